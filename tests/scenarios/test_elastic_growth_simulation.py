"""Elastic grow-back over several sessions in the simulator (docs/elastic.md).

The simulator commits a growth as the files backend does: the committed count is raised
in place, ``admittedAt`` is kept, and the new pods are bound at once. Expected values are
worked out by hand in the docstrings, from SEMANTICS §4 and docs/elastic.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.simulation import engine as simulation
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario, scenario_from_data
from preemptd.framework.decisions import Decisions

GPU = "nvidia.com/gpu"
API = "preemptd.io/v1alpha1"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the default start
EXAMPLE = Path(__file__).resolve().parent.parent.parent / "examples" / "scenarios" / "elastic-grow-back.yaml"


def _job(name: str, priority: int, gpus: int, count: int, *, arrival: str, runtime: str, **pod_set: Any) -> dict[str, Any]:
    return {
        "arrival": arrival,
        "runtime": runtime,
        "object": {
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "queueName": "solo",
                "priority": priority,
                "podSets": [{"name": "main", "count": count, "requests": {GPU: str(gpus)}, **pod_set}],
            },
        },
    }


def _scenario() -> dict[str, Any]:
    """One 16-GPU queue that preempts lower priorities; e (priority 0, 16 one-GPU pods,
    minCount 4) serves all along; urgent-a (priority 100, one 8-GPU pod, 30m) arrives at
    10m, urgent-b (priority 100, four one-GPU pods, 10m) at 20m."""
    quota = [{"name": "default", "resources": [{"name": GPU, "nominalQuota": "16"}]}]
    return {
        "duration": "1h",
        "cycleInterval": "10s",
        "objects": [
            {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
            {
                "apiVersion": API,
                "kind": "Queue",
                "metadata": {"name": "solo"},
                "spec": {
                    "preemption": {"withinQueue": "LowerPriority"},
                    "resourceGroups": [{"coveredResources": [GPU], "flavors": quota}],
                },
            },
        ],
        "workloads": [
            _job("e", 0, 1, 16, arrival="0s", runtime="forever", minCount=4),
            _job("urgent-a", 100, 8, 1, arrival="10m", runtime="30m"),
            _job("urgent-b", 100, 1, 4, arrival="20m", runtime="10m"),
        ],
    }


def _admitted(name: str, count: int, *, grown: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "workload": f"ml/{name}", "queue": "solo", "borrowing": False,
        "podSets": [{"name": "main", "count": count, "flavors": {GPU: "default"}}],
    }
    if grown:
        entry["grown"] = True
    return entry


def _shrink(preemptor: str, count: int) -> dict[str, Any]:
    return {"workload": "ml/e", "preemptor": f"ml/{preemptor}", "reason": "InQueue", "count": count, "pods": []}


def test_elastic_workload_shrinks_under_preemption_and_grows_back_over_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """e is shrunk twice by higher-priority arrivals and grows back, partly then fully, as
    each of them ends; every growth is in place (no new admission counted) and never
    preempts.

    0s: e admitted with 16 (usage 16 of 16). 600s: urgent-a needs 8, Available 0; e has
    16 - 4 = 12 single pods above minCount: 8 are taken (fill-back keeps all 8) → shrink
    count 8, e committed 8. The shrink frees its quota at once, so 610s admits urgent-a
    (usage 16; it ends at 610 + 1800 = 2410s). 1200s: urgent-b needs 4: e has 8 - 4 = 4
    singles, all taken → shrink count 4, e committed 4 (its minCount). 1210s admits
    urgent-b (ends at 1210 + 600 = 1810s). 1810s: urgent-b ended, usage 8 + 4 = 12,
    Available 4: e grows by 4 of its 12 missing pods → count 8 (partial growth). 2410s:
    urgent-a ended, usage 8, Available 8 → e grows by 8 → count 16. No other session
    decides anything.
    """
    seen: dict[int, dict[str, Any]] = {}
    original = simulation.run_session

    def recording(snapshot: Any, registry: Any, **kwargs: Any) -> Decisions:
        decisions = original(snapshot, registry, **kwargs)
        found = json.loads(decisions.to_json())
        del found["pending"], found["now"], found["podActions"]
        if found["admitted"] or found["preempted"]:
            seen[(snapshot.now - START_MS) // 1000] = found
        return decisions

    monkeypatch.setattr(simulation, "run_session", recording)
    scenario = scenario_from_data(_scenario(), source="test")
    entry = setup(scenario, None)
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
        verify=entry.plugins.registry(),  # every session also decided on Snapshot.build
    )
    assert [
        (0, {"admitted": [_admitted("e", 16)], "preempted": []}),
        (600, {"admitted": [], "preempted": [_shrink("urgent-a", 8)]}),
        (610, {"admitted": [_admitted("urgent-a", 1)], "preempted": []}),
        (1200, {"admitted": [], "preempted": [_shrink("urgent-b", 4)]}),
        (1210, {"admitted": [_admitted("urgent-b", 4)], "preempted": []}),
        (1810, {"admitted": [_admitted("e", 8, grown=True)], "preempted": []}),
        (2410, {"admitted": [_admitted("e", 16, grown=True)], "preempted": []}),
    ] == sorted(seen.items())
    figures = outcome.figures
    assert 3 == outcome.admissions  # e, urgent-a, urgent-b: a growth is not an admission
    assert {"total": 2, "evictions": 0, "shrinks": 2, "byReason": {"InQueue": 2}} == figures["preemptions"]
    # The queue is full (16 GPUs) all hour but for the two 10-second waits of the
    # preemptors, once their victims' pods are gone and before their admission: 600–610s
    # only e's 8 (8 idle), 1200–1210s e's 4 + urgent-a's 8 (4 idle): 80 + 40 = 120
    # GPU-seconds idle → (16 × 3600 − 120) / 3600 = 15.967 GPU-hours used.
    assert 15.967 == figures["queues"]["solo"]["usedHours"]
    invariants = figures["invariants"]
    assert [0, 0, 0] == [invariants[k]["count"] for k in ("quotaExceeded", "minRuntimeViolations", "preemptorStalls")]


def test_grow_back_example_shrinks_and_grows_back_without_eviction(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/scenarios/elastic-grow-back.yaml: each of the six evaluations (8 one-GPU
    pods, priority 100) shrinks sweep (32 pods, minCount 8, priority 10) by 8, never
    evicting it; as the evaluations of each wave end, sweep grows back in place, 8 pods
    a time, to 8 + 8 = 16, 24 and 32; no work is lost and no invariant is violated."""
    counts: list[tuple[bool, int]] = []  # sweep's admissions: (grown, new count)
    original = simulation.run_session

    def recording(snapshot: Any, registry: Any, **kwargs: Any) -> Decisions:
        decisions = original(snapshot, registry, **kwargs)
        for entry in decisions.admitted:
            if entry.workload == "research/sweep":
                counts.append((entry.grown, entry.pod_sets[0].count))
        return decisions

    monkeypatch.setattr(simulation, "run_session", recording)
    scenario = load_scenario(str(EXAMPLE))
    entry = setup(scenario, None)
    outcome = simulate(
        scenario, entry.plugins.registry(), actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
    )
    figures = outcome.figures
    assert {"total": 6, "evictions": 0, "shrinks": 6, "byReason": {"InQueue": 6}} == figures["preemptions"]
    assert [(False, 32)] + [(True, 16), (True, 24), (True, 32)] * 2 == counts
    assert 0.0 == figures["thrash"]["workLostHours"]
    invariants = figures["invariants"]
    assert [0, 0, 0] == [invariants[k]["count"] for k in ("quotaExceeded", "minRuntimeViolations", "preemptorStalls")]
