"""Free room per node during one session, with best-fit placement (see the package notes)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence

from ..model import GPU_RESOURCES, Flavor, PodSet, Toleration
from .filling import Filling
from .pool import (
    GPU_KINDS,
    NodePool,
    PodTally,
    _fits,
    _FlavorIndex,
    gpu_amount,
    node_matches,
    pod_terms,
    pods_held,
)
from .shared import SharedIndexes

__all__ = ["Placements"]

_GPU_ONE, _GPU_TWO = GPU_KINDS  # every GPU kind, summed in a fixed order

# No room kept beside the placements (a plain dict: asked once per node a scan passes).
_NO_CHANGES: Mapping[str, Mapping[str, int]] = {}


class Placements(SharedIndexes, Filling):
    """Free room per node during one session, with best-fit placement (the placing of
    identical pods: :class:`~.filling.Filling`)."""

    __slots__ = ("_moved", "_own", "_stale", "free", "gpus", "pool")

    def __init__(self, pool: NodePool) -> None:
        self.pool = pool
        self.free = {name: dict(free) for name, free in pool.free.items()}
        # Copy on write: the nodes whose room map this object may change in place. A copy
        # shares every map with its original, so both own none until they change one.
        self._own: set[str] = set(self.free)
        self._index: dict[str, _FlavorIndex] = {}
        # Nodes whose room changed tentatively -> the (gpus, cpu) the index holds for
        # them, and -> their (gpus, cpu) now. A node back at its place is not stale.
        self._stale: dict[str, tuple[int, int]] = {}
        self._moved: dict[str, tuple[int, int]] = {}
        for flavor, members in pool.by_flavor.items():
            index = self._index[flavor] = _FlavorIndex(pool.names, pool.ranks)
            for name in members:
                free = self.free[name]
                index.insert(gpu_amount(free), free.get("cpu", 0), name)
        self._node_flavors = pool.lay_out(self._index)
        # Per node of a flavor, its free GPUs of every kind: what its room map sums, kept as
        # the room changes (a victim walk reads it per pod room, ``preemption/room.py``).
        self.gpus = {name: gpu_amount(self.free[name]) for name in self._node_flavors}
        self._holder = None  # see SharedIndexes
        self._sharers = []

    def copy(self) -> Placements:
        """An independent copy, sharing room maps until a side changes one (see ``_own``)
        and flavor indexes until a side changes or hands out one (see ``SharedIndexes``)."""
        clone = Placements.__new__(Placements)
        clone.pool = self.pool
        clone.free = dict(self.free)
        self._own, clone._own = set(), set()
        clone._stale = dict(self._stale)
        clone._moved = dict(self._moved)
        clone.gpus = dict(self.gpus)
        self._share(clone)
        return clone

    def shared_free(self) -> dict[str, dict[str, int]]:
        """The room per node as a new dict of the same maps, which this object then owns
        none of (it copies a map before it changes one): for a reader that keeps them."""
        self._own = set()
        return dict(self.free)

    def _owned(self, node_name: str) -> dict[str, int] | None:
        """The room map of ``node_name`` to change in place (copied first if shared)."""
        free = self.free.get(node_name)
        if free is None or node_name in self._own:
            return free
        free = self.free[node_name] = dict(free)
        self._own.add(node_name)
        return free

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
        best = self._best(flavor, requests, selector, tolerations, _NO_CHANGES)
        return best[2] if best is not None else None

    def best_fit_unchanged(
        self,
        flavor: str,
        requests: Mapping[str, int],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        changed: Mapping[str, Mapping[str, int]],
    ) -> tuple[int, int, str] | None:
        """The best fit for one pod among the nodes of ``flavor`` neither stale nor in
        ``changed``, as its index orders them: (free GPUs, free cpu, name), or ``None``."""
        return self._best(flavor, requests, selector, tolerations, changed, with_stale=False)

    def best_fit_beside(
        self,
        flavor: str,
        requests: Mapping[str, int],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        changed: Mapping[str, Mapping[str, int]],
    ) -> str | None:
        """:meth:`best_fit` on the room of the placements plus ``changed``: room a search
        keeps beside them, per node (freed, or taken when negative). The nodes in
        ``changed`` are judged one by one on their room, as stale nodes are."""
        index = self._index.get(flavor)
        if index is None:
            return None
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        nodes = self.pool.nodes
        free = self.free
        node_flavors = self._node_flavors
        best = self._best(flavor, requests, selector, tolerations, changed)
        for name, extra in changed.items():
            if index not in node_flavors.get(name, ()):
                continue
            room = free[name]
            node_gpus = 0
            for resource in GPU_RESOURCES:
                node_gpus += room.get(resource, 0) + extra.get(resource, 0)
            node_cpu = room.get("cpu", 0) + extra.get("cpu", 0)
            if node_gpus < gpus or node_cpu < cpu:
                continue
            key = (node_gpus, node_cpu, name)
            if best is not None and key > best:
                continue
            for resource, amount in requests.items():
                if room.get(resource, 0) + extra.get(resource, 0) < amount:
                    break
            else:
                if node_matches(nodes[name], selector, tolerations):
                    best = key
        return best[2] if best is not None else None

    def _best(
        self,
        flavor: str,
        requests: Mapping[str, int],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        skip: Mapping[str, object],
        *,
        with_stale: bool = True,
    ) -> tuple[int, int, str] | None:
        """The best fit for one pod among the nodes of ``flavor`` not in ``skip``: the least
        (free GPUs, free cpu, name) of a node where it fits, or ``None``. The index's nodes
        walked from the request upwards (the first that fits is theirs), then, with
        ``with_stale``, the stale ones on their actual room, as a fresh index would judge them."""
        index = self._index.get(flavor)
        if index is None:
            return None
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        nodes = self.pool.nodes
        free = self.free
        stale = self._stale
        keys = index.keys
        names = index.names
        mask = index.mask
        shift = index.shift
        best: tuple[int, int, str] | None = None
        for k in keys[bisect_left(keys, gpus) :]:
            bucket = index.buckets[k]
            for j in range(bisect_left(bucket, cpu << shift), len(bucket)):
                code = bucket[j]
                name = names[code & mask]
                if (stale and name in stale) or name in skip:
                    continue
                if _fits(free[name], requests) and node_matches(nodes[name], selector, tolerations):
                    best = (k, code >> shift, name)
                    break
            if best is not None:
                break
        if not (with_stale and stale):
            return best
        node_flavors = self._node_flavors
        for name, (node_gpus, node_cpu) in self._moved.items():
            if node_gpus < gpus or node_cpu < cpu or name in skip or index not in node_flavors[name]:
                continue
            key = (node_gpus, node_cpu, name)
            if best is not None and key > best:
                continue
            if _fits(free[name], requests) and node_matches(nodes[name], selector, tolerations):
                best = key
        return best

    def fit_all(
        self,
        flavors: Mapping[str, Flavor],
        targets: Sequence[tuple[PodSet, int, str]],
        take: Callable[[str, Mapping[str, int]], None],
    ) -> bool:
        """Whether every pod of ``targets`` can be placed now: earlier pod sets take their
        room (through ``take``: additive, undone by the caller) so later ones see it gone."""
        last = len(targets) - 1
        for i, (spec, count, flavor_name) in enumerate(targets):
            selector, tolerations = pod_terms(flavors[flavor_name], spec)
            if i == last:
                return self.can_place(flavor_name, spec.requests, count, selector, tolerations)
            placed = self.place_pods(flavor_name, spec.requests, count, selector, tolerations, take, additive=True)
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
        each node takes, whatever the placement order, so this only counts. A node
        takes none of them when some requested resource is short, even when its room
        of that resource is negative (bound pods beyond its allocatable): it takes no
        pod, it does not cancel what others take.
        """
        if count <= 0:
            return True
        index = self._index.get(flavor)
        if index is None:
            return False
        gpus = gpu_amount(requests)
        cpu = requests.get("cpu", 0)
        requested = [(r, a) for r, a in requests.items() if a > 0]
        free = self.free
        found = 0
        if self._stale:
            # Stale nodes first, on their actual room and with the index's filters.
            nodes = self.pool.nodes
            node_flavors = self._node_flavors
            for name, (node_gpus, node_cpu) in self._moved.items():
                if node_gpus < gpus or node_cpu < cpu or index not in node_flavors[name]:
                    continue
                fits = pods_held(free[name], requested, count - found)
                if fits > 0 and node_matches(nodes[name], selector, tolerations):
                    found += fits
                    if found >= count:
                        return True
        counted = self._count_indexed(index, gpus, cpu, requested, selector, tolerations, count, found, _NO_CHANGES)
        return counted >= count

    def tally(
        self,
        flavor: str,
        requests: Mapping[str, int],
        count: int,
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
    ) -> PodTally | None:
        """The :class:`PodTally` of ``count`` identical pods on ``flavor``'s nodes, or
        ``None`` when the flavor has no nodes."""
        self._own_index()  # handed out: a tally follows this object's own index
        index = self._index.get(flavor)
        if index is None:
            return None
        return PodTally(
            index, self.pool.nodes, self._node_flavors, requests, count, selector, tolerations,
            self.pool.members[flavor],
        )

    def count(self, tally: PodTally, changed: Mapping[str, Mapping[str, int]] | None = None) -> int:
        """How many of the tally's pods the flavor's nodes take now, counted up to its
        ``count`` (a sum node by node: see :class:`PodTally`). Stale nodes are judged
        on their actual room, the rest walking the index from the request upwards:
        every node it skips fails the index's filters. ``changed``: room kept beside
        the placements, per node (see :meth:`best_fit_beside`)."""
        wanted = tally.count
        if wanted <= 0:
            return 0
        index = tally.index
        gpus = tally.gpus
        cpu = tally.cpu
        free = self.free
        found = 0
        on = tally.on
        if changed:
            for name, extra in changed.items():
                found += on(name, free[name], extra)
                if found >= wanted:
                    return found
        else:
            changed = {}
        stale = self._stale
        if stale:
            for name, (node_gpus, node_cpu) in self._moved.items():
                if node_gpus < gpus or node_cpu < cpu or name in changed:
                    continue
                found += on(name, free[name], None)
                if found >= wanted:
                    return found
        return self._count_indexed(
            index, gpus, cpu, tally.wanted, tally.selector, tally.tolerations, wanted, found, changed
        )

    def _count_indexed(
        self,
        index: _FlavorIndex,
        gpus: int,
        cpu: int,
        requested: Sequence[tuple[str, int]],
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        wanted: int,
        found: int,
        changed: Mapping[str, Mapping[str, int]],
    ) -> int:
        """``found`` plus the pods the index's nodes neither stale nor in ``changed`` take,
        walking it from the request upwards (every node it skips fails the index's
        filters), counted up to ``wanted``."""
        nodes = self.pool.nodes
        free = self.free
        stale = self._stale
        keys = index.keys
        names = index.names
        mask = index.mask
        floor = cpu << index.shift
        for k in keys[bisect_left(keys, gpus) :]:
            bucket = index.buckets[k]
            for j in range(bisect_left(bucket, floor), len(bucket)):
                name = names[bucket[j] & mask]
                if (stale and name in stale) or (changed and name in changed):
                    continue
                fits = pods_held(free[name], requested, wanted - found)
                if fits > 0 and node_matches(nodes[name], selector, tolerations):
                    found += fits
                    if found >= wanted:
                        return found
        return found

    def take(self, node_name: str, requests: Mapping[str, int]) -> None:
        self._adjust(node_name, requests, -1)

    def give_back(self, node_name: str, requests: Mapping[str, int]) -> None:
        self._adjust(node_name, requests, 1)

    def take_tentatively(self, node_name: str, requests: Mapping[str, int]) -> None:
        """:meth:`take`, leaving the index alone until :meth:`sync`."""
        self.defer(node_name, requests, -1)

    def give_back_tentatively(self, node_name: str, requests: Mapping[str, int]) -> None:
        """:meth:`give_back`, leaving the index alone until :meth:`sync`."""
        self.defer(node_name, requests, 1)

    def sync(self) -> None:
        """Move every stale node to its place in the index."""
        stale = self._stale
        if not stale:
            return
        self._own_index()
        moved = self._moved
        for name, (old_gpus, old_cpu) in stale.items():
            new_gpus, new_cpu = moved[name]
            for index in self._node_flavors[name]:
                index.move(old_gpus, old_cpu, new_gpus, new_cpu, name)
        stale.clear()
        moved.clear()

    def defer(
        self, node_name: str, requests: Mapping[str, int], sign: int, before: tuple[int, int] | None = None
    ) -> None:
        """Change the room of ``node_name`` by ``sign`` (-1 take, 1 give back) times
        ``requests``, leaving the index alone until :meth:`sync` (what a statement calls).
        ``before``: the node's (free GPUs, free cpu) before the change, where the caller has
        it (its key in an index walk of ``place_pods``); else it is read here."""
        # _owned, inline (a search and each placed node pass here).
        free = self.free.get(node_name)
        if free is None:
            return
        if node_name not in self._own:
            free = self.free[node_name] = dict(free)
            self._own.add(node_name)
        moved = self._moved
        stale = self._stale
        all_gpus = self.gpus
        # (gpus, cpu) of the node before this change: kept for a stale node, else what
        # the index holds (its room is that of the index while it is not stale).
        if before is not None:
            indexed = stale.get(node_name, before)
        elif (before := moved.get(node_name)) is None:
            gpus_before = all_gpus.get(node_name)
            if gpus_before is None:
                for resource, amount in requests.items():
                    free[resource] = free.get(resource, 0) + sign * amount
                return  # a node of no flavor: not in any index
            indexed = before = (gpus_before, free.get("cpu", 0))
        else:
            indexed = stale[node_name]
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) + sign * amount
        # Room changes additively, so (gpus, cpu) moves by the request's own.
        gpus = requests.get(_GPU_ONE, 0) + requests.get(_GPU_TWO, 0)
        now = (before[0] + sign * gpus, before[1] + sign * requests.get("cpu", 0))
        all_gpus[node_name] = now[0]
        if now != indexed:
            stale[node_name] = indexed
            moved[node_name] = now
        elif node_name in moved:
            del stale[node_name]
            del moved[node_name]

    def _adjust(self, node_name: str, requests: Mapping[str, int], sign: int) -> None:
        free = self._owned(node_name)
        if free is None:
            return
        if node_name in self._stale:
            # Its place in the index is the stale one; sync (or a later change) moves it.
            self.defer(node_name, requests, sign)
            return
        old_gpus = gpu_amount(free)
        old_cpu = free.get("cpu", 0)
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) + sign * amount
        new_gpus = gpu_amount(free)
        new_cpu = free.get("cpu", 0)
        if node_name in self.gpus:
            self.gpus[node_name] = new_gpus
        if (old_gpus, old_cpu) != (new_gpus, new_cpu):
            self._own_index()
            for index in self._node_flavors.get(node_name, ()):
                index.move(old_gpus, old_cpu, new_gpus, new_cpu, node_name)
