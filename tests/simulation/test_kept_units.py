"""Victim units kept from one session to the next (framework/preemption/kept.py, KeptUnits).

The simulator hands every session a snapshot of the same cluster model, and with it
the same store of units: a workload whose object, pods and usage are the very objects
an earlier session built its units from gives the same units, kept; anything else is
built again. These tests pin both halves: what is kept is reused (the same objects),
and a changed workload, a changed pod list, a take in the session and a changed
victim order key are never answered from the store. The last test runs a whole
simulation in which a workload is reclaimed on one flavor, re-admitted on the other
and then preempted there, with the store on and off and against ``Snapshot.build``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from preemptd.daemon.simulation.cluster import ClusterModel
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import scenario_from_data
from preemptd.framework import (
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_QUEUE,
    candidate_units,
    queue_units,
)
from preemptd.framework.model import Node, Workload
from preemptd.framework.session import Candidate, Registry, Session, Taken, hookimpl, order_for
from preemptd.framework.testing import inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]


def _session(model: ClusterModel, now: int, plugins: list[tuple[str, object, None]] | None = None) -> Session:
    session = Session(model.snapshot(now=now), Registry(plugins or PLUGINS))
    session.open()
    return session


def _units(session: Session, key: str) -> list[Candidate]:
    found = session.snapshot.workloads[key]
    leaf = session.snapshot.tree.leaves[found.queue]
    return candidate_units(session, found, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)


def _model(*running: Workload, nodes: dict[str, int] | None = None) -> ClusterModel:
    inv = inventory([queue("q", cpu=16), queue("r", cpu=16)], [])
    for name, cpu in (nodes or {}).items():
        inv.nodes[name] = Node(name, {}, {"cpu": cpu * 1000})
    model = ClusterModel(inv)
    model.add(list(running), now=0)
    return model


def test_an_unchanged_workload_keeps_its_units_from_one_session_to_the_next() -> None:
    model = _model(workload("w", "q", 2, admitted=True))
    (first,) = _units(_session(model, 1_000), "ns/w")
    (again,) = _units(_session(model, 2_000), "ns/w")
    assert again is first


def test_units_are_built_again_when_the_workload_object_changes() -> None:
    model = _model(workload("w", "q", 2, admitted=True))
    (first,) = _units(_session(model, 1_000), "ns/w")
    assert not first.evicted
    model.replace(dataclasses.replace(model.workloads["ns/w"], evicted=True))
    (again,) = _units(_session(model, 2_000), "ns/w")
    assert again is not first
    # SEMANTICS §4: an evicted workload is a unit already on its way out, sorted first.
    assert again.evicted and again.sort_key[0] == 0


def test_units_are_built_again_when_only_the_workloads_pods_change() -> None:
    # n1 (2 cpu) is the best fit for w's one pod (2 cpu). Its pod goes; x, admitted
    # earlier than w, is placed first at the next binding and takes n1; w's new pod
    # lands on n2. The workload object is the same; its pods are not.
    model = _model(workload("w", "q", 2, admitted=True, admitted_at=10), nodes={"n1": 2, "n2": 4})
    (pod,) = model.pods_by_workload["ns/w"]
    assert pod.node_name == "n1"
    before = model.workloads["ns/w"]
    (first,) = _units(_session(model, 1_000), "ns/w")
    assert [held.node_name for held in first.room] == ["n1"]
    model.remove_pod(pod.key)
    model.add([workload("x", "q", 2, admitted=True, admitted_at=5)], now=1_500)
    assert model.workloads["ns/w"] is before
    (again,) = _units(_session(model, 2_000), "ns/w")
    assert again is not first
    assert [held.node_name for held in again.room] == ["n2"]


def test_a_take_builds_the_session_its_own_units_and_keeps_the_untaken_ones() -> None:
    model = _model(workload("w", "q", 2, admitted=True))
    (first,) = _units(_session(model, 1_000), "ns/w")
    session = _session(model, 2_000)
    assert _units(session, "ns/w") == [first]
    # What the rounds do when a preemptor takes the whole workload (actions/allocate.py).
    session.taken["ns/w"] = Taken(whole=True)
    session.unit_cache.pop("ns/w", None)
    (taken,) = _units(session, "ns/w")
    assert taken is not first and taken.evicted
    # The take was this session's: the next one, over the same cluster, gets the kept unit.
    (later,) = _units(_session(model, 3_000), "ns/w")
    assert later is first and not later.evicted


def test_a_queue_list_is_kept_while_its_workloads_are_and_built_again_when_one_comes() -> None:
    model = _model(workload("w", "q", 2, priority=0, admitted=True))
    leaf = model.tree.leaves["q"]
    first = queue_units(_session(model, 1_000), leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    assert queue_units(_session(model, 2_000), leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE) is first
    model.add([workload("v", "q", 2, priority=5, admitted=True)], now=2_500)
    again = queue_units(_session(model, 3_000), leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    assert again is not first
    # By workload priority: w (0) below v (5); w's unit is still the kept one.
    assert [u.workload.name for u in again.between(None, None)] == ["w", "v"]
    assert again.between(None, None)[0] is first.between(None, None)[0]


def test_a_queue_list_is_built_again_when_only_a_workloads_pods_change() -> None:
    # As above, x in another queue: w's pod moves from n1 to n2, and q lists the very
    # same workload objects as before.
    model = _model(workload("w", "q", 2, admitted=True, admitted_at=10), nodes={"n1": 2, "n2": 4})
    leaf = model.tree.leaves["q"]
    session = _session(model, 1_000)
    listing = session.snapshot.admitted_by_queue["q"]
    first = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    (pod,) = model.pods_by_workload["ns/w"]
    model.remove_pod(pod.key)
    model.add([workload("x", "r", 2, admitted=True, admitted_at=5)], now=1_500)
    session = _session(model, 2_000)
    assert session.snapshot.admitted_by_queue["q"] is listing
    again = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    (unit,) = again.between(None, None)
    assert again is not first
    assert [held.node_name for held in unit.room] == ["n2"]


def test_a_queue_list_is_not_kept_past_a_take_from_one_of_its_workloads() -> None:
    model = _model(workload("w", "q", 2, admitted=True), workload("v", "q", 2, priority=1, admitted=True))
    leaf = model.tree.leaves["q"]
    first = queue_units(_session(model, 1_000), leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    session = _session(model, 2_000)
    assert queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE) is first
    (unit, _) = first.between(None, None)
    # What the rounds do when a preemptor takes w whole (actions/allocate.py).
    session.relied[unit.unit] = unit
    session.taken[unit.key] = Taken(whole=True)
    session.unit_cache.pop(unit.key, None)
    again = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    assert again is not first
    assert [u.evicted for u in again.between(None, None)] == [True, False]


def test_the_units_of_one_workload_in_every_class_share_its_room() -> None:
    # Each class of a workload is a unit of its own, and all free the same node room:
    # one tuple of (node, requests) for all, not one per class (a unit kept across
    # sessions is memory the collector walks).
    model = _model(workload("w", "q", 2, count=2, admitted=True), nodes={"n1": 8})
    session = _session(model, 1_000)
    found = session.snapshot.workloads["ns/w"]
    leaf = session.snapshot.tree.leaves["q"]
    (in_queue,) = candidate_units(session, found, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    (reclaimed,) = candidate_units(
        session, found, leaf, reason=IN_COHORT_RECLAIM, group=CLASS_OTHER_QUEUE, only_within_nominal=True
    )
    assert in_queue is not reclaimed
    assert [held.node_name for held in in_queue.room] == ["n1", "n1"]
    assert reclaimed.room is in_queue.room and reclaimed.unit is in_queue.unit


def test_a_kept_list_served_to_a_new_session_is_patched_for_that_sessions_takes() -> None:
    # w runs in q but names r as its queue (spec.queueName changed after admission), so a
    # take from w marks both q's and r's lists. r's list, built after that take, is kept;
    # served to the next session, a take from v (in r) must still reach it.
    moved = dataclasses.replace(workload("w", "q", 2, admitted=True), queue="r")
    model = _model(moved, workload("v", "r", 2, admitted=True))
    q, r = model.tree.leaves["q"], model.tree.leaves["r"]
    session = _session(model, 1_000)
    (w_unit,) = queue_units(session, q, reason=IN_QUEUE, group=CLASS_SAME_QUEUE).between(None, None)
    _take(session, w_unit)
    queue_units(session, q, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    kept = queue_units(session, r, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    session = _session(model, 2_000)
    assert queue_units(session, r, reason=IN_QUEUE, group=CLASS_SAME_QUEUE) is kept
    (v_unit,) = kept.between(None, None)
    _take(session, v_unit)
    (again,) = queue_units(session, r, reason=IN_QUEUE, group=CLASS_SAME_QUEUE).between(None, None)
    assert again.evicted, "the take from v is in r's list"


def _take(session: Session, unit: Candidate) -> None:
    """What the rounds record when a preemptor takes ``unit`` whole (actions/allocate.py)."""
    session.relied[unit.unit] = unit
    session.taken[unit.key] = Taken(whole=True)
    session.unit_cache.pop(unit.key, None)


class _Rank:
    """A victim order whose keys are the same for every preemptor of a session but not
    from one session to the next: the session's ``now`` is part of the key."""

    @staticmethod
    @hookimpl
    def victim_order(session: Session, preemptor: Workload) -> Any:
        def key(candidate: Candidate) -> tuple[int]:
            return (session.now,)

        key.preemptor_independent = True  # type: ignore[attr-defined]
        return key


