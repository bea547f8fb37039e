"""``cohort-reclaim`` offers the candidates SEMANTICS §4 names, in its order, in deep trees.

At each ancestor of the preemptor's queue, from its parent up, the part of the subtree not
yet visited is walked child by child, depth first, skipping every queue or cohort within
its nominal on the needed flavor-resources; each queue's workloads come by priority, then
creation time. The plugin checks siblings inline and keeps the parts of sibling cohorts
for other preemptors of the tree; these tests hold its answer, in order and class by
class, to a walk written out from the rule, for many preemptors of one session (the
answers kept for one are read by the next).
"""

from __future__ import annotations

import random

import pytest
from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
)
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Session, VictimSearch
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
NOW = 1_000_000
CPU = ("default", "cpu")
Offer = tuple[str, str, int, bool]


def _reference(session: Session, preemptor: Workload, leaf: QuotaNode, request: int) -> list[Offer]:
    accounting = session.accounting
    policy = leaf.spec.preemption

    def within(node: QuotaNode) -> bool:
        return accounting.used(node, CPU) <= node.subtree.get(CPU, 0)

    def offers(node: QuotaNode, advantage: bool) -> list[Offer]:
        listed = session.snapshot.admitted_by_queue.get(node.name, ())
        out = []
        for running in sorted(listed, key=lambda w: (w.priority, w.created)):
            if policy.reclaim_within_cohort == "LowerPriority" and running.priority >= preemptor.priority:
                continue
            if advantage:
                out.append((running.name, IN_COHORT_RECLAIM, CLASS_HIERARCHICAL, False))
            elif (
                policy.borrow_within_cohort == "Never"
                or running.priority >= preemptor.priority
                or (policy.max_priority_threshold is not None and running.priority > policy.max_priority_threshold)
            ):
                out.append((running.name, IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True))
            else:
                out.append((running.name, IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False))
        return out

    def walk(node: QuotaNode, advantage: bool) -> list[Offer]:
        if within(node):
            return []
        if node.is_leaf:
            return offers(node, advantage)
        return [offer for child in node.children for offer in walk(child, advantage)]

    out: list[Offer] = []
    advantage = accounting.used(leaf, CPU) + request <= leaf.subtree.get(CPU, 0)
    child, ancestor = leaf, leaf.parent
    while ancestor is not None:
        for sibling in ancestor.children:
            if sibling is not child:
                out.extend(walk(sibling, advantage))
        if not advantage:
            # Fits the ancestor: its usage plus what the levels below cannot supply from
            # their own reserves (none here: no lending limits) is within its quota.
            advantage = accounting.used(ancestor, CPU) + request <= ancestor.subtree.get(CPU, 0)
        child, ancestor = ancestor, ancestor.parent
    return out


def _cluster(seed: int) -> tuple[Session, list[str]]:
    """Two organisations of cohorts of queues (some cohorts nested once more), each queue
    running 0–5 one-core workloads on a nominal of 1–4 cores: some queues and cohorts are
    within nominal, others above."""
    rng = random.Random(seed)
    policy = PreemptionPolicy(
        within_queue="LowerPriority",
        reclaim_within_cohort=rng.choice(["Any", "LowerPriority"]),
        borrow_within_cohort=rng.choice(["Never", "LowerPriority"]),
        max_priority_threshold=rng.choice([None, 3]),
    )
    specs = [cohort("root")]
    leaves: list[str] = []
    for org in range(2):
        specs.append(cohort(f"org{org}", "root"))
        for c in range(3):
            parent = f"c{org}{c}"
            specs.append(cohort(parent, f"org{org}"))
            if rng.random() < 0.4:
                specs.append(cohort(f"{parent}x", parent))
            for q in range(rng.randrange(1, 4)):
                under = f"{parent}x" if f"{parent}x" in {s.name for s in specs} and q % 2 else parent
                name = f"q{org}{c}{q}"
                specs.append(queue(name, under, cpu=rng.randrange(1, 5), preemption=policy))
                leaves.append(name)
    running = [
        workload(f"w{i}", rng.choice(leaves), 1, priority=rng.randrange(6), created=rng.randrange(4), admitted=True)
        for i in range(rng.randrange(20, 45))
    ]
    return open_session(inventory(specs, running), PLUGINS, NOW), leaves


@pytest.mark.parametrize("seed", range(25))
def test_cohort_reclaim_offers_the_walk_of_the_rule_in_its_order(seed: int) -> None:
    session, leaves = _cluster(seed)
    rng = random.Random(seed)
    tree = session.snapshot.tree
    for _ in range(30):
        leaf = tree.leaves[rng.choice(leaves)]
        request = rng.choice([1, 2, 40])
        preemptor = workload("preemptor", leaf.name, request, priority=rng.randrange(7), created=2)
        search = VictimSearch(preemptor, leaf, {CPU: request * 1000}, frozenset({CPU}))
        found = cohort_reclaim.preemption_candidates(session, preemptor, search)
        offered = [(c.workload.name, c.reason, c.group, c.only_within_nominal) for c in found]
        assert offered == _reference(session, preemptor, leaf, request * 1000), (leaf.name, preemptor.priority)
