"""The candidate index (framework/preemption/unitindex.py): a queue's units by priority.

The plugins ``priority`` and ``cohort-reclaim`` take their candidates as priority
ranges of it; these tests pin the ranges, that a take refreshes the queue's lists, and
that the plugins offer exactly the candidates SEMANTICS §4 names, class by class,
against a reference written out workload by workload.
"""

from __future__ import annotations

import random

import pytest
from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    queue_units,
)
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.session import Session, Taken, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000


def _names(units: list[object]) -> list[str]:
    return sorted(u.workload.name for u in units)  # type: ignore[attr-defined]


def test_queue_units_answer_priority_ranges_and_newer_equal_priority() -> None:
    running = [
        workload("p0", "a", 1, priority=0, created=5, admitted=True),
        workload("p5-old", "a", 1, priority=5, created=1, admitted=True),
        workload("p5-new", "a", 1, priority=5, created=9, admitted=True),
        workload("p10", "a", 1, priority=10, created=2, admitted=True),
    ]
    session = open_session(inventory([queue("a", cpu=4)], running), PLUGINS, NOW)
    leaf = session.snapshot.tree.leaves["a"]
    units = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    assert _names(units.between(None, 5)) == ["p0"]
    assert _names(units.between(5, 10)) == ["p5-new", "p5-old"]
    assert _names(units.between(5, None)) == ["p10", "p5-new", "p5-old"]
    assert _names(units.between(None, None)) == ["p0", "p10", "p5-new", "p5-old"]
    assert _names(units.between(11, None)) == []
    # Equal priority, created strictly after 1: only the newer one; after 9: none.
    assert _names(units.newer(5, 1)) == ["p5-new"]
    assert _names(units.newer(5, 9)) == []
    assert _names(units.newer(5, 0)) == ["p5-new", "p5-old"]


def test_queue_units_of_a_queue_are_built_again_after_the_session_takes_from_it() -> None:
    running = [workload("victim", "a", 1, priority=0, admitted=True), workload("other", "b", 1, admitted=True)]
    session = open_session(inventory([queue("a", cpu=4), queue("b", cpu=4)], running), PLUGINS, NOW)
    a = session.snapshot.tree.leaves["a"]
    b = session.snapshot.tree.leaves["b"]
    (unit,) = queue_units(session, a, reason=IN_QUEUE, group=CLASS_SAME_QUEUE).between(None, None)
    kept = queue_units(session, b, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    assert not unit.evicted
    # What the rounds do when a preemptor takes the whole workload (actions/allocate.py).
    session.relied[unit.unit] = unit
    session.taken[unit.key] = Taken(whole=True)
    session.unit_cache.pop(unit.key, None)
    (again,) = queue_units(session, a, reason=IN_QUEUE, group=CLASS_SAME_QUEUE).between(None, None)
    assert again.evicted, "a unit the session took is offered as already on its way out"
    assert queue_units(session, b, reason=IN_QUEUE, group=CLASS_SAME_QUEUE) is kept


def _reference(session: Session, preemptor: Workload, leaf_name: str) -> set[tuple[str, str, int, bool]]:
    """SEMANTICS §4's candidates, workload by workload (within-nominal skipping aside:
    every queue below borrows in these clusters)."""
    tree = session.snapshot.tree
    leaf = tree.leaves[leaf_name]
    policy = leaf.spec.preemption
    out: set[tuple[str, str, int, bool]] = set()
    for running in session.snapshot.admitted_by_queue.get(leaf_name, ()):
        if running.priority < preemptor.priority or (
            policy.within_queue == "LowerOrNewerEqualPriority"
            and running.priority == preemptor.priority
            and running.created > preemptor.created
        ):
            out.add((running.name, IN_QUEUE, CLASS_SAME_QUEUE, False))
    for name, others in session.snapshot.admitted_by_queue.items():
        if name == leaf_name:
            continue
        for running in others:
            if policy.reclaim_within_cohort == "LowerPriority" and running.priority >= preemptor.priority:
                continue
            if (
                policy.borrow_within_cohort == "Never"
                or running.priority >= preemptor.priority
                or (policy.max_priority_threshold is not None and running.priority > policy.max_priority_threshold)
            ):
                out.add((running.name, IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True))
            else:
                out.add((running.name, IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_plugins_offer_every_candidate_of_each_class_exactly_once(seed: int) -> None:
    rng = random.Random(seed)
    policy = PreemptionPolicy(
        within_queue=rng.choice(["LowerPriority", "LowerOrNewerEqualPriority"]),
        reclaim_within_cohort=rng.choice(["Any", "LowerPriority"]),
        borrow_within_cohort=rng.choice(["Never", "LowerPriority"]),
        max_priority_threshold=rng.choice([None, 2, 5]),
    )
    queues = [cohort("all"), queue("me", "all", cpu=1, preemption=policy)]
    # Every other queue runs far above its nominal of 1 cpu: each one borrows.
    queues += [queue(f"q{i}", "all", cpu=1) for i in range(4)]
    running = [
        workload(f"w{i}", rng.choice(["me", "q0", "q1", "q2", "q3"]), 1, priority=rng.randrange(8),
                 created=rng.randrange(6), admitted=True)
        for i in range(40)
    ]
    session = open_session(inventory(queues, running), PLUGINS, NOW)
    leaf = session.snapshot.tree.leaves["me"]
    for p in range(9):
        preemptor = workload("preemptor", "me", 100, priority=p, created=3)
        request = VictimSearch(preemptor, leaf, {("default", "cpu"): 100_000}, frozenset({("default", "cpu")}))
        found = priority.preemption_candidates(session, preemptor, request)
        found += cohort_reclaim.preemption_candidates(session, preemptor, request)
        offered = [(c.workload.name, c.reason, c.group, c.only_within_nominal) for c in found]
        assert len(offered) == len(set(offered)), "no candidate twice"
        expected = _reference(session, preemptor, "me")
        assert set(offered) == expected, (p, policy)
        # The preemptor is not within its nominal: no hierarchical-reclaim candidate.
        assert all(c.group != CLASS_HIERARCHICAL for c in found)
