"""The static node view, the terms a pod is placed with, and how a node is judged.

:class:`NodePool` says which nodes serve which flavor; :class:`_FlavorIndex` keeps a
flavor's nodes bucketed by free GPUs, each bucket sorted by ``(free cpu, name)``, an
entry one integer (see the package notes); :class:`PodTally` judges one node for a pod
set as the placements' count does.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence

from ..model import GPU_RESOURCES, Flavor, Node, PodSet, Taint, Toleration, tolerates

__all__ = [
    "GPU_KINDS",
    "NodePool",
    "PodTally",
    "flavor_taints_tolerated",
    "flavor_tolerations",
    "gpu_amount",
    "node_matches",
    "pod_terms",
    "pods_held",
]

_BLOCKING = ("NoSchedule", "NoExecute")
GPU_KINDS = tuple(sorted(GPU_RESOURCES))  # summed in a fixed order (sums of ints)
_GPU_ONE, _GPU_TWO = GPU_KINDS


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

    __slots__ = ("by_flavor", "free", "layout", "members", "names", "nodes", "open", "ranks", "sharing")

    def __init__(self, nodes: Mapping[str, Node], flavors: Mapping[str, Flavor]) -> None:
        self.nodes = dict(sorted(nodes.items()))
        # The node names in order, and each one's place there (a flavor index's ranks).
        self.names: tuple[str, ...] = tuple(self.nodes)
        self.ranks: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.free: dict[str, dict[str, int]] = {
            name: dict(node.allocatable) for name, node in self.nodes.items()
        }
        self.by_flavor: dict[str, list[str]] = {}
        # The same nodes as a set per flavor: a node's membership asked in one step.
        self.members: dict[str, frozenset[str]] = {}
        # The nodes of each set of flavors, a node's flavors in ``by_flavor`` order.
        self.layout: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
        # Per flavor with nodes, every flavor one of its nodes also serves (itself too).
        self.sharing: dict[str, frozenset[str]] = {}
        # Per flavor whose every node is schedulable and has no NoSchedule/NoExecute taint,
        # its node labels: a pod whose selector asks only those matches each of its nodes.
        self.open: dict[str, Mapping[str, str]] = {}
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
                self.members[flavor.name] = frozenset(members)
                if not any(self._closed(self.nodes[name]) for name in members):
                    self.open[flavor.name] = dict(flavor.node_labels)
        flavors_of: dict[str, list[str]] = {}
        for flavor_name, members in self.by_flavor.items():
            for name in members:
                flavors_of.setdefault(name, []).append(flavor_name)
        layout: dict[tuple[str, ...], list[str]] = {}
        for name, of in flavors_of.items():
            layout.setdefault(tuple(of), []).append(name)
        self.layout = tuple((of, tuple(names)) for of, names in layout.items())
        sharing: dict[str, set[str]] = {}
        for served in layout:
            for flavor_name in served:
                sharing.setdefault(flavor_name, set()).update(served)
        self.sharing = {flavor_name: frozenset(found) for flavor_name, found in sharing.items()}

    @staticmethod
    def _closed(node: Node) -> bool:
        """Whether ``node`` may refuse a pod whatever its tolerations: unschedulable, or a
        NoSchedule/NoExecute taint."""
        return node.unschedulable or any(taint.effect in _BLOCKING for taint in node.taints)

    def matches_all(self, flavor: str, selector: Mapping[str, str]) -> bool:
        """Whether every node of ``flavor`` matches a pod of ``selector`` (any tolerations):
        its nodes are open and carry the flavor's labels, and the selector asks only those."""
        labels = self.open.get(flavor)
        if labels is None:
            return False
        # A plain loop: asked once per placement, usually of one or two labels.
        for key, value in selector.items():  # noqa: SIM110
            if labels.get(key) != value:
                return False
        return True

    def lay_out(self, index: Mapping[str, _FlavorIndex]) -> dict[str, list[_FlavorIndex]]:
        """Per node, the indexes of its flavors from ``index`` (a placements' own): one
        list, never changed, shared by the nodes of a set, so a step per set, not per node."""
        node_flavors: dict[str, list[_FlavorIndex]] = {}
        for flavors, names in self.layout:
            indexes = [index[flavor] for flavor in flavors]
            node_flavors.update(dict.fromkeys(names, indexes))
        return node_flavors

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
    """A flavor's nodes bucketed by free GPUs, each bucket sorted by (free cpu, name).

    An entry is one integer, ``cpu << shift | rank`` (``rank``: the name's place among
    ``names``, sorted, below ``1 << shift``), so a bucket orders its entries as it would
    order (cpu, name) pairs, and a search compares integers, not pairs (see the notes)."""

    __slots__ = ("buckets", "keys", "mask", "names", "ranks", "shift")

    def __init__(self, names: Sequence[str], ranks: Mapping[str, int] | None = None) -> None:
        """``names``: every node the index may hold, sorted; ``ranks``: each one's place
        there (made when not given)."""
        self.names = names
        self.ranks = ranks if ranks is not None else {name: i for i, name in enumerate(names)}
        self.shift = max(1, len(names).bit_length())
        self.mask = (1 << self.shift) - 1
        self.buckets: dict[int, list[int]] = {}
        self.keys: list[int] = []

    def copy(self) -> _FlavorIndex:
        copied = _FlavorIndex.__new__(_FlavorIndex)
        copied.names = self.names
        copied.ranks = self.ranks
        copied.shift = self.shift
        copied.mask = self.mask
        copied.keys = list(self.keys)
        copied.buckets = {k: list(v) for k, v in self.buckets.items()}
        return copied

    def entries(self, gpus: int) -> list[tuple[int, str]]:
        """The bucket of ``gpus`` as (cpu, name) pairs, in its order."""
        names = self.names
        mask = self.mask
        shift = self.shift
        return [(code >> shift, names[code & mask]) for code in self.buckets.get(gpus, ())]

    def insert(self, gpus: int, cpu: int, name: str) -> None:
        bucket = self.buckets.get(gpus)
        if bucket is None:
            bucket = self.buckets[gpus] = []
            insort(self.keys, gpus)
        insort(bucket, cpu << self.shift | self.ranks[name])

    def delete(self, gpus: int, cpu: int, name: str) -> None:
        bucket = self.buckets[gpus]
        del bucket[bisect_left(bucket, cpu << self.shift | self.ranks[name])]
        if not bucket:
            del self.buckets[gpus]
            del self.keys[bisect_left(self.keys, gpus)]

    def move(self, gpus: int, cpu: int, new_gpus: int, new_cpu: int, name: str) -> None:
        """:meth:`delete` then :meth:`insert` of ``name``. A node that keeps its bucket is
        moved within it, searched for once, and replaced where it is when it keeps its place
        (the entries beside it still enclose it)."""
        if new_gpus != gpus:
            self.delete(gpus, cpu, name)
            self.insert(new_gpus, new_cpu, name)
            return
        bucket = self.buckets[gpus]
        rank = self.ranks[name]
        shift = self.shift
        old = cpu << shift | rank
        new = new_cpu << shift | rank
        i = bisect_left(bucket, old)
        if new < old:
            if i == 0 or bucket[i - 1] < new:
                bucket[i] = new
                return
            del bucket[i]
            insort(bucket, new, 0, i)
            return
        if i + 1 == len(bucket) or new < bucket[i + 1]:
            bucket[i] = new
            return
        del bucket[i]
        insort(bucket, new, i)


