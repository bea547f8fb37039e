"""Victims for one replica, node by node (SEMANTICS §6, "Node choice").

For each node of the flavor, the node's eligible victims are taken in victim
order until the replica fits there (and its quota fits), then filled back;
among the nodes whose set works, the least intrusive wins: the worst needed
victim's (class, priority), then fewer victims, then the rest of the worst
victim's key, then the node name.

Node room is read from the session's physical view: victims chosen earlier in
the session still occupy their nodes and are no longer candidates, so the room
they free belongs to the preemptor they were chosen for, and what a victim
frees beyond one replica's needs stays unusable for the rest of the session.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..model import FR, PodSet, Workload
from ..nodes import node_matches, pod_terms
from ..quota import QuotaNode, lender_may_give
from ..session import CLASS_SAME_QUEUE, Candidate, NodeChoice, Session
from ..snapshot import fewest_to_cover
from .nodeindex import NodeIndex

__all__ = ["ReplicaSearch"]


class ReplicaSearch:
    """Places the missing replicas of one preemptor, one at a time."""

    __slots__ = (
        "accept",
        "chosen",
        "index",
        "leaf",
        "nodes",
        "order",
        "per_replica",
        "preemptible",
        "preemptor",
        "requests",
        "session",
        "usage",
        "used",
    )

    def __init__(
        self,
        session: Session,
        preemptor: Workload,
        leaf: QuotaNode,
        spec: PodSet,
        flavor: str,
        usage: Mapping[FR, int],
        candidates: Sequence[Candidate],
        order: Callable[[Candidate], tuple[Any, ...]],
        preemptible: Callable[[Candidate], bool],
        accept: Callable[[list[Candidate]], bool],
    ) -> None:
        self.session = session
        self.preemptor = preemptor
        self.leaf = leaf
        self.requests = {r: a for r, a in spec.requests.items() if a > 0}
        self.usage = usage
        self.per_replica = dict(usage)
        self.order = order
        self.preemptible = preemptible
        self.accept = accept
        self.chosen: list[Candidate] = []  # victims of the earlier replicas
        pool = session.snapshot.node_pool
        flavor_record = session.snapshot.flavors[flavor]
        selector, tolerations = pod_terms(flavor_record, spec)
        self.nodes = [
            name for name in pool.by_flavor.get(flavor, ()) if node_matches(pool.nodes[name], selector, tolerations)
        ]
        members = frozenset(self.nodes)
        index: NodeIndex | None = None
        cache: dict[Any, tuple[tuple[int, ...], NodeIndex, Sequence[Candidate]]] | None = None
        where: Any = None
        ids = tuple(map(id, candidates))
        if getattr(order, "preemptor_independent", False):
            # Preemptors that see the same candidates on the same nodes share the index,
            # and with it the units it built on the nodes earlier searches looked at.
            # Once a preemptor takes victims, the candidates change for good: only the
            # latest index of a node set is kept (with its candidates, so that no id in
            # the signature can be reused by another object while it is kept).
            cache = session.state.setdefault("_node_index", {})
            where = (flavor, members)
            found = cache.get(where)
            if found is not None and found[0] == ids:
                index = found[1]
        if index is None:
            index = NodeIndex(session, candidates, members, order)
            if cache is not None:
                cache[where] = (ids, index, candidates)
        self.index = index
        self.used: dict[str, dict[str, int]] = {}  # free room taken by earlier replicas

    def _shortage(self, node: str) -> dict[str, int]:
        """What the replica lacks on the node beyond its free room (and the room earlier
        replicas of this preemptor took there)."""
        placements = self.session.placements
        assert placements is not None
        free = placements.free[node]
        used = self.used.get(node)
        short: dict[str, int] = {}
        for resource, amount in self.requests.items():
            lacking = amount - free.get(resource, 0) + (used.get(resource, 0) if used else 0)
            if lacking > 0:
                short[resource] = lacking
        return short

    def _static_bound(self, node: str, quota_ok: bool, *, single: bool = True) -> tuple[Any, ...] | None:
        """A bound from the node's Deployment pods before any unit is built: every
        preemptor's candidates there are some of them, so the fewest of them that
        free the shortage, and the k-th least (class, priority) among them, bound the
        node's rank from below. ``None``: not even all of them make the replica fit.
        With ``single``, a one-victim bound also reads the key of the node's least pods."""
        pods = self.index.pods
        assert pods is not None
        placements = self.session.placements
        assert placements is not None
        free = placements.free[node]
        used = self.used.get(node)
        k = 0 if quota_ok else 1
        # _shortage without building its map: this runs for nearly every node.
        for resource, amount in self.requests.items():
            short = amount - free.get(resource, 0) + (used.get(resource, 0) if used else 0)
            if short > 0:
                fewest = pods.fewest(node, resource, short)
                if not fewest:
                    return None
                if fewest > k:
                    k = fewest
        if k <= 0 or k > len(pods.by_node[node]):
            return None
        pair = pods.pair(node, k)
        if k == 1 and single:
            least = self.index.least_single(node, pair)
            return (pair, 1, least if least is not None else (), node)
        return (pair, k, (), node)

    def _bound(self, node: str, quota_ok: bool) -> tuple[Any, ...] | None:
        """The same bound over the node's own candidates (built here): k from its
        shortage and its candidates' largest rooms; the worst of any k victims is no
        better than the k-th best (class, priority) and key there. ``None``: the node
        can never fit."""
        index = self.index
        victims = index.candidates_on(node)
        k = 0 if quota_ok else 1
        for resource, short in self._shortage(node).items():
            fewest = fewest_to_cover(index.room_sums(node, resource), short)
            if not fewest:
                return None
            k = max(k, fewest)
        if k <= 0 or k > len(victims):
            return None
        pairs, ranks = index.lows_of(node)
        return (pairs[k - 1], k, ranks[k - 1], node)

    def next_replica(self) -> NodeChoice | None:
        """The least intrusive node and victims for one more replica, or ``None``.

        Nodes come off a heap by a lower bound of their rank, sharpened in steps as a
        node comes up: first the least (class, priority) there; then the bound for the
        number of victims the node needs at least, from its Deployment pods alone; then
        the same from the node's own candidates, which are built only now. The walk
        stops once the bound passes the best rank found, so a replica builds the units
        of a handful of nodes, not of every pod.
        """
        statement = self.session.statement
        mark = statement.checkpoint()
        try:
            # The victims earlier preemptors of this session rely on are not candidates
            # here, and their quota is spoken for: the earlier preemptors' usage is
            # already added. Counting it as still used would make this preemptor free
            # the same quota a second time.
            for victim in self.session.relied.values():
                statement.evict(victim, nodes=False)
            return self._next_replica()
        finally:
            statement.rollback(mark)

    def _next_replica(self) -> NodeChoice | None:
        placements = self.session.placements
        assert placements is not None
        index = self.index
        best: tuple[Any, ...] | None = None
        choice: NodeChoice | None = None
        taken = {id(c) for c in self.chosen}
        quota_ok = self._quota_fits([])
        keys = index.keys
        built = index.by_node
        eager = index.eager
        heap = list(index.first)
        # Once a quarter of the nodes needed several victims each (a multi-GPU replica
        # in a full cluster), most of the rest will too: they are sharpened all at once,
        # which saves each of them a round trip through the heap.
        sharpen_all_after = max(64, len(heap) // 4)
        sharpened = 0
        while heap:
            bound, node, stage = heapq.heappop(heap)
            if best is not None and bound >= best:
                break
            if stage == 0 and node not in built and node not in eager:
                sharper = self._static_bound(node, quota_ok)
                if sharper is None:
                    continue
                if sharper[1] > 1:
                    sharpened += 1
                    if sharpened == sharpen_all_after:
                        heap.append((sharper, node, 1))
                        heap = self._sharpen_all(heap, quota_ok)
                        continue
                if sharper > bound:
                    heapq.heappush(heap, (sharper, node, 1))
                    continue
            if stage < 2:
                sharper = self._bound(node, quota_ok)
                if sharper is None:
                    continue
                if sharper > bound:
                    heapq.heappush(heap, (sharper, node, 2))
                    continue
            victims = self._victims_on(node, self._shortage(node), taken, quota_ok)
            if not victims:
                continue
            worst = max(victims, key=lambda c: keys[id(c)][2:])
            rank = ((worst.pod_class, worst.priority), len(victims), keys[id(worst)][2:], node)
            if best is None or rank < best:
                best = rank
                choice = NodeChoice(node, victims, self._from_free(node, victims))
        if choice is not None:
            self.chosen.extend(choice.victims)
            used = self.used.setdefault(choice.node, {})
            for resource, amount in choice.from_free.items():
                used[resource] = used.get(resource, 0) + amount
        return choice

    def _sharpen_all(
        self, heap: list[tuple[tuple[Any, ...], str, int]], quota_ok: bool
    ) -> list[tuple[tuple[Any, ...], str, int]]:
        """Every node still at its first bound, bounded from its Deployment pods."""
        built = self.index.by_node
        eager = self.index.eager
        out: list[tuple[tuple[Any, ...], str, int]] = []
        for entry in heap:
            bound, node, stage = entry
            if stage != 0 or node in built or node in eager:
                out.append(entry)
                continue
            sharper = self._static_bound(node, quota_ok, single=False)
            if sharper is None:
                continue
            if sharper[1] == 1:
                out.append(entry)  # a one-victim bound is sharpened on its own, when it comes up
            else:
                out.append((sharper if sharper > bound else bound, node, 1))
        heapq.heapify(out)
        return out

    def _victims_on(
        self, node: str, short: Mapping[str, int], taken: set[int], quota_ok: bool
    ) -> list[Candidate]:
        if not short and quota_ok:
            return []  # fits without victims: the nomination would have admitted it
        victims: list[Candidate] = []
        freed: dict[str, int] = {}
        relied = self.session.relied
        for candidate in self.index.candidates_on(node):
            if id(candidate) in taken or candidate.unit in relied or not self.preemptible(candidate):
                continue  # relied on: an earlier preemptor of this session has its room
            if candidate.group != CLASS_SAME_QUEUE and not self._lender_may_give(candidate, victims):
                continue
            victims.append(candidate)
            if not self.accept(self.chosen + victims):
                victims.pop()
                continue
            _add_room(freed, candidate, node)
            if all(freed.get(r, 0) >= need for r, need in short.items()) and (
                quota_ok or self._quota_fits(victims)
            ):
                return self._fill_back(victims, node, short, quota_ok)
        return []

    def _without(self, victims: list[Candidate], check: Callable[[], bool]) -> bool:
        """``check()`` on the quota with this preemptor's earlier replicas' victims and
        ``victims`` gone (undone afterwards)."""
        statement = self.session.statement
        checkpoint = statement.checkpoint()
        try:
            for victim in self.chosen:
                statement.evict(victim, nodes=False)
            for victim in victims:
                statement.evict(victim, nodes=False)
            return check()
        finally:
            statement.rollback(checkpoint)

    def _lender_may_give(self, candidate: Candidate, victims: list[Candidate]) -> bool:
        """SEMANTICS §4: a lender is never pushed below its nominal, here either."""
        accounting = self.session.accounting
        needed = frozenset(self.per_replica)
        return self._without(
            victims,
            lambda: lender_may_give(accounting, self.leaf, candidate.leaf, candidate.usage, needed),
        )

    def _from_free(self, node: str, victims: list[Candidate]) -> dict[str, int]:
        """What the replica needs beyond its victims' room: that much free room is taken,
        and whatever the victims free beyond the replica's needs stays unusable."""
        freed: dict[str, int] = {}
        for candidate in victims:
            _add_room(freed, candidate, node)
        return {r: a - freed.get(r, 0) for r, a in self.requests.items() if a > freed.get(r, 0)}

    def _fill_back(
        self, victims: list[Candidate], node: str, short: Mapping[str, int], quota_ok: bool
    ) -> list[Candidate]:
        for i in range(len(victims) - 2, -1, -1):
            rest = victims[:i] + victims[i + 1 :]
            freed: dict[str, int] = {}
            for candidate in rest:
                _add_room(freed, candidate, node)
            if (
                all(freed.get(r, 0) >= need for r, need in short.items())
                and (quota_ok or self._quota_fits(rest))
                and self.accept(self.chosen + rest)
            ):
                victims = rest
        return victims

    def _quota_fits(self, victims: list[Candidate]) -> bool:
        accounting = self.session.accounting
        leaf = self.leaf
        usage = self.usage
        return self._without(
            victims, lambda: all(amount <= accounting.available(leaf, fr) for fr, amount in usage.items())
        )


def _add_room(freed: dict[str, int], candidate: Candidate, node: str) -> None:
    for held in candidate.room:
        where, requests = held.node_name, held.requests
        if where == node:
            for resource, amount in requests.items():
                freed[resource] = freed.get(resource, 0) + amount


