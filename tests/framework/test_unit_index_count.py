"""A queue's units in a priority range, counted from whichever list the index holds.

``cohort-reclaim`` only counts a sibling queue's within-nominal units when every attempt
of a search borrows (they are left out, SEMANTICS §4). The count (units of workloads of
``low <= priority < high`` that use a needed flavor-resource, or with ``with_room`` hold
node room) is the same in every class's list of the queue in one take state, so
``queue_units(..., any_class=True)`` hands out a list the index already holds instead of
building or patching one of the within-nominal class. These tests pin that the count is
the one the within-nominal list gives, before and after takes, and that no list of that
class is made while another is at hand.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from preemptd.framework import (
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_QUEUE,
    queue_units,
)
from preemptd.framework.preemption import unitindex
from preemptd.framework.session import Session
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

from tests.framework.test_unit_index_patch import _take

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000
IN_QUEUE_CLASS: dict[str, Any] = {"reason": IN_QUEUE, "group": CLASS_SAME_QUEUE}
WITHIN: dict[str, Any] = {"reason": IN_COHORT_RECLAIM, "group": CLASS_OTHER_QUEUE, "only_within_nominal": True}
NEEDED = [frozenset({("default", "cpu")}), frozenset({("spare", "cpu")}), frozenset({("default", "cpu"), ("spare", "cpu")})]
BOUNDS = [None, 0, 1, 2, 3, 4]
_BUILD = unitindex._build  # a fresh build, whatever a test does to the module


def _session(seed: int, workloads: int = 16) -> Session:
    """Queues a and b; ``workloads`` running workloads of random queue, flavor, priority
    and size, some elastic (3 pods above minCount 1: single-pod units and the rest)."""
    rng = random.Random(seed)
    queues = [cohort("all"), queue("a", "all", cpu=4), queue("b", "all", cpu=4)]
    running = []
    for i in range(workloads):
        count = rng.choice([1, 1, 3])
        running.append(
            workload(
                f"w{i}", rng.choice(["a", "b"]), 1, count=count, min_count=1 if count > 1 else None,
                priority=rng.randrange(4), created=rng.randrange(5), admitted=True,
                flavor=rng.choice(["default", "spare"]),
            )
        )
    return open_session(inventory(queues, running, flavors=("default", "spare")), PLUGINS, NOW)


def _expected(session: Session, name: str, low: Any, high: Any, needed: frozenset[Any], with_room: bool) -> int:
    """The count of a within-nominal list built afresh, by hand: the units of workloads
    of priority in [low, high) that use a needed flavor-resource (no nodes: no room)."""
    leaf = session.snapshot.tree.leaves[name]
    fresh = _BUILD(
        session, leaf, WITHIN["reason"], WITHIN["group"], True, False,
        session.snapshot.admitted_by_queue.get(name, ()),
    )
    return sum(
        1
        for unit in fresh.units
        if (low is None or unit.workload.priority >= low)
        and (high is None or unit.workload.priority < high)
        and not needed.isdisjoint(unit.usage)
    )


def _check_counts(session: Session) -> None:
    for name in ("a", "b"):
        leaf = session.snapshot.tree.leaves[name]
        for low, high, needed, with_room in itertools.product(BOUNDS, BOUNDS, NEEDED, (False, True)):
            found = queue_units(session, leaf, **WITHIN, any_class=True).count_between(low, high, needed, with_room)
            assert found == _expected(session, name, low, high, needed, with_room), (name, low, high, needed)


@pytest.mark.parametrize("seed", range(8))
def test_a_count_read_from_the_in_queue_list_is_the_within_nominal_lists_count(seed: int) -> None:
    session = _session(seed)
    rng = random.Random(seed)
    leaves = session.snapshot.tree.leaves
    for name in ("a", "b"):
        queue_units(session, leaves[name], **IN_QUEUE_CLASS)
    _check_counts(session)
    for _ in range(6):
        # Take a random unit still there, then count: from the patched lists.
        name = rng.choice(["a", "b"])
        left = [u for u in queue_units(session, leaves[name], **IN_QUEUE_CLASS).units if not u.evicted]
        if left:
            _take(session, rng.choice(left))
        _check_counts(session)


def test_no_within_nominal_list_is_made_while_the_queue_has_another(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(3)
    leaf = session.snapshot.tree.leaves["a"]
    made: list[str] = []
    for function in ("_build", "_build_like", "_patch"):
        real = getattr(unitindex, function)

        def recording(*args: Any, _real: Any = real, _name: str = function) -> Any:
            made.append(f"{_name} {args[2]}")
            return _real(*args)

        monkeypatch.setattr(unitindex, function, recording)
    needed = NEEDED[2]
    # No list of the queue yet: the one of the class asked for is built.
    queue_units(session, leaf, **WITHIN, any_class=True).count_between(None, None, needed, False)
    assert made == [f"_build {IN_COHORT_RECLAIM}"]
    in_queue = queue_units(session, leaf, **IN_QUEUE_CLASS)
    made.clear()
    queue_units(session, leaf, **WITHIN, any_class=True).count_between(None, 2, needed, False)
    assert made == []  # counted from a list at hand
    # After a take, one list held before it is patched, not one per class.
    _take(session, next(u for u in in_queue.units if not u.evicted))
    queue_units(session, leaf, **WITHIN, any_class=True).count_between(None, None, needed, True)
    assert made == [f"_patch {IN_COHORT_RECLAIM}"]
    queue_units(session, leaf, **WITHIN, any_class=True).count_between(1, None, needed, False)
    assert made == [f"_patch {IN_COHORT_RECLAIM}"]


def test_a_node_by_node_collection_counts_from_its_own_lists() -> None:
    session = _session(5)
    leaf = session.snapshot.tree.leaves["b"]
    queue_units(session, leaf, **IN_QUEUE_CLASS)
    session.defer_pods = True
    try:
        units = queue_units(session, leaf, **WITHIN, any_class=True)
        found = units.count_between(None, None, NEEDED[2], True)
    finally:
        session.defer_pods = False
    assert found == _expected(session, "b", None, None, NEEDED[2], True)
