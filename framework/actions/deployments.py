"""Nomination of workloads that grow in place: Deployments (SEMANTICS §6) and
elastic workloads below their count (§4 Growth, docs/elastic.md).

A Deployment's desired replica count is ``spec.podSets[].count``; the
committed count is its admission's. The difference is pending demand: it is
admitted in place (the committed count raised) by as many replicas as fit, at
least one; when not even one fits it is a preemptor for its missing replicas,
placed one replica at a time on the node whose victims are least intrusive,
stopping at the first replica for which no victims can be found. This phase
frees room only: the new replicas are admitted in a later session, once the
room is really free.

An admitted elastic workload (a podSet with ``minCount``) whose committed count is
below its ``count`` grows the same way by as many pods as fit, on the flavors it
runs on, but never preempts: when not even one pod fits it does not grow in this
session, and no decision names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..flavors import finish_assignment
from ..model import PodSet, Workload
from ..pods import NORMAL
from ..preemption.replicas import more_replicas, replica_victims
from ..quota import QuotaNode
from ..session import (
    CLASS_SAME_QUEUE,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    PodSetAssignment,
    Session,
    with_vetoes,
)
from ..snapshot import pod_set_usage

__all__ = ["blocked_reason", "growing_in", "growth_of", "nominate_deployment", "nominate_growth"]


def blocked_reason(session: Session, workload: Workload) -> str:
    """Why a Deployment may not grow in this session ("" if it may)."""
    if workload.admission is not None:
        leaving = sorted(pod.key for pod, cls in session.snapshot.pod_classes(workload) if cls != NORMAL)
        if leaving:
            return "it still has pods on their way out: " + ", ".join(leaving)
    if workload.key in session.taken:
        return "it lost replicas in this session"
    return ""


def nominate_deployment(session: Session, leaf: QuotaNode, workload: Workload, first: Assignment | None) -> Assignment:
    """``first``: the ordinary assignment of a Deployment not admitted yet (flavor scan
    included); ``None`` for one that grows within its admitted flavors."""
    blocked = blocked_reason(session, workload)
    if blocked:
        return Assignment(workload, leaf, mode=NOCANDIDATES, blocked=blocked)
    spec = workload.pod_sets[0]
    committed = workload.admission.pod_sets[0].count if workload.admission is not None else 0
    missing = spec.count - committed
    if first is not None:
        flavors = first.pod_sets[0].flavors if first.pod_sets else {}
        fallback = first
    else:
        assert workload.admission is not None
        flavors = dict(workload.admission.pod_sets[0].flavors)
        fallback = None
    if not flavors:
        assert fallback is not None
        return fallback
    # As many replicas as fit, at least one.
    low, high = 1, missing
    fitting = 0
    while low <= high:
        middle = (low + high) // 2
        if _fits_now(session, leaf, spec, flavors, middle):
            fitting = middle
            low = middle + 1
        else:
            high = middle - 1
    if fitting:
        best = _fixed(session, leaf, workload, flavors, fitting)
        best.committed_total = {spec.name: committed + fitting}
        best.tried = (fallback.tried if fallback is not None else []) + best.tried
        return best
    flavor = next(iter(set(flavors.values())))
    placements = session.placements
    if placements is not None and placements.has_nodes(flavor) and len(set(flavors.values())) == 1:
        return _preempt_replicas(session, leaf, workload, flavors, flavor, missing, fallback)
    if fallback is not None:
        return fallback
    return _fixed(session, leaf, workload, flavors, missing)


def growth_of(workload: Workload) -> tuple[PodSet, int] | None:
    """The elastic podSet of an admitted, not evicted workload and its committed count,
    when that count is below the podSet's ``count`` (it may grow back); else None."""
    admission = workload.admission
    if admission is None or workload.evicted or workload.is_deployment:
        return None
    for spec in workload.pod_sets:
        if spec.min_count is not None:
            for psa in admission.pod_sets:
                if psa.name == spec.name:
                    return (spec, psa.count) if psa.count < spec.count else None
            return None
    return None


_GROWING: dict[str, tuple[tuple[Workload, ...], list[Workload]]] = {}
"""Per queue name, the last admitted listing (a tuple) :func:`growing_in` read, and what
it found in it."""


def growing_in(name: str, admitted: Sequence[Workload]) -> list[Workload]:
    """The workloads of queue ``name``'s admitted listing that may grow back
    (:func:`growth_of`), in listing order; the list is not to be changed.

    Whether a workload may grow reads nothing but the workload, and workloads are
    immutable: so is a tuple of them. A backend that hands successive snapshots the same
    listing object while a queue's admitted workloads stay the same (the simulator) has
    it read once, not once per session; the listing is kept (so its identity names it)
    until the queue's next listing replaces it."""
    kept = _GROWING.get(name)
    if kept is not None and kept[0] is admitted:
        return kept[1]
    found = [workload for workload in admitted if growth_of(workload) is not None]
    if type(admitted) is tuple:
        _GROWING[name] = (admitted, found)
    return found


