"""A queue's lists share which units a search keeps instead of reading every unit again.

Which units of a list a search keeps (:meth:`QueueUnits.using`: those that use a needed
flavor-resource, or with ``with_room`` hold node room) reads only each unit's usage and
room, and the units of every class of one workload in one take state have the same. So a
list made from another class's list (``_build_like``) takes the other's flags and usage
totals, and a list patched after a take reads only the units of the workloads taken
from. These tests pin that every list the index hands out, after any sequence of asks
and takes, keeps exactly the units a direct reading of its own units keeps, with the
same running counts and totals, and that the reading is not repeated.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    queue_units,
)
from preemptd.framework.model import FR
from preemptd.framework.preemption import unitindex
from preemptd.framework.session import Candidate, Session

from tests.framework.test_unit_index_count import _session as _count_session
from tests.framework.test_unit_index_patch import _take

CLASSES: list[dict[str, Any]] = [
    {"reason": IN_QUEUE, "group": CLASS_SAME_QUEUE},
    {"reason": IN_COHORT_RECLAIM, "group": CLASS_HIERARCHICAL},
    {"reason": IN_COHORT_RECLAIM_WHILE_BORROWING, "group": CLASS_OTHER_QUEUE},
    {"reason": IN_COHORT_RECLAIM, "group": CLASS_OTHER_QUEUE, "only_within_nominal": True},
]
DEFAULT: FR = ("default", "cpu")
SPARE: FR = ("spare", "cpu")
NEEDED = [frozenset({DEFAULT}), frozenset({SPARE}), frozenset({DEFAULT, SPARE})]


def _session(seed: int) -> Session:
    """Queues a and b; 14 running workloads of random queue, flavor, priority and size,
    some elastic (``test_unit_index_count``'s cluster)."""
    return _count_session(seed, 14)


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the unit lists whose flags are read from now on."""
    reads: list[int] = []
    real = unitindex.unit_flags

    def counting(units: list[Candidate], needed: frozenset[FR], with_room: bool) -> list[bool]:
        reads.append(len(units))
        return real(units, needed, with_room)

    monkeypatch.setattr(unitindex, "unit_flags", counting)
    return reads


def _direct(units: list[Candidate], needed: frozenset[FR], with_room: bool) -> list[bool]:
    """SEMANTICS §4's filter, read unit by unit (no nodes here: no unit holds room)."""
    return [bool(unit.room and with_room) or not needed.isdisjoint(unit.usage) for unit in units]


def _check(session: Session) -> None:
    """Every list the index holds answers as a direct reading of its own units."""
    index = session.state[unitindex._STATE]
    for by_class in index.lists.values():
        for found in by_class.values():
            for needed in NEEDED:
                for with_room in (False, True):
                    flags = _direct(found.units, needed, with_room)
                    kept, counts = found.using(needed, with_room)
                    assert kept == [unit for unit, flag in zip(found.units, flags, strict=True) if flag]
                    assert list(counts) == list(accumulate(flags, initial=0))
                    for fr in (DEFAULT, SPARE):
                        totals = list(accumulate([unit.usage.get(fr, 0) for unit in kept], initial=0))
                        assert found.totals(needed, with_room, fr) == totals


_STEP = st.tuples(
    st.sampled_from(["a", "b"]),
    st.integers(0, len(CLASSES) - 1),
    st.sampled_from(NEEDED),
    st.booleans(),  # with_room
    st.booleans(),  # then take from the queue
    st.integers(0, 99),  # which workload
)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 20), st.lists(_STEP, min_size=1, max_size=12))
def test_every_list_keeps_what_a_direct_reading_of_its_units_keeps(seed: int, steps: list[Any]) -> None:
    session = _session(seed)
    leaves = session.snapshot.tree.leaves
    for name, cls, needed, with_room, take, pick in steps:
        # Ask a list and read it (its flags are then kept, and handed to the lists made
        # from it), then maybe take from one of the queue's workloads.
        found = queue_units(session, leaves[name], **CLASSES[cls])
        found.using(needed, with_room)
        found.totals(needed, with_room, DEFAULT)
        if take:
            left = [unit for unit in found.units if not unit.evicted]
            if left:
                _take(session, left[pick % len(left)])
        for other in CLASSES:
            queue_units(session, leaves[name], **other)
        _check(session)


def test_a_list_made_from_another_class_reads_no_unit_again(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(3)
    leaf = session.snapshot.tree.leaves["a"]
    reads = _counted_reads(monkeypatch)
    first = queue_units(session, leaf, **CLASSES[0])
    first.using(NEEDED[0], False)
    assert reads == [len(first.units)]
    for cls in CLASSES[1:]:
        other = queue_units(session, leaf, **cls)
        assert other.using(NEEDED[0], False)[1] == first.using(NEEDED[0], False)[1]
    assert reads == [len(first.units)], "the other classes' lists take the first one's flags"


def test_a_patched_list_reads_only_the_units_of_the_workload_taken_from(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(5)
    leaf = session.snapshot.tree.leaves["a"]
    first = queue_units(session, leaf, **CLASSES[0])
    first.using(NEEDED[0], False)
    first.using(NEEDED[1], True)
    victim = next(unit for unit in first.units if unit.count is None)  # a whole workload
    reads = _counted_reads(monkeypatch)
    _take(session, victim)
    patched = queue_units(session, leaf, **CLASSES[0])
    assert patched is not first
    patched.using(NEEDED[0], False)
    patched.using(NEEDED[1], True)
    # One unit (the taken workload's, now evicted) read per kept reading, not the list.
    assert reads == [1, 1]
    _check(session)
