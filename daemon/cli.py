"""The ``preemptd`` command (CONTRACT §2).

Exit codes follow sysexits where CONTRACT names them: 0 ok, 2 unreadable
snapshot (or, with ``--strict``, an invalid object), 78 (``EX_CONFIG``) bad
configuration. Everything but the requested output goes to stderr, one line
per problem.

Interrupts. SIGINT (Ctrl-C) and SIGTERM end every command but ``run`` (the
daemon has its own shutdown) with one line and exit 130, never a traceback.
Both raise ``KeyboardInterrupt``, which the framework lets through every
plugin's failure containment; the signal is remembered as well, so an
interrupt that something under a session still swallowed (an exception raised
in its place by a ``finally``, caught as a plugin's failure) ends the command
as soon as the session returns, before anything is printed. ``simulate``
stops more gently (see :mod:`.simulation.command`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from preemptd.framework.decisions import Decisions
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.quantity import QuantityError, parse_timestamp
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot
from rich.console import Console

from preemptd import __version__

from . import report
from .backends.files import (
    Document,
    Loaded,
    LoadError,
    apply_decisions,
    hold_collection,
    load_files,
    settle_collection,
    write_documents,
)
from .config import Config, ConfigError, ConfigProblem, read_config
from .plugins import Plugins, describe_failure, resolve_plugins

__all__ = ["EXIT_CONFIG", "EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INPUT = 2  # also argparse's code for a bad command line
EXIT_CONFIG = 78  # sysexits EX_CONFIG
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell shows for a command stopped by Ctrl-C


class UsageError(Exception):
    """A bad argument that argparse cannot see (exit 2)."""


class StrictError(Exception):
    """``--strict`` and an invalid object: already reported, exit 2."""


class _Interrupts:
    """SIGINT and SIGTERM while a command runs: raise ``KeyboardInterrupt`` and remember
    the signal (:meth:`check`). Signals can be caught in the main thread only; elsewhere
    (a test calling :func:`main` from a thread) nothing is installed."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> _Interrupts:
        self.received = None
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        self.received = signum
        raise KeyboardInterrupt

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a signal came, even one that was swallowed."""
        if self.received is not None:
            raise KeyboardInterrupt

    def name(self) -> str:
        return signal.Signals(self.received).name if self.received is not None else "SIGINT"


_interrupts = _Interrupts()


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, a bad command line
        return exc.code if isinstance(exc.code, int) else EXIT_INPUT
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT
    if args.command == "run":  # the daemon handles its signals itself
        return _handle(args)
    try:
        with _interrupts:
            code = _handle(args)
            _interrupts.check()
    except KeyboardInterrupt:
        _errors([f"preemptd: interrupted ({_interrupts.name()})"])
        return EXIT_INTERRUPTED
    return code


def _handle(args: argparse.Namespace) -> int:
    """Run the command; its expected failures become their exit codes."""
    try:
        code: int = args.handler(args)
    except ConfigError as exc:
        _errors(map(str, exc.problems))
        return EXIT_CONFIG
    except LoadError as exc:
        _errors(exc.messages)
        return EXIT_INPUT
    except UsageError as exc:
        _errors([f"preemptd: error: {exc}"])
        return EXIT_INPUT
    except StrictError:
        return EXIT_INPUT
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="preemptd",
        description="Admission, preemption and reclaim for Kubernetes queues.",
    )
    parser.add_argument("--version", action="version", version=f"preemptd {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.add_argument("--config", metavar="FILE", help="TOML configuration (default: built-in defaults)")
        return sub

    cycle = command("cycle", "run one session over snapshot files and print the decisions")
    cycle.add_argument("snapshots", nargs="+", metavar="SNAPSHOT", help="YAML/JSON file, directory or -")
    cycle.add_argument("--now", metavar="T", help="session clock, RFC 3339 (default: the current time)")
    cycle.add_argument("--output", choices=("table", "json"), default="table")
    cycle.add_argument("--apply", metavar="OUT", help="also write the objects with the decisions committed")
    cycle.add_argument("--strict", action="store_true", help="exit 2 on any invalid object")
    cycle.add_argument(
        "--timings", action="store_true", help="print seconds per phase and the session's counters to stderr"
    )
    cycle.set_defaults(handler=_cycle)

    validate = command("validate", "check the configuration and snapshot files, listing every problem")
    validate.add_argument("snapshots", nargs="*", metavar="SNAPSHOT")
    validate.set_defaults(handler=_validate)

    plugins = command("plugins", "list the installed plugins, their source, and whether enabled")
    plugins.set_defaults(handler=_plugins)

    run = command("run", "the daemon: watch the cluster, decide, commit (kubernetes backend)")
    run.add_argument("--dry-run", action="store_true", help="decide and log, write nothing")
    run.add_argument("--http-address", metavar="A", help="host:port for /healthz, /readyz and /metrics")
    run.add_argument("--log-level", choices=("debug", "info", "warning", "error", "critical"))
    run.set_defaults(handler=_daemon)

    simulate = command("simulate", "replay a scenario through sessions on a simulated clock and report")
    simulate.add_argument("scenario", metavar="SCENARIO", help="scenario file (docs/simulation.md)")
    simulate.add_argument("--report", metavar="DIR", help="also write report.json and report.html to DIR")
    simulate.add_argument("--compare", metavar="OTHER.toml", help="run again under this configuration, side by side")
    simulate.add_argument("--timings", action="store_true", help="print seconds per phase to stderr")
    simulate.add_argument(
        "--progress-interval",
        metavar="SECONDS",
        type=float,
        default=5.0,
        help="off a terminal, seconds between progress lines on stderr (default: 5)",
    )
    simulate.set_defaults(handler=_simulate)

    explain = command("explain", "why a workload is pending, admitted or chosen as a victim")
    explain.add_argument("workload", metavar="WORKLOAD", help="namespace/name (or a name unique in the snapshot)")
    explain.add_argument("snapshots", nargs="*", metavar="SNAPSHOT")
    explain.add_argument(
        "--cluster",
        action="store_true",
        help="read the live cluster instead of snapshot files (in-cluster or KUBECONFIG); writes nothing",
    )
    explain.add_argument("--now", metavar="T", help="session clock, RFC 3339 (default: the current time)")
    explain.set_defaults(handler=_explain)

    from .backends.kubernetes import manifests

    manifests.add_arguments(command("manifests", "print the ClusterRole the enabled integrations need"))
    return parser


# --- shared steps ------------------------------------------------------------------------


def _errors(lines: Iterable[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _check_setup(path: str | None) -> tuple[Config, Plugins, list[ConfigProblem]]:
    from .backends.kubernetes.integrations.registry import resolve_integrations

    config, problems = read_config(path)
    plugins, more = resolve_plugins(config)
    more += resolve_integrations(config)[1]
    _errors(f"warning: {warning}" for warning in plugins.warnings)
    return config, plugins, sorted(problems + more, key=ConfigProblem.sort_key)


def _setup(path: str | None) -> tuple[Config, Plugins]:
    config, plugins, problems = _check_setup(path)
    if problems:
        raise ConfigError(problems)
    return config, plugins


def _now(text: str | None) -> int:
    if text is None:
        return time.time_ns() // 1_000_000
    try:
        return parse_timestamp(text)
    except QuantityError as exc:
        raise UsageError(f"--now: {exc}") from None


@dataclass(slots=True)
class _Run:
    config: Config
    documents: Loaded  # only the texts, kept for --apply
    inventory: Inventory
    decisions: Decisions
    counters: dict[str, int | str]


def _run(args: argparse.Namespace, timings: dict[str, float], *, strict: bool = False) -> _Run:
    """Load, report object problems, build the snapshot and run one session.

    Invalid objects are isolated (CONTRACT §2); with ``strict`` they stop the run.
    """
    config, plugins = _setup(args.config)
    now = _now(args.now)
    hold_collection()
    try:
        started = time.perf_counter()
        keep_text = getattr(args, "apply", None) is not None
        documents = load_files(args.snapshots, typed=True, keep_text=keep_text)
        inventory = parse_objects(documents)
        documents.forget()  # the parsed dicts; --apply reads the kept texts again
        timings["load"] = time.perf_counter() - started
        _errors(map(str, inventory.problems))
        _errors(f"warning: {warning}" for warning in inventory.warnings)
        if strict and inventory.problems:
            raise StrictError
        started = time.perf_counter()
        snapshot = Snapshot.build(inventory, now=now)
        timings["snapshot"] = time.perf_counter() - started
    finally:
        settle_collection()
    registry = plugins.registry()
    # run_session reports inventory.inadmissible (carried by the snapshot) as pending
    # Inadmissible itself; nothing is added here.
    counters: dict[str, int | str] = {}
    decisions = run_session(
        snapshot, registry, actions=config.scheduler.actions, timings=timings, counters=counters
    )
    _interrupts.check()  # an interrupt swallowed in the session is no plugin's failure
    _errors(describe_failure(error) for error in registry.errors)
    return _Run(config, documents, inventory, decisions, counters)


def _print_timings(timings: dict[str, float], actions: Sequence[str]) -> None:
    order = ["load", "snapshot", *actions, "session"]
    order += [phase for phase in timings if phase not in order]
    _errors(f"timing {phase} {timings[phase]:.6f}" for phase in order if phase in timings)


def _print_counters(counters: dict[str, int | str]) -> None:
    _errors(f"count {name} {value}" for name, value in counters.items())


def _stdout() -> Console:
    return Console(file=sys.stdout, highlight=False)


# --- commands ----------------------------------------------------------------------------


def _cycle(args: argparse.Namespace) -> int:
    timings: dict[str, float] = {}
    run = _run(args, timings, strict=args.strict)
    if args.apply is not None:
        # Written before anything is printed: a failed write leaves no half result.
        committed = apply_decisions(run.documents.again(), run.decisions)
        try:
            write_documents(args.apply, committed)
        except OSError as exc:
            _errors([f"preemptd: error: --apply {args.apply}: {exc.strerror or exc}"])
            return EXIT_FAILURE
    if args.output == "json":
        sys.stdout.write(run.decisions.to_json())
    else:
        report.print_decisions(run.decisions, _stdout())
    if args.timings:
        _print_timings(timings, run.config.scheduler.actions)
        _print_counters(run.counters)
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    _, _, config_problems = _check_setup(args.config)
    _errors(map(str, config_problems))
    object_problems = 0
    documents: list[tuple[str, Document]] = []
    if args.snapshots:
        try:
            documents = load_files(args.snapshots)
        except LoadError as exc:
            _errors(exc.messages)
            object_problems += len(exc.messages)
            documents = exc.documents
        inventory = parse_objects(documents)
        _errors(map(str, inventory.problems))
        _errors(f"warning: {warning}" for warning in inventory.warnings)
        object_problems += len(inventory.problems)
    if config_problems:
        return EXIT_CONFIG
    if object_problems:
        return EXIT_INPUT
    files = len({file for file, _ in documents})
    print(f"valid: configuration{f' and {files} snapshot files' if args.snapshots else ''}")
    return EXIT_OK


def _plugins(args: argparse.Namespace) -> int:
    _, plugins = _setup(args.config)
    out = _stdout()
    report.print_plugins(plugins.infos, out)
    for name in plugins.shadowed:
        out.print(
            f"note: {name} implements assign_flavors, but flavor-fungibility answers it first "
            "for every workload, so it is never called (disable flavor-fungibility to use it)",
            soft_wrap=True,
        )
    _errors(
        f"warning: plugin {info.name} is enabled but not installed"
        for info in plugins.infos
        if info.requested and not info.installed
    )
    return EXIT_OK


def _daemon(args: argparse.Namespace) -> int:
    import asyncio

    from .config import split_address
    from .service import check_configuration

    config, plugins, problems = check_configuration(args.config)
    if problems:
        raise ConfigError(problems)
    if args.http_address is not None:
        try:
            split_address(args.http_address)
        except ValueError as exc:
            raise UsageError(f"--http-address: {exc}") from None
    from kubernetes_asyncio.config import ConfigException

    from .backends.kubernetes.client import ApiError
    from .logging import configure_logging
    from .service import run_daemon

    configure_logging(log_format=config.daemon.log_format, level=args.log_level or config.daemon.log_level)
    try:
        return asyncio.run(run_daemon(
            config, plugins, dry_run=args.dry_run, config_path=args.config, http_address=args.http_address,
            log_level=args.log_level,
        ))
    except OSError as exc:  # most often the HTTP address is taken
        _errors([f"preemptd: error: {exc}"])
        return EXIT_FAILURE
    except (ApiError, ConfigException, ValueError) as exc:  # no cluster: no kubeconfig, unreachable
        _errors([f"preemptd: error: cannot reach the cluster: {exc}"])
        return EXIT_FAILURE


def _simulate(args: argparse.Namespace) -> int:
    # The simulator's modules load only for this command.
    from .simulation.command import run_command

    return run_command(
        args.scenario,
        config_path=args.config,
        report_dir=args.report,
        compare_path=args.compare,
        timings=args.timings,
        stdout=_stdout(),
        progress_interval=args.progress_interval,
    )


def _explain(args: argparse.Namespace) -> int:
    if args.cluster == bool(args.snapshots):
        raise UsageError("explain takes snapshot files or --cluster (one of the two)")
    if args.cluster:
        from kubernetes_asyncio.config import ConfigException

        from .backends.kubernetes.client import ApiError

        try:
            run = _live_run(args)
        except (ApiError, ConfigException, OSError, ValueError, TimeoutError) as exc:
            _errors([f"preemptd: error: cannot read the cluster: {exc}"])
            return EXIT_FAILURE
    else:
        run = _run(args, {})
    key = _find_workload(args.workload, run.inventory)
    if key is None:
        _errors([f"preemptd: workload {args.workload} not found in the snapshot"])
        return EXIT_INPUT
    workload = run.inventory.workloads.get(key)
    print("\n".join(report.explain_workload(key, run.decisions, workload)))
    return EXIT_OK


def _live_run(args: argparse.Namespace) -> _Run:
    """One session over the live cluster as the daemon's caches see it, writing nothing."""
    import asyncio

    config, plugins = _setup(args.config)
    inventory = asyncio.run(_live_inventory(config, plugins))
    _errors(map(str, inventory.problems))
    snapshot = Snapshot.build(inventory, now=_now(args.now))
    registry = plugins.registry()
    decisions = run_session(snapshot, registry, actions=config.scheduler.actions)
    _interrupts.check()
    return _Run(config, Loaded([]), inventory, decisions, {})


async def _live_inventory(config: Config, plugins: Plugins) -> Inventory:
    from .backends.kubernetes.backend import KubernetesBackend
    from .backends.kubernetes.client import Kube, load_configuration

    kube = Kube.from_configuration(await load_configuration())
    backend = KubernetesBackend(kube, config=config, plugins=plugins, dry_run=True)
    try:
        await backend.start(timeout=60)
        return backend.inventory.inventory()
    finally:
        await backend.stop()
        await kube.close()


def _find_workload(name: str, inventory: Inventory) -> str | None:
    """``namespace/name`` as given, or the one workload called ``name`` in any namespace."""
    keys = set(inventory.workloads) | set(inventory.inadmissible)
    if "/" in name:
        return name if name in keys else None
    matches = sorted(key for key in keys if key.partition("/")[2] == name)
    if len(matches) > 1:
        raise UsageError(f"workload {name!r} is ambiguous: {', '.join(matches)}; give namespace/name")
    return matches[0] if matches else None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
