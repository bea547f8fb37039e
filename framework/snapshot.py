"""The immutable, indexed view a session starts from.

Built once from an :class:`~.objects.Inventory`; every session makes its own
mutable copies of the two things it changes (quota usage and node room), so
building is the only cost proportional to the cluster's size, besides indexes a
snapshot builds the first time they are needed (the pod classes of a Deployment, the
Deployment pods by node of :class:`DeploymentPods`) and then keeps.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, groupby, islice
from operator import attrgetter, itemgetter, lt
from typing import Any

from .model import (
    FR,
    Flavor,
    FrozenDict,
    Pod,
    PodSet,
    PodSetAdmission,
    PriorityClass,
    Workload,
)
from .nodes import NodePool, Placements, pod_terms
from .objects import Inventory, PodsByKey, Problem
from .pods import NORMAL, classify
from .quota import Accounting, QuotaNode, QuotaTree, fr_of

__all__ = ["DeploymentPods", "Snapshot", "admitted_usage", "fewest_to_cover", "pod_set_usage", "wants_more"]


def pod_set_usage(pod_set: PodSet, count: int, flavors: Mapping[str, str]) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for resource, amount in pod_set.requests.items():
        flavor = flavors.get(resource)
        if flavor is None or amount == 0:
            continue
        fr = fr_of(flavor, resource)
        usage[fr] = usage.get(fr, 0) + amount * count
    return usage


def admitted_usage(workload: Workload, counts: Mapping[str, int] | None = None) -> dict[FR, int]:
    """SEMANTICS §1: Σ over podSets of ``count × requests`` on the admitted flavors."""
    usage: dict[FR, int] = {}
    if workload.admission is None:
        return usage
    specs = {ps.name: ps for ps in workload.pod_sets}
    for psa in workload.admission.pod_sets:
        spec = specs.get(psa.name)
        if spec is None:
            continue
        count = psa.count if counts is None else counts.get(psa.name, psa.count)
        for fr, amount in pod_set_usage(spec, count, psa.flavors).items():
            usage[fr] = usage.get(fr, 0) + amount
    return usage


_NO_QUEUES = QuotaTree({})
_NO_NODES = NodePool({}, {})


@dataclass(frozen=True, slots=True)
class PendingPlacement:
    """A pod of an admitted workload that has no Pod object yet, placed at session start."""

    workload: str
    pod_set: str
    node: str


class Snapshot:
    """Flavors, the quota tree, workloads (pending and admitted), nodes and pods at ``now``."""

    __slots__ = (
        "_deployment_pods",
        "_pod_classes",
        "accounting",
        "admitted",
        "admitted_by_queue",
        "deployment_count",
        "flavors",
        "inadmissible",
        "kept_units",
        "node_pool",
        "now",
        "pending",
        "pending_by_queue",
        "placements",
        "pods",
        "pods_by_workload",
        "priority_classes",
        "problems",
        "reserved_by_workload",
        "reserved_pods",
        "tree",
        "usage",
        "workloads",
    )

    def __init__(self) -> None:
        # Read-only once built (``build``): FrozenDicts and tuples. The empty tree and node
        # pool are shared (nothing changes them); a backend that builds a snapshot per
        # cycle replaces both.
        self.now = 0
        self.flavors: Mapping[str, Flavor] = {}
        self.tree = _NO_QUEUES
        self.workloads: Mapping[str, Workload] = {}
        self.admitted: Sequence[Workload] = []
        self.pending: Sequence[Workload] = []
        self.admitted_by_queue: Mapping[str, Sequence[Workload]] = {}
        self.pending_by_queue: Mapping[str, Sequence[Workload]] = {}
        self.usage: Mapping[str, Mapping[FR, int]] = {}
        self.pods: Mapping[str, Pod] = {}
        self.pods_by_workload: Mapping[str, Sequence[Pod]] = {}
        self.priority_classes: Mapping[str, PriorityClass] = {}
        self.inadmissible: Mapping[str, str] = {}
        self.problems: Sequence[Problem] = []
        self.node_pool = _NO_NODES
        self.accounting = Accounting(self.tree)
        self.placements: Placements | None = None
        self.reserved_pods: Sequence[PendingPlacement] = []
        self.reserved_by_workload: Mapping[str, Sequence[PendingPlacement]] = {}
        self._deployment_pods: DeploymentPods | None = None
        self._pod_classes: dict[str, list[tuple[Pod, int]]] = {}
        # Victim units kept from one session to the next by a backend that hands sessions
        # successive snapshots of one cluster (a ``preemption.kept.KeptUnits``); None: none.
        self.kept_units: Any = None
        # How many of ``workloads`` are Deployments, when a backend keeps the count between
        # snapshots; None: counted on first use (:meth:`has_deployments`).
        self.deployment_count: int | None = None

    @classmethod
    def build(cls, inventory: Inventory, *, now: int) -> Snapshot:
        snap = cls()
        snap.now = now
        snap.flavors = dict(inventory.flavors)
        snap.tree = QuotaTree(inventory.queues)
        snap.priority_classes = dict(inventory.priority_classes)
        inadmissible = dict(inventory.inadmissible)
        snap.problems = tuple(inventory.problems)
        snap.accounting = Accounting(snap.tree)
        leaves = snap.tree.leaves
        workloads: dict[str, Workload] = {}
        usages: dict[str, Mapping[FR, int]] = {}
        shared: dict[tuple[tuple[FR, int], ...], FrozenDict[FR, int]] = {}
        admitted: list[Workload] = []
        pending: list[Workload] = []
        admitted_by_queue: dict[str, list[Workload]] = {}
        pending_by_queue: dict[str, list[Workload]] = {}
        for key in sorted(inventory.workloads):
            workload = inventory.workloads[key]
            workloads[key] = workload
            if workload.admission is not None:
                # Quota is charged to the queue that admitted it (Kueue keeps the
                # admission's ClusterQueue even if spec.queueName changed since).
                leaf = leaves.get(workload.admission.queue)
                if leaf is None:
                    inadmissible.setdefault(
                        key, f"admitted to queue {workload.admission.queue!r}, which is not a leaf queue of this snapshot"
                    )
                    continue
                usage = admitted_usage(workload)
                charged = tuple(usage.items())  # one shape charges the same: one map, made once
                usages[key] = shared.get(charged) or shared.setdefault(charged, FrozenDict(usage))
                snap.accounting.add_all(leaf, usage)
                admitted.append(workload)
                admitted_by_queue.setdefault(leaf.name, []).append(workload)
                if workload.is_deployment and wants_more(workload):
                    # Desired above committed: the difference is pending demand (SEMANTICS §6).
                    pending.append(workload)
                    pending_by_queue.setdefault(leaf.name, []).append(workload)
            else:
                if workload.queue not in leaves:
                    inadmissible.setdefault(key, f"queue {workload.queue!r} is not a leaf queue")
                    continue
                pending.append(workload)
                pending_by_queue.setdefault(workload.queue, []).append(workload)
        # Plugins get read-only views only: what one session is handed must not change
        # what the sessions after it see (see :mod:`.model`).
        snap.workloads = FrozenDict(workloads)
        snap.usage = FrozenDict(usages)
        snap.inadmissible = FrozenDict(inadmissible)
        snap.admitted = tuple(admitted)
        snap.pending = tuple(pending)
        snap.admitted_by_queue = FrozenDict({q: tuple(ws) for q, ws in admitted_by_queue.items()})
        snap.pending_by_queue = FrozenDict({q: tuple(ws) for q, ws in pending_by_queue.items()})
        snap._build_nodes(inventory)
        snap.flavors = FrozenDict(snap.flavors)
        snap.priority_classes = FrozenDict(snap.priority_classes)
        return snap

    def _build_nodes(self, inventory: Inventory) -> None:
        # In namespace/name order, and so is each pods_by_workload list (one namespace).
        # parse_objects lists them in that order already, read-only: a large cluster's
        # Pods are neither sorted nor copied again.
        pods = inventory.pods
        if type(pods) is not PodsByKey and (type(pods) is not FrozenDict or not _in_order(pods)):
            pods = FrozenDict(sorted(pods.items()))
        self.pods = pods
        pool = NodePool(inventory.nodes, inventory.flavors) if inventory.nodes else None
        holding = list(filter(_HOLDS_RESOURCES, self.pods.values()))  # bound, not finished
        self.pods_by_workload = _by_workload(holding)
        if pool is None:
            return
        _take_room(pool, holding)
        self.node_pool = pool
        if not pool.by_flavor:
            return
        placements = Placements(pool)
        # Admitted workloads whose pods do not exist yet hold room on the nodes,
        # placed in admission order (SEMANTICS §6).
        order = sorted(
            self.admitted,
            key=lambda w: (w.admitted_at if w.admitted_at is not None else self.now, w.tiebreak),
        )
        reserved: list[PendingPlacement] = []
        for workload in order:
            self._reserve_missing_pods(workload, placements, reserved)
        reserved_by: dict[str, list[PendingPlacement]] = {}
        for placed in reserved:
            reserved_by.setdefault(placed.workload, []).append(placed)
        self.reserved_pods = tuple(reserved)
        self.reserved_by_workload = FrozenDict({key: tuple(ps) for key, ps in reserved_by.items()})
        pool.free = placements.shared_free()  # the same maps: the pool is not written after this
        self.placements = placements

    def _reserve_missing_pods(
        self, workload: Workload, placements: Placements, reserved: list[PendingPlacement]
    ) -> None:
        assert workload.admission is not None
        existing = len(self.pods_by_workload.get(workload.key, ()))
        if existing >= sum(psa.count for psa in workload.admission.pod_sets):
            return  # every pod set is covered, whichever pods are whose (most workloads)
        specs = {ps.name: ps for ps in workload.pod_sets}
        for psa in workload.admission.pod_sets:
            spec = specs.get(psa.name)
            if spec is None:
                continue
            covered = min(existing, psa.count)
            existing -= covered
            missing = psa.count - covered
            if missing <= 0:
                continue
            self._place_missing(workload, spec, psa, missing, placements, reserved)

    def _place_missing(
        self,
        workload: Workload,
        spec: PodSet,
        psa: PodSetAdmission,
        missing: int,
        placements: Placements,
        reserved: list[PendingPlacement],
    ) -> None:
        flavor_names = {psa.flavors[r] for r in spec.requests if r in psa.flavors}
        if len(flavor_names) != 1:
            return
        (flavor_name,) = flavor_names
        flavor = self.flavors.get(flavor_name)
        if flavor is None or not placements.has_nodes(flavor_name):
            return
        selector, tolerations = pod_terms(flavor, spec)
        for node in placements.place_pods(flavor_name, spec.requests, missing, selector, tolerations):
            reserved.append(PendingPlacement(workload.key, spec.name, node))

    def pod_classes(self, workload: Workload) -> list[tuple[Pod, int]]:
        """The workload's pods with their lifecycle class against its committed count
        (SEMANTICS §6, :func:`~.pods.classify`), worked out once per snapshot."""
        found = self._pod_classes.get(workload.key)
        if found is None:
            committed = workload.admission.pod_sets[0].count if workload.admission is not None else 0
            pods = self.pods_by_workload.get(workload.key, ())
            found = self._pod_classes[workload.key] = classify(pods, committed, ordered=True)
        return found

    def deployment_pods(self) -> DeploymentPods:
        """The pods of running Deployments by node, with their lifecycle class. Built
        once, the first time a node-by-node victim search needs it."""
        found = self._deployment_pods
        if found is None:
            found = self._deployment_pods = DeploymentPods(self)
        return found

    def has_deployments(self) -> bool:
        """Whether some workload of the snapshot is a Deployment (plugins ask at open)."""
        count = self.deployment_count
        if count is None:
            count = self.deployment_count = sum(w.is_deployment for w in self.workloads.values())
        return count > 0

    def leaf(self, name: str) -> QuotaNode | None:
        return self.tree.leaves.get(name)


_PAIR = itemgetter(0, 1)
_DELETING = attrgetter("facts.deleting")


class DeploymentPods:
    """Every bound pod of an admitted, not evicted Deployment, by node, as
    ``(class, priority, pod, index, requests)`` (SEMANTICS §6: pod classes; a pod's
    priority is its own, else its workload's; ``index``: its place in its workload's
    ``classify`` order).

    This is what the node-by-node victim search knows of a node before it builds the
    node's victim units: any preemptor's candidates there are a subset of these pods
    (plus units of other kinds), so bounds taken over all of them are lower bounds for
    every preemptor. Each node's pods are sorted by (class, priority); the rooms they
    free, largest first, are added up per resource the first time they are asked for.
    """

    __slots__ = ("bounds", "by_node", "sums")

    def __init__(self, snapshot: Snapshot) -> None:
        # Keyed by node name; Optional only because Pod.node_name is: these pods are bound.
        by_node: dict[str | None, list[tuple[int, int, Pod, int, Mapping[str, int]]]] = {}
        lookup = by_node.get
        pods_by_workload = snapshot.pods_by_workload
        for workload in snapshot.admitted:
            if not workload.is_deployment or workload.evicted or workload.admission is None:
                continue
            pods = pods_by_workload.get(workload.key)
            if not pods:
                continue
            default = workload.priority
            classes: list[int] | None = None  # None: every pod normal, in classify's order
            if len(pods) > workload.admission.pod_sets[0].count or any(map(_DELETING, pods)):
                classified = snapshot.pod_classes(workload)
                pods = [pod for pod, _ in classified]
                classes = [pod_class for _, pod_class in classified]
            for index, pod in enumerate(pods):
                priority = pod.priority
                entry = (
                    NORMAL if classes is None else classes[index],
                    default if priority is None else priority,
                    pod,
                    index,
                    pod.requests,
                )
                found = lookup(pod.node_name)
                if found is None:
                    by_node[pod.node_name] = [entry]
                else:
                    found.append(entry)
        for entries in by_node.values():
            entries.sort(key=_PAIR)  # least (class, priority) first
        self.by_node: dict[str, list[tuple[int, int, Pod, int, Mapping[str, int]]]] = by_node  # type: ignore[assignment]
        self.sums: dict[str, dict[str, list[int]]] = {}  # resource -> node -> running totals
        self.bounds: dict[frozenset[str], list[tuple[tuple[object, ...], str, int]]] = {}

    def first_bounds(self, members: frozenset[str]) -> list[tuple[tuple[object, ...], str, int]]:
        """For every node of ``members`` with such pods, ``((least pair, 1, (), node),
        node, 0)``: the coarsest bound of a one-victim set there, as a node search's heap
        starts from it. Kept per node set (a fresh list each time)."""
        found = self.bounds.get(members)
        if found is None:
            found = self.bounds[members] = [
                (((entries[0][0], entries[0][1]), 1, (), node), node, 0)
                for node, entries in self.by_node.items()
                if node in members
            ]
        return list(found)

    def fewest(self, node: str, resource: str, short: int) -> int:
        """The fewest of the node's pods whose requests of ``resource`` add up to
        ``short``; 0 when even all of them do not."""
        by_resource = self.sums.get(resource)
        if by_resource is None:
            by_resource = self.sums[resource] = {}
        sums = by_resource.get(node)
        if sums is None:
            rooms = [entry[4].get(resource, 0) for entry in self.by_node.get(node, ())]
            rooms.sort(reverse=True)
            sums = by_resource[node] = list(accumulate(rooms))
        return fewest_to_cover(sums, short)

    def pair(self, node: str, k: int) -> tuple[int, int]:
        """The k-th least (class, priority) among the node's pods (1 ≤ k ≤ their number)."""
        entry = self.by_node[node][k - 1]
        return (entry[0], entry[1])


