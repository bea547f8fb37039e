"""find_victims: the victim search for one preemptor (SEMANTICS §4, §6).

A Deployment whose one missing replica lacks node room frees it node by node
(:mod:`.replicas`); every other preemptor takes whole-workload and elastic units
until its request fits (:mod:`.search`). A search already run in the same state
is answered from the session's memo (:mod:`.memo`), and so is one a failed search
of the same state dominates. The time spent here is reported under
the name of the preemption action.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import SearchResult, Session, with_vetoes
from .memo import dominated, memo_key, recall, remember, remember_failure, snapshot_counts, tally
from .replicas import replica_victims
from .search import find_minimal

__all__ = ["find_victims"]


def find_victims(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]] = (),
) -> SearchResult:
    """The minimal set of victims that lets ``usage`` fit in ``leaf`` (and its pods fit
    the nodes), or an empty result. The accounting is left exactly as it was."""
    if not (session.in_queue_enabled or session.cross_queue_enabled):
        return SearchResult(message="preemption is not enabled")
    started = time.perf_counter()
    tally(session).asked += 1
    try:
        key = memo_key(session, preemptor, leaf, usage, needed, targets)
        if key is not None:
            found = recall(session, key)
            if found is not None:
                found.memo_key = key
                return found
            before = snapshot_counts(session, preemptor)
            found = dominated(session, preemptor, leaf, usage, needed, targets)
            if found is not None:
                if remember(session, key, found, before):
                    found.memo_key = key
                    tally(session).keys.add(key)
                return found
        session.counters.searches += 1
        if preemptor.is_deployment and len(targets) == 1:
            # A Deployment whose replica lacks node room frees it node by node (§6).
            result = _replicas(session, preemptor, leaf, targets[0])
        else:
            result = find_minimal(session, preemptor, leaf, usage, needed, targets)
        if key is not None:
            if remember(session, key, result, before):
                result.memo_key = key
            remember_failure(session, preemptor, leaf, usage, needed, targets, result, before)
        return result
    finally:
        name = "preempt" if "preempt" in session.actions else "reclaim"
        session.timings[name] = session.timings.get(name, 0.0) + time.perf_counter() - started


def _replicas(session: Session, preemptor: Workload, leaf: QuotaNode, target: tuple[PodSet, int, str]) -> SearchResult:
    spec, count, flavor = target
    choices, vetoed, search = replica_victims(session, preemptor, leaf, spec, flavor, count)
    if len(choices) < count:
        message = with_vetoes("no node has victims that free room for a replica", vetoed)
        return SearchResult(vetoed_by=vetoed, message=message)
    victims = [v for choice in choices for v in choice.victims]
    lines = [f"replica on node {c.node}: victims " + ", ".join(v.name for v in c.victims) for c in choices]
    return SearchResult(victims, True, 0, vetoed, lines=lines, replicas=choices, resume=search)
