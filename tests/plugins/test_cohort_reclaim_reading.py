"""cohort-reclaim reads again, after a commit, only the children of a cohort that moved.

What a child of a cohort is above nominal on is a function of its own committed usage and
its (static) quota. After a commit to the tree the plugin compares each child's usage with
the copy kept with the cohort's reading and reads only the children whose usage changed;
when none of them changed what it is above nominal on, the reading is the same list, and
the answers kept beside it (``_above``, ``_reached``) stand. These tests pin that every
answer equals a reading of every child from scratch (a property test over random usage,
commits, uncommitted changes, needed sets and priority bounds), that a commit reads only
the child it moved, and that a commit which moves usage but no child's standing keeps the
answers.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Session
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim

from tests.plugins.test_cohort_reclaim_above import (
    FRS,
    LEAVES,
    PLUGINS,
    applied_steps,
    counted_readings,
)

CPU = FRS[0]


def _session() -> Session:
    """org -> c0, c1 -> three leaves each with 2 cpu; running workloads of priorities 0 to 5."""
    queues = [cohort("org")] + [cohort(f"c{c}", "org") for c in range(2)]
    queues += [queue(name, f"c{name[1]}", cpu=2) for name in LEAVES]
    running = [
        workload(f"w{i}", name, 1, priority=i, admitted=True) for i, name in enumerate(LEAVES)
    ]
    return open_session(inventory(queues, running), PLUGINS, 1_000_000)


def _direct(session: Session, node: QuotaNode, needed: frozenset[FR], high: int | None) -> list[tuple[str, Any]]:
    """The children above nominal on a needed flavor-resource with a workload below
    ``high``, and their priority spans, from the usage and the snapshot directly."""
    usage = session.accounting.usage
    out = []
    for child in node.children:
        over = any(usage[child.index].get(fr, 0) > child.subtree.get(fr, 0) for fr in needed)
        leaves = [child] if child.is_leaf else list(child.children)
        priorities = [
            w.priority for leaf in leaves for w in session.snapshot.admitted_by_queue.get(leaf.name, ())
        ]
        if over and priorities and (high is None or min(priorities) < high):
            out.append((child.name, (min(priorities), max(priorities))))
    return out


_CHANGE = st.tuples(st.sampled_from(LEAVES), st.sampled_from(FRS), st.integers(1, 3000), st.booleans())
_STEP = st.tuples(
    st.lists(_CHANGE, max_size=3),  # usage added or removed at a leaf
    st.booleans(),  # committed, or left uncommitted while asking
    st.lists(  # needed sets and priority bounds asked
        st.tuples(st.frozensets(st.sampled_from(FRS), min_size=1), st.none() | st.integers(0, 6)),
        min_size=1, max_size=4,
    ),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=10))
def test_every_answer_after_commits_is_a_reading_of_every_child_from_scratch(steps: list[Any]) -> None:
    session = _session()
    tree = session.snapshot.tree
    cohorts = [tree.nodes[name] for name in ("org", "c0", "c1")]
    for asked, epoch in applied_steps(session, steps):
        for needed, high in asked:
            for node in cohorts:
                found = cohort_reclaim._reached(session, node, needed, epoch, high)
                assert [(child.name, span) for child, span in found] == _direct(session, node, needed, high)
        if epoch is not None:
            for node in cohorts:
                kept = session.state[cohort_reclaim.ABOVE_ON][node.index][1]
                assert kept == cohort_reclaim._above_on(session, node), node.name


def test_a_commit_reads_again_only_the_child_whose_usage_it_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session()
    tree = session.snapshot.tree
    org = tree.nodes["org"]
    reads = counted_readings(monkeypatch)
    statement = session.statement
    assert cohort_reclaim._above(session, org, frozenset({CPU}), statement.epoch(org)) == []
    assert reads == ["c0", "c1"]
    statement.add_usage(tree.leaves["q12"], {CPU: 9000})  # c1 goes above its 6 cpu
    statement.commit()
    above = cohort_reclaim._above(session, org, frozenset({CPU}), statement.epoch(org))
    assert [node.name for node in above] == ["c1"]
    assert reads == ["c0", "c1", "c1"], "c0's usage did not move: not read again"
    statement.add_usage(tree.leaves["q02"], {CPU: 500})  # c0 moves, within its quota
    statement.commit()
    assert cohort_reclaim._above(session, org, frozenset({CPU}), statement.epoch(org)) is above
    assert reads == ["c0", "c1", "c1", "c0"], "c1 is compared with its usage at the last reading"


def test_a_commit_that_moves_no_childs_standing_keeps_the_answers() -> None:
    session = _session()
    tree = session.snapshot.tree
    c0 = tree.nodes["c0"]
    statement = session.statement
    statement.add_usage(tree.leaves["q01"], {CPU: 3000})  # q01 above its 2 cpu
    statement.commit()
    needed = frozenset({CPU})
    above = cohort_reclaim._above(session, c0, needed, statement.epoch(c0))
    reached = cohort_reclaim._reached(session, c0, needed, statement.epoch(c0), 5)
    assert [node.name for node in above] == ["q01"]
    assert [(node.name, span) for node, span in reached] == [("q01", (1, 1))]
    # More usage at q01 (still above on cpu only) and some at q02 (still within): the
    # children's usage moved, what they are above nominal on did not.
    statement.add_usage(tree.leaves["q01"], {CPU: 500})
    statement.add_usage(tree.leaves["q02"], {CPU: 1000})
    statement.commit()
    epoch = statement.epoch(c0)
    assert cohort_reclaim._above(session, c0, needed, epoch) is above
    assert cohort_reclaim._reached(session, c0, needed, epoch, 5) is reached
    # q00 goes above too: a new answer.
    statement.add_usage(tree.leaves["q00"], {CPU: 2500})
    statement.commit()
    epoch = statement.epoch(c0)
    assert [node.name for node in cohort_reclaim._above(session, c0, needed, epoch)] == ["q00", "q01"]
