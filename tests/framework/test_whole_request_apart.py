"""The whole request of a launcher on one flavor and GPU pods on another is searched
without the launcher's node target when that target changes no fit test
(framework/preemption/victims.py, ``search_targets``).

Flavors ``cpu`` (nodes labelled ``pool=cpu``, no GPUs; 0 GPUs of quota) and ``gpu``
(nodes labelled ``pool=gpu``), in that order in the one resource group of queue ``q``
(withinQueue LowerPriority, quota far above what anyone asks). ``high`` (priority 5) asks
for a launcher of 2 cores and one pod of 8 cores and 8 GPUs. The flavor scan puts the
launcher on ``cpu`` when a node of it has 2 cores free (it fits: the scan stops there), and
the GPU pod on ``gpu`` (``cpu`` has no GPU quota: NoFit), where it lacks node room and is
searched with target ``[(main, 1, gpu)]``. The whole request then asks for the cores of
both flavors and the GPUs, every flavor-resource needed (the nodes lack room), with
targets ``[(launcher, 1, cpu), (main, 1, gpu)]``. Each case is worked out by hand:

* ``apart``: c1 (16 cores, pool=cpu) runs ``side`` (priority 0, 4 cores), n1 (8 GPUs, 16
  cores) runs ``low`` (priority 0, 8 cores, 8 GPUs). The launcher fits c1 now (12 cores
  free), and no node of ``cpu`` is a node of ``gpu``: the whole request is searched with
  ``[(main, 1, gpu)]``. Its candidates are ``side`` and ``low``: evicting ``side`` frees
  no GPU and fill-back puts it back; evicting ``low`` frees n1 for the GPU pod. ``low`` is
  preempted, ``side`` is not.
* ``flavors share nodes``: as ``apart``, but flavor ``cpu`` has no node labels, so its
  nodes are c1 and n1: the launcher could land where the GPU pod goes, and both targets
  are searched.
* ``launcher short now``: c1 has 4 cores, all used by ``side``; n1 has 8 cores, all used
  by ``low``. No node fits the launcher now: it needs victims on either flavor, and the
  scan takes the first, ``cpu`` (victim ``side``; the same rank as ``gpu``, listed
  earlier). The whole request keeps both targets: room freed on c1 is what makes the
  launcher fit. ``side`` and ``low`` are both preempted (each podSet needs its own node).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import flavors, hookimpl
from preemptd.framework.preemption import victims
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import snapshot
from preemptd.plugins import flavor_fungibility, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, SIZES, generate_spec
from tests.framework.test_whole_request_parked import _workload

_API = "preemptd.io/v1alpha1"
_GPU = "nvidia.com/gpu"
_NOW = "2026-01-01T01:00:00Z"

Running = tuple[str, int, int, int, str, str]  # name, priority, cores, GPUs, node, flavor
Head = tuple[str, int, int, int, int]  # name, priority, launcher cores, main cores, main GPUs


def _cluster(
    cpu_nodes: list[tuple[str, int]],
    gpu_nodes: list[tuple[str, int]],
    running: list[Running],
    heads: list[Head],
    *,
    shared: bool = False,
) -> list[Any]:
    """``cpu_nodes``/``gpu_nodes``: (name, cores); ``shared``: flavor ``cpu`` has no node
    labels (its nodes are every node)."""
    cpu_labels = {} if shared else {"pool": "cpu"}
    objects: list[Any] = [
        {"apiVersion": _API, "kind": "ResourceFlavor", "metadata": {"name": "cpu"}, "spec": {"nodeLabels": cpu_labels}},
        {"apiVersion": _API, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"pool": "gpu"}}},
        {"apiVersion": _API, "kind": "Queue", "metadata": {"name": "q"}, "spec": {
            "preemption": {"withinQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", _GPU], "flavors": [
                {"name": "cpu", "resources": [{"name": "cpu", "nominalQuota": "1000"}, {"name": _GPU, "nominalQuota": "0"}]},
                {"name": "gpu", "resources": [{"name": "cpu", "nominalQuota": "1000"}, {"name": _GPU, "nominalQuota": "64"}]},
            ]}],
        }},
    ]
    for name, cores in cpu_nodes:
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "cpu"}},
                        "status": {"allocatable": {"cpu": str(cores)}}})
    for name, cores in gpu_nodes:
        objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "gpu"}},
                        "status": {"allocatable": {"cpu": str(cores), _GPU: "8"}}})
    for name, prio, cores, gpus, node, flavor in running:
        objects.extend(_workload(name, prio, [("main", cores, gpus)], node, flavor))
    for name, prio, launcher, cores, gpus in heads:
        objects.extend(_workload(name, prio, [("launcher", launcher, 0), ("main", cores, gpus)]))
    return objects


_HIGH: list[Head] = [("high", 5, 2, 8, 8)]
_CASES: dict[str, tuple[list[Any], list[tuple[str, int, str]], list[str]]] = {
    # objects, the targets the whole request is searched with, the workloads preempted
    "apart": (
        _cluster([("c1", 16)], [("n1", 16)], [("side", 0, 4, 0, "c1", "cpu"), ("low", 0, 8, 8, "n1", "gpu")], _HIGH),
        [("main", 1, "gpu")],
        ["ml/low"],
    ),
    "flavors share nodes": (
        _cluster(
            [("c1", 16)], [("n1", 16)], [("side", 0, 4, 0, "c1", "cpu"), ("low", 0, 8, 8, "n1", "gpu")], _HIGH,
            shared=True,
        ),
        [("launcher", 1, "cpu"), ("main", 1, "gpu")],
        ["ml/low"],
    ),
    "launcher short now": (
        _cluster([("c1", 4)], [("n1", 8)], [("side", 0, 4, 0, "c1", "cpu"), ("low", 0, 8, 8, "n1", "gpu")], _HIGH),
        [("launcher", 1, "cpu"), ("main", 1, "gpu")],
        ["ml/low", "ml/side"],
    ),
}


class _Guard:
    """Refuses the running workloads whose name ends in ``g``: a plugin that may refuse
    makes the walks ask about every candidate they reach, and count its vetoes."""

    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        return False if preemptee.workload.name.endswith("g") else None


def _decide(objects: list[Any], apart: bool) -> tuple[tuple[Any, ...], list[list[tuple[str, int, str]]]]:
    """The decisions (JSON, explanations, vetoes, counters), and the targets of every
    search of a whole request that asks for both flavors."""
    asked: list[list[tuple[str, int, str]]] = []
    real = flavors.find_victims

    def recording(session: Any, preemptor: Any, leaf: Any, usage: Any, needed: Any, targets: Any = (), bases: Any = ()) -> Any:
        if len({fr[0] for fr in usage}) > 1:
            asked.append([(spec.name, count, flavor) for spec, count, flavor in targets])
        return real(session, preemptor, leaf, usage, needed, targets, bases)

    registry = Registry(
        [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("guard", _Guard(), None)]
    )
    counters: dict[str, int | str] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flavors, "find_victims", recording)
        patch.setattr(victims, "APART", apart)
        decisions = run_session(snapshot(objects, _NOW), registry, counters=counters)
    return (decisions.to_json(), decisions.explanations, dict(registry.vetoes), counters), asked


@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_whole_request_leaves_out_the_launchers_target_only_when_it_fits_apart(case: str) -> None:
    objects, targets, preempted = _CASES[case]
    fast, fast_asked = _decide(objects, True)
    plain, plain_asked = _decide(objects, False)
    assert fast == plain
    assert fast_asked == [targets]
    assert plain_asked == [[("launcher", 1, "cpu"), ("main", 1, "gpu")]]
    decisions = json.loads(fast[0])
    assert sorted(p["workload"] for p in decisions["preempted"]) == preempted
    assert all(p["preemptor"] == "ml/high" for p in decisions["preempted"])


def _random_cluster(seed: int) -> list[Any]:
    """One to three nodes of ``cpu`` (4 to 16 cores) and one to four of ``gpu`` (8 GPUs, 9
    to 16 cores), each running up to three one-pod workloads of random priorities and sizes
    (a name ending in ``g`` is refused by the guard); one or two heads of a launcher and GPU
    pods; now and then flavor ``cpu`` without node labels."""
    rng = random.Random(seed)
    cpu_nodes = [(f"c{i}", rng.choice((4, 8, 16))) for i in range(rng.randint(1, 3))]
    gpu_nodes = [(f"n{i}", rng.choice((9, 12, 16))) for i in range(rng.randint(1, 4))]
    running: list[Running] = []
    for nodes, flavor in ((cpu_nodes, "cpu"), (gpu_nodes, "gpu")):
        for node, cores in nodes:
            gpus_left, cores_left = (8 if flavor == "gpu" else 0), cores
            for j in range(rng.randint(0, 3)):
                gpus = rng.choice([g for g in (0, 4, 8) if g <= gpus_left])
                used = rng.randint(min(1, cores_left), cores_left) if cores_left else 0
                if not used and not gpus:
                    continue
                name = f"{node}-w{j}" + ("g" if rng.random() < 0.15 else "")
                running.append((name, rng.randint(0, 9), used, gpus, node, flavor))
                gpus_left -= gpus
                cores_left -= used
    heads = [
        (f"head{k}", rng.randint(4, 9), rng.randint(1, 3), rng.randint(4, 15), rng.choice((4, 8)))
        for k in range(rng.randint(1, 2))
    ]
    return _cluster(cpu_nodes, gpu_nodes, running, heads, shared=rng.random() < 0.2)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_random_clusters_decide_explain_and_count_as_with_every_target(seed: int) -> None:
    """Random nodes of two flavors and running workloads, heads of a launcher and GPU pods:
    with the launcher's target left out where it fits apart, the decisions, explanations,
    veto counts and session counters are those of searching every target."""
    objects = _random_cluster(seed)
    assert _decide(objects, True)[0] == _decide(objects, False)[0]


def test_the_random_clusters_reach_both_answers_of_the_condition() -> None:
    """The clusters above have whole requests searched without the launcher's target and
    whole requests of both flavors searched with it."""
    seen = {True: 0, False: 0}
    for seed in range(60):
        for targets in _decide(_random_cluster(seed), True)[1]:
            seen[len(targets) == 1] += 1
    assert seen[True] >= 3 and seen[False] >= 3


def _run_generated(objects: list[Any], apart: bool) -> tuple[Any, ...]:
    actions, registry_of = default_session()
    registry = registry_of()
    counters: dict[str, int | str] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(victims, "APART", apart)
        decisions = run_session(snapshot(objects, NOW_MS), registry, actions=actions, counters=counters)
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True), dict(registry.vetoes), counters


@settings(max_examples=6, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=30, max_value=80))
def test_generated_clusters_of_two_gpu_flavors_decide_as_with_every_target(seed: int, nodes: int) -> None:
    """Generated clusters of two GPU flavors whose larger workloads have a launcher, with
    the default plugins (cohort-reclaim, min-runtime refusing candidates): the same."""
    spec = replace(SIZES["S"], nodes=nodes, workloads=nodes * 8, queues=10)
    objects = generate_spec(spec, f"apart/{seed}")
    assert _run_generated(objects, True) == _run_generated(objects, False)
