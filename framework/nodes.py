"""Node-level fit and placement (SEMANTICS §6, first part).

Only flavors that have Node objects (nodes whose labels match the flavor's
``nodeLabels``) are placed; without nodes only quota counts, as in Kueue.

Pods are placed one at a time, best fit: the node with the least free GPUs
that still fits, then the least free cpu, then the node name. Scanning 4,000
nodes per pod would be quadratic over a burst of pods, so each flavor keeps
its nodes bucketed by free GPUs, each bucket sorted by ``(free cpu, name)``;
the first fitting node found walking buckets upwards from the request is the
best fit.

A victim search frees and takes room tentatively, and undoes it after every
attempt; re-sorting a node in its bucket each time cost more than the search
itself. Room changed through :meth:`Placements.take_tentatively` and
:meth:`Placements.give_back_tentatively` changes only the node's free room: the
node is marked stale, with the place the index still holds for it, and is moved
in the index by :meth:`Placements.sync` (the session's statement syncs on commit,
and when a rollback brings it back to the last commit). Until then every query
skips stale nodes in the index and judges them one by one on their actual room,
with the same filters and order, so its answer is the one a fresh index gives.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence

from .model import GPU_RESOURCES, Flavor, Node, PodSet, Taint, Toleration, tolerates

__all__ = ["NodePool", "Placements", "gpu_amount", "pod_terms"]

_BLOCKING = ("NoSchedule", "NoExecute")


def gpu_amount(amounts: Mapping[str, int]) -> int:
    total = 0
    for resource in GPU_RESOURCES:
        total += amounts.get(resource, 0)
    return total


def node_matches(
    node: Node,
    selector: Mapping[str, str],
    tolerations: Sequence[Toleration],
) -> bool:
    if node.unschedulable:
        return False
    labels = node.labels
    for key, value in selector.items():
        if labels.get(key) != value:
            return False
    for taint in node.taints:
        if taint.effect in _BLOCKING and not tolerates(tuple(tolerations), taint):
            return False
    return True


class NodePool:
    """The static node view of a snapshot: which nodes serve which flavor."""

    __slots__ = ("by_flavor", "free", "nodes")

    def __init__(self, nodes: Mapping[str, Node], flavors: Mapping[str, Flavor]) -> None:
        self.nodes = dict(sorted(nodes.items()))
        self.free: dict[str, dict[str, int]] = {
            name: dict(node.allocatable) for name, node in self.nodes.items()
        }
        self.by_flavor: dict[str, list[str]] = {}
        if not self.nodes:
            return
        for flavor in sorted(flavors.values(), key=lambda f: f.name):
            members = [
                name
                for name, node in self.nodes.items()
                if all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
            ]
            if members:
                self.by_flavor[flavor.name] = members

    def consume(self, node_name: str, requests: Mapping[str, int]) -> None:
        """Subtract a bound pod's requests (snapshot building only)."""
        free = self.free.get(node_name)
        if free is None:
            return
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) - amount


def _fits(free: Mapping[str, int], requests: Mapping[str, int]) -> bool:
    # A plain loop: all() over a generator costs a frame per call on this hot path.
    for resource, amount in requests.items():  # noqa: SIM110
        if free.get(resource, 0) < amount:
            return False
    return True


class _FlavorIndex:
    __slots__ = ("buckets", "keys")

    def __init__(self) -> None:
        self.buckets: dict[int, list[tuple[int, str]]] = {}
        self.keys: list[int] = []

    def insert(self, gpus: int, cpu: int, name: str) -> None:
        bucket = self.buckets.get(gpus)
        if bucket is None:
            bucket = self.buckets[gpus] = []
            insort(self.keys, gpus)
        insort(bucket, (cpu, name))

    def delete(self, gpus: int, cpu: int, name: str) -> None:
        bucket = self.buckets[gpus]
        del bucket[bisect_left(bucket, (cpu, name))]
        if not bucket:
            del self.buckets[gpus]
            del self.keys[bisect_left(self.keys, gpus)]


