"""The simulated cluster, kept up to date in place, and the Snapshot of it.

Rebuilding a snapshot from objects every cycle costs the whole cluster each
time (parsing a 1,000-node cluster takes seconds; ``Snapshot.build`` alone tens
of milliseconds), while a cycle changes a handful of workloads. So the
simulator keeps what :meth:`Snapshot.build` would derive — the accounting, the
admitted and pending lists per queue, the pods bound to nodes and the nodes'
free room — and changes it as workloads are admitted, shrunk and removed. A
session never changes its snapshot (it copies the accounting and the node room
it works on), so every session can be handed the live structures. Every snapshot
also carries the model's ``KeptUnits``: victim units kept from session to session
while their workloads are unchanged, which relies on what this module guarantees:
a changed workload, pod list or usage is a new object, and a queue's admitted
listing is a new tuple whenever one of its workloads comes, goes or changes.

The result must be exactly the snapshot ``Snapshot.build`` makes from the same
objects: :meth:`ClusterModel.inventory` gives those objects, and the
simulator's ``verify`` mode (used by the tests) runs every session on both and
compares the decisions.

Pods: an admitted workload's pods are bound when it is admitted, best fit, in
admission order — what ``Snapshot.build`` does for an admitted workload without
Pod objects (SEMANTICS §6) — and then kept, as the kubelet would keep them.
A Deployment's pods that leave get a ``deletionTimestamp`` and keep their room
until :meth:`ClusterModel.remove_pod`; a committed replica whose pod went is
replaced at the next snapshot, as its ReplicaSet would replace it.

The pods a node takes in a row are bound with their room taken in one step: the index
orders nodes by their room alone and room is additive, so it ends as binding them one by
one would leave it, with one move instead of one per pod. A workload whose pods already
cover its admission is not placed (nothing is missing).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from preemptd.framework.model import FR, Admission, FrozenDict, Pod, PodSetAdmission, Workload
from preemptd.framework.nodes import NodePool, Placements, pod_terms
from preemptd.framework.objects import Inventory
from preemptd.framework.pods import SURPLUS, classify
from preemptd.framework.preemption.kept import KeptUnits
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.snapshot import Snapshot, admitted_usage, wants_more

__all__ = ["VICTIM_DELETION_COST", "ClusterModel"]

VICTIM_DELETION_COST = -2147483648
"""The pod-deletion-cost a normal victim gets (CONTRACT §3), so the scale-down removes it."""


class _Keyed:
    """Workloads by key, with the list (and mapping) sorted by key rebuilt only after a
    change, and how many of them are Deployments."""

    __slots__ = ("_list", "_mapping", "changes", "deployments", "items", "keys")

    def __init__(self, changes: list[int] | None = None) -> None:
        self.items: dict[str, Workload] = {}
        self.keys: list[str] = []
        self._list: tuple[Workload, ...] | None = ()
        self._mapping: FrozenDict[str, Workload] | None = None
        self.deployments = 0
        # A counter shared by the listings of one kind (every queue's admitted ones, or
        # pending ones), moved by each change to any of them.
        self.changes = changes if changes is not None else [0]

    def put(self, workload: Workload) -> None:
        key = workload.key
        old = self.items.get(key)
        if old is None:
            insort(self.keys, key)
        elif old.is_deployment:
            self.deployments -= 1
        if workload.is_deployment:
            self.deployments += 1
        self.items[key] = workload
        self._list = None
        self._mapping = None
        self.changes[0] += 1

    def drop(self, key: str) -> None:
        old = self.items.pop(key, None)
        if old is not None:
            del self.keys[bisect_left(self.keys, key)]
            if old.is_deployment:
                self.deployments -= 1
            self._list = None
            self._mapping = None
            self.changes[0] += 1

    def listed(self) -> tuple[Workload, ...]:
        if self._list is None:
            self._list = tuple(map(self.items.__getitem__, self.keys))
        return self._list

    def mapping(self) -> FrozenDict[str, Workload]:
        """The workloads by key, in key order."""
        if self._mapping is None:
            self._mapping = FrozenDict(zip(self.keys, self.listed(), strict=True))
        return self._mapping


class ClusterModel:
    """Quota usage, workloads and pods of the simulated cluster at the current instant."""

    __slots__ = (
        "_admitted",
        "_admitted_all",
        "_admitted_changes",
        "_by_queue",
        "_by_queue_views",
        "_failed",
        "_freed",
        "_listed",
        "_pending",
        "_pending_all",
        "_pending_changes",
        "_pod_sets",
        "_unplaced",
        "accounting",
        "base",
        "flavors",
        "inadmissible",
        "kept_units",
        "leaves",
        "placements",
        "pods",
        "pods_by_workload",
        "pool",
        "tree",
        "usage",
        "workloads",
    )

    def __init__(self, inventory: Inventory, *, keep_units: bool = True) -> None:
        self.base = inventory
        # Victim units kept from session to session (framework/preemption/kept.py):
        # every snapshot of the model hands its sessions the same store.
        self.kept_units = KeptUnits() if keep_units else None
        self.tree = QuotaTree(inventory.queues)
        self.leaves = self.tree.leaves
        self.flavors = dict(inventory.flavors)
        self.accounting = Accounting(self.tree)
        self.inadmissible: dict[str, str] = dict(inventory.inadmissible)
        self.workloads: dict[str, Workload] = {}
        self.usage: dict[str, Mapping[FR, int]] = {}  # each a FrozenDict: sessions read them
        self._admitted: dict[str, _Keyed] = {}
        self._pending: dict[str, _Keyed] = {}
        # Changes to any queue's admitted (pending) listing, and the snapshots' mappings of
        # the non-empty listings by queue as of a count of them (rebuilt after a change).
        self._admitted_changes = [0]
        self._pending_changes = [0]
        self._by_queue_views: tuple[int, int, FrozenDict[str, tuple[Workload, ...]],
                                    FrozenDict[str, tuple[Workload, ...]]] | None = None
        self._admitted_all = _Keyed()
        self._pending_all = _Keyed()
        self._by_queue: dict[str, str] = {}  # key -> leaf it is listed under
        self._listed = _Keyed()  # the workloads of _by_queue: the snapshot's ``workloads``
        self.pods: dict[str, Pod] = dict(sorted(inventory.pods.items()))
        self._pod_sets: dict[str, str] = {}  # pod key -> podSet, for pods the simulator bound
        # Tuples, replaced whole on change: a session's snapshot reads them as they are.
        self.pods_by_workload: dict[str, tuple[Pod, ...]] = {}
        self._unplaced: dict[str, Workload] = {}
        # How many times node room was given back, and per unplaced workload whose last
        # placement attempt bound no pod: the workload and pod list it was made with and
        # that count then (see _place).
        self._freed = 0
        self._failed: dict[str, tuple[Workload, tuple[Pod, ...] | None, int]] = {}
        self.pool = NodePool(inventory.nodes, inventory.flavors) if inventory.nodes else NodePool({}, {})
        by_workload: dict[str, list[Pod]] = {}
        for pod in self.pods.values():
            if pod.workload is not None and pod.holds_resources:
                by_workload.setdefault(pod.workload, []).append(pod)
            if pod.holds_resources and pod.node_name is not None:
                self.pool.consume(pod.node_name, pod.requests)
        self.placements = Placements(self.pool) if self.pool.by_flavor else None
        self.pods_by_workload = {key: tuple(pods) for key, pods in by_workload.items()}

    # -- changes --------------------------------------------------------------------------

    def add(self, workloads: Iterable[Workload], *, now: int) -> None:
        """Add workloads as they are (pending, admitted or evicted); admitted ones get
        their missing pods placed in admission order."""
        admitted = []
        for workload in workloads:
            if workload.admission is None:
                self._add_pending(workload)
            elif self._add_admitted(workload):
                admitted.append(workload)
        if admitted:
            self._place(admitted, now=now)

    def _add_pending(self, workload: Workload) -> None:
        key = workload.key
        self.workloads[key] = workload
        if workload.queue not in self.leaves:
            self.inadmissible[key] = f"queue {workload.queue!r} is not a leaf queue"
            return
        self._pending.setdefault(workload.queue, _Keyed(self._pending_changes)).put(workload)
        self._pending_all.put(workload)
        self._by_queue[key] = workload.queue
        self._listed.put(workload)

    def _add_admitted(self, workload: Workload) -> bool:
        key = workload.key
        assert workload.admission is not None
        self.workloads[key] = workload
        leaf = self.leaves.get(workload.admission.queue)
        if leaf is None:
            self.inadmissible[key] = (
                f"admitted to queue {workload.admission.queue!r}, which is not a leaf queue of this snapshot"
            )
            return False
        usage = FrozenDict(admitted_usage(workload))
        self.usage[key] = usage
        self.accounting.add_all(leaf, usage)
        self._admitted.setdefault(leaf.name, _Keyed(self._admitted_changes)).put(workload)
        self._admitted_all.put(workload)
        self._by_queue[key] = leaf.name
        self._listed.put(workload)
        self._list_growth(workload, leaf.name)
        return True

    def _list_growth(self, workload: Workload, queue: str) -> None:
        """An admitted Deployment that wants more replicas than it has committed is also
        pending demand, listed under its leaf with the pending workloads (as
        ``Snapshot.build`` lists it)."""
        if workload.is_deployment and wants_more(workload):
            self._pending.setdefault(queue, _Keyed(self._pending_changes)).put(workload)
            self._pending_all.put(workload)
        elif queue in self._pending:
            self._pending[queue].drop(workload.key)
            self._pending_all.drop(workload.key)

    def admit(self, key: str, admission: Admission, *, now: int, scan: Mapping[str, Mapping[str, int]]) -> Workload:
        """A pending workload gets quota at ``now``; returns its new record."""
        workload = dataclasses.replace(
            self.workloads[key], admission=admission, admitted_at=now, evicted=False, flavor_scan=dict(scan)
        )
        self._unlist(key)
        self._add_admitted(workload)
        return workload

    def place_admitted(self, keys: Iterable[str], *, now: int) -> None:
        """Bind the pods of workloads admitted this cycle (after all :meth:`admit` calls)."""
        self._place([self.workloads[key] for key in keys], now=now)

    def replace(self, workload: Workload) -> None:
        """Swap a workload's record for one with the same admission (evicted, flavorScan)."""
        key = workload.key
        self.workloads[key] = workload
        if key in self._unplaced:
            self._unplaced[key] = workload  # its missing pods are placed for the new counts
        queue = self._by_queue.get(key)
        if queue is None:
            return
        self._listed.put(workload)
        listing = self._admitted if workload.admission is not None else self._pending
        listing[queue].put(workload)
        (self._admitted_all if workload.admission is not None else self._pending_all).put(workload)
        if workload.admission is not None:
            self._list_growth(workload, queue)

    def shrink(self, key: str, pod_set: str | None, count: int, pod_names: Iterable[str]) -> Workload:
        """Lower an admitted podSet's count by ``count``; its usage and pods go at once."""
        workload = self.workloads[key]
        assert workload.admission is not None
        admitted = {psa.name: psa for psa in workload.admission.pod_sets}
        elastic = [ps.name for ps in workload.pod_sets if ps.min_count is not None and ps.name in admitted]
        name = pod_set if pod_set in admitted else (elastic[0] if elastic else workload.admission.pod_sets[0].name)
        pod_sets = tuple(
            PodSetAdmission(psa.name, max(0, psa.count - count), psa.flavors) if psa.name == name else psa
            for psa in workload.admission.pod_sets
        )
        shrunk = dataclasses.replace(workload, admission=Admission(workload.admission.queue, pod_sets))
        leaf = self.leaves[self._by_queue[key]]
        self.accounting.remove_all(leaf, self.usage[key])
        usage = FrozenDict(admitted_usage(shrunk))
        self.usage[key] = usage
        self.accounting.add_all(leaf, usage)
        self.replace(shrunk)
        self._unbind_pods(key, name, count, set(pod_names))
        return shrunk

    # -- Deployments (SEMANTICS §6) ------------------------------------------------------------

    def recount(self, key: str, counts: Mapping[str, int], *, scan: Mapping[str, Mapping[str, int]] | None = None) -> Workload:
        """Set an admitted workload's committed counts (a Deployment grown in place or scaled
        down); its usage follows at once, its ``admittedAt`` is kept."""
        workload = self.workloads[key]
        assert workload.admission is not None
        pod_sets = tuple(
            PodSetAdmission(psa.name, counts.get(psa.name, psa.count), psa.flavors)
            for psa in workload.admission.pod_sets
        )
        changed = dataclasses.replace(workload, admission=Admission(workload.admission.queue, pod_sets))
        if scan is not None:
            changed = dataclasses.replace(changed, flavor_scan=dict(scan))
        leaf = self.leaves[self._by_queue[key]]
        self.accounting.remove_all(leaf, self.usage[key])
        usage = FrozenDict(admitted_usage(changed))
        self.usage[key] = usage
        self.accounting.add_all(leaf, usage)
        self.replace(changed)
        return changed

    def set_replicas(self, key: str, replicas: int) -> list[Pod]:
        """A Deployment's desired count becomes ``replicas``; a committed count above it is
        lowered to it. Returns the pods that start terminating (the surplus)."""
        workload = self.workloads[key]
        spec = workload.pod_sets[0]
        self.replace(dataclasses.replace(workload, pod_sets=(dataclasses.replace(spec, count=replicas), *workload.pod_sets[1:])))
        if workload.admission is None or workload.evicted or key not in self.usage:
            return []  # not admitted, or on its way out whole: its pods go with it
        if workload.admission.pod_sets[0].count > replicas:
            self.recount(key, {workload.admission.pod_sets[0].name: replicas})
        return self.terminate_surplus(key)

    def scale_down(self, key: str, count: int, pod_names: Iterable[str]) -> list[Pod]:
        """A Deployment victim: its committed count is lowered by ``count`` and the chosen
        pods get the lowest deletion cost, so the ReplicaSet removes exactly them. Returns
        the pods that start terminating."""
        workload = self.workloads[key]
        assert workload.admission is not None
        first = workload.admission.pod_sets[0]
        self.recount(key, {first.name: max(0, first.count - count)})
        named = set(pod_names)
        for pod in list(self.pods_by_workload.get(key, ())):
            if pod.key in named:
                self._swap(pod, dataclasses.replace(pod, deletion_cost=VICTIM_DELETION_COST))
        return self.terminate_surplus(key)

    def terminate_surplus(self, key: str) -> list[Pod]:
        """The pods beyond the committed count, chosen as the ReplicaSet chooses them, get
        their ``deletionTimestamp``: they hold their room until :meth:`remove_pod`."""
        workload = self.workloads[key]
        assert workload.admission is not None
        committed = workload.admission.pod_sets[0].count
        leaving = []
        for pod, cls in classify(self.pods_by_workload.get(key, ()), committed):
            if cls == SURPLUS:
                terminating = dataclasses.replace(pod, deleting=True)
                self._swap(pod, terminating)
                leaving.append(terminating)
        return leaving

    def remove_pod(self, pod_key: str) -> None:
        """A pod object is gone (its grace ended, or it was force-deleted): its room frees."""
        pod = self.pods.get(pod_key)
        if pod is None:
            return
        if pod.workload is not None and pod.workload in self.pods_by_workload:
            rest = tuple(p for p in self.pods_by_workload[pod.workload] if p.key != pod_key)
            if rest:
                self.pods_by_workload[pod.workload] = rest
            else:
                del self.pods_by_workload[pod.workload]
        self._unbind(pod)
        owner = self.workloads.get(pod.workload) if pod.workload is not None else None
        if owner is not None and owner.admission is not None and owner.key in self.usage:
            # The ReplicaSet replaces a pod it still counts: placed at the next snapshot
            # (a no-op when the pod was surplus).
            self._unplaced[owner.key] = owner

    def _swap(self, old: Pod, new: Pod) -> None:
        self.pods[old.key] = new
        if old.workload is not None:
            bound = self.pods_by_workload.get(old.workload, ())
            self.pods_by_workload[old.workload] = tuple(new if p.key == old.key else p for p in bound)

    def remove(self, key: str) -> Workload:
        """The workload leaves the cluster (finished, or gone after its eviction)."""
        workload = self.workloads.pop(key)
        self._unlist(key)
        self._unplaced.pop(key, None)
        self._failed.pop(key, None)
        self._unbind_all(self.pods_by_workload.pop(key, ()))
        return workload

    def _unlist(self, key: str) -> None:
        queue = self._by_queue.pop(key, None)
        self.inadmissible.pop(key, None)
        if queue is None:
            return
        self._listed.drop(key)
        usage = self.usage.pop(key, None)
        if usage is not None:
            self.accounting.remove_all(self.leaves[queue], usage)
            self._admitted[queue].drop(key)
            self._admitted_all.drop(key)
            if queue in self._pending:
                self._pending[queue].drop(key)  # a Deployment listed for its growth
                self._pending_all.drop(key)
        else:
            self._pending[queue].drop(key)
            self._pending_all.drop(key)

    def leaf_of(self, key: str) -> QuotaNode | None:
        queue = self._by_queue.get(key)
        return None if queue is None else self.leaves[queue]

    # -- pods -------------------------------------------------------------------------------

    def _place(self, workloads: Iterable[Workload], *, now: int) -> None:
        placements = self.placements
        if placements is None:
            return
        waiting = dict(self._unplaced)
        waiting.update((w.key, w) for w in workloads)
        order = sorted(waiting.values(), key=lambda w: (w.admitted_at if w.admitted_at is not None else now, w.tiebreak))
        self._unplaced = {}
        failed = self._failed
        bound = self.pods_by_workload
        for workload in order:
            key = workload.key
            pods = bound.get(key)
            last = failed.get(key)
            if last is not None and last[0] is workload and last[1] is pods and last[2] == self._freed:
                # Its last attempt bound no pod and no room has been freed since: no node
                # takes a pod it misses now either (room only shrank), so it would bind
                # none again.
                self._unplaced[key] = workload
                continue
            if self._place_missing(workload, placements, now):
                if last is not None:
                    del failed[key]
                continue
            self._unplaced[key] = workload
            if bound.get(key) is pods:
                failed[key] = (workload, pods, self._freed)
            elif last is not None:
                del failed[key]

    def _place_missing(self, workload: Workload, placements: Placements, now: int) -> bool:
        """Bind every pod the admission has and no Pod holds; False if some did not fit."""
        assert workload.admission is not None
        held = self.pods_by_workload.get(workload.key, ())
        if len(held) >= sum(psa.count for psa in workload.admission.pod_sets):
            # Every pod set is covered whichever pods are whose (as Snapshot.build judges
            # it): nothing to bind, and complete.
            return True
        bound = list(held)
        existing = len(bound)
        specs = {ps.name: ps for ps in workload.pod_sets}
        complete = True
        for psa in workload.admission.pod_sets:
            spec = specs.get(psa.name)
            if spec is None:
                continue
            covered = min(existing, psa.count)
            existing -= covered
            wanted = psa.count - covered
            if wanted <= 0:
                continue
            flavor_names = {psa.flavors[r] for r in spec.requests if r in psa.flavors}
            if len(flavor_names) != 1:
                continue
            (flavor_name,) = flavor_names
            flavor = self.flavors.get(flavor_name)
            if flavor is None or not placements.has_nodes(flavor_name):
                continue
            selector, tolerations = pod_terms(flavor, spec)
            # The pods a node takes in a row are placed with their room taken in one step
            # (room is additive, and a node's place in the index depends on its room
            # only), then bound in the order placed.
            nodes = placements.place_pods(
                flavor_name, spec.requests, wanted, selector, tolerations, self._take, additive=True
            )
            self._bind(workload, spec.name, now, bound, nodes)
            if len(nodes) < wanted:
                complete = False
        if len(bound) != len(held):
            # Replaced only when pods were bound: an unchanged list stays the same object
            # (what kept units are checked against).
            self.pods_by_workload[workload.key] = tuple(bound)
        return complete

    def _take(self, node: str, requests: Mapping[str, int]) -> None:
        """Take room on ``node`` for pods about to be bound there."""
        assert self.placements is not None
        self.placements.take(node, requests)
        self.pool.consume(node, requests)

    def _bind(self, workload: Workload, pod_set: str, now: int, bound: list[Pod], nodes: Iterable[str]) -> None:
        """Bind a new pod of ``pod_set`` to each of ``nodes`` (their room already taken),
        each named after how many pods the workload holds unless that name is taken."""
        requests = next(ps.requests for ps in workload.pod_sets if ps.name == pod_set)
        namespace = workload.namespace
        prefix = f"{workload.name}-{pod_set}-"
        owner = workload.key
        pods = self.pods
        pod_sets = self._pod_sets
        for node in nodes:
            index = len(bound)
            name = f"{prefix}{index}"
            key = f"{namespace}/{name}"
            while key in pods:
                index += 1
                name = f"{prefix}{index}"
                key = f"{namespace}/{name}"
            pod = Pod(namespace, name, requests, node_name=node, workload=owner, created=now)
            pod_sets[key] = pod_set
            bound.append(pod)
            pods[key] = pod

    def _unbind(self, pod: Pod) -> None:
        self.pods.pop(pod.key, None)
        self._pod_sets.pop(pod.key, None)
        if pod.node_name is None or not pod.holds_resources:
            return
        self._give_back(pod.node_name, pod.requests)

    def _unbind_all(self, pods: Iterable[Pod]) -> None:
        """:meth:`_unbind` of every pod, each node's room given back once: the sum of its
        pods' requests (room is additive, and a node's place in the index depends only
        on its room, so the result is the same)."""
        room: dict[str, dict[str, int]] = {}
        for pod in pods:
            self.pods.pop(pod.key, None)
            self._pod_sets.pop(pod.key, None)
            node = pod.node_name
            if node is None or not pod.holds_resources:
                continue
            found = room.get(node)
            if found is None:
                room[node] = dict(pod.requests)
            else:
                for resource, amount in pod.requests.items():
                    found[resource] = found.get(resource, 0) + amount
        for node, requests in room.items():
            self._give_back(node, requests)

    def _give_back(self, node: str, requests: Mapping[str, int]) -> None:
        self._freed += 1  # room grew: a placement that failed may now succeed
        if self.placements is not None:
            self.placements.give_back(node, requests)
        free = self.pool.free.get(node)
        if free is not None:
            for resource, amount in requests.items():
                free[resource] = free.get(resource, 0) + amount

    def _unbind_pods(self, key: str, pod_set: str, count: int, named: set[str]) -> None:
        """The pods a shrink takes: those the decision names, else the newest of the podSet."""
        bound = self.pods_by_workload.get(key)
        if not bound:
            return
        chosen = [pod for pod in bound if pod.key in named]
        if len(chosen) < count:
            rest = [p for p in bound if p.key not in named and self._pod_sets.get(p.key, pod_set) == pod_set]
            rest.sort(key=lambda p: (-p.created, p.name))
            chosen += rest[: count - len(chosen)]
        gone = {pod.key for pod in chosen}
        rest = tuple(pod for pod in bound if pod.key not in gone)
        if rest:
            self.pods_by_workload[key] = rest
        else:
            del self.pods_by_workload[key]
        self._unbind_all(chosen)

    # -- views ------------------------------------------------------------------------------

    @property
    def unplaced(self) -> int:
        """Admitted workloads some of whose pods found no node (they hold quota, not room)."""
        return len(self._unplaced)

    def pending_keys(self) -> list[str]:
        return list(self._pending_all.keys)

    def snapshot(self, *, now: int) -> Snapshot:
        """What ``Snapshot.build`` would make of :meth:`inventory` at ``now``, sharing the
        model's structures: valid until the model next changes."""
        if self._unplaced:
            # Snapshot.build places missing pods at every build: room may have freed.
            self._place([], now=now)
        snap = Snapshot()
        snap.now = now
        # Read-only views of the live mappings (no copy; their values are immutable), so a
        # plugin cannot change what the next session sees, as with ``Snapshot.build``.
        snap.flavors = MappingProxyType(self.flavors)
        snap.tree = self.tree
        snap.priority_classes = FrozenDict(self.base.priority_classes)
        snap.inadmissible = MappingProxyType(self.inadmissible)
        snap.problems = tuple(self.base.problems)
        snap.accounting = self.accounting
        snap.workloads = self._listed.mapping()
        snap.deployment_count = self._listed.deployments
        snap.admitted = self._admitted_all.listed()
        snap.pending = self._pending_all.listed()
        snap.admitted_by_queue, snap.pending_by_queue = self._listings_by_queue()
        snap.usage = MappingProxyType(self.usage)
        snap.pods = MappingProxyType(self.pods)
        snap.pods_by_workload = MappingProxyType(self.pods_by_workload)
        snap.node_pool = self.pool
        snap.placements = self.placements
        snap.kept_units = self.kept_units
        return snap

    def _listings_by_queue(self) -> tuple[FrozenDict[str, tuple[Workload, ...]], FrozenDict[str, tuple[Workload, ...]]]:
        """The non-empty admitted and pending listings by queue, in queue order: the same
        mappings from snapshot to snapshot until a listing of their kind changes."""
        admitted_at, pending_at = self._admitted_changes[0], self._pending_changes[0]
        views = self._by_queue_views
        if views is not None and views[0] == admitted_at and views[1] == pending_at:
            return views[2], views[3]
        if views is None or views[0] != admitted_at:
            admitted = FrozenDict({q: k.listed() for q, k in sorted(self._admitted.items()) if k.items})
        else:
            admitted = views[2]
        if views is None or views[1] != pending_at:
            pending = FrozenDict({q: k.listed() for q, k in sorted(self._pending.items()) if k.items})
        else:
            pending = views[3]
        self._by_queue_views = (admitted_at, pending_at, admitted, pending)
        return admitted, pending

    def inventory(self) -> Inventory:
        """The objects the model stands for, for ``Snapshot.build`` (verification)."""
        return Inventory(
            flavors=dict(self.base.flavors),
            queues=dict(self.base.queues),
            workloads={key: w for key, w in self.workloads.items() if key not in self.base.inadmissible},
            nodes=dict(self.base.nodes),
            pods=dict(self.pods),
            priority_classes=dict(self.base.priority_classes),
            problems=list(self.base.problems),
            inadmissible=dict(self.base.inadmissible),
            excluded_queues=set(self.base.excluded_queues),
        )
