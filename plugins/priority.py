"""Plugin ``priority``: workload order and in-queue preemption candidates.

* Order inside a queue, and among heads of equal borrowing level: higher
  priority first, then older ``creationTimestamp`` (SEMANTICS §2).
* ``withinQueue`` (SEMANTICS §4): ``LowerPriority`` offers strictly lower
  priority workloads of the preemptor's own queue; ``LowerOrNewerEqualPriority``
  adds equal-priority workloads created after the preemptor.
"""

from __future__ import annotations

from collections.abc import Sequence

from preemptd.framework import (
    CLASS_SAME_QUEUE,
    IN_QUEUE,
    Candidate,
    Offer,
    Session,
    VictimSearch,
    Workload,
    hookimpl,
    queue_units,
)

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)


def _order(workload: Workload) -> Sequence[object]:
    return (-workload.priority, workload.created)


@hookimpl
def workload_order(session: Session) -> object:
    return _order


@hookimpl
def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[Candidate]:
    if not session.in_queue_enabled:
        return []
    leaf = assignment.leaf
    policy = leaf.spec.preemption.within_queue
    if policy == "Never":
        return []
    # The queue's units by priority (the candidate index): strictly lower priority, and
    # for LowerOrNewerEqualPriority equal priority created after the preemptor. The
    # preemptor itself (an admitted workload growing) is in neither range.
    # The answer keeps the ranges it is made of (an Offer): the framework filters and
    # sums them per range.
    units = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    out = Offer()
    units.offer_between(out, None, preemptor.priority)
    if policy == "LowerOrNewerEqualPriority":
        units.offer_newer(out, preemptor.priority, preemptor.created)
    return out
