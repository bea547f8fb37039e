"""The immutable, indexed view a session starts from.

Built once from an :class:`~.objects.Inventory`; every session makes its own
mutable copies of the two things it changes (quota usage and node room), so
building is the only cost proportional to the cluster's size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .model import FR, Flavor, Pod, PodSet, PodSetAdmission, PriorityClass, Workload
from .nodes import NodePool, Placements, pod_terms
from .objects import Inventory, Problem
from .quota import Accounting, QuotaNode, QuotaTree

__all__ = ["Snapshot", "admitted_usage", "pod_set_usage", "wants_more"]


def pod_set_usage(pod_set: PodSet, count: int, flavors: Mapping[str, str]) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for resource, amount in pod_set.requests.items():
        flavor = flavors.get(resource)
        if flavor is None or amount == 0:
            continue
        fr = (flavor, resource)
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


@dataclass(frozen=True, slots=True)
class PendingPlacement:
    """A pod of an admitted workload that has no Pod object yet, placed at session start."""

    workload: str
    pod_set: str
    node: str


class Snapshot:
    """Flavors, the quota tree, workloads (pending and admitted), nodes and pods at ``now``."""

    __slots__ = (
        "_name_ranks",
        "_object_ranks",
        "accounting",
        "admitted",
        "admitted_by_queue",
        "flavors",
        "inadmissible",
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
        self.now = 0
        self.flavors: dict[str, Flavor] = {}
        self.tree = QuotaTree({})
        self.workloads: dict[str, Workload] = {}
        self.admitted: list[Workload] = []
        self.pending: list[Workload] = []
        self.admitted_by_queue: dict[str, list[Workload]] = {}
        self.pending_by_queue: dict[str, list[Workload]] = {}
        self.usage: dict[str, dict[FR, int]] = {}
        self.pods: dict[str, Pod] = {}
        self.pods_by_workload: dict[str, list[Pod]] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.inadmissible: dict[str, str] = {}
        self.problems: list[Problem] = []
        self.node_pool = NodePool({}, {})
        self.accounting = Accounting(self.tree)
        self.placements: Placements | None = None
        self.reserved_pods: list[PendingPlacement] = []
        self.reserved_by_workload: dict[str, list[PendingPlacement]] = {}
        self._name_ranks: dict[str, int] | None = None
        self._object_ranks: dict[int, int] | None = None

    @classmethod
    def build(cls, inventory: Inventory, *, now: int) -> Snapshot:
        snap = cls()
        snap.now = now
        snap.flavors = dict(inventory.flavors)
        snap.tree = QuotaTree(inventory.queues)
        snap.priority_classes = dict(inventory.priority_classes)
        snap.inadmissible = dict(inventory.inadmissible)
        snap.problems = list(inventory.problems)
        snap.accounting = Accounting(snap.tree)
        leaves = snap.tree.leaves
        for key in sorted(inventory.workloads):
            workload = inventory.workloads[key]
            snap.workloads[key] = workload
            if workload.admission is not None:
                # Quota is charged to the queue that admitted it (Kueue keeps the
                # admission's ClusterQueue even if spec.queueName changed since).
                leaf = leaves.get(workload.admission.queue)
                if leaf is None:
                    snap.inadmissible.setdefault(
                        key, f"admitted to queue {workload.admission.queue!r}, which is not a leaf queue of this snapshot"
                    )
                    continue
                usage = admitted_usage(workload)
                snap.usage[key] = usage
                snap.accounting.add_all(leaf, usage)
                snap.admitted.append(workload)
                snap.admitted_by_queue.setdefault(leaf.name, []).append(workload)
                if workload.is_deployment and wants_more(workload):
                    # Desired above committed: the difference is pending demand (SEMANTICS §6).
                    snap.pending.append(workload)
                    snap.pending_by_queue.setdefault(leaf.name, []).append(workload)
            else:
                if workload.queue not in leaves:
                    snap.inadmissible.setdefault(key, f"queue {workload.queue!r} is not a leaf queue")
                    continue
                snap.pending.append(workload)
                snap.pending_by_queue.setdefault(workload.queue, []).append(workload)
        snap._build_nodes(inventory)
        return snap

    def _build_nodes(self, inventory: Inventory) -> None:
        self.pods = dict(sorted(inventory.pods.items()))
        for pod in self.pods.values():
            if pod.workload is not None and pod.holds_resources:
                self.pods_by_workload.setdefault(pod.workload, []).append(pod)
        if not inventory.nodes:
            return
        pool = self.node_pool = NodePool(inventory.nodes, inventory.flavors)
        for pod in self.pods.values():
            if pod.holds_resources and pod.node_name is not None:
                pool.consume(pod.node_name, pod.requests)
        if not pool.by_flavor:
            return
        placements = Placements(pool)
        # Admitted workloads whose pods do not exist yet hold room on the nodes,
        # placed in admission order (SEMANTICS §6).
        order = sorted(
            self.admitted,
            key=lambda w: (w.admitted_at if w.admitted_at is not None else self.now, w.tiebreak),
        )
        for workload in order:
            self._reserve_missing_pods(workload, placements)
        pool.free = {name: dict(free) for name, free in placements.free.items()}
        self.placements = placements

    def _reserve_missing_pods(self, workload: Workload, placements: Placements) -> None:
        assert workload.admission is not None
        existing = len(self.pods_by_workload.get(workload.key, ()))
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
            self._place_missing(workload, spec, psa, missing, placements)

    def _place_missing(
        self,
        workload: Workload,
        spec: PodSet,
        psa: PodSetAdmission,
        missing: int,
        placements: Placements,
    ) -> None:
        flavor_names = {psa.flavors[r] for r in spec.requests if r in psa.flavors}
        if len(flavor_names) != 1:
            return
        (flavor_name,) = flavor_names
        flavor = self.flavors.get(flavor_name)
        if flavor is None or not placements.has_nodes(flavor_name):
            return
        selector, tolerations = pod_terms(flavor, spec)
        for _ in range(missing):
            node = placements.best_fit(flavor_name, spec.requests, selector, tolerations)
            if node is None:
                return
            placements.take(node, spec.requests)
            placed = PendingPlacement(workload.key, spec.name, node)
            self.reserved_pods.append(placed)
            self.reserved_by_workload.setdefault(workload.key, []).append(placed)

    def descending_rank(self, name: str) -> int:
        """A pod's or workload's ``namespace/name`` as an integer that is smaller for a
        higher name: victim orders that take "higher name first" compare ints, not
        strings turned around character by character. Built once, on first use."""
        return self._ranks().get(name, -1)

    def descending_rank_of(self, obj: Pod | Workload) -> int:
        """:meth:`descending_rank` of a pod or workload of this snapshot, without
        building its ``namespace/name`` again."""
        self._ranks()
        assert self._object_ranks is not None
        found = self._object_ranks.get(id(obj))
        return found if found is not None else self.descending_rank(obj.key)

    def _ranks(self) -> dict[str, int]:
        ranks = self._name_ranks
        if ranks is None:
            names = sorted({*self.pods, *self.workloads}, reverse=True)
            ranks = self._name_ranks = {n: i for i, n in enumerate(names)}
            by_object = {id(pod): ranks[key] for key, pod in self.pods.items()}
            by_object.update((id(w), ranks[key]) for key, w in self.workloads.items())
            self._object_ranks = by_object
        return ranks

    def leaf(self, name: str) -> QuotaNode | None:
        return self.tree.leaves.get(name)


def wants_more(workload: Workload) -> bool:
    """An admitted workload whose desired counts are above its committed ones."""
    assert workload.admission is not None
    committed = {psa.name: psa.count for psa in workload.admission.pod_sets}
    return any(ps.count > committed.get(ps.name, 0) for ps in workload.pod_sets)
