"""``preemptd simulate``: a scenario, one or two configurations, runs, a report.

Configuration precedence, lowest first: the built-in defaults, the scenario's
``config`` table (and its ``cycleInterval``), then ``--config FILE`` (or the
``--compare`` file for the second run) — so a compared file changes exactly
what it names. Each source is checked on its own first, so a problem is
reported where it was written (file and line for a TOML file, the key path for
the scenario); the sources are then merged key by key.
"""

from __future__ import annotations

import gc
import json
import signal
import sys
import threading
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from preemptd.framework.quantity import format_duration
from rich.console import Console

from ..config import Config, ConfigError, ConfigProblem, parse_config, read_config
from ..plugins import Plugins, resolve_plugins
from . import report as simreport
from .engine import Outcome, simulate
from .scenario import Scenario, load_scenario

__all__ = ["Setup", "run_command", "setup", "to_toml"]

EXIT_OK = 0
EXIT_FAILURE = 1  # an invariant was violated, or the report could not be written
EXIT_INTERRUPTED = 130  # 128 + SIGINT: stopped by SIGINT or SIGTERM, the report covers what ran
PROGRESS_INTERVAL = 5.0  # seconds of wall time between progress lines off a terminal


@dataclass(frozen=True, slots=True)
class Setup:
    """One configuration to run the scenario under."""

    label: str
    source: str | None  # the TOML file, None for defaults plus the scenario's table
    config: Config
    plugins: Plugins
    cycle_interval: int


def run_command(
    scenario_path: str,
    *,
    config_path: str | None,
    report_dir: str | None,
    compare_path: str | None,
    timings: bool,
    stdout: Console,
    progress_interval: float = PROGRESS_INTERVAL,
) -> int:
    """Everything ``preemptd simulate`` does; raises :class:`~.scenario.ScenarioError`
    (exit 2) or :class:`ConfigError` (exit 78) before anything runs, and checks that
    ``report_dir`` can take the report (exit 1) before the runs too.

    A SIGINT or SIGTERM during the runs stops them after the session under way: the
    report covers the simulated time reached, says so, and the exit is 130."""
    started = time.perf_counter()
    # What the imports made lives as long as the process too: frozen now, the collection
    # after loading walks only what loading made.
    gc.freeze()
    scenario = load_scenario(scenario_path)
    setups = [setup(scenario, config_path)]
    if compare_path is not None:
        setups.append(setup(scenario, compare_path))
    if report_dir is not None:
        try:
            simreport.check_report_dir(report_dir)
        except OSError as exc:
            _errors([f"preemptd: error: --report {report_dir}: {exc.strerror or exc}"])
            return EXIT_FAILURE
    loaded = time.perf_counter() - started
    # The scenario's objects live as long as the process: keep the cyclic collector from
    # walking them again and again (about a tenth of a large simulation's time).
    gc.collect()
    gc.freeze()
    _errors(scenario.problems)
    _errors(f"warning: {warning}" for warning in scenario.warnings)
    outcomes: list[tuple[Setup, Outcome]] = []
    stopped: dict[int, int] = {}  # run index -> the simulated time it stopped at
    with _Stop() as stop, _progress(scenario, progress_interval) as track:
        for entry in setups:
            if stop.signal is not None:
                break
            registry = entry.plugins.registry()
            begun = time.perf_counter()
            reached: list[int] = []  # the simulated time the run stopped at, if it did
            advance = track(entry.label)
            outcome = simulate(
                scenario,
                registry,
                actions=tuple(entry.config.scheduler.actions),
                cycle_interval=entry.cycle_interval,
                progress=_step(advance, stop, reached),
            )
            if reached:
                stopped[len(outcomes)] = reached[0]
            wall = time.perf_counter() - begun
            end = reached[0] if reached else scenario.duration
            advance(end, outcome.sessions, outcome.admissions, final=True)
            _errors([
                f"{entry.label}: simulated {format_duration(end)} in {wall:.2f} s: "
                f"{outcome.sessions:,} sessions ({outcome.sessions / wall:,.0f}/s), "
                f"{outcome.admissions:,} admissions ({outcome.admissions / wall:,.0f}/s)"
            ])
            _errors(
                f"warning: plugin {error.plugin} failed in {error.hook}: {error.message}"
                for error in registry.errors
            )
            outcomes.append((entry, outcome))
    if not outcomes:  # stopped before the first run began: nothing to report
        _errors([f"preemptd: stopped by {signal.Signals(stop.signal or signal.SIGINT).name} before the run began"])
        return EXIT_INTERRUPTED
    begun = time.perf_counter()
    report = simreport.build_report(
        scenario, [(e.label, e.source, e.cycle_interval, o) for e, o in outcomes], stopped=stopped
    )
    simreport.print_report(report, stdout)
    code = EXIT_OK
    if report_dir is not None:
        try:
            written = simreport.write_report(report_dir, report)
        except OSError as exc:
            _errors([f"preemptd: error: --report {report_dir}: {exc.strerror or exc}"])
            return EXIT_FAILURE
        stdout.print(f"\nReport: {written[0]}  {written[1]}", soft_wrap=True)
    if timings:
        total: Counter[str] = Counter({"load": loaded, "report": time.perf_counter() - begun})
        for _, outcome in outcomes:
            total.update(outcome.timings)
        actions = [a for entry in setups for a in entry.config.scheduler.actions]
        order = ["load", "setup", "events", "snapshot", *dict.fromkeys(actions), "session", "commit", "report"]
        _errors(f"timing {phase} {total[phase]:.6f}" for phase in order if phase in total)
    if any(outcome.violations for _, outcome in outcomes):
        _errors(["preemptd: the scheduler broke an invariant; see the report's Invariants"])
        code = EXIT_FAILURE
    if stop.signal is not None:
        name = signal.Signals(stop.signal).name
        length = format_duration(scenario.duration)
        skipped = [entry.label for entry in setups[len(outcomes) :]]
        if stopped:
            index, t = next(iter(stopped.items()))
            at = format_duration(t)
            covers = "the report covers" if len(setups) == 1 else f"the {setups[index].label} run covers"
            line = f"preemptd: stopped by {name} at {at} of {length} simulated; {covers} the first {at}"
        else:  # the signal came after a run's last session
            line = f"preemptd: stopped by {name} after a whole run"
        _errors([line + (f" (the {', '.join(skipped)} run did not start)" if skipped else "")])
        code = EXIT_INTERRUPTED
    return code


