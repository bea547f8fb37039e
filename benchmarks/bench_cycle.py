"""The whole ``preemptd cycle`` process on a generated file, against a parse-only floor.

    python -m benchmarks.bench_cycle                    # the large shape, 3 repeats
    python -m benchmarks.bench_cycle --shape contended --repeats 5
    python -m benchmarks.bench_cycle --file /tmp/large.json   # an existing JSON snapshot

The shape (``benchmarks/generate.py``) is written once to a JSON file (not timed). Then,
``--repeats`` times and in turn, two fresh processes read that file:
``benchmarks/parse_floor.py`` (only parses the JSON and touches each object once) and
``preemptd cycle --timings --output json`` with the repository's default configuration.
Each is timed as a whole process (wall clock, from start to exit, interpreter start-up
included); the cycle's own ``--timings`` give its load, snapshot and session phases.

Peak RSS is the measured process's own. Linux carries a process's ``ru_maxrss`` over
``fork`` and ``exec``, so ``wait4`` on a child forked from this (large) benchmark reports at
least this process's own high-water mark, not the child's. Each command is therefore run
under a small launcher (:data:`LAUNCHER`): a fresh interpreter, started with ``-S -I`` and
holding nothing, which runs the command, waits for it and reports the command's wall time
and ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of the one child it ever had; that child was
forked from the launcher, whose own mark (a few MB) is far below any figure reported.

Medians are reported beside the targets of issue 16 for the large shape: load <= 1.5 s,
session <= 1.0 s, whole process <= 1.3x the floor, peak RSS <= 250 MB (<= 1 KB per pod).

This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.generate import NOW, describe, generate_shape, shape_maker, write

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "preemptd.toml"
FLOOR = ROOT / "benchmarks" / "parse_floor.py"
TARGET_LOAD_S = 1.5
TARGET_SESSION_S = 1.0
TARGET_RATIO = 1.3
TARGET_RSS_MB = 250.0
TARGET_BYTES_PER_POD = 1000.0


# Runs argv[2:], then writes to the descriptor argv[1] the wall seconds of that run and the
# peak RSS (KiB, as Linux reports ru_maxrss) of that child alone; see the module docstring.
LAUNCHER = (
    "import os, resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)\n"
    "wall = time.perf_counter() - started\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "os.write(int(sys.argv[1]), f'{wall} {peak}'.encode())\n"
    "sys.exit(code if code >= 0 else 128 - code)\n"
)


def run_process(command: list[str]) -> dict[str, Any]:
    """Run ``command`` to its end: wall seconds, its own peak RSS in bytes, exit code, stderr.

    The wall time is taken by the launcher around the command alone, so the launcher's
    own start-up is not counted.
    """
    with tempfile.TemporaryFile() as errors:
        read_end, write_end = os.pipe()
        launcher = [sys.executable, "-S", "-I", "-c", LAUNCHER, str(write_end), *command]
        process = subprocess.Popen(
            launcher, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors, pass_fds=(write_end,)
        )
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            reported = pipe.read().split()
        process.wait()
        errors.seek(0)
        stderr = errors.read().decode("utf-8", "replace")
    if len(reported) != 2:
        return {"wall_s": 0.0, "rss_bytes": 0, "code": process.returncode or 1, "stderr": stderr}
    # Linux reports ru_maxrss in KiB.
    return {
        "wall_s": float(reported[0]),
        "rss_bytes": int(reported[1]) * 1024,
        "code": process.returncode,
        "stderr": stderr,
    }


def timings(stderr: str) -> dict[str, float]:
    """The ``timing PHASE SECONDS`` lines ``--timings`` prints."""
    found = {}
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "timing":
            found[parts[1]] = float(parts[2])
    return found


def measure(path: str, repeats: int) -> dict[str, Any]:
    floor_command = [sys.executable, str(FLOOR), path]
    cycle_command = [
        sys.executable, "-m", "preemptd", "cycle", "--config", str(CONFIG), "--now", NOW,
        "--output", "json", "--timings", path,
    ]
    floors: list[dict[str, Any]] = []
    cycles: list[dict[str, Any]] = []
    for _ in range(repeats):
        for command, runs in ((floor_command, floors), (cycle_command, cycles)):
            run = run_process(command)
            if run["code"] != 0:
                tail = run["stderr"].strip().splitlines()[-3:]
                raise SystemExit(f"{' '.join(command)}: exit {run['code']}: {' / '.join(tail)}")
            runs.append(run)
    phases: dict[str, list[float]] = {}
    for run in cycles:
        for phase, seconds in timings(run["stderr"]).items():
            phases.setdefault(phase, []).append(seconds)
    floor_s = statistics.median(run["wall_s"] for run in floors)
    cycle_s = statistics.median(run["wall_s"] for run in cycles)
    return {
        "repeats": repeats,
        "floor_s": floor_s,
        "floor_all_s": [run["wall_s"] for run in floors],
        "floor_rss_mb": statistics.median(run["rss_bytes"] for run in floors) / 1e6,
        "cycle_s": cycle_s,
        "cycle_all_s": [run["wall_s"] for run in cycles],
        "ratio": cycle_s / floor_s,
        "rss_mb": statistics.median(run["rss_bytes"] for run in cycles) / 1e6,
        "rss_max_mb": max(run["rss_bytes"] for run in cycles) / 1e6,
        "phases_s": {phase: statistics.median(values) for phase, values in phases.items()},
    }


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def render(label: str, counts: dict[str, int], r: dict[str, Any]) -> str:
    phases = r["phases_s"]
    pods = counts.get("Pod", 0)
    per_pod = r["rss_mb"] * 1e6 / pods if pods else float("nan")
    rows = [("figure", "median", "target", "")]

    def row(name: str, value: str, target: str, met: bool | None) -> None:
        rows.append((name, value, target, "" if met is None else _verdict(met)))

    row("parse-only floor, whole process", f"{r['floor_s']:.2f} s", "-", None)
    row("preemptd cycle, whole process", f"{r['cycle_s']:.2f} s", "-", None)
    row("cycle / floor", f"{r['ratio']:.2f}x", f"<= {TARGET_RATIO}x", r["ratio"] <= TARGET_RATIO)
    if "load" in phases:
        row("load (--timings)", f"{phases['load']:.2f} s", f"<= {TARGET_LOAD_S} s", phases["load"] <= TARGET_LOAD_S)
    if "snapshot" in phases:
        row("snapshot (--timings)", f"{phases['snapshot']:.2f} s", "-", None)
    if "session" in phases:
        met = phases["session"] <= TARGET_SESSION_S
        row("session (--timings)", f"{phases['session']:.2f} s", f"<= {TARGET_SESSION_S} s", met)
    row("peak RSS", f"{r['rss_mb']:.0f} MB", f"<= {TARGET_RSS_MB:.0f} MB", r["rss_mb"] <= TARGET_RSS_MB)
    row("peak RSS per pod", f"{per_pod:,.0f} B", f"<= {TARGET_BYTES_PER_POD:,.0f} B", per_pod <= TARGET_BYTES_PER_POD)
    widths = [max(len(cells[i]) for cells in rows) for i in range(4)]
    lines = [
        f"{label}: " + ", ".join(f"{kind} {count:,}" for kind, count in counts.items()),
        "",
    ]
    for n, cells in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(
        "targets are issue 16's for the large shape; "
        f"medians of {r['repeats']} runs; cycle runs (s): "
        + ", ".join(f"{s:.2f}" for s in r["cycle_all_s"])
        + "; floor runs (s): "
        + ", ".join(f"{s:.2f}" for s in r["floor_all_s"])
        + f"; floor RSS {r['floor_rss_mb']:.0f} MB; cycle RSS max {r['rss_max_mb']:.0f} MB"
    )
    other = {k: v for k, v in phases.items() if k not in ("load", "snapshot", "session")}
    if other:
        lines.append("other phases (s): " + ", ".join(f"{k} {v:.2f}" for k, v in other.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cycle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="large", help="a shape of benchmarks/generate.py")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--file", help="an existing JSON snapshot to read instead of generating one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="preemptd-bench-") as folder:
        if args.file:
            path, label = args.file, args.file
            with open(path, encoding="utf-8") as source:
                counts = describe(json.load(source))
        else:
            try:
                shape_maker(args.shape)
            except ValueError as exc:
                parser.error(str(exc))
            print(f"generating {args.shape} ...", file=sys.stderr, flush=True)
            objects = generate_shape(args.shape, args.seed)
            counts = describe(objects)
            path, label = os.path.join(folder, f"{args.shape}.json"), args.shape
            write(objects, path)
            del objects
        print(f"running {args.repeats} x (floor, cycle) on {path} ...", file=sys.stderr, flush=True)
        result = measure(path, args.repeats)
    result["counts"] = counts
    print(json.dumps(result, indent=2) if args.json else render(label, counts, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