class Placements:
    """Free room per node during one session, with best-fit placement."""

    __slots__ = ("_index", "_moved", "_node_flavors", "_stale", "free", "pool")

    def __init__(self, pool: NodePool) -> None:
        self.pool = pool
        self.free = {name: dict(free) for name, free in pool.free.items()}
        self._index: dict[str, _FlavorIndex] = {}
        self._node_flavors: dict[str, list[_FlavorIndex]] = {}
        # Nodes whose room changed tentatively -> the (gpus, cpu) the index holds for
        # them, and -> their (gpus, cpu) now. A node back at its place is not stale.
        self._stale: dict[str, tuple[int, int]] = {}
        self._moved: dict[str, tuple[int, int]] = {}
        for flavor, members in pool.by_flavor.items():
            index = self._index[flavor] = _FlavorIndex()
            for name in members:
                free = self.free[name]
                index.insert(gpu_amount(free), free.get("cpu", 0), name)
                self._node_flavors.setdefault(name, []).append(index)

    def copy(self) -> Placements:
        clone = Placements.__new__(Placements)
        clone.pool = self.pool
        clone.free = {name: dict(free) for name, free in self.free.items()}
        clone._index = {}
        clone._node_flavors = {}
        clone._stale = dict(self._stale)
        clone._moved = dict(self._moved)
        for flavor, index in self._index.items():
            copied = clone._index[flavor] = _FlavorIndex()
            copied.keys = list(index.keys)
            copied.buckets = {k: list(v) for k, v in index.buckets.items()}
        for flavor, members in self.pool.by_flavor.items():
            for name in members:
                clone._node_flavors.setdefault(name, []).append(clone._index[flavor])
        return clone

    def has_nodes(self, flavor: str) -> bool:
        return flavor in self._index

    def best_fit(
        self,
        flavor: str,
        requests: Mapping[str, int],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
    ) -> str | None:
        """The best-fit node of ``flavor`` for one pod, or ``None``."""
        index = self._index.get(flavor)
        if index is None:
            return None
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        nodes = self.pool.nodes
        free = self.free
        keys = index.keys
        stale = self._stale
        for k in keys[bisect_left(keys, gpus) :]:
            bucket = index.buckets[k]
            for j in range(bisect_left(bucket, (cpu, "")), len(bucket)):
                node_cpu, name = bucket[j]
                if stale and name in stale:
                    continue
                if _fits(free[name], requests) and node_matches(nodes[name], selector, tolerations):
                    if not stale:
                        return name
                    return self._best_stale(index, requests, selector, tolerations, (k, node_cpu, name))
        if not stale:
            return None
        return self._best_stale(index, requests, selector, tolerations, None)

    def _best_stale(
        self,
        index: _FlavorIndex,
        requests: Mapping[str, int],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        best: tuple[int, int, str] | None,
    ) -> str | None:
        """The best fit among ``best`` (the index's, from its fresh nodes) and the stale
        nodes of ``index``, judged as the index would judge them if it were fresh."""
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        nodes = self.pool.nodes
        node_flavors = self._node_flavors
        for name, (node_gpus, node_cpu) in self._moved.items():
            if node_gpus < gpus or node_cpu < cpu or index not in node_flavors[name]:
                continue
            key = (node_gpus, node_cpu, name)
            if best is not None and key > best:
                continue
            if _fits(self.free[name], requests) and node_matches(nodes[name], selector, tolerations):
                best = key
        return best[2] if best is not None else None

    def place_pods(
        self,
        flavor: str,
        requests: Mapping[str, int],
        count: int,
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        take: Callable[[str, Mapping[str, int]], None] | None = None,
    ) -> list[str]:
        """Place up to ``count`` identical pods best fit, one at a time; the nodes chosen.

        Each pod's room is taken before the next is placed, with ``take`` (a statement's
        ``take_room``, or whatever binds the pod) or else :meth:`take`. Stops at the
        first pod that fits nowhere, so fewer than ``count`` nodes means not all fit.
        The one best-fit placement loop: the snapshot (pods not created yet), the
        session (pods of earlier podSets, an admitted workload's pods) and the
        simulated cluster all place through it.
        """
        take_room = take if take is not None else self.take
        chosen: list[str] = []
        for _ in range(count):
            node = self.best_fit(flavor, requests, selector, tolerations)
            if node is None:
                break
            take_room(node, requests)
            chosen.append(node)
        return chosen

    def fit_all(
        self,
        flavors: Mapping[str, Flavor],
        targets: Sequence[tuple[PodSet, int, str]],
        take: Callable[[str, Mapping[str, int]], None],
    ) -> bool:
        """Whether every pod of ``targets`` can be placed now: earlier pod sets take their
        room (through ``take``, which the caller undoes) so that the later ones see it gone."""
        last = len(targets) - 1
        for i, (spec, count, flavor_name) in enumerate(targets):
            selector, tolerations = pod_terms(flavors[flavor_name], spec)
            if i == last:
                return self.can_place(flavor_name, spec.requests, count, selector, tolerations)
            placed = self.place_pods(flavor_name, spec.requests, count, selector, tolerations, take)
            if len(placed) < count:
                return False
        return True

    def can_place(
        self,
        flavor: str,
        requests: Mapping[str, int],
        count: int,
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
    ) -> bool:
        """Whether ``count`` identical pods fit the flavor's nodes, without placing them.

        For identical pods the number that fits is the sum over nodes of how many
        each node takes, whatever the placement order, so this only counts.
        """
        if count <= 0:
            return True
        index = self._index.get(flavor)
        if index is None:
            return False
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        wanted = [(r, a) for r, a in requests.items() if a > 0]
        nodes = self.pool.nodes
        free = self.free
        keys = index.keys
        remaining = count
        stale = self._stale
        if stale:
            # Stale nodes first, on their actual room and with the index's filters.
            node_flavors = self._node_flavors
            for name, (node_gpus, node_cpu) in self._moved.items():
                if node_gpus < gpus or node_cpu < cpu or index not in node_flavors[name]:
                    continue
                room = free[name]
                fits = remaining
                for resource, amount in wanted:
                    fits = min(fits, room.get(resource, 0) // amount)
                    if fits == 0:
                        break
                if fits and node_matches(nodes[name], selector, tolerations):
                    remaining -= fits
                    if remaining <= 0:
                        return True
        for k in keys[bisect_left(keys, gpus) :]:
            bucket = index.buckets[k]
            for j in range(bisect_left(bucket, (cpu, "")), len(bucket)):
                name = bucket[j][1]
                if stale and name in stale:
                    continue
                room = free[name]
                fits = remaining
                for resource, amount in wanted:
                    fits = min(fits, room.get(resource, 0) // amount)
                    if fits == 0:
                        break
                if fits and node_matches(nodes[name], selector, tolerations):
                    remaining -= fits
                    if remaining <= 0:
                        return True
        return False

    def take(self, node_name: str, requests: Mapping[str, int]) -> None:
        self._adjust(node_name, requests, -1)

    def give_back(self, node_name: str, requests: Mapping[str, int]) -> None:
        self._adjust(node_name, requests, 1)

    def take_tentatively(self, node_name: str, requests: Mapping[str, int]) -> None:
        """:meth:`take`, leaving the index alone until :meth:`sync`."""
        self._defer(node_name, requests, -1)

    def give_back_tentatively(self, node_name: str, requests: Mapping[str, int]) -> None:
        """:meth:`give_back`, leaving the index alone until :meth:`sync`."""
        self._defer(node_name, requests, 1)

    def sync(self) -> None:
        """Move every stale node to its place in the index."""
        stale = self._stale
        if not stale:
            return
        moved = self._moved
        for name, (old_gpus, old_cpu) in stale.items():
            new_gpus, new_cpu = moved[name]
            for index in self._node_flavors[name]:
                index.delete(old_gpus, old_cpu, name)
                index.insert(new_gpus, new_cpu, name)
        stale.clear()
        moved.clear()

    def _defer(self, node_name: str, requests: Mapping[str, int], sign: int) -> None:
        free = self.free.get(node_name)
        if free is None:
            return
        moved = self._moved
        # (gpus, cpu) of the node before this change: kept for a stale node, else what
        # the index holds (its room is that of the index while it is not stale).
        before = moved.get(node_name)
        if before is None:
            if node_name not in self._node_flavors:
                for resource, amount in requests.items():
                    free[resource] = free.get(resource, 0) + sign * amount
                return  # a node of no flavor: not in any index
            gpus = 0
            for resource in GPU_RESOURCES:
                gpus += free.get(resource, 0)
            indexed = before = (gpus, free.get("cpu", 0))
        else:
            indexed = self._stale[node_name]
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) + sign * amount
        # Room changes additively, so (gpus, cpu) moves by the request's own.
        gpus = 0
        for resource in GPU_RESOURCES:
            gpus += requests.get(resource, 0)
        now = (before[0] + sign * gpus, before[1] + sign * requests.get("cpu", 0))
        if now != indexed:
            self._stale[node_name] = indexed
            moved[node_name] = now
        elif node_name in moved:
            del self._stale[node_name]
            del moved[node_name]

    def _adjust(self, node_name: str, requests: Mapping[str, int], sign: int) -> None:
        free = self.free.get(node_name)
        if free is None:
            return
        if node_name in self._stale:
            # Its place in the index is the stale one; sync (or a later change) moves it.
            self._defer(node_name, requests, sign)
            return
        indexes = self._node_flavors.get(node_name, ())
        old_gpus = gpu_amount(free)
        old_cpu = free.get("cpu", 0)
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) + sign * amount
        new_gpus = gpu_amount(free)
        new_cpu = free.get("cpu", 0)
        if (old_gpus, old_cpu) != (new_gpus, new_cpu):
            for index in indexes:
                index.delete(old_gpus, old_cpu, node_name)
                index.insert(new_gpus, new_cpu, node_name)


def flavor_tolerations(flavor: Flavor, pod_tolerations: Sequence[Toleration]) -> tuple[Toleration, ...]:
    """What a pod admitted on ``flavor`` tolerates: its own plus the flavor's injected ones."""
    return tuple(pod_tolerations) + flavor.tolerations


def pod_terms(flavor: Flavor, pod_set: PodSet) -> tuple[dict[str, str], tuple[Toleration, ...]]:
    """The node selector and tolerations a pod of ``pod_set`` has once admitted on
    ``flavor``: admission injects the flavor's node labels and tolerations."""
    return {**pod_set.node_selector, **flavor.node_labels}, flavor_tolerations(flavor, pod_set.tolerations)


def flavor_taints_tolerated(flavor: Flavor, tolerations: Sequence[Toleration]) -> bool:
    """SEMANTICS §3: a flavor is skipped when one of its NoSchedule/NoExecute taints is not tolerated."""
    taints: tuple[Taint, ...] = flavor.node_taints
    return all(
        taint.effect not in _BLOCKING or tolerates(tuple(tolerations), taint) for taint in taints
    )
