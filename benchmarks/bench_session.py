"""Time one full session over generated clusters, phase by phase.

    python -m benchmarks.bench_session              # typical-M, saturated, contended, large
    python -m benchmarks.bench_session --shapes saturated,contended --repeats 5
    python -m benchmarks.bench_session --shapes S,M      # the typical sizes by name

For each shape (``benchmarks/generate.py``) the cluster is generated in-process (not
timed with the phases), then three phases are timed separately, each repeated (3 times
unless ``--repeats``) and reported as the median: ``parse_objects`` (objects to the
model), ``Snapshot.build`` and one ``run_session`` as ``preemptd cycle`` runs it with the
repository's default configuration (``config/preemptd.toml``): its actions (allocate and
preempt) and every built-in plugin it enables. The session is also split into its
actions, and its CPU time and counters (those of ``preemptd cycle --timings``) are
printed. The peak RSS (``ru_maxrss``) is the whole process's; each shape runs in a
fresh interpreter, so its RSS is its own (``--in-process`` turns that off).
``--tracemalloc`` adds one untimed run of each phase under ``tracemalloc`` for its
allocation peak.

This prints figures; it asserts nothing. The targets of the session (PERFORMANCE.md) are
shown next to the measured times.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.generate import NOW_MS, describe, generate_shape, shape_maker

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "preemptd.toml"
DEFAULT_SHAPES = ("typical-M", "saturated", "contended", "large")
REPEATS = 3
TARGETS_MS = {"saturated": 150.0, "contended": 300.0, "large": 1000.0, "typical-L": 1000.0, "L": 1000.0}
"""Session budget per shape (issue 16); the other shapes have none of their own."""
SOURCE = "generated.json"

T = TypeVar("T")


def _timed(function: Callable[[], T], repeats: int) -> tuple[T, list[float]]:
    """Run ``function`` ``repeats`` times; its last result and every duration in seconds."""
    durations = []
    result: T | None = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = function()
        durations.append(time.perf_counter() - start)
    assert result is not None
    return result, durations


def default_session() -> tuple[tuple[str, ...], Callable[[], Any]]:
    """The actions of the default configuration and a maker of fresh registries of its
    enabled plugins: what ``preemptd cycle --config config/preemptd.toml`` runs."""
    from preemptd.daemon.config import read_config
    from preemptd.daemon.plugins import resolve_plugins

    config, problems = read_config(CONFIG)
    plugins, more = resolve_plugins(config)
    if problems or more:
        raise SystemExit("\n".join(str(problem) for problem in problems + more))
    return tuple(config.scheduler.actions), plugins.registry


def measure(
    shape: str,
    seed: int = 1,
    repeats: int = REPEATS,
    *,
    with_tracemalloc: bool = False,
    setup_repeats: int | None = None,
) -> dict[str, Any]:
    """Every figure of one shape, as a JSON-able dict; parse and snapshot are timed
    ``setup_repeats`` times (default: ``repeats``)."""
    from preemptd.framework.objects import parse_objects
    from preemptd.framework.run import run_session
    from preemptd.framework.snapshot import Snapshot

    actions, registry = default_session()
    start = time.perf_counter()
    objects = generate_shape(shape, seed)
    generated = time.perf_counter() - start
    documents = [(SOURCE, obj) for obj in objects]

    def parse() -> Any:
        return parse_objects(documents)

    setup_repeats = setup_repeats or repeats
    inventory, parse_times = _timed(parse, setup_repeats)
    problems = len(inventory.problems)

    def build() -> Any:
        return Snapshot.build(inventory, now=NOW_MS)

    snapshot, build_times = _timed(build, setup_repeats)
    phases: list[dict[str, float]] = []
    cpu: list[float] = []
    counters: dict[str, int | str] = {}

    def session() -> Any:
        timings: dict[str, float] = {}
        counters.clear()
        started = time.process_time()
        decisions = run_session(snapshot, registry(), actions=actions, timings=timings, counters=counters)
        cpu.append(time.process_time() - started)
        phases.append(timings)
        return decisions

    decisions, session_times = _timed(session, repeats)
    action_s = {
        action: statistics.median(t[action] for t in phases if action in t)
        for action in actions
        if any(action in t for t in phases)
    }

    peaks = {}
    if with_tracemalloc:
        tracemalloc.start()
        for phase, function in (("parse", parse), ("snapshot", build), ("session", session)):
            gc.collect()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            function()
            peaks[phase] = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()

    counts = describe(objects)
    reasons: dict[str, int] = {}
    for pending in decisions.pending:
        reasons[pending.reason] = reasons.get(pending.reason, 0) + 1
    return {
        "shape": shape,
        "seed": seed,
        "actions": list(actions),
        "repeats": repeats,
        "nodes": counts.get("Node", 0),
        "queues": counts.get("Queue", 0),
        "workloads": counts.get("Workload", 0),
        "pending_before": counts.get("pending", 0),
        "pods": counts.get("Pod", 0),
        "problems": problems,
        "generate_s": generated,
        "parse_s": statistics.median(parse_times),
        "snapshot_s": statistics.median(build_times),
        "session_s": statistics.median(session_times),
        "session_all_s": session_times,
        # CPU time of this process: on a shared machine, less moved by other work than wall time.
        "session_cpu_s": statistics.median(cpu[:repeats]),
        "counters": dict(counters),
        "action_s": action_s,
        "admitted": len(decisions.admitted),
        "pending_after": len(decisions.pending),
        "pending_reasons": dict(sorted(reasons.items())),
        # Linux reports ru_maxrss in KiB.
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tracemalloc_peak_mib": {phase: peak / 2**20 for phase, peak in peaks.items()},
    }


def in_child(
    shape: str,
    seed: int,
    repeats: int,
    *,
    with_tracemalloc: bool = False,
    setup_repeats: int | None = None,
) -> dict[str, Any]:
    """``measure`` in a fresh interpreter (its RSS is then the shape's own)."""
    command = [
        sys.executable, "-m", "benchmarks.bench_session", "--child", shape,
        "--seed", str(seed), "--repeats", str(repeats),
        "--setup-repeats", str(setup_repeats or repeats),
    ]
    if with_tracemalloc:
        command.append("--tracemalloc")
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {"shape": shape, "error": lines[-1]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def render(results: list[dict[str, Any]]) -> str:
    header = (
        "shape", "nodes", "queues", "workloads", "pods", "gen s", "parse ms", "snapshot ms",
        "session ms", "target ms", "admitted", "left pending", "RSS MiB",
    )
    rows: list[tuple[str, ...]] = [header]
    notes = []
    for r in results:
        if "error" in r:
            notes.append(f"{r['shape']}: failed: {r['error']}")
            continue
        target = TARGETS_MS.get(r["shape"])
        verdict = "-"
        if target is not None:
            verdict = f"{target:,.0f} ({'met' if r['session_s'] * 1000 <= target else 'MISSED'})"
        rows.append(
            (
                r["shape"], f"{r['nodes']:,}", f"{r['queues']:,}", f"{r['workloads']:,}",
                f"{r['pods']:,}", f"{r['generate_s']:.2f}", _ms(r["parse_s"]),
                _ms(r["snapshot_s"]), _ms(r["session_s"]), verdict,
                f"{r['admitted']:,}", f"{r['pending_after']:,}", f"{r['max_rss_mib']:,.0f}",
            )
        )
        if r["problems"]:
            notes.append(f"{r['shape']}: parse_objects reported {r['problems']} problems")
        split = ", ".join(f"{action} {_ms(s)}" for action, s in r["action_s"].items())
        notes.append(
            f"{r['shape']}: medians of {r['repeats']} runs ({split} ms); session runs (ms): "
            + ", ".join(_ms(s) for s in r["session_all_s"])
            + f"; pending reasons {r['pending_reasons']}"
        )
        if "counters" in r:
            counted = ", ".join(f"{name} {value:,}" if isinstance(value, int) else f"{name} {value}"
                                for name, value in r["counters"].items())
            notes.append(f"{r['shape']}: session CPU {_ms(r['session_cpu_s'])} ms (median); {counted}")
        peaks = r["tracemalloc_peak_mib"]
        if peaks:
            notes.append(
                f"{r['shape']}: tracemalloc peak MiB parse {peaks['parse']:,.0f}, "
                f"snapshot {peaks['snapshot']:,.0f}, session {peaks['session']:,.0f}"
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for n, row in enumerate(rows):
        cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    actions = results[0].get("actions", []) if results else []
    lines.append(
        f"session = actions {'+'.join(actions)} with the plugins config/preemptd.toml enables; "
        "targets (issue 16): saturated <= 150 ms, contended <= 300 ms, large <= 1 s"
    )
    lines.extend(notes)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_session", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", "--sizes", default=",".join(DEFAULT_SHAPES), help="comma-separated shapes of benchmarks/generate.py")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--in-process", action="store_true", help="run every shape in this interpreter")
    parser.add_argument("--tracemalloc", action="store_true", help="also measure allocation peaks")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON instead")
    parser.add_argument("--setup-repeats", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", metavar="SHAPE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        figures = measure(
            args.child,
            args.seed,
            args.repeats,
            with_tracemalloc=args.tracemalloc,
            setup_repeats=args.setup_repeats,
        )
        print(json.dumps(figures))
        return 0
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    for shape in shapes:
        try:
            shape_maker(shape)
        except ValueError as exc:
            parser.error(str(exc))
    results = []
    for shape in shapes:
        print(f"benchmarking {shape} ...", file=sys.stderr, flush=True)
        if args.in_process:
            results.append(measure(shape, args.seed, args.repeats, with_tracemalloc=args.tracemalloc))
        else:
            results.append(in_child(shape, args.seed, args.repeats, with_tracemalloc=args.tracemalloc))
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
