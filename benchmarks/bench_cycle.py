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
The CPU seconds (user + system) of each process are reported too: on a shared machine
they move far less with the load of others than the wall time does.

``--breakdown`` runs the cycle through a small driver (:data:`DRIVER`) that marks the
clock and the CPU time between the phases of the process, from its start to its end:
start-up, imports, setup, load, snapshot, session, output, teardown and exit.

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


# Runs argv[2:], then writes to the descriptor argv[1] the wall seconds of that run, the
# peak RSS (KiB, as Linux reports ru_maxrss) and the CPU seconds (user + system) of that
# child alone, and the monotonic clock just before it was started and once it had ended
# (see the module docstring).
LAUNCHER = (
    "import os, resource, subprocess, sys, time\n"
    "started = time.perf_counter()\n"
    "code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL)\n"
    "ended = time.perf_counter()\n"
    "usage = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "cpu = usage.ru_utime + usage.ru_stime\n"
    "report = f'{ended - started} {usage.ru_maxrss} {cpu} {started} {ended}'\n"
    "os.write(int(sys.argv[1]), report.encode())\n"
    "sys.exit(code if code >= 0 else 128 - code)\n"
)

# ``--breakdown``: ``preemptd cycle`` run by this driver instead of ``python -m preemptd``.
# It does what ``python -m preemptd`` does (imports the command and runs it as the program
# does, through ``cli.entry`` where there is one), and prints to stderr ``mark NAME WALL
# CPU`` lines: the monotonic clock (the launcher's: ``time.perf_counter`` is
# CLOCK_MONOTONIC on Linux) and the process's CPU seconds when it started running Python
# code, when the imports were done, when the snapshot's files started being read, when
# the snapshot was built, when the session ran, when the output started and ended, and
# when ``main`` returned.
DRIVER = (
    "import sys, time\n"
    "def now():\n"
    "    return (time.perf_counter(), time.process_time())\n"
    "marks = {'begin': now()}\n"
    "from preemptd.daemon import cli\n"
    "marks['imported'] = now()\n"
    "def timed(name, function):\n"
    "    def run(*args, **kwargs):\n"
    "        marks.setdefault(name + '-start', now())\n"
    "        try:\n"
    "            return function(*args, **kwargs)\n"
    "        finally:\n"
    "            marks[name + '-end'] = now()\n"
    "    return run\n"
    "cli._load = timed('load', cli._load)\n"
    "cli.Snapshot.build = timed('snapshot', cli.Snapshot.build)\n"
    "cli.run_session = timed('session', cli.run_session)\n"
    "cli.write_output = timed('output', cli.write_output)\n"
    "main = cli.main\n"
    "def run_main(argv=None):\n"
    "    code = main(argv)\n"
    "    marks['returned'] = now()\n"
    "    sys.stderr.write(''.join(f'mark {name} {wall!r} {cpu!r}\\n' for name, (wall, cpu) in marks.items()))\n"
    "    return code\n"
    "cli.main = run_main\n"
    "sys.argv = ['preemptd', *sys.argv[1:]]\n"
    "if hasattr(cli, 'entry'):\n"
    "    cli.entry()\n"
    "sys.exit(run_main())\n"
)


