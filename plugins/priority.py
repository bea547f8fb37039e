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
LOWEST = "priority/lowest"  # per queue name, its admitted workloads' lowest priority (``session.state``)


def _order(workload: Workload) -> Sequence[object]:
    return (-workload.priority, workload.created)


_order.fixed_length = 2  # type: ignore[attr-defined]  # every key two items (hooks.workload_order)


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
    # Both ranges hold workloads of the preemptor's priority or lower: none when every
    # workload of the queue is above it (or, without the newer ones, at it or above). The
    # queue's lists are then neither read nor built.
    out = Offer()
    lowest = _lowest(session, leaf.name)
    if lowest is None or lowest > preemptor.priority or (lowest == preemptor.priority and policy == "LowerPriority"):
        return out
    units = queue_units(session, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    units.offer_between(out, None, preemptor.priority)
    if policy == "LowerOrNewerEqualPriority":
        units.offer_newer(out, preemptor.priority, preemptor.created)
    return out


def _lowest(session: Session, queue: str) -> int | None:
    """The lowest priority of the admitted workloads of ``queue`` (None: none), read once
    per session: the candidate index lists exactly these workloads, by priority, whatever
    the session takes (``queue_units``), and the snapshot does not change in a session."""
    found: dict[str, int | None] | None = session.state.get(LOWEST)
    if found is None:
        found = session.state[LOWEST] = {}
    if queue in found:
        return found[queue]
    listing = session.snapshot.admitted_by_queue.get(queue, ())
    lowest = found[queue] = min([workload.priority for workload in listing]) if listing else None
    return lowest
