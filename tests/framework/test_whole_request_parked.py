"""The whole request of a launcher and GPU pods, searched on nodes, takes the search of
its GPU podSet when the launcher parks on a node no GPU pod can use
(framework/preemption/parked.py).

Flavor ``gpu`` (nodes labelled ``pool=gpu``), queue ``q`` (withinQueue LowerPriority,
quota far above what anyone asks but in the last case: node room is short). ``high`` asks
for a launcher of 2 cores and one pod of 8 GPUs and ``main_cpu`` cores. Running
workloads of priority 0 and 1 are its candidates (lowest priority first), one of
priority 9 is not. The scan searches ``main`` on top of the launcher's cores with target
``[(main, 1, gpu)]``; the whole request asks for the same usage with targets
``[(launcher, 1, gpu), (main, 1, gpu)]``. Each case below is worked out by hand:

* ``parked``: n1 (8 GPUs, 16 cores) runs ``low`` (8 GPUs, 8 cores), n2 (8 GPUs, 16 cores)
  runs ``keep`` (priority 9: 8 GPUs, 12 cores). n2 hosts no candidate, has 0 GPUs free
  and 4 cores: the launcher fits there at every step, and a node with fewer than 8 GPUs
  takes no GPU pod. Both searches take ``low`` (n1 then holds the GPU pod); the whole
  request's answer is the podSet's, without a second walk.
* ``no node for the launcher``: n1 (8 GPUs, 9 cores) runs ``low`` (8, 8), n2 (8 GPUs, 9
  cores) runs ``low2`` (priority 1: 8, 8). No node fits the launcher now (its own search
  takes ``low``). The podSet's search takes ``low`` (n1: 8 GPUs, 9 cores). The whole
  request's launcher then goes to n1, the only node with 2 cores, leaving 7 for the GPU
  pod: it takes ``low2`` too (n1 and n2 both at (8, 9): the launcher takes n1 by name,
  the pod n2); fill-back cannot put ``low`` back (n1 at 1 core, the launcher goes to n2
  and leaves it 7). The answers differ: the whole request is walked.
* ``parking node hosts a candidate``: n1 (8 GPUs, 16 cores) runs ``low`` (8, 8): 0 GPUs
  and 8 cores free, the launcher fits there now; n2 (8 GPUs, 9 cores) runs ``low2`` (8,
  8). The GPU pod asks 15 cores. The podSet's search takes ``low`` (n1: 8 GPUs, 16
  cores). The whole request's launcher then lands on n1 (the only node with 2 cores),
  leaving 14: it takes ``low2`` too (n2 at (8, 9) is the launcher's best fit, n1 keeps
  16 cores for the pod); fill-back puts ``low`` back only if the pod still fits: n1 back
  at (0, 8) takes the launcher, n2 has 9 cores: no. The answers differ, and the node the
  launcher fitted at the start (n1) is one the walk frees: the whole request is walked.
* ``launcher's node has the pods' GPUs``: n1 (8 GPUs, 9 cores) runs ``low`` (8, 8), n2
  (8 AMD GPUs, 12 cores) runs nothing: the launcher fits there, the GPU pod (8 NVIDIA
  GPUs) does not, but n2 counts 8 GPUs. The podSet's search takes ``low`` (n1: 8 GPUs,
  9 cores). The whole request's launcher then prefers n1 ((8, 9) before n2's (8, 12)),
  leaving 7 cores: no set of victims holds both, ``high`` stays pending. A node with as
  many GPUs as the pods ask does not keep the launcher apart: the whole request is walked.
* ``parked, quota short``: ``parked`` with 12 GPUs of quota (16 in use): even without
  ``low`` the 8 GPUs asked do not fit, which the quota bound proves. A plugin that may
  refuse candidates (``guard``) is then still asked about each one by a hopeless walk, so
  the podSet's failure answers no other search; the whole request takes it without its
  own walk, counted as bounded as that walk is.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from preemptd.framework import hookimpl
from preemptd.framework.preemption import hopeless, parked
from preemptd.framework.preemption.walk import Walk
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import snapshot
from preemptd.plugins import flavor_fungibility, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec

_API = "preemptd.io/v1alpha1"
_GPU = "nvidia.com/gpu"
_NOW = "2026-01-01T01:00:00Z"


def _node(name: str, cpu: int, gpu: str = _GPU) -> dict[str, Any]:
    allocatable = {gpu: "8", "cpu": str(cpu)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": "gpu"}},
            "status": {"allocatable": allocatable}}


def _workload(
    name: str, prio: int, pod_sets: list[tuple[str, int, int]], node: str | None = None, flavor: str = "gpu"
) -> list[dict[str, Any]]:
    """A workload of ``pod_sets`` (name, cores, GPUs), one pod each; running on ``node``
    (its pods bound there, admitted on ``flavor``) when given."""
    spec_sets = []
    for ps, cores, gpus in pod_sets:
        requests = {"cpu": str(cores)}
        if gpus:
            requests[_GPU] = str(gpus)
        spec_sets.append({"name": ps, "count": 1, "requests": requests})
    workload: dict[str, Any] = {
        "apiVersion": _API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "q", "priority": prio, "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": name},
                 "podSets": spec_sets},
    }
    objects = [workload]
    if node is not None:
        flavors = {"cpu": flavor, _GPU: flavor}
        workload["status"] = {
            "admission": {"queue": "q", "podSets": [{"name": ps["name"], "count": 1, "flavors": flavors} for ps in spec_sets]},
            "admittedAt": "2026-01-01T00:10:00Z",
        }
        for ps in spec_sets:
            objects.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{ps['name']}", "namespace": "ml", "labels": {"preemptd.io/workload": name},
                             "creationTimestamp": "2026-01-01T00:10:00Z"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": ps["requests"]}}]},
            })
    return objects


def _cluster(
    nodes: list[tuple[str, int]] | list[tuple[str, int, str]],
    running: list[tuple[str, int, int, int, str]],
    main_cpu: int,
    pending: list[tuple[str, int, int, int, int]] | None = None,
    gpu_quota: int = 64,
) -> list[Any]:
    """``nodes``: (name, cores[, GPU kind]); ``running``: (name, priority, cores, GPUs, node);
    ``pending``: (name, priority, launcher cores, main cores, main GPUs), by default
    ``high`` of the module notes."""
    objects: list[Any] = [
        {"apiVersion": _API, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}, "spec": {"nodeLabels": {"pool": "gpu"}}},
        {"apiVersion": _API, "kind": "Queue", "metadata": {"name": "q"}, "spec": {
            "preemption": {"withinQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": ["cpu", _GPU], "flavors": [{"name": "gpu", "resources": [
                {"name": "cpu", "nominalQuota": "1000"}, {"name": _GPU, "nominalQuota": str(gpu_quota)}]}]}],
        }},
    ]
    objects.extend(_node(*node) for node in nodes)
    for name, prio, cores, gpus, node in running:
        objects.extend(_workload(name, prio, [("main", cores, gpus)], node))
    for name, prio, launcher, cores, gpus in pending or [("high", 5, 2, main_cpu, 8)]:
        objects.extend(_workload(name, prio, [("launcher", launcher, 0), ("main", cores, gpus)]))
    return objects


_CASES = {
    "parked": (
        [("n1", 16), ("n2", 16)], [("low", 0, 8, 8, "n1"), ("keep", 9, 12, 8, "n2")], 8, ["ml/low"], (2, 1),
    ),
    "no node for the launcher": (
        [("n1", 9), ("n2", 9)], [("low", 0, 8, 8, "n1"), ("low2", 1, 8, 8, "n2")], 8, ["ml/low", "ml/low2"], (3, 3),
    ),
    "parking node hosts a candidate": (
        [("n1", 16), ("n2", 9)], [("low", 0, 8, 8, "n1"), ("low2", 1, 8, 8, "n2")], 15, ["ml/low", "ml/low2"], (2, 2),
    ),
    "launcher's node has the pods' GPUs": (
        [("n1", 9), ("n2", 12, "amd.com/gpu")], [("low", 0, 8, 8, "n1")], 8, [], (2, 2),
    ),
    "parked, quota short": (
        [("n1", 16), ("n2", 16)], [("low", 0, 8, 8, "n1"), ("keep", 9, 12, 8, "n2")], 8, [], (2, 1), 12,
    ),
}


class _Guard:
    """Refuses the running workload named ``guarded`` (none below): a plugin that may
    refuse makes a walk the quota bound proves hopeless still ask it about every candidate."""

    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def is_preemptible(session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        return False if preemptee.workload.name == "guarded" else None


def _decide(monkeypatch: pytest.MonkeyPatch, objects: list[Any], enabled: bool) -> tuple[Any, int, dict[str, int | str]]:
    """The decisions (JSON, explanations, vetoes), how many walks ran, and the counters."""
    walks: list[int] = []
    real = Walk.attempt

    def counting(self: Walk, *args: Any, **kwargs: Any) -> Any:
        walks.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Walk, "attempt", counting)
    monkeypatch.setattr(parked, "ENABLED", enabled)
    # Every hopeless walk walks (none told again from an earlier one's, hopeless.py).
    monkeypatch.setattr(hopeless, "REPLAY", False)
    registry = Registry(
        [("priority", priority, None), ("flavor-fungibility", flavor_fungibility, None), ("guard", _Guard(), None)]
    )
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(objects, _NOW), registry, counters=counters)
    monkeypatch.undo()
    return (decisions.to_json(), decisions.explanations, dict(registry.vetoes)), len(walks), counters


@pytest.mark.parametrize("case", sorted(_CASES))
def test_the_whole_request_takes_its_gpu_podsets_walk_only_when_the_launcher_parks_apart(
    monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    nodes, running, main_cpu, victims, walks, *quota = _CASES[case]
    objects = _cluster(nodes, running, main_cpu, gpu_quota=quota[0] if quota else 64)
    fast, fast_walks, fast_counts = _decide(monkeypatch, objects, True)
    plain, plain_walks, plain_counts = _decide(monkeypatch, objects, False)
    assert fast == plain
    assert fast_counts == plain_counts
    preempted = json.loads(fast[0])["preempted"]
    assert sorted(p["workload"] for p in preempted) == victims
    assert all(p["preemptor"] == "ml/high" for p in preempted)
    # The plain path walks the podSet's search and the whole request's (and the
    # launcher's, when no node fits it now); the podSet's answers the whole request only
    # where the launcher parks apart.
    assert (plain_walks, fast_walks) == walks


def test_without_the_launchers_node_the_podsets_answer_would_be_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """The condition is needed: forced on where it fails, the whole request takes the
    podSet's victims (``low`` alone), which leave no room for the launcher and the GPU
    pod together: the head is sent back and nothing is preempted, where the walk of the
    whole request preempts ``low`` and ``low2``."""
    monkeypatch.setattr(parked, "_parked", lambda *args: True)
    nodes, running, main_cpu, *_ = _CASES["parking node hosts a candidate"]
    forced, _, _ = _decide(monkeypatch, _cluster(nodes, running, main_cpu), True)
    assert forced[1]["ml/high"][-1] == "minimal set of victims: ml/low (InQueue)"
    decisions = json.loads(forced[0])
    assert decisions["preempted"] == []
    assert [p["workload"] for p in decisions["pending"]] == ["ml/high"]


def _random_cluster(seed: int) -> list[Any]:
    """Two to six nodes of 8 GPUs and 9 to 16 cores, each running one to three one-pod
    workloads of random priorities and sizes; one or two heads of a launcher and GPU pods."""
    rng = random.Random(seed)
    nodes = [(f"n{i}", rng.choice((9, 12, 16))) for i in range(rng.randint(2, 6))]
    running = []
    for node, cores in nodes:
        gpus_left, cores_left = 8, cores
        for j in range(rng.randint(1, 3)):
            gpus = rng.choice([g for g in (0, 4, 8) if g <= gpus_left])
            used = rng.randint(min(1, cores_left), cores_left) if cores_left else 0
            if not used and not gpus:
                continue
            running.append((f"{node}-w{j}", rng.randint(0, 9), used, gpus, node))
            gpus_left -= gpus
            cores_left -= used
    pending = [
        (f"head{k}", rng.randint(4, 9), rng.randint(1, 3), rng.randint(4, 15), rng.choice((4, 8)))
        for k in range(rng.randint(1, 2))
    ]
    return _cluster(nodes, running, 0, pending, gpu_quota=rng.choice((24, 64)))


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_random_gpu_nodes_decide_explain_and_count_as_the_whole_request_walked(seed: int) -> None:
    """Random nodes and running workloads, heads of a launcher and GPU pods: with the
    whole request answered by its podSet's search where the launcher parks apart, the
    decisions, explanations, veto counts and session counters are those of walking every
    whole request."""
    objects = _random_cluster(seed)
    with pytest.MonkeyPatch.context() as patch:
        fast = _decide(patch, objects, True)
    with pytest.MonkeyPatch.context() as patch:
        plain = _decide(patch, objects, False)
    assert fast[0] == plain[0]
    assert fast[2] == plain[2]


def test_the_random_clusters_reach_both_answers_of_the_condition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clusters above have whole requests the podSet's search answers and whole
    requests walked on their own because no node parks the launcher apart."""
    seen = {True: 0, False: 0}
    real = parked._parked

    def counting(*args: Any) -> bool:
        found = real(*args)
        seen[found] += 1
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parked, "_parked", counting)
        for seed in range(40):
            _decide(monkeypatch, _random_cluster(seed), True)
    assert seen[True] >= 3 and seen[False] >= 3


