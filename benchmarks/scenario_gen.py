"""Large random simulation scenarios, from the synthetic clusters of ``generate.py``.

The cluster of :func:`benchmarks.generate.generate` is the scenario's starting
point: its running workloads finish at random during the simulated hours, its
pending ones wait, and new workloads — copies of the cluster's own, so their
shapes and queues follow the same weights — keep arriving at the rate that
keeps the cluster about as busy as it started. The same (size, seed, hours)
always gives the same scenario.

    python -m benchmarks.scenario_gen --size S --seed 1 --hours 2 --out /tmp/s.yaml
    preemptd simulate /tmp/s.yaml
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
from typing import Any

from preemptd.daemon.simulation.scenario import RUNTIME_ANNOTATION
from preemptd.framework.quantity import format_duration, parse_timestamp

from benchmarks.generate import NOW, generate

__all__ = ["MEAN_RUNTIME_MS", "generate_scenario", "main"]

_MINUTE = 60_000
RUNTIME_MS = (20 * _MINUTE, 4 * 60 * _MINUTE)
MEAN_RUNTIME_MS = sum(RUNTIME_MS) // 2


def generate_scenario(size: str, seed: int, hours: float, *, cycle_interval: str = "10s") -> dict[str, Any]:
    """A scenario (the mapping a scenario file holds) over ``hours`` of the size's cluster."""
    rng = random.Random(f"preemptd-scenario/{size}/{seed}/{hours}")
    duration = int(hours * 60 * _MINUTE)
    objects = generate(size, seed)
    now = parse_timestamp(NOW)
    templates = []
    running = 0
    for obj in objects:
        if obj["kind"] != "Workload":
            continue
        templates.append(obj)
        status = obj.get("status")
        if status:
            running += 1
            ran = now - parse_timestamp(status["admittedAt"])
            remaining = rng.randint(5 * _MINUTE, max(5 * _MINUTE, int(duration * 1.5)))
            runtime = ran + remaining
        else:
            runtime = rng.randint(*RUNTIME_MS)
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[RUNTIME_ANNOTATION] = format_duration(runtime)
    arrivals = []
    count = round(running * duration / MEAN_RUNTIME_MS)
    for index in range(count):
        template = rng.choice(templates)
        workload = copy.deepcopy({key: template[key] for key in ("metadata", "spec")})
        metadata = workload["metadata"]
        metadata["name"] = f"arrival-{index:06d}"
        metadata.pop("uid", None)
        metadata.pop("annotations", None)
        metadata.pop("creationTimestamp", None)
        arrivals.append(
            {
                "arrival": format_duration(rng.randrange(duration)),
                "runtime": format_duration(rng.randint(*RUNTIME_MS)),
                "object": workload,
            }
        )
    return {
        "duration": format_duration(duration),
        "start": NOW,
        "cycleInterval": cycle_interval,
        "seed": seed,
        "objects": objects,
        "workloads": arrivals,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scenario_gen", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="S")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--out", required=True, help="FILE.yaml or FILE.json")
    args = parser.parse_args(argv)
    scenario = generate_scenario(args.size.upper(), args.seed, args.hours)
    with open(args.out, "w", encoding="utf-8") as out:
        if args.out.endswith(".json"):
            import json

            json.dump(scenario, out, separators=(",", ":"))
        else:
            import yaml

            dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            yaml.dump(scenario, out, Dumper=dumper, sort_keys=False)
    print(
        f"size {args.size} seed {args.seed}: {len(scenario['objects'])} objects, "
        f"{len(scenario['workloads'])} arrivals over {scenario['duration']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
