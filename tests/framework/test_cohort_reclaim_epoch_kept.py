"""cohort-reclaim hands a cohort's kept children within one epoch of the tree without asking
again; a sibling queue's takes are read from the candidate index's record once per answer.

Within one epoch of the tree (no commit since) the reading of a cohort's children stands,
so ``_reached`` hands the answer it kept for the cohort, request and bound at that epoch
without asking ``_above``. These tests pin that every answer, asked once or again at the
same epoch, across commits and while changes are uncommitted, equals a reading of every
child from scratch, and count the readings by hand. ``takes_by_queue`` counts what
``queue_takes`` counts for every queue, before and after takes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import queue_takes, takes_by_queue
from preemptd.framework.session import Session, Taken
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim

from tests.plugins.test_cohort_reclaim_above import FRS, LEAVES, PLUGINS, applied_steps
from tests.plugins.test_cohort_reclaim_reading import _direct, _session

CPU = FRS[0]
_CHANGE = st.tuples(st.sampled_from(LEAVES), st.sampled_from(FRS), st.integers(1, 3000), st.booleans())
_ASKED = st.tuples(st.frozensets(st.sampled_from(FRS), min_size=1), st.none() | st.integers(0, 6))
_STEP = st.tuples(
    st.lists(_CHANGE, max_size=3),  # usage added or removed at a leaf (none: the epoch stays)
    st.booleans(),  # committed, or left uncommitted while asking
    st.lists(st.sampled_from([(frozenset({CPU}), 3), (frozenset({CPU}), None)]) | _ASKED, min_size=1, max_size=4),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=10))
def test_every_answer_asked_again_at_one_epoch_is_a_reading_from_scratch(steps: list[Any]) -> None:
    session = _session()
    tree = session.snapshot.tree
    cohorts = [tree.nodes[name] for name in ("org", "c0", "c1")]
    for asked, epoch in applied_steps(session, steps):
        for needed, high in asked + asked:  # each question twice: the second at the same epoch
            for node in cohorts:
                found = cohort_reclaim._reached(session, node, needed, epoch, high)
                assert [(child.name, span) for child, span in found] == _direct(session, node, needed, high)


def test_a_cohort_is_asked_once_per_epoch_for_every_search(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session()
    tree = session.snapshot.tree
    c0 = tree.nodes["c0"]
    statement = session.statement
    asked: list[str] = []
    real = cohort_reclaim._above

    def counting(*args: Any) -> Any:
        asked.append(args[1].name)
        return real(*args)

    monkeypatch.setattr(cohort_reclaim, "_above", counting)
    needed = frozenset({CPU})
    statement.add_usage(tree.leaves["q01"], {CPU: 3000})  # q01 above its 2 cpu
    statement.commit()
    first = cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 5)
    assert [(node.name, span) for node, span in first] == [("q01", (1, 1))]
    assert cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 5) is first
    assert asked == ["c0"], "the same epoch: the kept answer, without asking again"
    # Another bound is another answer, asked once.
    assert cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 1) == []
    assert asked == ["c0", "c0"]
    # Uncommitted usage: read from the usage as it is, nothing kept.
    statement.add_usage(tree.leaves["q00"], {CPU: 2500})
    now = cohort_reclaim._reached(session, c0, needed, None, 5)
    assert [node.name for node, _ in now] == ["q00", "q01"]
    assert asked == ["c0", "c0", "c0"]
    # Committed: a new epoch asks again, and offers q00.
    statement.commit()
    after = cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 5)
    assert [node.name for node, _ in after] == ["q00", "q01"]
    assert asked == ["c0", "c0", "c0", "c0"]
    assert cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 5) is after
    assert len(asked) == 4


def _takes_session() -> Session:
    queues = [cohort("all"), queue("a", "all", cpu=2), queue("b", "all", cpu=2), queue("c", "all", cpu=2)]
    running = [workload(f"{name}{i}", name, 1, priority=i, admitted=True) for name in "abc" for i in range(3)]
    return open_session(inventory(queues, running), PLUGINS, 1_000_000)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([f"{name}{i}" for name in "abc" for i in range(3)]), max_size=6, unique=True))
def test_takes_by_queue_counts_what_queue_takes_counts(taken: list[str]) -> None:
    session = _takes_session()
    leaves = session.snapshot.tree.leaves
    counts = {name: 0 for name in "abc"}  # worked out by hand: one take per unit taken
    for name in taken:
        found = cohort_reclaim.queue_units(
            session, leaves[name[0]], reason=cohort_reclaim.IN_COHORT_RECLAIM, group=cohort_reclaim.CLASS_OTHER_QUEUE
        )
        unit = next(unit for unit in found.units if unit.workload.name == name)
        session.relied[unit.unit] = unit  # what the rounds record when a preemptor takes it
        session.taken[unit.key] = Taken(whole=True)
        counts[name[0]] += 1
        takes = takes_by_queue(session)
        for queue_name, leaf in leaves.items():
            assert len(takes.get(queue_name, ())) == queue_takes(session, leaf) == counts[queue_name]