def test_a_kept_unit_gets_the_victim_order_key_of_the_session_it_is_in() -> None:
    model = _model(workload("w", "q", 2, admitted=True))
    plugins: list[tuple[str, object, None]] = [*PLUGINS, ("rank", _Rank(), None)]
    preemptor = workload("p", "q", 2, priority=9)
    session = _session(model, 1_000, plugins)
    (unit,) = _units(session, "ns/w")
    assert order_for(session, preemptor)(unit)[2] == (0, 1_000)
    session = _session(model, 2_000, plugins)
    (kept,) = _units(session, "ns/w")
    assert kept is unit
    assert order_for(session, preemptor)(kept)[2] == (0, 2_000)


# --- a whole simulation ---------------------------------------------------------------------

GPU = "nvidia.com/gpu"
API = "preemptd.io/v1alpha1"


def _queue(name: str, quotas: dict[str, int], preemption: dict[str, str]) -> dict[str, Any]:
    flavors = [{"name": f, "resources": [{"name": GPU, "nominalQuota": str(n)}]} for f, n in quotas.items()]
    return {
        "apiVersion": API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "parent": "lab",
            "preemption": preemption,
            "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
        },
    }


def _job(name: str, queue_name: str, arrival: str, runtime: str, priority: int) -> dict[str, Any]:
    return {
        "arrival": arrival,
        "runtime": runtime,
        "object": {
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {
                "queueName": queue_name,
                "priority": priority,
                "podSets": [{"name": "main", "count": 1, "requests": {GPU: "4"}}],
            },
        },
    }


