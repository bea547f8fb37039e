"""The ``preemptd`` command (CONTRACT §2).

Exit codes follow sysexits where CONTRACT names them: 0 ok, 2 unreadable
snapshot (or, with ``--strict``, an invalid object), 78 (``EX_CONFIG``) bad
configuration. Everything but the requested output goes to stderr, one line
per problem.

Nothing is never a silent success: an input holding no object preemptd reads is exit 2
(``kubectl apply`` refuses a file without objects the same way), while an empty file
beside others, or a snapshot without a Queue or without a Workload, is a warning and
exit 0 (``kubectl get`` finding nothing). A scenario is not a snapshot: ``cycle``,
``explain`` and ``validate`` name ``simulate`` for it, and ``simulate`` names ``cycle``
for a snapshot; a dump (:mod:`.dump`) is both. Unknown fields of preemptd's own kinds
are errors in ``validate`` and with ``--strict``, warnings otherwise.

Commands are registered in :func:`_parser`, one ``command(...)`` call each with its
examples; the read commands print through :mod:`.output` (``-o``), and
``preemptd completion`` is generated from the same parser (:mod:`.completion`).

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
import atexit
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec
from preemptd.framework.decisions import Decisions
from preemptd.framework.objects import Inventory, escape, parse_objects
from preemptd.framework.objects.typed import RawItems, forget_read_memos
from preemptd.framework.quantity import (
    QuantityError,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot

from preemptd import __version__

from . import convert, pending
from .backends.files import (
    Loaded,
    LoadError,
    apply_decisions,
    hold_collection,
    load_files,
    settle_collection,
    write_documents,
)
from .config import Config, ConfigError, ConfigProblem, read_config
from .dump import Frozen
from .output import Answer, add_output_option, write_output
from .plugins import Plugins, describe_failure, resolve_plugins

if TYPE_CHECKING:  # rich, and the tables of .report, are imported when a table is printed
    from rich.console import Console

__all__ = ["EXIT_CONFIG", "EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "entry", "main"]

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


def entry() -> NoReturn:
    """The ``preemptd`` program (``python -m preemptd``, the console script): :func:`main`,
    then the end of the process.

    A read command (cycle, explain, validate) ends holding what it read, millions of
    objects for a large cluster, which a normal exit frees one by one although the
    system reclaims the memory at once. Such a command leaves them here
    (:func:`_keep_to_exit`), and the process then ends with ``os._exit`` once what a
    normal exit does that anyone can see is done: standard output and error flushed, the
    ``atexit`` functions run (logging's shutdown among them), then both flushed again.
    When a flush fails (a closed pipe), or a thread that is not a daemon still runs, it
    ends the usual way instead, which reports and waits as it always has.
    """
    global _kept_to_exit
    _kept_to_exit = []
    code = main()
    if _kept_to_exit and _flushed() and not _other_threads():
        atexit._run_exitfuncs()
        if _flushed():
            os._exit(code)
    sys.exit(code)


_kept_to_exit: list[object] | None = None
"""Under :func:`entry`, what the read commands leave to the end of the process."""


def _keep_to_exit(*objects: object) -> None:
    """Under :func:`entry`, keep ``objects`` to the end of the process (see there);
    for a caller of :func:`main` (a test), nothing."""
    if _kept_to_exit is not None:
        _kept_to_exit.extend(objects)


def _flushed() -> bool:
    """Flush standard output and error; whether both were written out."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the usual exit reports it
        return False
    return True


def _other_threads() -> bool:
    """Whether a thread that the usual exit would wait for still runs."""
    main_thread = threading.main_thread()
    return any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate())


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra and isinstance(getattr(args, "snapshots", None), list) and not any(
            word.startswith("-") and word != "-" for word in extra
        ):
            args.snapshots += extra  # files after an option: explain NAME -n NS FILE
        elif extra:
            parser.parse_args(argv)  # the usual error for what is left over
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
        epilog=_examples(
            "preemptd cycle cluster.yaml --now 2026-01-01T00:00:00Z",
            "preemptd simulate examples/scenarios/gpu-fleet.yaml",
            "preemptd COMMAND --help",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"preemptd {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str, *, examples: Sequence[str]) -> argparse.ArgumentParser:
        """Register one command: its help, its examples (shown by ``--help``) and ``--config``."""
        sub = commands.add_parser(
            name,
            help=help,
            description=help,
            epilog=_examples(*examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("--config", metavar="FILE", help="TOML configuration (default: built-in defaults)")
        return sub

    cycle = command(
        "cycle",
        "run one session over snapshot files and print the decisions",
        examples=(
            "preemptd cycle cluster.yaml --now 2026-01-01T00:00:00Z",
            "preemptd cycle snapshots/ -o json > decisions.json",
            "preemptd cycle cluster.yaml --apply next.yaml && preemptd cycle next.yaml",
            "kubectl get queues,workloads,nodes,pods,priorityclasses -A -o yaml | preemptd cycle -",
            "preemptd cycle dump.yaml          # a `preemptd dump`, at the moment it was taken",
        ),
    )
    cycle.add_argument("snapshots", nargs="+", metavar="SNAPSHOT", help="YAML/JSON file, directory or -")
    cycle.add_argument("--now", metavar="T", help="session clock, RFC 3339 with a zone (default: the current time)")
    add_output_option(cycle)
    cycle.add_argument("--apply", metavar="OUT", help="also write the objects with the decisions committed")
    cycle.add_argument("--strict", action="store_true", help="exit 2 on any invalid object or unknown field")
    cycle.add_argument(
        "--timings", action="store_true", help="print seconds per phase and the session's counters to stderr"
    )
    cycle.set_defaults(handler=_cycle)

    validate = command(
        "validate",
        "check the configuration and snapshot files, listing every problem",
        examples=(
            "preemptd validate --config /etc/preemptd/preemptd.toml",
            "preemptd validate queues.yaml workloads/",
            "preemptd validate cluster.yaml -o json | jq .counts",
        ),
    )
    validate.add_argument("snapshots", nargs="*", metavar="SNAPSHOT")
    add_output_option(validate)
    validate.set_defaults(handler=_validate)

    plugins = command(
        "plugins",
        "list the installed plugins, their source, and whether enabled",
        examples=("preemptd plugins", "preemptd plugins --config preemptd.toml -o name"),
    )
    add_output_option(plugins)
    plugins.set_defaults(handler=_plugins)

    run = command(
        "run",
        "the daemon: watch the cluster, decide, commit (kubernetes backend)",
        examples=(
            "preemptd run --config /etc/preemptd/preemptd.toml",
            "preemptd run --config preemptd.toml --dry-run --log-level debug",
            "preemptd run --config preemptd.toml --dry-run --kubeconfig ~/.kube/staging",
            "preemptd run --config preemptd.toml --dry-run --context staging",
        ),
    )
    run.add_argument("--dry-run", action="store_true", help="decide and log, write nothing")
    run.add_argument("--http-address", metavar="A", help="host:port for /healthz, /readyz and /metrics")
    run.add_argument("--log-level", choices=("debug", "info", "warning", "error", "critical"))
    run.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig file outside a cluster (default: $KUBECONFIG, ~/.kube/config)"
    )
    run.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")
    run.add_argument("--shadow", choices=("kueue",), help="read Kueue's objects, write nothing, report where "
                     "preemptd would decide otherwise (implies --dry-run)")
    run.add_argument("--shadow-grace", metavar="S", type=float, default=5.0,
                     help="seconds a divergence lasts before it is reported (default 5)")
    run.set_defaults(handler=_daemon)

    simulate = command(
        "simulate",
        "replay a scenario through sessions on a simulated clock and report",
        examples=(
            "preemptd simulate examples/scenarios/gpu-fleet.yaml --report out/gpu-fleet",
            "preemptd simulate scenario.yaml --compare other.toml",
            "preemptd simulate dump.yaml       # a `preemptd dump`, run on from its moment",
        ),
    )
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

    explain = command(
        "explain",
        "why a workload is pending, admitted or chosen as a victim",
        examples=(
            "preemptd explain ml/train-1 cluster.yaml --now 2026-01-01T00:00:00Z",
            "preemptd explain train-1 -n ml --cluster --context prod",
            "preemptd explain ml/train-1 dump.yaml -o json",
        ),
    )
    explain.add_argument("workload", metavar="WORKLOAD", help="namespace/name (or a name unique in the snapshot)")
    explain.add_argument("snapshots", nargs="*", metavar="SNAPSHOT")
    explain.add_argument(
        "--cluster",
        action="store_true",
        help="read the live cluster instead of snapshot files (in-cluster or KUBECONFIG); writes nothing",
    )
    explain.add_argument(
        "-n", "--namespace", metavar="NS", help="the workload's namespace (WORKLOAD is then its name)"
    )
    _cluster_options(explain)
    explain.add_argument("--now", metavar="T", help="session clock, RFC 3339 with a zone (default: the current time)")
    add_output_option(explain)
    explain.set_defaults(handler=_explain)

    dump = command(
        "dump",
        "write what the scheduler sees and its configuration into one file, for a bug report",
        examples=(
            "preemptd dump --cluster --config /etc/preemptd/preemptd.toml --out dump.yaml",
            "preemptd dump --cluster --context prod --as-test --out tests/scenarios/cases/issue_123.yaml",
            "preemptd dump cluster.yaml --config preemptd.toml --now 2026-01-01T00:00:00Z --out dump.yaml",
            "preemptd cycle dump.yaml; preemptd explain ml/train-1 dump.yaml; preemptd simulate dump.yaml",
        ),
    )
    dump.add_argument("snapshots", nargs="*", metavar="SNAPSHOT", help="snapshot files to dump (or --cluster)")
    dump.add_argument("--cluster", action="store_true", help="read the live cluster; writes nothing to it")
    _cluster_options(dump)
    dump.add_argument("--now", metavar="T", help="the dump's moment, RFC 3339 with a zone (default: the current time)")
    dump.add_argument("--out", metavar="FILE", default="-", help="the YAML file to write (default: stdout)")
    dump.add_argument("--duration", metavar="D", default="1h", help="how long `simulate` runs on from it (default: 1h)")
    dump.add_argument("--as-test", action="store_true", help="write a scenario case (tests/scenarios/cases) instead")
    dump.set_defaults(handler=_dump)

    completion = command(
        "completion",
        "print a shell completion script",
        examples=(
            "source <(preemptd completion bash)",
            "preemptd completion zsh > \"${fpath[1]}/_preemptd\"",
        ),
    )
    completion.add_argument("shell", choices=("bash", "zsh"), metavar="SHELL", help="bash or zsh")
    completion.set_defaults(handler=lambda args: _completion(args, parser))

    convert_command = command("convert", convert.HELP, examples=convert.EXAMPLES)
    convert.add_arguments(convert_command)
    convert_command.set_defaults(handler=convert.run)
    pending.add_arguments(waiting := command("pending", pending.HELP, examples=pending.EXAMPLES))
    waiting.set_defaults(decide=_run)

    manifests = command(
        "manifests",
        "print the ClusterRole the enabled integrations need (--webhook: the webhook's rules)",
        examples=(
            "preemptd manifests --config preemptd.toml > 20-rbac-role.yaml",
            "preemptd manifests --webhook --config preemptd.toml",
        ),
    )
    manifests.add_argument(
        "--webhook", action="store_true",
        help="print the admission webhook's rules (deploy/webhook/webhook.yaml) instead of the ClusterRole",
    )
    manifests.set_defaults(handler=_manifests)
    return parser


def _manifests(args: argparse.Namespace) -> int:
    # The Kubernetes backend (and its client, a sixth of a large cycle's memory) loads only
    # for the commands that use it.
    from .backends.kubernetes import manifests

    return manifests.run(args)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def _check_cluster_options(args: argparse.Namespace) -> None:
    if not args.cluster and (args.kubeconfig or args.context):
        raise UsageError("--kubeconfig and --context go with --cluster")
    if args.kubeconfig is not None and not Path(args.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {args.kubeconfig}: no such file")


def _cluster_options(sub: argparse.ArgumentParser) -> None:
    """``--kubeconfig`` and ``--context``, as kubectl spells them, for a command that reads
    a cluster."""
    sub.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    sub.add_argument("--context", metavar="NAME", help="kubeconfig context (default: its current context)")


# --- shared steps ------------------------------------------------------------------------


def _errors(lines: Iterable[str]) -> None:
    for line in lines:
        print(line, file=sys.stderr)


def _check_setup(
    path: str | None, *, integrations: bool = False
) -> tuple[Config, Plugins, list[ConfigProblem]]:
    """The configuration and the plugins, with every problem; ``integrations`` also checks
    the ``[integrations]`` tables (``validate``). The commands that only read files leave
    them to ``run`` and ``validate``: checking them loads the Kubernetes client, which
    alone is a sixth of a large ``cycle``'s memory."""
    config, problems = read_config(path)
    plugins, more = resolve_plugins(config)
    if integrations:
        from .backends.kubernetes.integrations.registry import resolve_integrations

        more += resolve_integrations(config)[1]
    _errors(f"warning: {warning}" for warning in plugins.warnings)
    return config, plugins, sorted(problems + more, key=ConfigProblem.sort_key)


def _setup(path: str | None, dump: Frozen | None = None) -> tuple[Config, Plugins]:
    """The configuration: ``path`` over the built-in defaults, or over a dump's ``config``
    table when the snapshot is a dump."""
    if dump is not None and dump.config:
        from .dump import dump_setup

        config, plugins, problems = dump_setup(dump.config, path, source=dump.source)
        _errors(f"warning: {warning}" for warning in plugins.warnings)
    else:
        config, plugins, problems = _check_setup(path)
    if problems:
        raise ConfigError(problems)
    return config, plugins


# RFC 3339 requires a zone: a clock read without one would depend on where it runs.
_ZONED = re.compile(r"(?:[Zz]|[+-]\d\d:\d\d)$")


def _now(text: str | None, default: int | None = None) -> int:
    if text is None:
        return default if default is not None else time.time_ns() // 1_000_000
    try:
        moment = parse_timestamp(text)
    except QuantityError as exc:
        raise UsageError(f"--now: {exc}") from None
    if not _ZONED.search(text.strip()):
        raise UsageError(
            f"--now: {text!r} has no time zone; write it in RFC 3339 with one "
            "(2026-01-01T00:00:00Z or 2026-01-01T01:00:00+01:00)"
        )
    return moment


@dataclass(slots=True)
class _Run:
    config: Config
    documents: Loaded  # only the texts, kept for --apply
    inventory: Inventory
    decisions: Decisions
    counters: dict[str, int | str]


def _load(args: argparse.Namespace, *, typed: bool, keep_text: bool = False) -> tuple[Loaded, Frozen | None]:
    """The snapshot's documents; a dump among them gives its objects, its moment and its
    configuration (:mod:`.dump`); a scenario is refused (``simulate`` runs those)."""
    from .dump import read_dumps

    loaded = load_files(args.snapshots, typed=typed, keep_text=keep_text)
    documents, frozen = read_dumps(loaded)
    if frozen is not None and keep_text:
        raise UsageError(f"--apply: {frozen.source} is a dump; --apply writes snapshot files of objects")
    return documents, frozen


def _empty_files(documents: Loaded) -> list[str]:
    """The files that hold no document (asked before the documents are parsed: a JSON
    list's items are handed over once)."""
    used = {file.partition(": objects[")[0] for file, document in documents if _holds_something(document)}
    return [file for file in documents.files if file not in used]


def _check_input(documents: Loaded, inventory: Inventory, empty: list[str]) -> None:
    """Nothing is never a silent success: an input without objects is an error (exit 2,
    as ``kubectl apply`` refuses a file with no objects), one without queues or
    workloads a warning (exit 0, as ``kubectl get`` finds no resources)."""
    if not sum(inventory.counts.values()):
        known = ", ".join(sorted(inventory.counts))
        if inventory.warnings:
            message = f"no objects of the kinds preemptd reads ({known}) in the snapshot"
        elif len(documents.files) == 1:
            message = f"{escape(documents.files[0])}: no objects: the file is empty"
        else:
            message = "no objects: every snapshot file is empty"
        raise LoadError([f"preemptd: error: {message}"])
    _errors(f"warning: {escape(file)}: no objects: the file is empty" for file in empty)
    if not inventory.counts.get("Queue"):
        _errors(["warning: no Queue in the snapshot: no workload can be admitted"])
    if not inventory.counts.get("Workload"):
        _errors(["warning: no Workload in the snapshot: there is nothing to schedule"])


def _holds_something(document: object) -> bool:
    """Whether a document holds anything: an empty YAML document is None, a list may be empty."""
    if isinstance(document, list):
        return bool(document)
    if isinstance(document, RawItems):
        return bool(document.items)
    return document is not None


def _run(args: argparse.Namespace, timings: dict[str, float], *, strict: bool = False) -> _Run:
    """Load, report object problems, build the snapshot and run one session.

    Invalid objects are isolated (CONTRACT §2); with ``strict`` they stop the run, and so
    do unknown fields (otherwise warnings).
    """
    config, plugins = _setup(args.config)
    now = _now(args.now)
    hold_collection()
    try:
        with _LoadProgress(args.snapshots) as progress:
            started = time.perf_counter()
            keep_text = getattr(args, "apply", None) is not None
            documents, frozen = _load(args, typed=True, keep_text=keep_text)
            if frozen is not None:  # a dump: its configuration under --config, its moment
                config, plugins = _setup(args.config, frozen)
                now = _now(args.now, frozen.start)
            empty = _empty_files(documents)
            progress.phase = "reading objects"
            inventory = parse_objects(documents)
            _check_input(documents, inventory, empty)
            documents.forget()  # the parsed dicts; --apply reads the kept texts again
            timings["load"] = time.perf_counter() - started
            _errors(map(str, inventory.problems))
            _errors(f"warning: {warning}" for warning in inventory.warnings)
            if strict:
                _errors(map(str, inventory.unknown_fields))
            else:
                _errors(f"warning: {problem}" for problem in inventory.unknown_fields)
            if strict and (inventory.problems or inventory.unknown_fields):
                raise StrictError
            progress.phase = "building the snapshot"
            started = time.perf_counter()
            snapshot = Snapshot.build(inventory, now=now)
            timings["snapshot"] = time.perf_counter() - started
            forget_read_memos()  # nothing more is read: the session has that memory
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
    _keep_to_exit(inventory, decisions)
    return _Run(config, documents, inventory, decisions, counters)


LOAD_PROGRESS_INTERVAL = 5.0
"""Seconds between the lines :class:`_LoadProgress` prints."""


class _LoadProgress:
    """Off a terminal (a pipe, a CI log), one line on stderr every few seconds while a
    snapshot loads, so that a large one is not taken for a hung command; on a terminal,
    and for a load that ends sooner, nothing."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.phase = "reading files"
        self._paths = list(paths)
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _LoadProgress:
        if LOAD_PROGRESS_INTERVAL > 0 and not sys.stderr.isatty():
            self._thread = threading.Thread(target=self._report, name="preemptd-load-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _report(self) -> None:
        started = time.monotonic()
        size = sum(Path(path).stat().st_size for path in self._paths if Path(path).is_file())
        what = ", ".join(self._paths) if len(self._paths) <= 2 else f"{len(self._paths)} paths"
        shown = f"{escape(what)}{f' ({size / 1e6:.0f} MB)' if size >= 1e6 else ''}"
        while not self._done.wait(LOAD_PROGRESS_INTERVAL):
            print(f"loading {shown}: {self.phase}, {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)


def _print_timings(timings: dict[str, float], actions: Sequence[str]) -> None:
    order = ["load", "snapshot", *actions, "session"]
    order += [phase for phase in timings if phase not in order]
    _errors(f"timing {phase} {timings[phase]:.6f}" for phase in order if phase in timings)


def _print_counters(counters: dict[str, int | str]) -> None:
    _errors(f"count {name} {value}" for name, value in counters.items())


def _report_module() -> Any:
    """:mod:`.report`, imported when it is used (it brings rich's tables)."""
    from . import report

    return report


def _stdout() -> Console:
    from rich.console import Console

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
    write_output(_decisions_answer(run.decisions), args.output)
    if args.timings:
        _print_timings(timings, run.config.scheduler.actions)
        _print_counters(run.counters)
    return EXIT_OK


def _decisions_answer(decisions: Decisions) -> Answer:
    def names() -> list[str]:
        data = decisions.to_dict()
        # A growth in place is listed as such (CONTRACT §3 keeps it among "admitted").
        found = [f"{'grown' if entry.get('grown') else section}/{entry['workload']}"
                 for section in ("admitted", "preempted", "pending") for entry in data[section]]
        return found + [f"podAction/{entry['pod']}" for entry in data["podActions"]]

    return Answer(
        data=decisions.to_dict,
        names=names,
        table=lambda out, wide: _report_module().print_decisions(decisions, out),
        text=lambda: indented_json_pieces(decisions.to_dict()),  # CONTRACT §3's bytes: to_json's
    )


def indented_json(data: Any) -> str:
    """``json.dumps(data, indent=2, ensure_ascii=False) + "\\n"``, byte for byte, in a
    fraction of the time (what :meth:`Decisions.to_json` writes; the decisions of a large
    cluster are megabytes).

    The standard encoder indents only in pure Python; here its C encoder writes the
    compact text (every value, escape and number as it always writes them) and msgspec
    lays that text out, changing only the white space between tokens. A value that is
    not JSON (``NaN``, ``Infinity``) or a string msgspec cannot carry (a lone surrogate)
    is written by the standard encoder indenting.
    """
    compact = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    try:
        return msgspec.json.format(compact, indent=2) + "\n"
    except (msgspec.DecodeError, UnicodeError):
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


PIECE_ITEMS = 256
"""Items of a list laid out together by :func:`indented_json_pieces`."""


def indented_json_pieces(data: Any, batch: int = PIECE_ITEMS) -> list[str]:
    """:func:`indented_json`'s text in pieces of tens of kilobytes, written one after another.

    A mapping's lists (the decisions' sections) are laid out ``batch`` items at a time: the
    whole text of a large cluster's decisions, and the buffers it is laid out in, would each
    be megabytes taken from the top of the heap after the session, raising the process's
    peak memory, where pieces of tens of kilobytes fit in the room the session left free.
    A list of a batch's items, indented as at the top, holds each item at one level deeper
    than the list's own lines; one more level (two spaces after every line break) puts it
    where the mapping's list holds it. Anything else (a key that is not a string, a value
    that is not a list) is laid out whole, as :func:`indented_json` does.
    """
    if not isinstance(data, dict) or not data or not all(type(key) is str for key in data):
        return [indented_json(data)]
    pieces = ["{"]
    before = "\n  "
    for key, value in data.items():
        pieces.append(f"{before}{json.dumps(key, ensure_ascii=False)}: ")
        before = ",\n  "
        if not isinstance(value, list) or not value:
            pieces.append(indented_json(value)[:-1].replace("\n", "\n  "))
            continue
        pieces.append("[\n")
        for start in range(0, len(value), batch):
            items = indented_json(value[start : start + batch])[2:-3]  # without "[\n" and "\n]\n"
            pieces.append((",\n  " if start else "  ") + items.replace("\n", "\n  "))
        pieces.append("\n  ]")
    pieces.append("\n}\n")
    return pieces


def _validate(args: argparse.Namespace) -> int:
    _, _, config_problems = _check_setup(args.config, integrations=True)
    problems: list[str] = []
    warnings: list[str] = []
    documents = Loaded([])
    counts: dict[str, int] = {}
    names: list[str] = []
    if args.snapshots:
        try:
            documents, frozen = _load(args, typed=False)
            if frozen is not None and frozen.config and not config_problems:
                from .dump import dump_setup

                # A dump's configuration, as cycle would use it (under --config).
                config_problems = dump_setup(frozen.config, args.config, source=frozen.source)[2]
        except LoadError as exc:
            problems += exc.messages
            documents = Loaded(exc.documents)
    _errors(map(str, config_problems))
    if args.snapshots:
        empty = _empty_files(documents)
        inventory = parse_objects(documents)
        if not problems:
            try:
                _check_input(documents, inventory, empty)
            except LoadError as exc:
                problems += exc.messages
        problems += map(str, inventory.problems)
        problems += map(str, inventory.unknown_fields)  # typos are errors here
        warnings += map(str, inventory.warnings)
        counts = {kind: count for kind, count in inventory.counts.items() if count}
        names = _object_names(inventory)
        _keep_to_exit(inventory)
    _errors(problems)
    _errors(f"warning: {warning}" for warning in warnings)
    files = len(documents.files)
    valid = not config_problems and not problems
    checked = ", ".join(f"{count} {kind}" for kind, count in counts.items()) or "no objects"

    _keep_to_exit(documents)

    def table(out: Console, wide: bool) -> None:
        if not valid:
            return
        what = f" and {files} snapshot file{'s' if files != 1 else ''} ({checked})" if args.snapshots else ""
        out.print(f"valid: configuration{what}", soft_wrap=True)

    answer = Answer(
        data=lambda: {
            "valid": valid,
            "configuration": [str(problem) for problem in config_problems],
            "files": files,
            "counts": counts,
            "problems": problems,
            "warnings": warnings,
        },
        names=lambda: names,
        table=table,
    )
    write_output(answer, args.output)
    if config_problems:
        return EXIT_CONFIG
    if problems:
        return EXIT_INPUT
    return EXIT_OK


def _object_names(inventory: Inventory) -> list[str]:
    """``Kind/key`` of every valid object, kind by kind in name order."""
    found = [f"ResourceFlavor/{key}" for key in inventory.flavors]
    found += [f"Queue/{key}" for key in inventory.queues]
    found += [f"Workload/{key}" for key in inventory.workloads]
    found += [f"Node/{key}" for key in inventory.nodes]
    found += [f"Pod/{key}" for key in inventory.pods]
    found += [f"PriorityClass/{key}" for key in inventory.priority_classes]
    return found


def _plugins(args: argparse.Namespace) -> int:
    _, plugins = _setup(args.config)
    notes = [
        f"note: {name} implements assign_flavors, but flavor-fungibility answers it first "
        "for every workload, so it is never called (disable flavor-fungibility to use it)"
        for name in plugins.shadowed
    ]

    def table(out: Console, wide: bool) -> None:
        if wide:  # why a plugin is off: not asked for, or asked for and not installed
            from rich import box
            from rich.table import Table

            rows = Table(box=box.SIMPLE_HEAD, show_edge=False)
            for column in ("name", "source", "enabled", "requested", "installed"):
                rows.add_column(column)
            for info in plugins.infos:
                flags = (info.enabled, info.requested, info.installed)
                rows.add_row(info.name, info.source, *("yes" if flag else "no" for flag in flags))
            out.print(rows)
        else:
            _report_module().print_plugins(plugins.infos, out)
        for note in notes:
            out.print(note, soft_wrap=True)

    answer = Answer(
        data=lambda: [
            {"name": info.name, "source": info.source, "enabled": info.enabled,
             "requested": info.requested, "installed": info.installed}
            for info in plugins.infos
        ],
        names=lambda: [f"plugin/{info.name}" for info in plugins.infos],
        table=table,
    )
    write_output(answer, args.output)
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
    if args.kubeconfig is not None and not Path(args.kubeconfig).is_file():
        raise UsageError(f"--kubeconfig {args.kubeconfig}: no such file")
    if args.http_address is not None:
        try:
            split_address(args.http_address)
        except ValueError as exc:
            raise UsageError(f"--http-address: {exc}") from None
    if not args.shadow_grace >= 0:
        raise UsageError(f"--shadow-grace: expected seconds (0 or more), got {args.shadow_grace}")
    from kubernetes_asyncio.config import ConfigException

    from .backends.kubernetes.client import ApiError
    from .backends.kubernetes.shadow import ShadowError
    from .logging import configure_logging
    from .service import run_daemon

    configure_logging(log_format=config.daemon.log_format, level=args.log_level or config.daemon.log_level)
    try:
        return asyncio.run(run_daemon(
            config, plugins, dry_run=args.dry_run, config_path=args.config, http_address=args.http_address,
            log_level=args.log_level, kubeconfig=args.kubeconfig, context=args.context, shadow=args.shadow,
            shadow_grace=args.shadow_grace,
        ))
    except OSError as exc:  # most often the HTTP address is taken
        _errors([f"preemptd: error: {exc}"])
        return EXIT_FAILURE
    except ShadowError as exc:  # --shadow kueue on a cluster without Kueue
        _errors([f"preemptd: error: {exc}"])
        return EXIT_FAILURE
    except (ApiError, ConfigException, ValueError) as exc:  # no cluster: no kubeconfig, unreachable
        _errors([f"preemptd: error: cannot reach the cluster: {exc}"])
        return EXIT_FAILURE


def _simulate(args: argparse.Namespace) -> int:
    # The simulator's modules load only for this command.
    from .simulation.command import run_command

    try:
        return run_command(
            args.scenario,
            config_path=args.config,
            report_dir=args.report,
            compare_path=args.compare,
            timings=args.timings,
            stdout=_stdout(),
            progress_interval=args.progress_interval,
        )
    except LoadError as exc:
        if _is_snapshot(args.scenario):
            exc.messages.append(
                f"{escape(args.scenario)}: a snapshot of objects, not a scenario: "
                f"run one session on it with `preemptd cycle {escape(args.scenario)}`"
            )
        raise


def _is_snapshot(path: str) -> bool:
    """Whether ``path`` holds Kubernetes objects (what ``cycle`` reads) rather than a scenario."""
    try:
        documents = load_files([path])
    except LoadError:
        return False
    return any(
        isinstance(document, (list, RawItems)) or (isinstance(document, dict) and "kind" in document)
        for _, document in documents
    )


def _explain(args: argparse.Namespace) -> int:
    if args.cluster == bool(args.snapshots):
        raise UsageError("explain takes snapshot files or --cluster (one of the two)")
    _check_cluster_options(args)
    name = args.workload
    if args.namespace is not None:
        if "/" in name:
            raise UsageError(f"give WORKLOAD as a name with -n/--namespace, not {name!r}")
        name = f"{args.namespace}/{name}"
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
    key = _find_workload(name, run.inventory)
    if key is None:
        _errors([f"preemptd: workload {name} not found in the snapshot"])
        return EXIT_INPUT
    workload = run.inventory.workloads.get(key)
    lines = _report_module().explain_workload(key, run.decisions, workload)
    write_output(_explain_answer(key, run, lines), args.output)
    return EXIT_OK


def _explain_answer(key: str, run: _Run, lines: list[str]) -> Answer:
    data = run.decisions.to_dict()

    def answer() -> dict[str, object]:
        found: dict[str, object] = {"workload": key, "now": data["now"]}
        for section in ("admitted", "preempted", "pending"):
            entry = next((e for e in data[section] if e["workload"] == key), None)
            if entry is not None:
                found[section] = entry
        found["victims"] = [entry for entry in data["preempted"] if entry["preemptor"] == key]
        found["podActions"] = [entry for entry in data["podActions"] if entry["preemptor"] == key]
        if key in run.inventory.inadmissible:
            found["inadmissible"] = run.inventory.inadmissible[key]
        found["explanation"] = list(run.decisions.explain(key))
        found["lines"] = lines
        return found

    return Answer(
        data=answer,
        names=lambda: [f"Workload/{key}"],
        table=lambda out, wide: out.print("\n".join(lines), soft_wrap=True, markup=False),
    )


def _live_run(args: argparse.Namespace) -> _Run:
    """One session over the live cluster as the daemon's caches see it, writing nothing."""
    import asyncio

    config, plugins = _setup(args.config)
    inventory = asyncio.run(_live_inventory(config, plugins, args.kubeconfig, args.context))
    _errors(map(str, inventory.problems))
    _errors(f"warning: {problem}" for problem in inventory.unknown_fields)
    snapshot = Snapshot.build(inventory, now=_now(args.now))
    registry = plugins.registry()
    decisions = run_session(snapshot, registry, actions=config.scheduler.actions)
    _interrupts.check()
    return _Run(config, Loaded([]), inventory, decisions, {})


async def _live_inventory(
    config: Config, plugins: Plugins, kubeconfig: str | None = None, context: str | None = None
) -> Inventory:
    from .backends.kubernetes.backend import KubernetesBackend
    from .backends.kubernetes.client import Kube, load_configuration

    kube = Kube.from_configuration(await load_configuration(kubeconfig=kubeconfig, context=context))
    backend = KubernetesBackend(kube, config=config, plugins=plugins, dry_run=True)
    try:
        await backend.start(timeout=60)
        return backend.inventory.inventory()
    finally:
        await backend.stop()
        await kube.close()


def _dump(args: argparse.Namespace) -> int:
    from . import dump as dumps
    from .backends.files import dump_documents

    if args.cluster == bool(args.snapshots):
        raise UsageError("dump takes snapshot files or --cluster (one of the two)")
    _check_cluster_options(args)
    try:
        parse_duration(args.duration)
    except QuantityError as exc:
        raise UsageError(f"--duration: {exc}") from None
    config, plugins = _setup(args.config)
    now = _now(args.now)
    tables = dumps.config_tables(args.config)
    if args.cluster:
        import asyncio

        from kubernetes_asyncio.config import ConfigException

        from .backends.kubernetes.client import ApiError

        try:
            objects = asyncio.run(_live_objects(config, plugins, args.kubeconfig, args.context))
        except (ApiError, ConfigException, OSError, ValueError, TimeoutError) as exc:
            _errors([f"preemptd: error: cannot read the cluster: {exc}"])
            return EXIT_FAILURE
        source = f"the cluster{f' (context {args.context})' if args.context else ''}"
    else:
        documents, frozen = _load(args, typed=False)
        if frozen is not None:
            raise UsageError(f"{frozen.source} is a dump already")
        objects = _flattened(documents)
        source = ", ".join(escape(path) for path in documents.files)
    moment = format_timestamp(now)
    if args.as_test:
        inventory = parse_objects((source, obj) for obj in objects)
        _errors(map(str, inventory.problems))
        decisions = run_session(
            Snapshot.build(inventory, now=now), plugins.registry(), actions=config.scheduler.actions
        )
        document = dumps.scenario_case(
            objects, now=moment, config=tables, decisions=decisions.to_dict(), source=source
        )
    else:
        document = dumps.dump_document(objects, start=moment, config=tables, duration=args.duration)
    if args.out == "-":
        sys.stdout.write(dump_documents([document]))
        return EXIT_OK
    try:
        write_documents(args.out, [document])
    except OSError as exc:
        _errors([f"preemptd: error: --out {args.out}: {exc.strerror or exc}"])
        return EXIT_FAILURE
    _errors([f"wrote {len(objects)} objects to {escape(args.out)}"])
    return EXIT_OK


def _flattened(documents: Loaded) -> list[object]:
    """Every object of the documents, lists opened, in file and document order."""
    found: list[object] = []
    for _, document in documents:
        if isinstance(document, list):
            found += document
        elif isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
            found += document.get("items") or []
        elif isinstance(document, dict):
            found.append(document)
    return found


async def _live_objects(
    config: Config, plugins: Plugins, kubeconfig: str | None, context: str | None
) -> list[object]:
    """Every object the daemon's informers hold, as it holds them, in a stable order."""
    from .backends.kubernetes.backend import KubernetesBackend
    from .backends.kubernetes.client import (
        FLAVORS,
        NODES,
        PODS,
        PRIORITY_CLASSES,
        QUEUES,
        WORKLOADS,
        Kube,
        load_configuration,
    )

    kube = Kube.from_configuration(await load_configuration(kubeconfig=kubeconfig, context=context))
    backend = KubernetesBackend(kube, config=config, plugins=plugins, dry_run=True)
    try:
        await backend.start(timeout=60)
        found: list[object] = []
        for resource in (FLAVORS, PRIORITY_CLASSES, QUEUES, NODES, WORKLOADS, PODS):
            store = backend.informers[resource].store
            version = f"{resource.group}/{resource.version}" if resource.group else resource.version
            for key in sorted(store):
                obj = dict(store[key])
                obj.setdefault("apiVersion", version)
                obj.setdefault("kind", resource.kind)
                found.append(obj)
        return found
    finally:
        await backend.stop()
        await kube.close()


def _completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .completion import completion_script

    sys.stdout.write(completion_script(parser, args.shell))
    return EXIT_OK


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
