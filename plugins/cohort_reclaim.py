"""Plugin ``cohort-reclaim``: victims in other queues of the cohort tree (SEMANTICS §4).

Walks the preemptor's ancestors from its parent up. At each ancestor it looks
at the part of the subtree not yet visited, skipping every queue or cohort
that is within its nominal on all the needed flavor-resources (a lender is
never a victim while it only uses what it lends to nobody), and offers the
workloads that ``reclaimWithinCohort`` allows, each classed:

* hierarchical reclaim — the preemptor already has the *advantage* at this
  level (it is within its own nominal, or fits an ancestor below);
* reclaim without borrowing — ``borrowWithinCohort`` is ``Never``, or the
  candidate is not below the preemptor's priority, or above
  ``maxPriorityThreshold``: usable only in an attempt that ends within nominal;
* reclaim while borrowing — the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    FR,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    Accounting,
    Candidate,
    PreemptionPolicy,
    QuotaNode,
    Session,
    VictimSearch,
    Workload,
    candidate_units,
    hookimpl,
)

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)


def _fits_at(accounting: Accounting, leaf: QuotaNode, ancestor: QuotaNode, usage: Mapping[FR, int]) -> bool:
    """usage(A) + remaining <= subtree(A) on every requested fr, where remaining is the
    request less what the levels below A can still supply from their local reserves."""
    for fr, request in usage.items():
        amount = request
        node: QuotaNode | None = leaf
        while node is not None and node is not ancestor:
            amount -= max(0, node.guaranteed.get(fr, 0) - accounting.used(node, fr))
            node = node.parent
        if accounting.used(ancestor, fr) + max(0, amount) > ancestor.subtree.get(fr, 0):
            return False
    return True


def _within_nominal(accounting: Accounting, node: QuotaNode, needed: frozenset[FR]) -> bool:
    return all(accounting.used(node, fr) <= node.subtree.get(fr, 0) for fr in needed)


@hookimpl
def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[Candidate]:
    if not session.cross_queue_enabled:
        return []
    leaf = assignment.leaf
    policy = leaf.spec.preemption
    if policy.reclaim_within_cohort == "Never" or leaf.parent is None:
        return []
    accounting = session.accounting
    needed = assignment.needed
    usage = assignment.usage
    advantage = all(
        accounting.used(leaf, fr) + amount <= leaf.subtree.get(fr, 0) for fr, amount in usage.items()
    )
    out: list[Candidate] = []
    child = leaf
    ancestor: QuotaNode | None = leaf.parent
    while ancestor is not None:
        for sibling in ancestor.children:
            if sibling is not child:
                _collect(session, preemptor, policy, sibling, needed, advantage, out)
        if not advantage and _fits_at(accounting, leaf, ancestor, usage):
            advantage = True
        child = ancestor
        ancestor = ancestor.parent
    return out


def _collect(
    session: Session,
    preemptor: Workload,
    policy: PreemptionPolicy,
    node: QuotaNode,
    needed: frozenset[FR],
    advantage: bool,
    out: list[Candidate],
) -> None:
    if _within_nominal(session.accounting, node, needed):
        return
    if not node.is_leaf:
        for child in node.children:
            _collect(session, preemptor, policy, child, needed, advantage, out)
        return
    for running in session.snapshot.admitted_by_queue.get(node.name, ()):
        if policy.reclaim_within_cohort == "LowerPriority" and running.priority >= preemptor.priority:
            continue
        if advantage:
            reason, group, only_within = IN_COHORT_RECLAIM, CLASS_HIERARCHICAL, False
        elif (
            policy.borrow_within_cohort == "Never"
            or running.priority >= preemptor.priority
            or (policy.max_priority_threshold is not None and running.priority > policy.max_priority_threshold)
        ):
            reason, group, only_within = IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True
        else:
            reason, group, only_within = IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False
        out.extend(
            candidate_units(session, running, node, reason=reason, group=group, only_within_nominal=only_within)
        )