def nominate_growth(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment:
    """The most pods, up to its ``count``, that an admitted elastic workload can add on
    its admitted flavors with the quota (within its queue's nominal) and node room free
    now; ``NOFIT`` (with why in ``message``) when it may not grow or not even one pod
    fits. Never a victim search."""
    found = growth_of(workload)
    assert found is not None and workload.admission is not None
    spec, committed = found
    flavors = next(dict(psa.flavors) for psa in workload.admission.pod_sets if psa.name == spec.name)
    blocked = ""
    if workload.key in session.taken:
        blocked = "it lost pods in this session"
    else:
        total = sum(psa.count for psa in workload.admission.pod_sets)
        if len(session.snapshot.pods_by_workload.get(workload.key, ())) > total:
            blocked = "it still has pods on their way out"
    if blocked:
        return Assignment(workload, leaf, mode=NOFIT, message=f"does not grow while {blocked}")
    low, high = 1, spec.count - committed
    fitting = 0
    while low <= high:
        middle = (low + high) // 2
        if _grows_by(session, leaf, spec, flavors, middle):
            fitting = middle
            low = middle + 1
        else:
            high = middle - 1
    if not fitting:
        return Assignment(
            workload, leaf, mode=NOFIT,
            message=(
                f"does not grow: not one more pod of podSet {spec.name} fits the free quota within "
                f"queue {leaf.name}'s nominal and the free node room"
            ),
        )
    usage = pod_set_usage(spec, fitting, flavors)
    assignment = Assignment(workload, leaf, usage=dict(usage))
    assignment.pod_sets.append(PodSetAssignment(spec.name, fitting, flavors, usage, replace(spec, count=fitting)))
    assignment.level = session.accounting.level_of(leaf, usage)
    assignment.committed_total = {spec.name: committed + fitting}
    assignment.tried.append(f"grows podSet {spec.name} from {committed} to {committed + fitting} of {spec.count} pods")
    if committed + fitting < spec.count:
        stop = _growth_stop(session, leaf, spec, flavors, fitting + 1)
        assignment.tried.append(f"grows no further: one more pod would exceed {stop}")
    return assignment


def _grows_by(session: Session, leaf: QuotaNode, spec: PodSet, flavors: dict[str, str], count: int) -> bool:
    return not _growth_stop(session, leaf, spec, flavors, count)


def _growth_stop(session: Session, leaf: QuotaNode, spec: PodSet, flavors: dict[str, str], count: int) -> str:
    """"" when ``count`` more pods fit Available without borrowing (the queue stays
    within its nominal) and, for a podSet on one flavor with nodes, the nodes' free room
    (where admission will place them, :func:`.books.place`); else what they exceed."""
    accounting = session.accounting
    for (flavor, resource), amount in pod_set_usage(spec, count, flavors).items():
        fr = (flavor, resource)
        if accounting.used(leaf, fr) + amount > leaf.subtree.get(fr, 0):
            return f"queue {leaf.name}'s nominal quota of {resource} on flavor {flavor} (growth never borrows)"
        if amount > accounting.available(leaf, fr):
            return f"the free quota of {resource} on flavor {flavor} for queue {leaf.name}"
    on = set(flavors.values())
    if len(on) == 1:
        flavor = on.pop()
        if not session.pods_fit([(spec, count, flavor)]):
            return f"the free room on flavor {flavor}'s nodes"
    return ""


def _fits_now(session: Session, leaf: QuotaNode, spec: PodSet, flavors: dict[str, str], count: int) -> bool:
    """``count`` more replicas fit the quota and the nodes as they are, without victims."""
    accounting = session.accounting
    for fr, amount in pod_set_usage(spec, count, flavors).items():
        if amount > accounting.available(leaf, fr):
            return False
    return session.pods_fit([(spec, count, flavor) for flavor in set(flavors.values())][:1])


def _fixed(session: Session, leaf: QuotaNode, workload: Workload, flavors: dict[str, str], count: int) -> Assignment:
    spec = workload.pod_sets[0]
    assignment = Assignment(workload, leaf)
    assignment.pod_sets.append(
        PodSetAssignment(spec.name, count, dict(flavors), pod_set_usage(spec, count, flavors), replace(spec, count=count))
    )
    return finish_assignment(session, assignment)


def _preempt_replicas(
    session: Session,
    leaf: QuotaNode,
    workload: Workload,
    flavors: dict[str, str],
    flavor: str,
    missing: int,
    fallback: Assignment | None,
) -> Assignment:
    spec = workload.pod_sets[0]
    assignment = Assignment(workload, leaf, mode=NOCANDIDATES)
    if fallback is not None:
        assignment.tried.extend(fallback.tried)
    earlier = fallback.search if fallback is not None else None
    if earlier is not None and earlier.resume is not None and earlier.replicas:
        # The flavor was chosen by placing the first replica: go on from there.
        assignment.replicas = more_replicas(earlier.resume, list(earlier.replicas), missing)
        assignment.vetoed_by = earlier.vetoed_by
    else:
        assignment.replicas, assignment.vetoed_by, _ = replica_victims(session, workload, leaf, spec, flavor, missing)
    vetoed = assignment.vetoed_by
    if not assignment.replicas:
        assignment.message = with_vetoes("no node has victims that free room for one replica", vetoed)
        return assignment
    count = len(assignment.replicas)
    assignment.pod_sets.append(
        PodSetAssignment(spec.name, count, dict(flavors), pod_set_usage(spec, count, flavors), replace(spec, count=count))
    )
    assignment.usage = pod_set_usage(spec, count, flavors)
    assignment.victims = [v for choice in assignment.replicas for v in choice.victims]
    assignment.mode = PREEMPT if any(v.group == CLASS_SAME_QUEUE for v in assignment.victims) else RECLAIM
    for choice in assignment.replicas:
        names = ", ".join(f"{v.name} ({v.reason})" for v in choice.victims)
        assignment.tried.append(f"replica on node {choice.node}: victims {names}")
    return assignment
