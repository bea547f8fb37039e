"""A workload's units of two classes of one group share their sort key.

The classes of victim units differ in their reason, group and "only within nominal" flag;
the sort key differs only in its group (SEMANTICS §4, "Order"). Units of another class are
made from units already built (``units.units_like``), from those of the same group when
the session has them, whose sort key tuple they then keep: one tuple for both. Held here
for both ways a class is made (a workload's units, and a queue's list of the candidate
index), with the keys' values those of a plain build.
"""

from __future__ import annotations

import sys
from typing import Any

from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    candidate_units,
    queue_units,
)
from preemptd.framework.session.candidates import units_like
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
HIERARCHICAL: dict[str, Any] = {"reason": IN_COHORT_RECLAIM, "group": CLASS_HIERARCHICAL}
WITHIN: dict[str, Any] = {"reason": IN_COHORT_RECLAIM, "group": CLASS_OTHER_QUEUE, "only_within_nominal": True}
BORROWING: dict[str, Any] = {"reason": IN_COHORT_RECLAIM_WHILE_BORROWING, "group": CLASS_OTHER_QUEUE}


def _session() -> Any:
    queues = [cohort("all"), queue("me", "all", cpu=1), queue("other", "all", cpu=1)]
    running = [workload(f"w{i}", "other", 1, priority=i % 2, created=i, admitted=True) for i in range(4)]
    return open_session(inventory(queues, running), PLUGINS, 1_000_000)


def _plain_key(unit: Any, group: int) -> tuple[Any, ...]:
    """A whole workload's sort key as SEMANTICS §4 orders it: not evicted, group, priority,
    whole, most recently admitted first, tie-break, first place."""
    w = unit.workload
    return (1, group, w.priority, 1, -w.admitted_at, (w.uid, w.namespace, w.name), 0)


def test_a_queue_list_of_a_group_shares_the_keys_of_the_held_list_of_that_group() -> None:
    session = _session()
    leaf = session.snapshot.tree.leaves["other"]
    first = queue_units(session, leaf, **HIERARCHICAL)
    within = queue_units(session, leaf, **WITHIN)
    borrowing = queue_units(session, leaf, **BORROWING)
    assert len(first.units) == len(within.units) == len(borrowing.units) == 4
    for a, b, c in zip(first.units, within.units, borrowing.units, strict=True):
        assert a.sort_key == _plain_key(a, CLASS_HIERARCHICAL)
        assert b.sort_key == c.sort_key == _plain_key(b, CLASS_OTHER_QUEUE)
        assert c.sort_key is b.sort_key  # the group's tuple, not another of the same value
        assert (c.reason, c.group, c.only_within_nominal) == (IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False)


def test_a_workloads_units_of_a_group_share_the_keys_of_its_units_of_that_group() -> None:
    session = _session()
    leaf = session.snapshot.tree.leaves["other"]
    for running in session.snapshot.admitted_by_queue["other"]:
        first = candidate_units(session, running, leaf, **HIERARCHICAL)
        within = candidate_units(session, running, leaf, **WITHIN)
        borrowing = candidate_units(session, running, leaf, **BORROWING)
        assert first[0].sort_key == _plain_key(first[0], CLASS_HIERARCHICAL)
        assert within[0].sort_key == _plain_key(within[0], CLASS_OTHER_QUEUE)
        assert borrowing[0].sort_key is within[0].sort_key
        assert borrowing[0] is not within[0] and borrowing[0].reason == IN_COHORT_RECLAIM_WHILE_BORROWING


def test_units_of_another_class_come_in_a_tuple_of_their_own_size() -> None:
    """Most workloads give one unit: its units of another class are one unit's tuple, ``(unit,)``."""
    session = _session()
    leaf = session.snapshot.tree.leaves["other"]
    running = session.snapshot.admitted_by_queue["other"][0]
    made = units_like(candidate_units(session, running, leaf, **HIERARCHICAL), IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True)
    assert type(made) is tuple and len(made) == 1 and sys.getsizeof(made) == sys.getsizeof((made[0],))