class PodTally:
    """How many of ``count`` identical pods the nodes of one flavor take, node by node.

    Identical pods fill a set of nodes independently of the order they are placed in:
    the number that fits is the sum over the nodes of what each takes
    (:meth:`Placements.can_place`). A search that frees room on a few nodes follows
    that sum by judging those nodes again, before and after, instead of scanning the
    flavor's nodes at every test. :meth:`on` judges one node exactly as the scan does:
    a node of the flavor whose free GPUs and cpu reach the request's (the index's
    filters), matching the pods' selector and tolerations, takes as many pods as every
    requested resource allows, none if one is short, at most ``count``.
    """

    __slots__ = (
        "count", "cpu", "gpus", "index", "matches", "members", "node_flavors", "nodes", "selector",
        "tolerations", "wanted",
    )

    def __init__(
        self,
        index: _FlavorIndex,
        nodes: Mapping[str, Node],
        node_flavors: Mapping[str, list[_FlavorIndex]],
        requests: Mapping[str, int],
        count: int,
        selector: Mapping[str, str],
        tolerations: Sequence[Toleration],
        members: frozenset[str],
    ) -> None:
        self.index = index
        # The names of the flavor's nodes (the nodes whose ``node_flavors`` hold ``index``).
        self.members = members
        self.count = count
        self.gpus = gpu_amount(requests)
        self.cpu = requests.get("cpu", 0)
        self.wanted = [(r, a) for r, a in requests.items() if a > 0]
        self.selector = selector
        self.tolerations = tolerations
        self.nodes = nodes
        self.node_flavors = node_flavors
        self.matches: dict[str, bool] = {}

    def on(self, name: str, free: Mapping[str, int], extra: Mapping[str, int] | None) -> int:
        """How many of the pods node ``name`` takes with room ``free`` plus ``extra``."""
        if name not in self.members:
            return 0
        return self.takes(name, free, extra)

    def short(self, free: Mapping[str, int], extra: Mapping[str, int] | None) -> bool:
        """Whether a node with room ``free`` plus ``extra`` lacks the GPUs (of both kinds
        together) or the cpu of one pod: it takes none (the first filter of :meth:`takes`,
        asked on its own where most nodes fail it)."""
        # Called per node judged: plain method calls, no bound method made per call.
        if extra:
            gpus = free.get(_GPU_ONE, 0) + extra.get(_GPU_ONE, 0)
            gpus += free.get(_GPU_TWO, 0) + extra.get(_GPU_TWO, 0)
            return gpus < self.gpus or free.get("cpu", 0) + extra.get("cpu", 0) < self.cpu
        gpus = free.get(_GPU_ONE, 0) + free.get(_GPU_TWO, 0)
        return gpus < self.gpus or free.get("cpu", 0) < self.cpu

    def takes(self, name: str, free: Mapping[str, int], extra: Mapping[str, int] | None) -> int:
        """:meth:`on` for a node known to serve the tally's flavor."""
        return 0 if self.short(free, extra) else self.takes_past_short(name, free, extra)

    def takes_past_short(self, name: str, free: Mapping[str, int], extra: Mapping[str, int] | None) -> int:
        """:meth:`takes` for a node :meth:`short` has passed."""
        get = free.get
        if extra:
            more = extra.get
            fits = self.count
            for resource, amount in self.wanted:
                room = (get(resource, 0) + more(resource, 0)) // amount
                if room < fits:
                    fits = room
                if fits <= 0:
                    return 0
        else:
            fits = pods_held(free, self.wanted, self.count)
            if fits <= 0:
                return 0
        matches = self.matches.get(name)
        if matches is None:
            matches = self.matches[name] = node_matches(self.nodes[name], self.selector, self.tolerations)
        return fits if matches else 0


def pods_held(room: Mapping[str, int], wanted: Sequence[tuple[str, int]], most: int) -> int:
    """How many identical pods ``room`` holds, up to ``most``: ``wanted`` are their
    positive requests. Zero or less when it holds none (a short, even negative, room of
    a requested resource takes no pod)."""
    get = room.get
    for resource, amount in wanted:
        held = get(resource, 0) // amount
        if held < most:
            most = held
            if most <= 0:
                break
    return most


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
