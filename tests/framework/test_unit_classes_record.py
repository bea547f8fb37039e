"""A workload's units by class in one list (``kept.UnitClasses``, ``session.unit_cache``).

A class of victim units is the leaf they count against and (reason, group, only within
nominal, deferred) (SEMANTICS §4). The four classes the bundled plugins ask of a
workload's own queue — hierarchical reclaim, reclaim while borrowing, reclaim within
nominal, in-queue — have a place each in the list; any other class (another leaf, a
deferred one, fair sharing's reclaim of group 1 without the nominal limit) is held beside
them. These tests pin that each class answers the units made for it and only those: two
classes that differ in one field never answer each other's units.
"""

from __future__ import annotations

from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    candidate_units,
    queue_units,
)
from preemptd.framework.preemption.kept import PLACES, held, hold, unit_classes, units_of
from preemptd.framework.preemption.units import class_units
from preemptd.framework.session import Candidate
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000
PLACED = [
    (IN_COHORT_RECLAIM, CLASS_HIERARCHICAL, False, False),
    (IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False, False),
    (IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True, False),
    (IN_QUEUE, CLASS_SAME_QUEUE, False, False),
]
OTHERS = [
    (IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, False, False),  # fair sharing's
    (IN_COHORT_RECLAIM, CLASS_HIERARCHICAL, False, True),  # deferred
    (IN_QUEUE, CLASS_SAME_QUEUE, True, False),
]


def _units(tag: str) -> tuple[Candidate, ...]:
    return (tag,)  # type: ignore[return-value]  # a stand-in, told apart by identity


def test_the_plugins_classes_have_places_and_every_other_class_is_held_beside_them() -> None:
    assert sorted(PLACES) == sorted(PLACED)
    record = unit_classes(3)
    made = {}
    for cls in PLACED + OTHERS:
        made[3, *cls] = hold(record, 3, cls, _units(str(cls)))
    # The same classes at another leaf are other classes.
    for cls in PLACED:
        made[4, *cls] = hold(record, 4, cls, _units(f"4 {cls}"))
    for (leaf, *cls), units in made.items():
        assert units_of(record, leaf, tuple(cls)) is units  # type: ignore[arg-type]
    assert units_of(record, 5, PLACED[0]) is None
    assert dict(held(record)) == made
    assert [key for key, _ in held(record)][:4] == [(3, *cls) for cls in PLACED]
    # The places, then the one dict of the other classes: six places in all.
    assert len(record) == 6 and len(record[-1]) == len(OTHERS) + len(PLACED)


def test_an_empty_record_answers_no_class() -> None:
    record = unit_classes(0)
    for cls in PLACED + OTHERS:
        assert units_of(record, 0, cls) is None
    assert list(held(record)) == []


def test_a_session_holds_each_class_of_a_workload_in_one_record() -> None:
    queues = [cohort("all"), queue("q", "all", cpu=4), queue("r", "all", cpu=4)]
    running = [workload("w", "q", 1, priority=1, created=1, admitted=True)]
    session = open_session(inventory(queues, running), PLUGINS, NOW)
    leaf = session.snapshot.tree.leaves["q"]
    lists = {
        cls: queue_units(session, leaf, reason=cls[0], group=cls[1], only_within_nominal=cls[2]) for cls in PLACED
    }
    fair = class_units(session, lists[PLACED[0]].running[0], leaf, IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, False)
    record = session.unit_cache[lists[PLACED[0]].running[0].key]
    assert record[0] == leaf.index
    for cls, found in lists.items():
        (unit,) = units_of(record, leaf.index, cls)
        assert found.units == [unit]
        # SEMANTICS §4: the unit carries its class's reason, group and nominal limit.
        assert (unit.reason, unit.group, unit.only_within_nominal) == cls[:3]
    (unit,) = fair
    assert (unit.reason, unit.group, unit.only_within_nominal) == (IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, False)
    assert units_of(record, leaf.index, (IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, False, False)) is fair
    assert record[-1] == {(leaf.index, IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, False, False): fair}
    # Asked again, each class answers a new list of the very units it holds, as a tuple.
    for cls in PLACED:
        again = candidate_units(session, unit.workload, leaf, reason=cls[0], group=cls[1], only_within_nominal=cls[2])
        found = units_of(record, leaf.index, cls)
        assert type(found) is tuple and type(again) is list
        assert again is not found and len(again) == 1 and again[0] is found[0]