def run_process(command: list[str]) -> dict[str, Any]:
    """Run ``command`` to its end: wall seconds, its own peak RSS in bytes, its CPU seconds,
    the monotonic clock at its start and end, exit code, stderr.

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
    if len(reported) != 5:
        return {"wall_s": 0.0, "rss_bytes": 0, "code": process.returncode or 1, "stderr": stderr}
    # Linux reports ru_maxrss in KiB.
    return {
        "wall_s": float(reported[0]),
        "rss_bytes": int(reported[1]) * 1024,
        "cpu_s": float(reported[2]),
        "started": float(reported[3]),
        "ended": float(reported[4]),
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


def marks(stderr: str) -> dict[str, tuple[float, float]]:
    """The ``mark NAME WALL CPU`` lines :data:`DRIVER` prints."""
    found = {}
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "mark":
            found[parts[1]] = (float(parts[2]), float(parts[3]))
    return found


BREAKDOWN = (
    ("start-up", "begin", "interpreter start and site (until the first line of Python code)"),
    ("imports", "imported", "importing the command"),
    ("setup", "load-start", "command line, configuration, plugins (until the files are read)"),
    ("load", "snapshot-start", "reading, decoding, the inventory, its problems printed"),
    ("snapshot", "snapshot-end", "building the snapshot"),
    ("session", "session-end", "the session (and the plugins' registry made before it)"),
    ("output", "output-end", "the decisions written (to /dev/null)"),
    ("teardown", "returned", "from the output to the return of main: timings printed, locals freed"),
    ("exit", "", "from the return of main to the end of the process"),
)
"""The phases of ``--breakdown``, in order: each from the end of the one before to its
mark, with what it covers."""


def breakdown(run: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """One ``--breakdown`` run's (wall, CPU) seconds per phase of :data:`BREAKDOWN`."""
    found = marks(run["stderr"])
    parts = {}
    wall, cpu = run["started"], 0.0
    for name, mark, _ in BREAKDOWN:
        until = found[mark] if mark else (run["ended"], run["cpu_s"])
        parts[name] = (until[0] - wall, until[1] - cpu)
        wall, cpu = until
    return parts


def measure(path: str, repeats: int, *, broken_down: bool = False) -> dict[str, Any]:
    floor_command = [sys.executable, str(FLOOR), path]
    start = [sys.executable, "-c", DRIVER] if broken_down else [sys.executable, "-m", "preemptd"]
    cycle_command = [
        *start, "cycle", "--config", str(CONFIG), "--now", NOW, "--output", "json", "--timings", path,
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
    floor_cpu_s = statistics.median(run["cpu_s"] for run in floors)
    cycle_cpu_s = statistics.median(run["cpu_s"] for run in cycles)
    parts: dict[str, list[tuple[float, float]]] = {}
    for run in cycles if broken_down else ():
        for name, seconds in breakdown(run).items():
            parts.setdefault(name, []).append(seconds)
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
        "floor_cpu_s": floor_cpu_s,
        "cycle_cpu_s": cycle_cpu_s,
        "cpu_ratio": cycle_cpu_s / floor_cpu_s,
        "breakdown_s": {
            name: [statistics.median(wall for wall, _ in values), statistics.median(cpu for _, cpu in values)]
            for name, values in parts.items()
        },
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
    row("floor, CPU (user + system)", f"{r['floor_cpu_s']:.2f} s", "-", None)
    row("cycle, CPU (user + system)", f"{r['cycle_cpu_s']:.2f} s", "-", None)
    row("cycle / floor, CPU", f"{r['cpu_ratio']:.2f}x", "-", None)
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
    if r["breakdown_s"]:
        lines += ["", "the cycle by phase (medians, s):", f"  {'phase'.ljust(19)}  {'wall':>6}  {'CPU':>6}"]
        for name, _, what in BREAKDOWN:
            wall, cpu = r["breakdown_s"][name]
            lines.append(f"  {name.ljust(19)}  {wall:6.3f}  {cpu:6.3f}  {what}")
        outside = [r["breakdown_s"][name] for name, _, _ in BREAKDOWN if name != "session"]
        lines.append(
            f"  {'all but the session'.ljust(19)}  {sum(w for w, _ in outside):6.3f}  {sum(c for _, c in outside):6.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_cycle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="large", help="a shape of benchmarks/generate.py")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--file", help="an existing JSON snapshot to read instead of generating one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON instead")
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="run the cycle through a small driver that also times start-up, imports, setup, "
        "output, teardown and exit, and print the wall time per phase",
    )
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
        result = measure(path, args.repeats, broken_down=args.breakdown)
    result["counts"] = counts
    print(json.dumps(result, indent=2) if args.json else render(label, counts, result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
