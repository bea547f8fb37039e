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
    Session,
    VictimSearch,
    Workload,
    candidate_units,
    hookimpl,
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
    out: list[Candidate] = []
    for running in session.snapshot.admitted_by_queue.get(leaf.name, ()):
        if running.key == preemptor.key:
            continue
        if running.priority < preemptor.priority or (
            policy == "LowerOrNewerEqualPriority"
            and running.priority == preemptor.priority
            and running.created > preemptor.created
        ):
            out.extend(candidate_units(session, running, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE))
    return out
