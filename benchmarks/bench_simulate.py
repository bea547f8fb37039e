"""Simulated work per second: sessions and admissions, on generated clusters and the example.

    python -m benchmarks.bench_simulate                     # L for 15 minutes, and the 500-node day
    python -m benchmarks.bench_simulate --sizes S,M,L --hours 0.5
    python -m benchmarks.bench_simulate --scenario examples/scenarios/spot-on-demand.yaml

For each generated size, the scenario of ``benchmarks/scenario_gen.py`` (the size's
cluster, running workloads finishing and new ones arriving) is simulated with the
default configuration and a session every ``--cycle`` of simulated time; the
bundled ``examples/scenarios/gpu-fleet.yaml`` (500 nodes, a day) runs as it is.
Generating is not timed; loading (parsing every object once) and simulating are,
with the simulation split into the phases of ``--timings``. Each run is in a fresh
interpreter unless ``--in-process``.

Speed-up is simulated seconds per wall-clock second.

Each bundled or named scenario is also run ``--repeats`` times as the whole command,
``preemptd simulate FILE`` in a fresh process (interpreter start-up, imports, loading,
the runs and the report: what a user waits for), back to back, with each run's CPU
seconds beside its wall (a busy shared machine moves the wall much more); the median wall
is printed beside issue 16's target for the example (``simulate gpu-fleet`` <= 3 s), and L's
simulation wall beside its target (<= 30 s), each with the figure measured when the
targets were set (:data:`BEFORE`). This prints figures; it asserts nothing.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "scenarios" / "gpu-fleet.yaml"
# Issue 16's targets, in wall seconds: the whole `preemptd simulate` of the example, and the
# simulation of the generated L scenario (15 simulated minutes, a session every 30 s).
TARGET_EXAMPLE_S = 3.0
TARGET_L_S = 30.0
# The same figures at 6a382d7, on the 2-core development machine (medians of 5, L once).
BEFORE = {"example": 5.30, "L": 86.3}


def measure(size: str | None, *, hours: float, cycle: str, path: str | None = None, seed: int = 1) -> dict[str, Any]:
    """Every figure of one run, as a JSON-able dict."""
    from preemptd.daemon.simulation.command import setup
    from preemptd.daemon.simulation.engine import simulate
    from preemptd.daemon.simulation.scenario import load_scenario, scenario_from_data

    from benchmarks.scenario_gen import generate_scenario

    started = time.perf_counter()
    if path is None:
        assert size is not None
        data = generate_scenario(size, seed, hours, cycle_interval=cycle)
        generated = time.perf_counter() - started
        started = time.perf_counter()
        scenario = scenario_from_data(data, source=f"generated {size}")
    else:
        generated = 0.0
        scenario = load_scenario(path)
    loaded = time.perf_counter() - started
    entry = setup(scenario, None)
    gc.collect()
    gc.freeze()  # as `preemptd simulate` does after loading
    started = time.perf_counter()
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
    )
    wall = time.perf_counter() - started
    inventory = scenario.inventory
    return {
        "name": size or Path(path or "").name,
        "nodes": len(inventory.nodes),
        "queues": len(inventory.queues),
        "initial": len(inventory.workloads),
        "arrivals": len(scenario.arrivals),
        "simulated_s": scenario.duration / 1000,
        "cycle_s": entry.cycle_interval / 1000,
        "generate_s": generated,
        "load_s": loaded,
        "wall_s": wall,
        "sessions": outcome.sessions,
        "admissions": outcome.admissions,
        "preemptions": outcome.figures["preemptions"]["total"],
        "violations": outcome.violations,
        "phases_s": {k: round(v, 3) for k, v in sorted(outcome.timings.items())},
    }


def _in_child(arguments: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_simulate", "--child", *arguments]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        return {"name": arguments[0], "error": lines[-1]}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def whole_process(path: str, repeats: int, cpus: list[float] | None = None) -> list[float]:
    """Wall seconds of ``preemptd simulate PATH`` as a fresh process, ``repeats`` times in
    turn; ``cpus``, when given, receives each run's CPU seconds (user + system), which
    other work on a shared machine moves far less than the wall."""
    command = [sys.executable, "-m", "preemptd.daemon.cli", "simulate", path]
    walls = []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if cpus is not None:
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
            raise RuntimeError(f"preemptd simulate {path}: {lines[-1]}")
    return walls


def targets(
    results: list[dict[str, Any]], processes: dict[str, list[float]], cpus: dict[str, list[float]] | None = None
) -> list[str]:
    """Lines naming each figure issue 16 sets a target for, the target and the figure before;
    then each scenario's whole-process runs (and their CPU seconds, when measured)."""
    rows = [("figure", "now", "target", "before", "")]
    for name, walls in processes.items():
        median = statistics.median(walls)
        if name == EXAMPLE.name:
            before, target, met = f"{BEFORE['example']:.2f} s", f"<= {TARGET_EXAMPLE_S:g} s", median <= TARGET_EXAMPLE_S
        else:
            before, target, met = "-", "-", None
        rows.append((f"preemptd simulate {name}, whole process", f"{median:.2f} s", target, before, _verdict(met)))
    for r in results:
        if r.get("name") == "L" and "error" not in r and r["simulated_s"] == 900 and r["cycle_s"] == 30:
            met = r["wall_s"] <= TARGET_L_S
            rows.append(("L, simulation wall", f"{r['wall_s']:.2f} s", f"<= {TARGET_L_S:g} s", f"{BEFORE['L']:.1f} s", _verdict(met)))
    if len(rows) == 1:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, walls in processes.items():
        lines.append(f"{name}: whole-process runs (s): " + ", ".join(f"{w:.2f}" for w in walls))
        if cpus and cpus.get(name):
            lines.append(f"{name}: their CPU (s): " + ", ".join(f"{c:.2f}" for c in cpus[name]))
    return lines


