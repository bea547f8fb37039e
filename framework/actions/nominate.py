"""The nomination of one head (SEMANTICS §2.2): its flavors and, if it needs them, victims.

A head is judged by a kept head of its queue when one decides it (``preemption/heads.py``);
a Deployment is nominated for one replica and grows replica by replica, an admitted elastic
workload for what it may grow by (:mod:`.deployments`); any other head gets its flavor
assignment, from a plugin's ``assign_flavors`` or the framework's own, and is kept to judge
later heads when it may. An elastic workload that fits neither way is tried with fewer pods
(partial admission, a binary search over its count).
"""

from __future__ import annotations

from dataclasses import replace

from ..flavors import default_assign
from ..model import Workload
from ..preemption.heads import head_counts, judged_head, keep_head
from ..quota import QuotaNode
from ..session import FIT, PREEMPT, RECLAIM, Assignment, Session
from .deployments import nominate_deployment, nominate_growth

__all__ = ["nominate"]


def nominate(session: Session, leaf: QuotaNode, workload: Workload, *, judged: bool = True) -> Assignment:
    """Flavors (and victims, if needed) for ``workload`` against the current accounting;
    an elastic workload that fits neither way is tried with fewer pods (partial admission).
    ``judged=False``: the caller found no kept head that judges it (``heads.judge``)."""
    session.counters.nominations += 1
    if workload.is_deployment:
        first = None
        if workload.admission is None:
            # The flavor is chosen for one replica: a Deployment is admitted by as many
            # replicas as fit, at least one, and preempts replica by replica.
            one = replace(workload, pod_sets=(replace(workload.pod_sets[0], count=1), *workload.pod_sets[1:]))
            first = _assign(session, leaf, one)
            first.workload = workload
        return nominate_deployment(session, leaf, workload, first)
    if workload.admission is not None:  # verdicts.grows
        return nominate_growth(session, leaf, workload)
    found = judged_head(session, leaf, workload) if judged else None
    if found is not None:
        return found
    before = head_counts(session, workload, leaf)
    assignment = _assign(session, leaf, workload)
    if assignment.mode in (FIT, PREEMPT, RECLAIM):
        return assignment
    keep_head(session, leaf, workload, assignment, before)
    for pod_set in workload.pod_sets:  # ``workload.is_elastic``, without a generator
        if pod_set.min_count is not None:
            break
    else:
        return assignment
    elastic = next(ps for ps in workload.pod_sets if ps.min_count is not None)
    assert elastic.min_count is not None
    low, high = elastic.min_count, elastic.count - 1
    best: Assignment | None = None
    while low <= high:
        middle = (low + high) // 2
        smaller = replace(
            workload,
            pod_sets=tuple(replace(ps, count=middle) if ps is elastic else ps for ps in workload.pod_sets),
        )
        attempt = _assign(session, leaf, smaller)
        if attempt.mode in (FIT, PREEMPT, RECLAIM):
            best = attempt
            low = middle + 1
        else:
            high = middle - 1
    if best is None:
        return assignment
    best.workload = workload
    return best


def _assign(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment:
    found = session.plugin_assignment(workload)
    if found is not None:
        return found
    return default_assign(session, workload, leaf)