READMITTED_ELSEWHERE = {
    "duration": "1h",
    "cycleInterval": "10s",
    "terminationGrace": "30s",
    "objects": [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {"nodeLabels": {"pool": f}}}
        for f in ("f0", "f1")
    ]
    + [
        _queue("team-a", {"f0": 0, "f1": 4}, {"withinQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        _queue("team-b", {"f0": 4}, {"reclaimWithinCohort": "Any"}),
    ],
    "nodeGroups": [
        {"name": f, "count": 1, "labels": {"pool": f}, "allocatable": {GPU: "4"}} for f in ("f0", "f1")
    ],
    "workloads": [
        _job("a-1", "team-a", "0s", "2h", 0),
        _job("b-1", "team-b", "10m", "2h", 0),
        _job("a-2", "team-a", "20m", "2h", 100),
    ],
}


def _simulate(data: dict[str, Any], *, keep_units: bool) -> dict[str, Any]:
    scenario = scenario_from_data(data, source="test")
    entry = setup(scenario, None)
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
        verify=entry.plugins.registry(),
        keep_units=keep_units,
    )
    return outcome.figures


def test_a_workload_readmitted_on_another_flavor_is_judged_by_its_new_units() -> None:
    """a-1 (4 GPUs) starts at 0 on f0, borrowing team-b's f0 (team-a has no f0 quota).
    b-1 arrives at 10m within team-b's nominal and reclaims it (SEMANTICS §4); a-1 is
    gone at 10m30s, b-1 takes f0 and a-1, requeued, fits only on f1 (team-a's own 4).
    At 20m a-2 (priority 100) arrives in team-a: f0 is b-1's and not reclaimable (b-1
    within nominal), f1 is full with a-1 (priority 0): withinQueue LowerPriority takes
    a-1 there. Two preemptions: one reclaim, one in queue. Had a-1's units from its time
    on f0 been kept, a-2's search would see no unit using (f1, gpu) and wait instead.

    Every session is also decided on ``Snapshot.build`` (verify), which keeps nothing;
    the figures are the same with the store off."""
    kept = _simulate(READMITTED_ELSEWHERE, keep_units=True)
    assert {"InCohortReclamation": 1, "InQueue": 1} == kept["preemptions"]["byReason"]
    assert 3 == kept["queues"]["team-a"]["admissions"]  # a-1 twice, a-2 once
    assert kept == _simulate(READMITTED_ELSEWHERE, keep_units=False)
