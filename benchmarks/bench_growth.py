"""How the session grows with the cluster: the exponent of a power-law fit.

    python -m benchmarks.bench_growth                   # both series, 2.5k to 20k workloads
    python -m benchmarks.bench_growth --series deep --counts 2500,5000,10000 --repeats 5

Two series of generated clusters (``benchmarks/generate.py``), N/10 nodes and M's kinds
of workload at every point: ``queues`` (N workloads in N/100 queues: the cluster grows
wider) and ``deep`` (N workloads in 100 queues: the queues grow deeper). At each point one
fresh interpreter times the session as ``benchmarks/bench_session.py`` does (the default
configuration: allocate and preempt, every built-in plugin), ``--repeats`` times, and
keeps the median. The exponent is the least-squares slope of log(session time) against
log(workloads): 1.0 is linear. Target (issue 16): <= 1.1 for both series.

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.bench_session import in_child
from benchmarks.generate import GROWTH_SERIES

COUNTS = (2_500, 5_000, 10_000, 20_000)
TARGET_EXPONENT = 1.1


def exponent(counts: Sequence[float], seconds: Sequence[float]) -> float:
    """The slope of the least-squares line through (log count, log seconds)."""
    xs = [math.log(c) for c in counts]
    ys = [math.log(s) for s in seconds]
    mean_x = sum(xs) / len(xs)
    mean_y = sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread


def measure(series: str, counts: Sequence[int], seed: int, repeats: int) -> dict[str, Any]:
    points = []
    for count in counts:
        shape = f"grow-{series}-{count}"
        print(f"benchmarking {shape} ...", file=sys.stderr, flush=True)
        result = in_child(shape, seed, repeats, setup_repeats=1)
        if "error" in result:
            raise SystemExit(f"{shape}: {result['error']}")
        points.append(result)
    seconds = [point["session_s"] for point in points]
    return {
        "series": series,
        "counts": list(counts),
        "queues": [point["queues"] for point in points],
        "session_s": seconds,
        "session_all_s": [point["session_all_s"] for point in points],
        "exponent": exponent(counts, seconds),
        "repeats": repeats,
    }


def render(results: list[dict[str, Any]]) -> str:
    counts = results[0]["counts"]
    header = ["series", *(f"{c:,} ms" for c in counts), "exponent", "target", ""]
    rows = [header]
    for r in results:
        met = r["exponent"] <= TARGET_EXPONENT
        rows.append(
            [
                f"{r['series']} ({r['queues'][0]}..{r['queues'][-1]} queues)",
                *(f"{s * 1000:,.0f}" for s in r["session_s"]),
                f"{r['exponent']:.2f}",
                f"<= {TARGET_EXPONENT}",
                "met" if met else "MISSED",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(
        f"session medians of {results[0]['repeats']} runs at each point (allocate + preempt, "
        "the plugins config/preemptd.toml enables); target (issue 16): exponent <= 1.1"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", default=",".join(GROWTH_SERIES), help="comma-separated, of " + ", ".join(GROWTH_SERIES))
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)), help="workloads at each point")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON instead")
    args = parser.parse_args(argv)
    series = [s.strip() for s in args.series.split(",") if s.strip()]
    unknown = [s for s in series if s not in GROWTH_SERIES]
    if unknown:
        parser.error(f"unknown series {', '.join(unknown)} (choose from {', '.join(GROWTH_SERIES)})")
    try:
        counts = [int(c) for c in args.counts.split(",") if c.strip()]
    except ValueError:
        parser.error(f"--counts: not a list of integers: {args.counts!r}")
    if len(counts) < 2 or min(counts) <= 0:
        parser.error("--counts: at least two positive workload counts")
    results = [measure(s, counts, args.seed, args.repeats) for s in series]
    print(json.dumps(results, indent=2) if args.json else render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