def _verdict(met: bool | None) -> str:
    return "" if met is None else "met" if met else "MISSED"


def render(results: list[dict[str, Any]]) -> str:
    header = ("run", "nodes", "queues", "workloads", "simulated", "cycle", "load s", "wall s",
              "sessions", "sessions/s", "admissions", "admissions/s", "speed-up", "preemptions")
    rows: list[tuple[str, ...]] = [header]
    notes = []
    for r in results:
        if "error" in r:
            notes.append(f"{r['name']}: failed: {r['error']}")
            continue
        wall = r["wall_s"] or 1e-9
        rows.append((
            r["name"], f"{r['nodes']:,}", f"{r['queues']:,}", f"{r['initial']:,}+{r['arrivals']:,}",
            f"{r['simulated_s'] / 3600:g} h", f"{r['cycle_s']:g} s", f"{r['load_s']:.2f}", f"{wall:.2f}",
            f"{r['sessions']:,}", f"{r['sessions'] / wall:,.1f}", f"{r['admissions']:,}",
            f"{r['admissions'] / wall:,.0f}", f"{r['simulated_s'] / wall:,.0f}x", f"{r['preemptions']:,}",
        ))
        notes.append(f"{r['name']}: phases (s) {r['phases_s']}; invariant violations {r['violations']}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_simulate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="L", help="comma-separated generated sizes (S, M, L); '' for none")
    parser.add_argument("--hours", type=float, default=0.25, help="simulated hours of the generated scenarios")
    parser.add_argument("--cycle", default="30s", help="cycle interval of the generated scenarios")
    parser.add_argument("--scenario", action="append", help=f"a scenario file to run too (default: {EXAMPLE.name})")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument(
        "--repeats", type=int, default=5, help="whole-process runs of each scenario file (0: none)"
    )
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--child", nargs=4, metavar=("NAME", "HOURS", "CYCLE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, hours, cycle, path = args.child
        result = measure(None if path != "-" else name, hours=float(hours), cycle=cycle, path=None if path == "-" else path)
        print(json.dumps(result))
        return 0
    runs = [(size.strip().upper(), "-") for size in args.sizes.split(",") if size.strip()]
    runs += [(Path(p).name, str(p)) for p in (args.scenario or [str(EXAMPLE)])]
    results = []
    for name, path in runs:
        print(f"simulating {name} ...", file=sys.stderr, flush=True)
        child = [name, str(args.hours), args.cycle, path]
        if args.in_process:
            results.append(measure(None if path != "-" else name, hours=args.hours, cycle=args.cycle, path=None if path == "-" else path))
        else:
            results.append(_in_child(child))
    processes: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for name, path in runs:
        if path != "-" and args.repeats > 0:
            print(f"running preemptd simulate {name} {args.repeats} times ...", file=sys.stderr, flush=True)
            processes[name] = whole_process(path, args.repeats, cpus.setdefault(name, []))
    if args.json:
        print(json.dumps({"runs": results, "whole_process_s": processes, "whole_process_cpu_s": cpus}, indent=2))
    else:
        print("\n\n".join(part for part in (render(results), "\n".join(targets(results, processes, cpus))) if part))
    return 0


if __name__ == "__main__":
    sys.exit(main())
