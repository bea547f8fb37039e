"""cohort-reclaim reads what each cohort's children are above nominal on once per commit.

Which children of a cohort are above nominal on a needed flavor-resource is asked for
many needed sets between two commits to the tree (each flavor's search asks its own).
The plugin reads, once per cohort and epoch of the tree, the flavor-resources each child
uses more of than its nominal (subtree) quota, and answers every needed set from that.
These tests pin that every answer is the one a direct reading of the usage gives (a
property test over random usage, commits, uncommitted changes and needed sets), and
that two needed sets asked between the same commits cost one reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Session
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
# cpu of the flavor the queues have quota of (2 cores each), and two they have none of.
FRS: list[FR] = [("default", "cpu"), ("default", "memory"), ("other", "cpu")]
LEAVES = [f"q{c}{i}" for c in range(2) for i in range(3)]


def _session() -> Session:
    """org -> c0, c1 -> three leaves each, each with 2 cpu; one running workload of 1 cpu."""
    queues = [cohort("org")] + [cohort(f"c{c}", "org") for c in range(2)]
    queues += [queue(name, f"c{name[1]}", cpu=2) for name in LEAVES]
    running = [workload("w", "q00", 1, admitted=True)]
    return open_session(inventory(queues, running), PLUGINS, 1_000_000)


def _direct(session: Session, node: QuotaNode, needed: frozenset[FR]) -> list[str]:
    usage = session.accounting.usage
    return [
        child.name
        for child in node.children
        if any(usage[child.index].get(fr, 0) > child.subtree.get(fr, 0) for fr in needed)
    ]


def applied_steps(session: Session, steps: list[Any]) -> Iterator[tuple[Any, int | None]]:
    """Each step's usage changes at leaves (a removal only where as much was added before),
    committed or left uncommitted while its questions are asked (and committed after):
    yields the questions and the tree's epoch, or None while uncommitted."""
    statement = session.statement
    org = session.snapshot.tree.nodes["org"]
    added: dict[tuple[str, FR], int] = {}
    for changes, commit, asked in steps:
        for name, fr, amount, add in changes:
            leaf = session.snapshot.tree.leaves[name]
            if add:
                statement.add_usage(leaf, {fr: amount})
                added[(name, fr)] = added.get((name, fr), 0) + amount
            elif added.get((name, fr), 0) >= amount:
                statement.remove_usage(leaf, {fr: amount})
                added[(name, fr)] -= amount
        if commit:
            statement.commit()
        yield asked, None if statement.ops else statement.epoch(org)
        if not commit:
            statement.commit()


_CHANGE = st.tuples(st.sampled_from(LEAVES), st.sampled_from(FRS), st.integers(1, 3000), st.booleans())
_STEP = st.tuples(
    st.lists(_CHANGE, max_size=3),  # usage added or removed at a leaf
    st.booleans(),  # committed, or left uncommitted while asking
    st.lists(st.frozensets(st.sampled_from(FRS), min_size=1), min_size=1, max_size=4),  # needed sets asked
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=8))
def test_every_answer_is_the_direct_reading_of_the_usage(steps: list[Any]) -> None:
    session = _session()
    tree = session.snapshot.tree
    cohorts = [tree.nodes[name] for name in ("org", "c0", "c1")]
    for asked, epoch in applied_steps(session, steps):
        for needed in asked:
            for node in cohorts:
                found = cohort_reclaim._above(session, node, needed, epoch)
                assert [child.name for child in found] == _direct(session, node, needed), (node.name, needed)


def counted_readings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queues and cohorts whose usage is read for what they are above nominal on
    (``_over``) from now on, in order."""
    reads: list[str] = []
    real = cohort_reclaim._over

    def counting(node: QuotaNode, usage: Any) -> Any:
        reads.append(node.name)
        return real(node, usage)

    monkeypatch.setattr(cohort_reclaim, "_over", counting)
    return reads


def test_two_needed_sets_between_the_same_commits_read_the_children_once(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session()
    tree = session.snapshot.tree
    reads = counted_readings(monkeypatch)
    c0 = tree.nodes["c0"]
    epoch = session.statement.epoch(c0)
    cpu, memory = FRS[0], FRS[1]
    assert [c.name for c in cohort_reclaim._above(session, c0, frozenset({cpu}), epoch)] == []
    assert [c.name for c in cohort_reclaim._above(session, c0, frozenset({memory}), epoch)] == []
    assert reads == ["q00", "q01", "q02"]
    # q01 goes above its 2 cpu, committed: read again, and above on cpu only.
    session.statement.add_usage(tree.leaves["q01"], {cpu: 3000})
    session.statement.commit()
    epoch = session.statement.epoch(c0)
    assert [c.name for c in cohort_reclaim._above(session, c0, frozenset({cpu}), epoch)] == ["q01"]
    assert [c.name for c in cohort_reclaim._above(session, c0, frozenset({memory}), epoch)] == []
    assert reads == ["q00", "q01", "q02", "q01"]
