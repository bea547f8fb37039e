"""cohort-reclaim reads no queue for a priority range it has no workload in.

Every range a search reads of a sibling queue lies below the preemptor's bound
(``reclaimWithinCohort: LowerPriority``: its priority); the within-nominal range starts
at the borrowing cut. The plugin knows, per queue and cohort, the lowest and highest
priority of its admitted workloads (the candidate index lists exactly those), and passes
over a queue or a whole cohort without a workload in a range it would read: the range
adds nothing and counts nothing left out. And a cohort's children are read again after
a commit to the tree only when the usage of one of them changed.

These tests pin that the answers (candidates, classes, runs, units left out) are the
ones the plain walk gives — every sibling above nominal read, every range asked — for
random trees, policies, priorities and commits, and that the skipped reads are skipped.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import Offer
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Session, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

from tests.plugins.test_cohort_reclaim_above import counted_readings

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000
CPU = ("default", "cpu")
LEAVES = ["a0", "a1", "a2", "b0", "b1", "c0"]  # org -> ca (a*), cb (b*), c0


def _plain(session: Session, preemptor: Workload, request: VictimSearch) -> Offer:
    """The plain walk: every sibling above nominal on a needed flavor-resource, every
    class's range asked (the plugin's own ``_offer`` before ranges were checked)."""
    leaf = request.leaf
    policy = leaf.spec.preemption
    accounting = session.accounting
    usage = request.usage
    high = preemptor.priority if policy.reclaim_within_cohort == "LowerPriority" else None
    cut: int | None = None
    if policy.borrow_within_cohort != "Never":
        cut = preemptor.priority
        if policy.max_priority_threshold is not None:
            cut = min(cut, policy.max_priority_threshold + 1)
    out = Offer()

    def offer(node: QuotaNode, advantage: bool) -> None:
        if advantage:
            units = cohort_reclaim.queue_units(
                session, node, reason=cohort_reclaim.IN_COHORT_RECLAIM, group=cohort_reclaim.CLASS_HIERARCHICAL
            )
            units.offer_between(out, None, high)
            return
        if cut is not None:
            borrowing = cohort_reclaim.queue_units(
                session, node, reason=cohort_reclaim.IN_COHORT_RECLAIM_WHILE_BORROWING,
                group=cohort_reclaim.CLASS_OTHER_QUEUE,
            )
            borrowing.offer_between(out, None, cut)
        within = cohort_reclaim.queue_units(
            session, node, reason=cohort_reclaim.IN_COHORT_RECLAIM, group=cohort_reclaim.CLASS_OTHER_QUEUE,
            only_within_nominal=True,
        )
        if request.borrowing_only:
            request.left_out += within.count_between(cut, high, request.needed, request.with_room)
        else:
            within.offer_between(out, cut, high)

    def walk(node: QuotaNode, advantage: bool) -> None:
        if accounting.used(node, CPU) <= node.subtree.get(CPU, 0):
            return
        if node.is_leaf:
            offer(node, advantage)
        else:
            for child in node.children:
                walk(child, advantage)

    advantage = accounting.used(leaf, CPU) + usage[CPU] <= leaf.subtree.get(CPU, 0)
    child, ancestor = leaf, leaf.parent
    while ancestor is not None:
        for sibling in ancestor.children:
            if sibling is not child:
                walk(sibling, advantage)
        if not advantage:
            advantage = cohort_reclaim._fits_at(accounting, leaf, ancestor, usage)
        child, ancestor = ancestor, ancestor.parent
    return out


def _cluster(draw: Any) -> tuple[Any, list[tuple[str, int, int]]]:
    policy = PreemptionPolicy(
        reclaim_within_cohort=draw(st.sampled_from(["Any", "LowerPriority"])),
        borrow_within_cohort=draw(st.sampled_from(["Never", "LowerPriority"])),
        max_priority_threshold=draw(st.sampled_from([None, 1, 3])),
    )
    queues = [cohort("org"), cohort("ca", "org"), cohort("cb", "org")]
    for name in LEAVES:
        parent = {"a": "ca", "b": "cb"}.get(name[0], "org")
        queues.append(queue(name, parent, cpu=draw(st.integers(0, 3)), preemption=policy))
    running = [
        workload(f"w{i}", leaf, 1, priority=prio, created=created, admitted=True)
        for i, (leaf, prio, created) in enumerate(
            draw(st.lists(st.tuples(st.sampled_from(LEAVES), st.integers(0, 5), st.integers(0, 3)), max_size=24))
        )
    ]
    asks = draw(
        st.lists(st.tuples(st.sampled_from(LEAVES), st.integers(0, 6), st.integers(1, 3)), min_size=1, max_size=12)
    )
    return inventory(queues, running), asks


def _runs(found: Any) -> list[tuple[str, str, int, bool, int, int]]:
    return [
        (source.units[0].leaf.name, source.units[0].reason, source.units[0].group,
         source.units[0].only_within_nominal, start, end)
        for source, start, end in found.runs
    ]


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_every_answer_is_the_plain_walks_answer(data: Any) -> None:
    cluster, asks = _cluster(data.draw)
    session = open_session(cluster, PLUGINS, NOW)
    plain_session = open_session(cluster, PLUGINS, NOW)
    tree = session.snapshot.tree
    for n, (name, prio, cpu) in enumerate(asks):
        preemptor = workload(f"p{n}", name, cpu, priority=prio, created=9)
        borrowing_only = data.draw(st.booleans()) and name != "c0"
        answers = []
        for one in (session, plain_session):
            leaf = one.snapshot.tree.leaves[name]
            request = VictimSearch(preemptor, leaf, {CPU: cpu * 1000}, frozenset({CPU}), borrowing_only)
            if one is session:
                found = cohort_reclaim.preemption_candidates(one, preemptor, request)
            else:
                found = _plain(one, preemptor, request)
            names = [(c.workload.name, c.reason, c.group, c.only_within_nominal) for c in found]
            answers.append((names, _runs(found), request.left_out))
        assert answers[0] == answers[1], (name, prio, cpu)
        # A commit to the tree between asks (in both sessions alike).
        if data.draw(st.booleans()):
            moved = data.draw(st.sampled_from(LEAVES))
            for one in (session, plain_session):
                one.statement.add_usage(one.snapshot.tree.leaves[moved], {CPU: 1000})
                one.statement.commit()
    assert tree is session.snapshot.tree


def _session(specs: list[Any], running: list[Workload]) -> Session:
    return open_session(inventory(specs, running), PLUGINS, NOW)


def test_a_queue_without_a_workload_below_the_preemptor_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # reclaimWithinCohort LowerPriority: a preemptor of priority 3 takes nothing of
    # priority 3 or above. "high" and "low" both borrow; only "low" runs something below.
    policy = PreemptionPolicy(reclaim_within_cohort="LowerPriority", borrow_within_cohort="Never")
    specs = [
        cohort("all"),
        queue("me", "all", cpu=1, preemption=policy),
        queue("high", "all", cpu=1),
        queue("low", "all", cpu=1),
    ]
    running = [
        workload("h1", "high", 1, priority=3, admitted=True),
        workload("h2", "high", 1, priority=5, admitted=True),
        workload("l1", "low", 1, priority=1, admitted=True),
        workload("l2", "low", 1, priority=4, admitted=True),
    ]
    session = _session(specs, running)
    read: list[str] = []
    real = cohort_reclaim.queue_units

    def recording(*args: Any, **kwargs: Any) -> Any:
        read.append(args[1].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(cohort_reclaim, "queue_units", recording)
    preemptor = workload("p", "me", 1, priority=3, created=9)
    request = VictimSearch(preemptor, session.snapshot.tree.leaves["me"], {CPU: 1000}, frozenset({CPU}))
    found = cohort_reclaim.preemption_candidates(session, preemptor, request)
    assert [c.workload.name for c in found] == ["l1"]
    assert read == ["low"]


def test_no_within_nominal_list_is_read_when_the_cut_is_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    # borrowWithinCohort LowerPriority without a threshold: below the preemptor's priority
    # is reclaimed while borrowing; reclaimWithinCohort LowerPriority leaves nothing at or
    # above it: the within-nominal range [priority, priority) is empty.
    policy = PreemptionPolicy(reclaim_within_cohort="LowerPriority", borrow_within_cohort="LowerPriority")
    specs = [cohort("all"), queue("me", "all", cpu=0, preemption=policy), queue("other", "all", cpu=1)]
    running = [workload(f"o{i}", "other", 1, priority=i, created=i, admitted=True) for i in range(4)]
    session = _session(specs, running)
    asked: list[dict[str, Any]] = []
    real = cohort_reclaim.queue_units

    def recording(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(cohort_reclaim, "queue_units", recording)
    preemptor = workload("p", "me", 1, priority=2, created=9)
    request = VictimSearch(preemptor, session.snapshot.tree.leaves["me"], {CPU: 1000}, frozenset({CPU}))
    found = cohort_reclaim.preemption_candidates(session, preemptor, request)
    assert [(c.workload.name, c.reason) for c in found] == [
        ("o0", cohort_reclaim.IN_COHORT_RECLAIM_WHILE_BORROWING),
        ("o1", cohort_reclaim.IN_COHORT_RECLAIM_WHILE_BORROWING),
    ]
    assert [kwargs.get("only_within_nominal", False) for kwargs in asked] == [False]


def test_a_commit_to_one_cohort_leaves_the_reading_of_another(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = [cohort("org"), cohort("ca", "org"), cohort("cb", "org")]
    specs += [queue(name, "ca" if name[0] == "a" else "cb", cpu=1) for name in ("a0", "a1", "b0", "b1")]
    running = [workload(f"w{name}", name, 2, admitted=True) for name in ("a0", "b0")]
    session = _session(specs, running)
    nodes = session.snapshot.tree.nodes
    reads = counted_readings(monkeypatch)
    needed = frozenset({CPU})
    statement = session.statement
    first = cohort_reclaim._above(session, nodes["cb"], needed, statement.epoch(nodes["cb"]))
    assert [q.name for q in first] == ["b0"]
    statement.add_usage(session.snapshot.tree.leaves["a1"], {CPU: 2000})
    statement.commit()
    epoch = statement.epoch(nodes["cb"])
    assert [q.name for q in cohort_reclaim._above(session, nodes["ca"], needed, epoch)] == ["a0", "a1"]
    assert cohort_reclaim._above(session, nodes["cb"], needed, epoch) is first
    assert reads == ["b0", "b1", "a0", "a1"], "cb's children did not move: not read again"
    # A commit below cb reads the child it moved again.
    statement.add_usage(session.snapshot.tree.leaves["b1"], {CPU: 2000})
    statement.commit()
    again = cohort_reclaim._above(session, nodes["cb"], needed, statement.epoch(nodes["cb"]))
    assert [q.name for q in again] == ["b0", "b1"]
    assert reads == ["b0", "b1", "a0", "a1", "b1"]
