"""Per node set: a search's candidates by node, their bounds and room sums.

Shared by the replicas of one preemptor and, when the victim order does not
depend on the preemptor, by every preemptor that sees the same candidates on
the same nodes (see :class:`.nodechoice.ReplicaSearch`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

from ..model import Pod
from ..session import Candidate, DeferredPods, Session
from ..snapshot import DeploymentPods
from .units import pod_unit

__all__ = ["NodeIndex"]


class NodeIndex:
    """A search's candidates by node, sorted by victim key, with what bounds them.

    Units that plugins handed over built (whole Jobs, elastic pods, ...) are placed on
    their nodes at once. A Deployment offered as :class:`DeferredPods` is built only
    when the search first looks at a node holding one of its pods; until then the
    snapshot's :class:`DeploymentPods` bounds the node.
    """

    __slots__ = (
        "by_node",
        "deferred",
        "eager",
        "first",
        "keys",
        "lows",
        "order",
        "pods",
        "positions",
        "session",
        "sums",
        "units",
    )

    def __init__(
        self,
        session: Session,
        candidates: Sequence[Candidate],
        members: frozenset[str],
        order: Callable[[Candidate], tuple[Any, ...]],
    ) -> None:
        self.session = session
        self.order = order
        eager: dict[str, list[Candidate]] = {}
        keys: dict[int, tuple[Any, ...]] = {}
        # Where each unit came in the plugins' lists: it breaks ties between equal keys.
        positions: dict[int, tuple[int, int]] = {}
        deferred: dict[str, tuple[int, DeferredPods]] = {}
        for position, candidate in enumerate(candidates):
            if isinstance(candidate, DeferredPods):
                if candidate.key not in deferred:
                    deferred[candidate.key] = (position, candidate)
                continue
            placed = False
            for held in candidate.room:
                node = held.node_name
                if node not in members:
                    continue
                victims = eager.get(node)
                if victims is None:
                    victims = eager[node] = []
                if not victims or victims[-1] is not candidate:
                    victims.append(candidate)
                placed = True
            if placed:
                keys[id(candidate)] = order(candidate)
                positions[id(candidate)] = (position, 0)
        self.eager = eager
        self.deferred = deferred
        self.keys = keys
        self.positions = positions
        self.pods: DeploymentPods | None = session.snapshot.deployment_pods() if deferred else None
        self.units: dict[int, Candidate | None] = {}  # id(pod) -> its unit (None: taken)
        self.by_node: dict[str, list[Candidate]] = {}  # built nodes, sorted by victim key
        self.lows: dict[str, tuple[list[Any], list[Any]]] = {}
        self.sums: dict[tuple[str, str], list[int]] = {}
        self.first = self._first_bounds(members)

    def _first_bounds(self, members: frozenset[str]) -> list[tuple[tuple[Any, ...], str, int]]:
        """For every node, a bound of a one-victim set: the least (class, priority)
        there, with the least key among the built units (an empty key, below every
        key, where Deployment pods may be among the candidates)."""
        keys = self.keys
        eager = self.eager
        out: list[tuple[tuple[Any, ...], str, int]] = []
        static = self.pods.by_node if self.pods is not None else {}
        if self.pods is not None:
            out = self.pods.first_bounds(members)
            if eager:
                out = [entry for entry in out if entry[1] not in eager]
        for node, victims in eager.items():
            bound: tuple[Any, ...] = (
                min((c.pod_class, c.priority) for c in victims),
                1,
                min(keys[id(c)][2:] for c in victims),
                node,
            )
            pods_here = static.get(node)
            if pods_here and ((pods_here[0][0], pods_here[0][1]), 1, (), node) < bound:
                bound = ((pods_here[0][0], pods_here[0][1]), 1, (), node)
            out.append((bound, node, 0))
        heapq.heapify(out)
        return out

    def candidates_on(self, node: str) -> list[Candidate]:
        """The node's candidates in victim order, built the first time they are asked for."""
        found = self.by_node.get(node)
        if found is not None:
            return found
        victims = list(self.eager.get(node, ()))
        pods = self.pods
        if pods is not None:
            deferred = self.deferred
            for pod_class, _, pod, index, _ in pods.by_node.get(node, ()):
                offered = deferred.get(pod.workload) if pod.workload is not None else None
                if offered is not None:
                    unit = self._unit(offered, pod, pod_class, index)
                    if unit is not None:  # None: an earlier preemptor of this session took it
                        victims.append(unit)
        keys = self.keys
        positions = self.positions
        if len(victims) > 1:
            victims.sort(key=lambda c: (keys[id(c)], positions[id(c)]))
        self.by_node[node] = victims
        return victims

    def _unit(self, offered: tuple[int, DeferredPods], pod: Pod, pod_class: int, index: int) -> Candidate | None:
        """The unit of one pod of an offered Deployment, with its victim key (built once)."""
        units = self.units
        if id(pod) in units:
            return units[id(pod)]
        unit = units[id(pod)] = pod_unit(self.session, offered[1], pod, pod_class, index)
        if unit is not None:
            self.keys[id(unit)] = self.order(unit)
            self.positions[id(unit)] = (offered[0], index)
        return unit

    def least_single(self, node: str, pair: tuple[int, int]) -> tuple[Any, ...] | None:
        """The least victim key (past its first two parts) among the units of offered
        Deployment pods on ``node`` whose (class, priority) is ``pair``: with ``pair``
        the least there, ``(pair, 1, that key, node)`` bounds every one-victim set on
        the node, and only those pods' units are built for it."""
        pods = self.pods
        assert pods is not None
        deferred = self.deferred
        keys = self.keys
        least: tuple[Any, ...] | None = None
        for pod_class, priority, pod, index, _ in pods.by_node.get(node, ()):
            if pod_class != pair[0] or priority != pair[1]:
                continue
            offered = deferred.get(pod.workload) if pod.workload is not None else None
            if offered is None:
                continue
            unit = self._unit(offered, pod, pod_class, index)
            if unit is not None:
                tail = keys[id(unit)][2:]
                if least is None or tail < least:
                    least = tail
        return least

    def lows_of(self, node: str) -> tuple[list[Any], list[Any]]:
        """The node's candidates' (class, priority) pairs and victim keys, each sorted."""
        found = self.lows.get(node)
        if found is None:
            victims = self.candidates_on(node)
            keys = self.keys
            pairs = sorted((c.pod_class, c.priority) for c in victims)
            ranks = sorted(keys[id(c)][2:] for c in victims)
            found = self.lows[node] = (pairs, ranks)
        return found

    def room_sums(self, node: str, resource: str) -> list[int]:
        """Running totals of the room the node's candidates free, largest first."""
        found = self.sums.get((node, resource))
        if found is None:
            rooms = sorted(
                (
                    sum(held.requests.get(resource, 0) for held in c.room if held.node_name == node)
                    for c in self.candidates_on(node)
                ),
                reverse=True,
            )
            found = self.sums[(node, resource)] = list(accumulate(rooms))
        return found
