"""Time one allocate session over generated clusters, phase by phase.

    python -m benchmarks.bench_session              # sizes S and M
    python -m benchmarks.bench_session --sizes S,M,L

For each size the cluster is generated in-process (not timed with the
phases), then three phases are timed separately, each repeated (5 times for
S and M, 3 for L) and reported as the median: ``parse_objects`` (objects to
the model), ``Snapshot.build`` and one ``run_session`` with
``actions=("allocate",)`` and the priority plugin. One extra, untimed run
under ``tracemalloc`` gives each phase's peak of Python allocations; the peak
RSS (``ru_maxrss``) is the whole process's. Each size runs in a fresh
interpreter, so its RSS is its own (``--in-process`` turns that off).

This prints figures; it asserts nothing. The targets (ARCHITECTURE.md: the
hot loops must be cheap) are shown next to the measured session times.
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

from benchmarks.generate import NOW_MS, SIZES, describe, generate

REPEATS = {"S": 5, "M": 5, "L": 3}
TARGETS_MS = {"M": 150.0, "L": 1000.0}
"""Session budget per size; S has none of its own (it must simply be well under M's)."""
SOURCE = "generated.yaml"

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


def measure(size: str, seed: int = 1, repeats: int | None = None) -> dict[str, Any]:
    """Every figure of one size, as a JSON-able dict."""
    from preemptd.framework.objects import parse_objects
    from preemptd.framework.run import run_session
    from preemptd.framework.session import Registry
    from preemptd.framework.snapshot import Snapshot
    from preemptd.plugins import priority

    repeats = repeats or REPEATS.get(size, 3)
    start = time.perf_counter()
    objects = generate(size, seed)
    generated = time.perf_counter() - start
    documents = [(SOURCE, obj) for obj in objects]

    def parse() -> Any:
        return parse_objects(documents)

    inventory, parse_times = _timed(parse, repeats)
    problems = len(inventory.problems)

    def build() -> Any:
        return Snapshot.build(inventory, now=NOW_MS)

    snapshot, build_times = _timed(build, repeats)

    def session() -> Any:
        registry = Registry([("priority", priority, None)])
        return run_session(snapshot, registry, actions=("allocate",))

    decisions, session_times = _timed(session, repeats)

    # One more run of each phase under tracemalloc, for its allocation peak.
    tracemalloc.start()
    peaks = {}
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
        "size": size,
        "seed": seed,
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
        "admitted": len(decisions.admitted),
        "pending_after": len(decisions.pending),
        "pending_reasons": dict(sorted(reasons.items())),
        # Linux reports ru_maxrss in KiB.
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "tracemalloc_peak_mib": {phase: peak / 2**20 for phase, peak in peaks.items()},
    }


def _in_child(size: str, seed: int) -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    command = [sys.executable, "-m", "benchmarks.bench_session", "--child", size, "--seed", str(seed)]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {"size": size, "error": lines[-1]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def render(results: list[dict[str, Any]]) -> str:
    header = (
        "size", "nodes", "queues", "workloads", "pods", "gen s", "parse ms", "snapshot ms",
        "session ms", "target ms", "admitted", "left pending", "RSS MiB",
        "tracemalloc MiB parse/snap/session",
    )
    rows: list[tuple[str, ...]] = [header]
    notes = []
    for r in results:
        if "error" in r:
            notes.append(f"{r['size']}: failed: {r['error']}")
            continue
        target = TARGETS_MS.get(r["size"])
        verdict = ""
        if target is not None:
            verdict = f"{target:,.0f} ({'met' if r['session_s'] * 1000 <= target else 'MISSED'})"
        peaks = r["tracemalloc_peak_mib"]
        rows.append(
            (
                r["size"], f"{r['nodes']:,}", f"{r['queues']:,}", f"{r['workloads']:,}",
                f"{r['pods']:,}", f"{r['generate_s']:.2f}", _ms(r["parse_s"]),
                _ms(r["snapshot_s"]), _ms(r["session_s"]), verdict or "-",
                f"{r['admitted']:,}", f"{r['pending_after']:,}", f"{r['max_rss_mib']:,.0f}",
                f"{peaks['parse']:,.0f} / {peaks['snapshot']:,.0f} / {peaks['session']:,.0f}",
            )
        )
        if r["problems"]:
            notes.append(f"{r['size']}: parse_objects reported {r['problems']} problems")
        notes.append(
            f"{r['size']}: medians of {r['repeats']} runs; session runs (ms): "
            + ", ".join(_ms(s) for s in r["session_all_s"])
            + f"; pending reasons {r['pending_reasons']}"
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for n, row in enumerate(rows):
        cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("targets: one allocate session on M <= 150 ms, on L <= 1 s")
    lines.extend(notes)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_session", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="S,M", help="comma-separated, of " + ",".join(SIZES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--in-process", action="store_true", help="run every size in this interpreter")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON instead")
    parser.add_argument("--child", metavar="SIZE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.seed)))
        return 0
    sizes = [s.strip().upper() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {', '.join(unknown)} (choose from {', '.join(SIZES)})")
    results = []
    for size in sizes:
        print(f"benchmarking {size} ...", file=sys.stderr, flush=True)
        results.append(measure(size, args.seed) if args.in_process else _in_child(size, args.seed))
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
