"""A queue's list patched after a take makes a taken whole unit again from the one it held.

When the session takes from a workload it drops the workload's units; the candidate index
then patches each list of its queue, making that workload's units again. A whole unit
(not elastic, not a Deployment's pods) taken is a whole unit again with only ``evicted``
changed: its node room and unit name come from the snapshot alone, so the patch makes it
from the unit the list held (``retaken.retaken_units``) without reading the workload's pods.
These tests pin that every list after any sequence of takes equals, field by field, the
units built from the snapshot with every cache left aside (every scenario case with running
workloads, every class, whole and pod-by-pod takes), that the session's cache then hands
out the same objects, and that no pod of a workload taken whole is read again.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from preemptd.framework import candidate_units, queue_units
from preemptd.framework.preemption import units
from preemptd.framework.session import Session

from tests.framework.test_unit_classes import CLASSES, RUNNING, _fields, _fresh, _running, _session
from tests.framework.test_unit_index_patch import take_at_random


def _by_queue(session: Session) -> dict[str, tuple[Any, list[Any]]]:
    found: dict[str, tuple[Any, list[Any]]] = {}
    for one, leaf in _running(session):
        found.setdefault(leaf.name, (leaf, []))[1].append(one)
    return found


def _plain(workload: Any) -> bool:
    """One whole unit: not a Deployment, not elastic."""
    return not workload.is_deployment and all(ps.min_count is None for ps in workload.pod_sets)


def _plain_with_pods(session: Session) -> bool:
    """Whether the case has nodes and a running whole-unit workload with pods on them."""
    return session.placements is not None and any(
        _plain(w) and session.snapshot.pods_by_workload.get(w.key) for w, _ in _running(session)
    )


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_every_list_after_takes_equals_the_units_built_from_the_snapshot(case: Path) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    queues = _by_queue(session)
    names = sorted(queues)
    for _ in range(5):
        for name in names:
            leaf, listed = queues[name]
            ordered = sorted(listed, key=lambda w: (w.priority, w.created))
            for cls in rng.sample(CLASSES, len(CLASSES)):
                found = queue_units(session, leaf, **cls)
                built = [unit for one in ordered for unit in _fresh(session, one, leaf, cls)]
                assert _fields(found.units) == _fields(built), (name, cls)
                # The session's cache hands out the very units of the list.
                again = [unit for one in ordered for unit in candidate_units(session, one, leaf, **cls)]
                assert all(a is b for a, b in zip(again, found.units, strict=True)), (name, cls)
        take_at_random(session, queues[rng.choice(names)][0], rng)


WITH_PODS = [case for case in RUNNING if _plain_with_pods(_session(case))]


@pytest.mark.parametrize("case", WITH_PODS, ids=[c.stem for c in WITH_PODS])
def test_a_patch_reads_no_pods_of_a_workload_taken_whole(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    queues = _by_queue(session)
    names = sorted(queues)
    for name in names:
        for cls in CLASSES:
            queue_units(session, queues[name][0], **cls)
    rooms: list[str] = []
    real = units._room

    def counting(session: Session, workload: Any) -> Any:
        rooms.append(workload.key)
        return real(session, workload)

    monkeypatch.setattr(units, "_room", counting)
    for _ in range(6):
        take_at_random(session, queues[rng.choice(names)][0], rng)
        for name in names:
            for cls in rng.sample(CLASSES, len(CLASSES)):
                queue_units(session, queues[name][0], **cls)
    workloads = session.snapshot.workloads
    # Taken whole, and one whole unit before (an elastic workload's last unit taken makes
    # it whole too: its units before were several, and they are built again).
    whole = {key for key, taken in session.taken.items() if taken.whole and _plain(workloads[key])}
    assert not whole & set(rooms), "a whole unit taken is made again from the one the list held"


def test_the_cases_with_nodes_take_whole_units_with_room() -> None:
    """The counted test above is not vacuous: its cases take whole units holding room."""
    assert len(WITH_PODS) >= 3
    took = 0
    for case in WITH_PODS:
        session = _session(case)
        rng = random.Random(case.stem)
        queues = _by_queue(session)
        for _ in range(6):
            take_at_random(session, queues[rng.choice(sorted(queues))][0], rng)
        took += sum(
            1
            for key, taken in session.taken.items()
            if taken.whole and _plain(session.snapshot.workloads[key]) and session.snapshot.pods_by_workload.get(key)
        )
    assert took > 0
