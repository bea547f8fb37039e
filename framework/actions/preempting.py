"""A preemptor's victims chosen for the session (SEMANTICS §2.4, §6), as the rounds
(:mod:`.allocate`) process an entry with victims that still fits: each victim evicted
from the view without the session's victims (:class:`~.books.Books`), taken from its
workload, listed once per victim workload in ``decisions.preempted`` and explained."""

from __future__ import annotations

from dataclasses import replace

from ..decisions import Pending, PodAction
from ..model import Workload
from ..objects.records import new_pending, new_preempted
from ..pods import NORMAL, TERMINATING
from ..session import Assignment, Candidate, Session, Taken
from .books import Books

__all__ = ["preempt"]


def preempt(
    session: Session, books: Books, preempted_at: dict[str, int], workload: Workload, assignment: Assignment
) -> Pending:
    """Choose ``assignment``'s victims for ``workload``: evicted from ``books``' view (unless
    its re-check kept them evicted), taken, listed in ``decisions.preempted`` (one entry
    per victim workload, ``preempted_at`` its place) and explained; the preemptor's pending
    entry (``PendingPreemption``, waiting for its victims) is returned."""
    chosen = books.victims
    relied = session.relied
    new: dict[str, list[Candidate]] = {}
    evicted, with_room = books.evicted, books.with_room  # by still_fits, when it kept them
    books.evicted = False
    for victim in assignment.victims:
        unit = victim.unit
        if unit in chosen:
            continue
        chosen[unit] = victim
        relied[unit] = victim
        if not evicted:
            books.evict(victim)
        elif not with_room:
            books.give_room(victim)
        if victim.pod_class != NORMAL:
            # A Deployment's pod already on its way out: its room goes to this
            # preemptor; a terminating one is force-deleted, the others need nothing.
            pod = victim.pods[0]
            taken = session.taken.setdefault(victim.key, Taken(preemptor=workload.key, reason=victim.reason))
            taken.pod_names.append(pod.key)
            session.unit_cache.pop(victim.key, None)
            if victim.pod_class == TERMINATING:
                session.decisions.pod_actions.append(PodAction(pod.key, "ForceDelete", workload.key))
            continue
        if not victim.evicted:
            units = new.get(victim.key)
            if units is None:
                new[victim.key] = [victim]
            else:
                units.append(victim)
    entries = preempted_at
    preemptor = workload.key
    all_taken = session.taken
    unit_cache = session.unit_cache
    preempted = session.decisions.preempted
    explanations = session.decisions.explanations if session.explaining else None
    for victim_key, units in sorted(new.items()):
        first = units[0]
        whole = first.count is None if len(units) == 1 else any(u.count is None for u in units)
        found = all_taken.get(victim_key)
        if found is None:
            found = all_taken[victim_key] = Taken(preemptor=preemptor, reason=first.reason)
        taken = found
        unit_cache.pop(victim_key, None)
        pods: list[str] = []
        count: int | None = None
        if whole:
            taken.whole = True
        else:
            count = sum(u.count or 0 for u in units)
            taken.pods += count
            pods = [p.key for u in units for p in u.pods]
            taken.pod_names.extend(pods)
            taken.scaled.extend(pods)
            taken.pod_set = first.pod_set
        # One entry per victim workload: what the whole session takes from it,
        # named after the first preemptor that took from it (SEMANTICS §6).
        index = entries.get(victim_key)
        if index is None:
            entries[victim_key] = len(preempted)
            preempted.append(
                new_preempted(victim_key, preemptor, first.reason, count, tuple(sorted(pods)) if pods else (), first.pod_set)
            )
        else:
            before = preempted[index]
            total = None if taken.whole else taken.pods
            preempted[index] = replace(
                before, count=total, pods=tuple(sorted(taken.scaled)) if total is not None else ()
            )
        if explanations is not None:  # session.explain
            taken_what = "the whole workload" if whole else f"{count} pod(s)"
            line = (
                f"chosen as a victim of {preemptor} ({first.reason}): {taken_what} from queue "
                f"{first.leaf.name}, priority {first.priority}"
            )
            lines = explanations.get(victim_key)
            if lines is None:
                explanations[victim_key] = [line]
            else:
                lines.append(line)
    # A Deployment's pods, and the surplus pods of a shrinking elastic workload, are
    # named one by one (SEMANTICS §4, §6).
    waiting = tuple(
        sorted(
            {
                f"pod:{v.name}" if v.pods and (v.workload.is_deployment or v.pod_class != NORMAL) else v.key
                for v in assignment.victims
            }
        )
    )
    return new_pending(
        workload.key,
        "PendingPreemption",
        f"preempting {', '.join(waiting)}; admitted once they have released their quota",
        waiting,
    )
