"""``cohort-reclaim`` keeps each sibling queue's part of an answer while nothing is taken
from the queue.

A sibling queue's part (the runs of its lists a search is offered, and the units it
leaves out) is read from the candidate index, whose lists of a queue change only when
the session takes from one of its workloads (``queue_takes``), with the bounds the
search asks (priority bounds, whether it only borrows, the request) and whether the
preemptor has the advantage at that level. So the part is kept per queue and what it
reads (``KEEP_OFFERS``): it outlives takes from other queues and commits to the tree.
Two sessions over the same random cluster, one keeping the parts and one reading the
lists at every search, take the same victims between the searches and must hand every
search the same candidates in the same order, with the same count left out.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.session import Candidate, Session, Taken, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
CPU = ("default", "cpu")
SPOT = ("spot", "cpu")
FLAVORS = ["default", "default", "spot"]
NEEDED = [frozenset({CPU}), frozenset({SPOT}), frozenset({CPU, SPOT})]
NOW = 1_000_000


def _cluster(rng: random.Random) -> tuple[Any, list[str]]:
    """org -> c0, c1 (three leaves each) and two leaves of org itself; every policy of
    cohort reclaim; running workloads of random queues, sizes and priorities, so that some
    queues borrow and some stay within their nominal."""
    queues = [cohort("org"), cohort("c0", "org"), cohort("c1", "org")]
    leaves = [f"q{c}{i}" for c in range(2) for i in range(3)] + ["r0", "r1"]
    for name in leaves:
        policy = PreemptionPolicy(
            reclaim_within_cohort=rng.choice(["Any", "LowerPriority", "Never"]),
            borrow_within_cohort=rng.choice(["Never", "LowerPriority"]),
            max_priority_threshold=rng.choice([None, 2, 4]),
        )
        parent = "org" if name.startswith("r") else f"c{name[1]}"
        queues.append(queue(name, parent, cpu=rng.choice([1, 2, 4]), preemption=policy))
    # Some run on a flavor no queue has a quota of (above nominal on it whenever they run
    # there), some are elastic (a unit per pod above their minimum, then the rest).
    running = [
        workload(
            f"w{i}", rng.choice(leaves), rng.choice([1, 1, 2]), count=rng.choice([1, 1, 3]), min_count=1,
            priority=rng.randrange(6), created=rng.randrange(9), admitted=True, flavor=rng.choice(FLAVORS),
        )
        for i in range(rng.randrange(20, 50))
    ]
    return inventory(queues, running), leaves


Request = tuple[str, int, int, bool, bool, frozenset[tuple[str, str]]]


def _ask(session: Session, request: Request, keep: bool) -> tuple[list[Candidate], int]:
    name, prio, cpu, borrowing_only, with_room, needed = request
    preemptor = workload(f"p-{name}-{prio}-{cpu}", name, cpu, priority=prio, created=5)
    search = VictimSearch(
        preemptor, session.snapshot.tree.leaves[name], dict.fromkeys(needed, cpu * 1000), needed,
        borrowing_only=borrowing_only, with_room=with_room,
    )
    cohort_reclaim.KEEP_OFFERS = keep
    try:
        found = cohort_reclaim.preemption_candidates(session, preemptor, search)
    finally:
        cohort_reclaim.KEEP_OFFERS = True
    return list(found), search.left_out


def _seen(found: list[Candidate]) -> list[tuple[object, ...]]:
    return [(c.unit, c.reason, c.group, c.only_within_nominal, c.evicted, dict(c.usage)) for c in found]


def _take(session: Session, unit: tuple[object, ...], found: list[Candidate]) -> None:
    """What the rounds do when a preemptor takes a whole workload, committed."""
    victim = next(c for c in found if c.unit == unit)
    session.relied[victim.unit] = victim
    session.taken[victim.key] = Taken(whole=True)
    session.unit_cache.pop(victim.key, None)
    session.statement.remove_usage(victim.leaf, dict(victim.usage))
    session.statement.commit()


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=1_000_000))
def test_kept_sibling_parts_answer_as_reading_the_lists_at_every_search(seed: int) -> None:
    rng = random.Random(seed)
    cluster, leaves = _cluster(rng)
    kept = open_session(cluster, PLUGINS, NOW)
    plain = open_session(cluster, PLUGINS, NOW)
    for _ in range(20):
        request = (
            rng.choice(leaves), rng.randrange(7), rng.choice([1, 2]), rng.random() < 0.4, rng.random() < 0.3,
            rng.choice(NEEDED),
        )
        found, left_out = _ask(kept, request, True)
        expected, expected_left_out = _ask(plain, request, False)
        assert _seen(found) == _seen(expected), request
        assert left_out == expected_left_out, request
        takeable = [c.unit for c in found if not c.evicted and c.key not in kept.taken]
        if takeable and rng.random() < 0.6:
            unit = rng.choice(takeable)
            _take(kept, unit, found)
            _take(plain, unit, expected)


def test_a_sibling_part_is_read_again_only_after_a_take_from_its_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """SEMANTICS §4 by hand. Cohort root: queue a (nominal 1, reclaims ``Any``, never
    borrows) and queues b and c (nominal 1) running two workloads of 1 cpu each: both
    borrow, so all four are candidates of a's preemptors. A take from c leaves b's part
    as it was: b's lists are not read again; c's are, and its workload taken is offered
    as already on its way out."""
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="Never")
    queues = [cohort("root"), queue("a", "root", cpu=1, preemption=policy), queue("b", "root", cpu=1),
              queue("c", "root", cpu=1)]
    running = [workload(f"{q}{i}", q, 1, priority=i, created=i, admitted=True) for q in "bc" for i in range(2)]
    session = open_session(inventory(queues, running), PLUGINS, NOW)
    read: list[str] = []
    real = cohort_reclaim.queue_units

    def counting(*args: Any, **kwargs: Any) -> Any:
        read.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(cohort_reclaim, "queue_units", counting)
    first, _ = _ask(session, ("a", 3, 1, False, False, frozenset({CPU})), True)
    assert [c.workload.name for c in first] == ["b0", "b1", "c0", "c1"]
    assert read == ["b", "c"]
    # Taken from c; the same search again (the whole answer is not kept across a take).
    c0 = next(c for c in first if c.workload.name == "c0")
    session.relied[c0.unit] = c0
    session.taken[c0.key] = Taken(whole=True)
    session.unit_cache.pop(c0.key, None)
    again, _ = _ask(session, ("a", 3, 1, False, False, frozenset({CPU})), True)
    assert read == ["b", "c", "c"]
    assert [(c.workload.name, c.evicted) for c in again] == [
        ("b0", False), ("b1", False), ("c0", True), ("c1", False)
    ]
    assert all(x is y for x, y in zip(again[:2], first[:2], strict=True))
