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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..candidates import Candidate, Scenario
from ..model import FR, PodSet, Workload
from ..nodes import flavor_tolerations, node_matches
from ..quota import QuotaNode

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

    __slots__ = (
        "accept",
        "by_node",
        "chosen",
        "leaf",
        "nodes",
        "order",
        "preemptible",
        "preemptor",
        "requests",
        "session",
        "usage",
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
        self.order = order
        self.preemptible = preemptible
        self.accept = accept
        self.chosen: list[Candidate] = []  # victims of the earlier replicas
        pool = session.snapshot.node_pool
        flavor_record = session.snapshot.flavors[flavor]
        tolerations = flavor_tolerations(flavor_record, spec.tolerations)
        selector = {**spec.node_selector, **flavor_record.node_labels}
        self.nodes = [
            name for name in pool.by_flavor.get(flavor, ()) if node_matches(pool.nodes[name], selector, tolerations)
        ]
        members = set(self.nodes)
        by_node: dict[str, list[Candidate]] = {}
        for candidate in candidates:
            seen: set[str] = set()
            for node, _ in candidate.room:
                if node in members and node not in seen:
                    seen.add(node)
                    by_node.setdefault(node, []).append(candidate)
        for victims in by_node.values():
            victims.sort(key=order)
        self.by_node = by_node

    def next_replica(self) -> NodeChoice | None:
        """The least intrusive node and victims for one more replica, or ``None``."""
        placements = self.session.placements
        assert placements is not None
        best: tuple[Any, ...] | None = None
        choice: NodeChoice | None = None
        taken = {id(c) for c in self.chosen}
        quota_ok = self._quota_fits([])
        for node in self.nodes:
            victims = self._victims_on(node, placements.free[node], taken, quota_ok)
            if not victims:
                continue
            worst = max(victims, key=self.order)
            rank = ((worst.pod_class, worst.priority), len(victims), self.order(worst), node)
            if best is None or rank < best:
                best = rank
                choice = NodeChoice(node, victims, self._from_free(node, victims))
        if choice is not None:
            self.chosen.extend(choice.victims)
        return choice

    def _victims_on(
        self, node: str, free: Mapping[str, int], taken: set[int], quota_ok: bool
    ) -> list[Candidate]:
        requests = self.requests
        short = {r: a - free.get(r, 0) for r, a in requests.items() if a > free.get(r, 0)}
        if not short:
            return []  # fits without victims: the nomination would have admitted it
        victims: list[Candidate] = []
        freed: dict[str, int] = {}
        for candidate in self.by_node.get(node, ()):
            if id(candidate) in taken or not self.preemptible(candidate):
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
