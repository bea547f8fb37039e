"""Victims for a Deployment's missing replicas, one replica at a time (SEMANTICS §6).

The candidates are collected once (a running Deployment's pods deferred, see
:class:`~preemptd.framework.session.DeferredPods`); :class:`.nodechoice.ReplicaSearch`
then places replica after replica on the least intrusive node, stopping at the
first replica for which no node has victims.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import PodSet, Workload
from ..quota import QuotaNode
from ..session import (
    Candidate,
    NodeChoice,
    ScenarioFilters,
    Session,
    VictimSearch,
    collect_candidates,
    order_for,
)
from ..snapshot import pod_set_usage
from .nodechoice import ReplicaSearch

__all__ = ["more_replicas", "replica_victims"]


def replica_victims(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    spec: PodSet,
    flavor: str,
    replicas: int,
    *,
    defer_pods: bool = True,
) -> tuple[list[NodeChoice], frozenset[str], ReplicaSearch | None]:
    """Node and victims for up to ``replicas`` replicas, one at a time (SEMANTICS §6);
    stops at the first replica for which no node has victims. ``defer_pods=False``
    builds every Deployment pod's unit up front (the same choice, only slower)."""
    flavors = {r: flavor for r in spec.requests}
    per_replica = pod_set_usage(spec, 1, flavors)
    request = VictimSearch(preemptor, leaf, dict(per_replica), frozenset(per_replica))
    candidates = collect_candidates(session, preemptor, request, with_room=True, defer_pods=defer_pods)
    if not candidates:
        return [], frozenset(), None
    vetoed: set[str] = set()
    verdicts: dict[int, bool] = {}

    def preemptible(candidate: Candidate) -> bool:
        found = verdicts.get(id(candidate))
        if found is None:
            action = "preempt" if candidate.leaf is leaf else "reclaim"
            plugin = session.is_preemptible(action, preemptor, candidate)
            if plugin is not None:
                vetoed.add(plugin)
            found = verdicts[id(candidate)] = plugin is None
        return found

    filters = session.scenario_filters(preemptor)
    search = ReplicaSearch(
        session, preemptor, leaf, spec, flavor, per_replica, candidates, order_for(session, preemptor),
        preemptible, scenario_accepts(session, preemptor, filters),
    )
    choices = more_replicas(search, [], replicas)
    return choices, frozenset(vetoed), search


def scenario_accepts(
    session: Session, preemptor: Workload, filters: ScenarioFilters
) -> Callable[[list[Candidate]], bool]:
    """One callable over the accumulated victims that every scenario filter must accept."""

    def accept(victims: list[Candidate]) -> bool:
        if not filters:
            return True
        return session.scenario_rejects(preemptor, filters, list(victims)) is None

    return accept


def more_replicas(search: ReplicaSearch, choices: list[NodeChoice], replicas: int) -> list[NodeChoice]:
    """Go on placing replicas until ``replicas`` are placed or one finds no victims."""
    per_replica = search.per_replica
    while len(choices) < replicas:
        # The quota of the replicas placed so far counts for the next one.
        search.usage = {fr: amount * (len(choices) + 1) for fr, amount in per_replica.items()}
        choice = search.next_replica()
        if choice is None:
            break
        choices.append(choice)
    return choices
