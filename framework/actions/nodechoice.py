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
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from ..candidates import CLASS_SAME_QUEUE, Candidate, Scenario
from ..model import FR, PodSet, Workload
from ..nodes import node_matches, pod_terms
from ..quota import Accounting, QuotaNode

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["NodeChoice", "ReplicaSearch"]


@dataclass(slots=True)
class NodeChoice:
    """One replica's node and victims, and the free room it takes there besides theirs."""

    node: str
    victims: list[Candidate]
    from_free: dict[str, int]


class ReplicaSearch:
    """Places the missing replicas of one preemptor, one at a time."""

    ONE: tuple[Any, ...] = ("one victim",)

    __slots__ = (
        "accept",
        "by_node",
        "chosen",
        "first",
        "keys",
        "leaf",
        "lows",
        "maxroom",
        "nodes",
        "order",
        "per_replica",
        "preemptible",
        "preemptor",
        "requests",
        "session",
        "sums",
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
        wanted = tuple(self.requests)
        index: _NodeIndex | None = None
        cache: dict[Any, _NodeIndex] | None = None
        signature: Any = None
        if getattr(order, "preemptor_independent", False):
            # Preemptors that see the same candidates on the same nodes share the index:
            # building it touches every candidate, using it touches a few nodes.
            cache = session.state.setdefault("_node_index", {})
            signature = (flavor, members, wanted, tuple(map(id, candidates)))
            index = cache.get(signature)
        if index is None:
            index = _NodeIndex(candidates, members, wanted, order)
            if cache is not None:
                cache[signature] = index
        self.by_node = index.by_node
        self.keys = index.keys
        self.maxroom = index.maxroom
        self.lows = index.lows
        self.sums = index.sums
        self.first = index.first
        self.used: dict[str, dict[str, int]] = {}  # free room taken by earlier replicas

    def _lows(self, node: str) -> tuple[list[Any], list[Any]]:
        """The node's candidates' (class, priority) pairs and victim keys, each sorted."""
        found = self.lows.get(node)
        if found is None:
            victims = self.by_node[node]
            keys = self.keys
            pairs = sorted((c.pod_class, c.priority) for c in victims)
            ranks = sorted(keys[id(c)][2:] for c in victims)
            found = self.lows[node] = (pairs, ranks)
        return found

    def _sums(self, node: str, resource: str) -> list[int]:
        """Running totals of the room the node's candidates free, largest first."""
        found = self.sums.get((node, resource))
        if found is None:
            rooms = sorted(
                (
                    sum(r.get(resource, 0) for where, r in c.room if where == node)
                    for c in self.by_node[node]
                ),
                reverse=True,
            )
            found = self.sums[(node, resource)] = list(accumulate(rooms))
        return found

    def _bound(self, node: str, quota_ok: bool) -> tuple[Any, ...] | None:
        """A node needs at least k victims, k from its shortage and its largest
        candidate; the worst of any k victims is no better than the k-th best
        (class, priority) and key there. ``None``: the node can never fit."""
        placements = self.session.placements
        assert placements is not None
        free = placements.free[node]
        used = self.used.get(node)
        most = self.maxroom[node]
        k = 0 if quota_ok else 1
        for resource, amount in self.requests.items():
            short = amount - free.get(resource, 0) + (used.get(resource, 0) if used else 0)
            if short > 0:
                if most.get(resource, 0) <= 0:
                    return None
                # The fewest candidates whose rooms, largest first, add up to the shortage.
                sums = self._sums(node, resource)
                fewest = bisect_left(sums, short) + 1
                if fewest > len(sums):
                    return None
                k = max(k, fewest)
        if k <= 0 or k > len(self.by_node[node]):
            return None
        if k == 1:
            return self.ONE  # the one-victim bound it came with is already exact
        pairs, ranks = self._lows(node)
        return (pairs[k - 1], k, ranks[k - 1], node)

    def next_replica(self) -> NodeChoice | None:
        """The least intrusive node and victims for one more replica, or ``None``.

        Nodes come off a heap by a lower bound of their rank: first the cheap
        one-victim bound, refined on first pop to the bound for the number of victims
        the node needs at least. The walk stops once the bound passes the best rank
        found, so a single-GPU replica looks at a handful of nodes, not all of them.
        """
        placements = self.session.placements
        assert placements is not None
        best: tuple[Any, ...] | None = None
        choice: NodeChoice | None = None
        taken = {id(c) for c in self.chosen}
        quota_ok = self._quota_fits([])
        keys = self.keys
        heap = list(self.first)
        while heap:
            bound, node, refined = heapq.heappop(heap)
            if best is not None and bound >= best:
                break
            if not refined:
                sharper = self._bound(node, quota_ok)
                if sharper is None:
                    continue
                if sharper is not self.ONE and sharper > bound:
                    heapq.heappush(heap, (sharper, node, True))
                    continue
            free: Mapping[str, int] = placements.free[node]
            used = self.used.get(node)
            if used:
                free = {r: free.get(r, 0) - used.get(r, 0) for r in self.requests}
            victims = self._victims_on(node, free, taken, quota_ok)
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

    def _victims_on(
        self, node: str, free: Mapping[str, int], taken: set[int], quota_ok: bool
    ) -> list[Candidate]:
        requests = self.requests
        short = {r: a - free.get(r, 0) for r, a in requests.items() if a > free.get(r, 0)}
        if not short and quota_ok:
            return []  # fits without victims: the nomination would have admitted it
        victims: list[Candidate] = []
        freed: dict[str, int] = {}
        relied = self.session.relied
        for candidate in self.by_node.get(node, ()):
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

    def _lender_may_give(self, candidate: Candidate, victims: list[Candidate]) -> bool:
        """SEMANTICS §4: a lender is never pushed below its nominal, here either."""
        statement = self.session.statement
        checkpoint = statement.checkpoint()
        try:
            for victim in self.chosen:
                statement.evict(victim, nodes=False)
            for victim in victims:
                statement.evict(victim, nodes=False)
            return lender_may_give(self.session.accounting, self.leaf, candidate, frozenset(self.per_replica))
        finally:
            statement.rollback(checkpoint)

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
        session = self.session
        statement = session.statement
        accounting = session.accounting
        checkpoint = statement.checkpoint()
        try:
            for candidate in self.chosen:
                statement.evict(candidate, nodes=False)
            for candidate in victims:
                statement.evict(candidate, nodes=False)
            leaf = self.leaf
            return all(amount <= accounting.available(leaf, fr) for fr, amount in self.usage.items())
        finally:
            statement.rollback(checkpoint)



class _NodeIndex:
    """A search's candidates by node, sorted by victim key, with what bounds them."""

    __slots__ = ("by_node", "first", "keys", "lows", "maxroom", "sums")

    def __init__(
        self,
        candidates: Sequence[Candidate],
        members: frozenset[str],
        wanted: tuple[str, ...],
        order: Callable[[Candidate], tuple[Any, ...]],
    ) -> None:
        # Per node: its candidates, and the largest room one of them frees per
        # requested resource (it bounds how few victims the node can need, _bound).
        by_node: dict[str, list[Candidate]] = {}
        maxroom: dict[str, dict[str, int]] = {}
        keys: dict[int, tuple[Any, ...]] = {}
        for candidate in candidates:
            placed = False
            for node, requests in candidate.room:
                if node not in members:
                    continue
                victims = by_node.get(node)
                if victims is None:
                    victims = by_node[node] = []
                    maxroom[node] = dict.fromkeys(wanted, 0)
                if not victims or victims[-1] is not candidate:
                    victims.append(candidate)
                most = maxroom[node]
                for resource in wanted:
                    amount = requests.get(resource, 0)
                    if amount > most[resource]:
                        most[resource] = amount
                placed = True
            if placed:
                keys[id(candidate)] = order(candidate)
        # Sorting each node's few candidates costs far less than one sort of all of
        # them; a stable sort keeps the plugins' order among equal keys.
        for victims in by_node.values():
            if len(victims) > 1:
                victims.sort(key=lambda c: keys[id(c)])
        self.by_node = by_node
        self.keys = keys
        self.maxroom = maxroom
        self.lows: dict[str, tuple[list[Any], list[Any]]] = {}
        self.sums: dict[tuple[str, str], list[int]] = {}
        self.first = self._first_bounds()

    def _first_bounds(self) -> list[tuple[tuple[Any, ...], str, bool]]:
        """For every node, the bound of a one-victim set: the best (class, priority)
        and key among its candidates. Cheap, and exact for single-victim replicas."""
        keys = self.keys
        out = []
        for node, victims in self.by_node.items():
            first, last = keys[id(victims[0])], keys[id(victims[-1])]
            if first[:2] == last[:2]:
                # One (evicted, group) part: the first candidate has the least key.
                head = victims[0]
                bound = ((head.pod_class, head.priority), 1, first[2:], node)
            else:
                bound = (
                    min((c.pod_class, c.priority) for c in victims),
                    1,
                    min(keys[id(c)][2:] for c in victims),
                    node,
                )
            out.append((bound, node, False))
        heapq.heapify(out)
        return out


def _add_room(freed: dict[str, int], candidate: Candidate, node: str) -> None:
    for where, requests in candidate.room:
        if where == node:
            for resource, amount in requests.items():
                freed[resource] = freed.get(resource, 0) + amount


def scenario_accepts(
    session: Session, preemptor: Workload, filters: Sequence[tuple[str, Callable[[Scenario], bool]]]
) -> Callable[[list[Candidate]], bool]:
    """One callable over the accumulated victims that every scenario filter must accept."""

    def accept(victims: list[Candidate]) -> bool:
        if not filters:
            return True
        scenario = Scenario(session, preemptor, list(victims), "preempt")
        for plugin, check in filters:
            try:
                ok = check(scenario)
            except Exception as exc:
                session.registry.record_failure(plugin, "scenario_filter", exc)
                ok = False
            if not ok:
                session.registry.vetoes[plugin] += 1
                return False
        return True

    return accept


def lender_may_give(
    accounting: Accounting,
    leaf: QuotaNode,
    candidate: Candidate,
    needed: frozenset[FR],
    path: frozenset[QuotaNode] | None = None,
) -> bool:
    """Whether taking ``candidate`` keeps its queue — and every cohort between it and the
    preemptor's ``leaf`` — at or above nominal: each must still borrow on some needed
    flavor-resource the candidate uses (SEMANTICS §4). ``path``: the preemptor's leaf
    and ancestors, when the caller has it already."""
    preemptor_path = path if path is not None else frozenset(leaf.path())
    node: QuotaNode | None = candidate.leaf
    while node is not None and node not in preemptor_path:
        if not any(accounting.used(node, fr) > node.subtree.get(fr, 0) for fr in needed if fr in candidate.usage):
            return False
        node = node.parent
    return True