def _errors(lines: Any) -> None:
    for line in lines:
        print(line, file=sys.stderr)


class _Stop:
    """SIGINT and SIGTERM while the runs go on: the first asks the run under way to stop
    after its session (the engine stops at a session's end, so what it has measured is
    whole); a second one stops at once (``KeyboardInterrupt``, no report). Outside the
    main thread signals cannot be caught, and nothing changes."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.again = False  # a second signal: stop at once
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: object) -> None:
        if self.signal is not None:
            self.again = True
            raise KeyboardInterrupt
        self.signal = signum
        _errors([
            f"preemptd: {signal.Signals(signum).name}: stopping after the session under way "
            "and reporting the time simulated so far (again to stop at once)"
        ])


Advance = Callable[..., None]


def _step(advance: Advance, stop: _Stop, reached: list[int]) -> Callable[[int, int, int], bool]:
    """The engine's progress callback: show progress, and answer whether a signal asked
    the run to stop (then ``reached`` gets the simulated time it stops at)."""

    def step(t: int, sessions: int, admissions: int) -> bool:
        if stop.again:  # its KeyboardInterrupt was swallowed under the session
            raise KeyboardInterrupt
        advance(t, sessions, admissions)
        if stop.signal is None:
            return False
        reached.append(t)
        return True

    return step


@contextmanager
def _progress(scenario: Scenario, interval: float) -> Iterator[Callable[[str], Advance]]:
    """Progress on stderr, one task per run: a rich progress bar on a terminal; off a
    terminal (a pipe, a file, a CI log) one line every ``interval`` seconds of wall
    time with the simulated time, sessions, admissions and their rates."""
    console = Console(stderr=True)
    terminal = console.is_terminal
    bar: Any = None  # a rich Progress on a terminal (its module is imported only then)
    if terminal:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[clock]} simulated"),
            TimeElapsedColumn(),
            console=console,
        )
    total = format_duration(scenario.duration)

    def task(label: str) -> Advance:
        handle = bar.add_task(label, total=scenario.duration, clock="0s") if terminal else None
        begun = time.monotonic()
        last = [begun if not terminal else -1.0]

        def advance(t: int, sessions: int, admissions: int, final: bool = False) -> None:
            now = time.monotonic()
            if terminal:
                if now - last[0] >= 0.05 or final:  # redraws, not sessions, cost
                    last[0] = now
                    bar.update(handle, completed=t, clock=format_duration(t - t % 1000))
            elif now - last[0] >= interval and not final:
                last[0] = now
                wall = max(now - begun, 1e-9)
                share = t / scenario.duration if scenario.duration else 1.0
                _errors([
                    f"{label}: {format_duration(t - t % 1000)} of {total} simulated ({share:.0%}), "
                    f"{sessions:,} sessions ({sessions / wall:,.0f}/s), "
                    f"{admissions:,} admissions ({admissions / wall:,.0f}/s)"
                ])

        return advance

    shown: AbstractContextManager[Any] = bar if terminal else nullcontext()
    with shown:
        yield task


# --- configuration ---------------------------------------------------------------------


def setup(scenario: Scenario, path: str | None) -> Setup:
    """The configuration and plugins one run uses; :class:`ConfigError` lists every problem."""
    problems: list[ConfigProblem] = []
    where = f"{scenario.source}: config"
    try:
        scenario_text = to_toml(scenario.config)
    except ValueError as exc:
        raise ConfigError([ConfigProblem(where, None, "", str(exc))]) from None
    scenario_config, found = parse_config(scenario_text, source=where)
    problems += [replace(problem, line=None) for problem in found]
    scenario_plugins: Plugins | None = None
    if not found:
        scenario_plugins, found = resolve_plugins(scenario_config)
        problems += [replace(problem, line=None) for problem in found]
    file_config, found = read_config(path)
    problems += found
    raw: dict[str, Any] = {}
    if path is not None and not found:
        _, more = resolve_plugins(file_config)
        problems += more
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    if problems:
        raise ConfigError(sorted(problems, key=ConfigProblem.sort_key))
    if path is None and scenario_plugins is not None:
        # Nothing to merge: the scenario's own table, already read and resolved above.
        config, plugins = scenario_config, scenario_plugins
    else:
        merged_source = path if path is not None else where
        config, found = parse_config(to_toml(_merge(scenario.config, raw)), source=merged_source)
        plugins, more = resolve_plugins(config)
        if found or more:
            raise ConfigError([replace(problem, line=None) for problem in found + more])
    interval = config.scheduler.cycle_interval
    if scenario.cycle_interval is not None and ("scheduler", "cycle_interval") not in file_config.lines:
        interval = scenario.cycle_interval
    label = Path(path).name if path is not None else "default"
    return Setup(label, path, config, plugins, interval)


def _merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(current, value)
        else:
            merged[key] = value
    return merged


def to_toml(table: Mapping[str, Any]) -> str:
    """A TOML document for a mapping of tables, keys and plain values, so that the
    scenario's ``config`` goes through the same checks as a TOML file."""
    lines: list[str] = []

    def emit(path: Sequence[str], values: Mapping[str, Any]) -> None:
        scalars = [(k, v) for k, v in values.items() if not isinstance(v, Mapping)]
        tables = [(k, v) for k, v in values.items() if isinstance(v, Mapping)]
        if path and (scalars or not tables):
            lines.append(f"[{'.'.join(_key(part) for part in path)}]")
        for key, value in scalars:
            lines.append(f"{_key(key)} = {_value(value, [*path, str(key)])}")
        for key, value in tables:
            emit([*path, str(key)], value)

    emit([], table)
    return "\n".join(lines) + "\n"


def _key(key: object) -> str:
    text = str(key)
    if text and all(c.isascii() and (c.isalnum() or c in "-_") for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _value(value: object, path: Sequence[str]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if not isinstance(value, float) or value == value else "nan"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item, path) for item in value) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(k)} = {_value(v, [*path, str(k)])}" for k, v in value.items())
        return "{" + items + "}"
    raise ValueError(f"{'.'.join(path)}: {value!r} has no TOML form (use a string, number, boolean, list or table)")