def _generated(seed: int, nodes: int, leaves: int) -> list[Any]:
    spec = replace(CONTENDED, nodes=nodes, workloads=nodes * 5, queues=10, leaves_per_cohort=leaves)
    return generate_spec(spec, f"parked/{seed}")


def _run_generated(objects: list[Any], enabled: bool) -> tuple[Any, ...]:
    actions, registry_of = default_session()
    registry = registry_of()
    counters: dict[str, int | str] = {}
    parked.ENABLED = enabled
    try:
        decisions = run_session(snapshot(objects, NOW_MS), registry, actions=actions, counters=counters)
    finally:
        parked.ENABLED = True
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True), dict(registry.vetoes), counters


@settings(max_examples=8, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=20, max_value=60),
    st.sampled_from((1, 2, 5)),
)
@example(1, 80, 2)  # both answers of the condition
def test_generated_gpu_clusters_decide_explain_and_count_as_the_whole_request_walked(
    seed: int, nodes: int, leaves: int
) -> None:
    """Generated clusters of GPU nodes whose workloads have a launcher and GPU pods, with
    the default plugins (cohort-reclaim, min-runtime refusing candidates): the same."""
    objects = _generated(seed, nodes, leaves)
    assert _run_generated(objects, True) == _run_generated(objects, False)