_HOLDS_RESOURCES = attrgetter("holds_resources")


def _by_workload(pods: list[Pod]) -> FrozenDict[str, tuple[Pod, ...]]:
    """The pods of each workload in the order of ``pods``, taken by runs (in key order the
    pods of a workload come together: their names start with the workload's)."""
    found: dict[str, list[Pod]] = {}
    for workload, run in groupby(pods, attrgetter("facts.workload")):
        if workload is not None:
            found.setdefault(workload, []).extend(run)
    return FrozenDict({key: tuple(listed) for key, listed in found.items()})


def _take_room(pool: NodePool, pods: list[Pod]) -> None:
    """``pool.consume`` of every pod of ``pods`` (all bound), once per node and request map
    times the count of such pods (the pods of a pod set share one map): the same sums. A
    pod asking for a resource its node does not list adds it to the node's room, in the
    order pods come: then pods are consumed one by one, as that order is not kept here."""
    nodes_by_map: dict[int, tuple[Mapping[str, int], list[str]]] = {}  # id(map) -> map, nodes
    node_name_of = attrgetter("node_name")
    for requests, run in groupby(pods, attrgetter("requests")):
        found = nodes_by_map.get(id(requests))
        if found is None:
            found = nodes_by_map[id(requests)] = (requests, [])
        found[1].extend(map(node_name_of, run))
    counted = [(requests, Counter(names)) for requests, names in nodes_by_map.values()]
    free = pool.free
    for requests, counts in counted:
        for node_name in counts:
            room = free.get(node_name)
            if room is not None and not requests.keys() <= room.keys():
                for pod in pods:
                    pool.consume(pod.node_name, pod.requests)  # type: ignore[arg-type]  # bound
                return
    for requests, counts in counted:
        items = requests.items()
        for node_name, count in counts.items():
            room = free.get(node_name)
            if room is not None:
                for resource, amount in items:
                    room[resource] -= amount * count


def _in_order(pods: Mapping[str, Pod]) -> bool:
    """Whether the keys of ``pods`` are in sorted order already."""
    keys = list(pods)
    return all(map(lt, keys, islice(keys, 1, None)))


def fewest_to_cover(sums: list[int], short: int) -> int:
    """Given the running totals of rooms, largest first, the fewest of them that add up
    to ``short``; 0 when even all of them do not."""
    found = bisect_left(sums, short) + 1
    return found if found <= len(sums) else 0


def wants_more(workload: Workload) -> bool:
    """An admitted workload whose desired counts are above its committed ones."""
    assert workload.admission is not None
    committed = {psa.name: psa.count for psa in workload.admission.pod_sets}
    return any(ps.count > committed.get(ps.name, 0) for ps in workload.pod_sets)
