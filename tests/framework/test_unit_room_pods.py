"""A unit's node room lists its bound Pods themselves (``Candidate.room``, ``units._room``).

A unit's room was a tuple of ``(node name, requests)`` pairs, one per bound pod of the
unit and one per pod placed at session start without a Pod object. It now lists the
Pods themselves (each has its ``node_name`` and ``requests``) and a :class:`NodeRoom` per
placed pod; a whole workload's room is the snapshot's tuple of its pods, not a copy.
These tests read every unit's room of every running workload of every scenario case, in
every class and after random takes, as pairs, and compare them with the pairs the old
representation listed, built here from the snapshot as it built them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from preemptd.framework import candidate_units
from preemptd.framework.session import Candidate, DeferredPods, NodeRoom, Registry, Session
from preemptd.framework.snapshot import Snapshot

from tests.framework.test_snapshot_build import inventory, pod
from tests.framework.test_unit_classes import CLASSES, _running, _session
from tests.framework.test_unit_index_patch import take_at_random

CASES = sorted((Path(__file__).parents[1] / "scenarios" / "cases").glob("*.yaml"))
RUNNING = [c for c in CASES if "admission:" in c.read_text()]


def _pairs(room: Iterable[Any]) -> list[tuple[str, dict[str, int]]]:
    return [(held.node_name, dict(held.requests)) for held in room]


def _old_whole_room(session: Session, workload: Any) -> list[tuple[str, dict[str, int]]]:
    """What the old ``_room`` listed: each bound pod's (node, requests) in the snapshot's
    order, then each pod placed at session start with its pod set's requests."""
    if session.placements is None:
        return []
    snapshot = session.snapshot
    pods = snapshot.pods_by_workload.get(workload.key, ())
    pairs = [(p.node_name, dict(p.requests)) for p in pods if p.node_name]
    specs = {ps.name: ps for ps in workload.pod_sets}
    reserved = snapshot.reserved_by_workload.get(workload.key, ())
    return pairs + [(r.node, dict(specs[r.pod_set].requests)) for r in reserved]


def _key(pair: tuple[str, dict[str, int]]) -> tuple[str, tuple[tuple[str, int], ...]]:
    return pair[0], tuple(sorted(pair[1].items()))


def _check(session: Session, workload: Any, found: list[Candidate]) -> None:
    taken = session.taken.get(workload.key)
    gone = set(taken.pod_names) if taken is not None else set()
    for unit in found:
        assert not isinstance(unit, DeferredPods)
        for held in unit.room:
            # A Pod of the unit's workload, or a pod placed at session start.
            assert type(held) is NodeRoom or held.workload == workload.key, (unit, held)
        if unit.pods:  # a unit of its pods: the bound ones, in order (old: per pod)
            assert _pairs(unit.room) == [(p.node_name, dict(p.requests)) for p in unit.pods if p.node_name]
    if taken is None or not gone:
        # The units of one take state hold the workload's room once between them.
        together = Counter(_key(pair) for unit in found for pair in _pairs(unit.room))
        assert together == Counter(_key(pair) for pair in _old_whole_room(session, workload)), workload.key
    if len(found) == 1 and found[0].unit == (workload.key,) and not gone:
        # A whole workload: the old pairs, in the old order.
        assert _pairs(found[0].room) == _old_whole_room(session, workload), workload.key


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_every_units_room_reads_as_the_old_pairs_in_every_class_and_after_takes(case: Path) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    names = sorted({leaf.name for _, leaf in _running(session)})
    leaves = session.snapshot.tree.leaves
    for _ in range(3):
        for workload, leaf in _running(session):
            for cls in rng.sample(CLASSES, len(CLASSES)):
                _check(session, workload, candidate_units(session, workload, leaf, **cls))
        if names:
            take_at_random(session, leaves[rng.choice(names)], rng)


def test_a_whole_workloads_room_is_the_snapshots_tuple_of_its_pods_not_a_copy() -> None:
    shared = 0
    for case in RUNNING:
        session = _session(case)
        for workload, leaf in _running(session):
            found = candidate_units(session, workload, leaf, **CLASSES[0])
            if len(found) != 1 or found[0].unit != (workload.key,) or not found[0].room:
                continue
            assert not session.snapshot.reserved_by_workload.get(workload.key)
            assert found[0].room is session.snapshot.pods_by_workload[workload.key]
            shared += 1
    assert shared


def test_pods_placed_at_session_start_follow_the_bound_pods_with_their_pod_sets_requests() -> None:
    """Workload ns/w admitted with 3 pods of cpu 1 on node n1's flavor, one of them a Pod
    object: the other two are placed on n1 at session start (SEMANTICS §6). Its unit frees
    cpu 1 on n1 three times: the Pod's, then two placed pods'."""
    snapshot = Snapshot.build(inventory([pod("w-0")], count=3), now=10)
    session = Session(snapshot, Registry([]))
    workload = snapshot.workloads["ns/w"]
    (unit,) = candidate_units(session, workload, snapshot.tree.leaves["q"], **CLASSES[0])
    assert _pairs(unit.room) == [("n1", {"cpu": 1})] * 3
    assert unit.room[0] is snapshot.pods["ns/w-0"]
    assert [type(held) for held in unit.room[1:]] == [NodeRoom, NodeRoom]
    assert _pairs(unit.room) == _old_whole_room(session, workload)
