"""The Kubernetes backend: informers in, one session per cycle, commits out.

One :class:`KubernetesBackend` owns the informers (one named task each), the
incremental inventory, the writer and the Event recorder. A cycle is:

1. **sync** the Jobs and Deployments whose objects (or Workloads, or pods)
   changed since the last cycle: create missing Workloads, finish what an
   earlier commit or a crash left half done (``jobs.sync_job``,
   ``deployments.sync_deployment``);
2. **snapshot** the inventory (its cost is what changed, see ``inventory``) and
   run one **session**;
3. **commit** the decisions (``commit``), then write each Queue's status.

Watch events set :attr:`wake`; the loop (``daemon.loop``) runs a cycle soon
after it is set and at least every ``cycle_interval``. Cycles never overlap:
the loop awaits each one.

Every write asks ``gate`` (leader election: only the leader writes) right
before it is sent; :meth:`drain` stops decisions from starting so that a
shutdown leaves none half applied (``commit``'s design note).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from preemptd.framework.decisions import Decisions
from preemptd.framework.model import WORKLOAD_LABEL, Flavor
from preemptd.framework.quantity import format_quantity
from preemptd.framework.session import run_session
from preemptd.framework.snapshot import Snapshot

from ...config import Config
from ...logging import DecisionLog
from ...plugins import FailureLog, Plugins
from .client import (
    DEPLOYMENTS,
    FLAVORS,
    JOBS,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    WORKLOADS,
    Kube,
    Obj,
    Resource,
)
from .commit import CommitStats, Committer, Writer, seen_workloads
from .deployments import sync_deployment
from .events import EventRecorder
from .informers import Informer, object_key, trim_metadata, trim_pod
from .inventory import ClusterInventory
from .jobs import sync_job
from .workloads import QUEUE_LABEL, workload_name

__all__ = ["WATCHED", "CycleReport", "KubernetesBackend"]

log = logging.getLogger("preemptd.kubernetes")

WATCHED: tuple[Resource, ...] = (QUEUES, FLAVORS, PRIORITY_CLASSES, NODES, PODS, WORKLOADS, JOBS, DEPLOYMENTS)
"""Every resource the backend lists and watches (the RBAC role grants list+watch on each)."""

_OWNERS = {"Job": JOBS, "Deployment": DEPLOYMENTS}


@dataclass(slots=True)
class CycleReport:
    decisions: Decisions
    commit: CommitStats
    synced_owners: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    actions: tuple[str, ...] = ()
    # queue -> {"admitted": n, "pending": n, "evicted": n}, as the session's snapshot saw them
    queues: dict[str, dict[str, int]] = field(default_factory=dict)
    # this cycle's hook failures and vetoes per plugin (the session's registry counters)
    plugin_failures: dict[str, int] = field(default_factory=dict)
    plugin_vetoes: dict[str, int] = field(default_factory=dict)


class KubernetesBackend:
    """See the module docstring. ``start`` before the first ``cycle``; ``stop`` at the end."""

    def __init__(
        self,
        kube: Kube,
        *,
        config: Config,
        plugins: Plugins,
        dry_run: bool = False,
        concurrency: int = 32,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        watch_timeout: int = 300,
        gate: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube = kube
        self.config = config
        self.plugins = plugins
        self.dry_run = dry_run
        self.clock = clock
        self.wake = asyncio.Event()
        self.resync = False  # a write was refused: decide again at once
        self.draining = False  # shutting down: decisions not yet begun are left alone
        self.inventory = ClusterInventory()
        self._dirty: set[tuple[str, str]] = set()  # (owner kind, namespace/name)
        self._pods_by_workload: dict[str, set[str]] = {}
        self._queue_status: dict[str, Obj] = {}
        self.informers: dict[Resource, Informer] = {}
        for resource in WATCHED:
            selector = QUEUE_LABEL if resource in (JOBS, DEPLOYMENTS) else None
            self.informers[resource] = Informer(
                kube,
                resource,
                on_event=self._handler(resource),
                trim=trim_pod if resource is PODS else trim_metadata,
                label_selector=selector,
                watch_timeout=watch_timeout,
            )
        self._events = EventRecorder(kube, dry_run=dry_run, gate=gate)
        self._writer = Writer(
            kube, self.informers, concurrency=concurrency, dry_run=dry_run, on_conflict=self._conflict, gate=gate
        )
        self.committer = Committer(
            self._writer,
            self._events,
            workloads=self.informers[WORKLOADS],
            pods=self.informers[PODS],
            owners=self._owner_of,
            sync_owner=self._sync_owner_of,
            accepting=lambda: not self.draining,
            concurrency=concurrency,
        )
        self.decision_log = DecisionLog(dry_run=dry_run)
        self.plugin_failures = FailureLog()
        self._tasks: list[asyncio.Task[None]] = []

    # -- the Cluster protocol (owners.py) -----------------------------------------

    @property
    def writer(self) -> Writer:
        return self._writer

    @property
    def events(self) -> EventRecorder:
        return self._events

    def flavors(self) -> Mapping[str, Flavor]:
        return self.inventory.flavors

    def priority(self, class_name: str | None) -> int | None:
        return self.inventory.priority(class_name)

    def now_ms(self) -> int:
        return self.clock()

    def live_pods(self, workload_key: str) -> list[Obj]:
        store = self.informers[PODS].store
        pods = [store[key] for key in self._pods_by_workload.get(workload_key, ()) if key in store]
        return [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]

    # -- lifecycle ------------------------------------------------------------------

    async def start(self, *, timeout: float | None = None) -> None:
        """Start every informer and the Event writer; return once all have listed."""
        for informer in self.informers.values():
            self._tasks.append(asyncio.create_task(informer.run(), name=informer.name))
        self._tasks.append(asyncio.create_task(self._events.run(), name="events"))
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers.values())), timeout)
        self._dirty.update(("Job", key) for key in self.informers[JOBS].store)
        self._dirty.update(("Deployment", key) for key in self.informers[DEPLOYMENTS].store)
        self.wake.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    @property
    def healthy(self) -> bool:
        """Every watch is connected (the loop's measure of a stale cache)."""
        return all(informer.healthy for informer in self.informers.values())

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers.values())

    def drain(self) -> None:
        """Begin no new decision; those under way finish (SIGTERM)."""
        self.draining = True

    # -- watch events -----------------------------------------------------------------

    def _handler(self, resource: Resource) -> Callable[[str, Obj | None, Obj | None], None]:
        kind = resource.kind

        def handle(event: str, old: Obj | None, new: Obj | None) -> None:
            deleted = event == "DELETED"
            obj = old if deleted and new is None else new
            if obj is None:
                return
            if kind in ("Job", "Deployment"):
                if not deleted:
                    self._dirty.add((kind, object_key(obj)))
            else:
                self.inventory.apply(kind, obj, deleted=deleted)
                if kind == "Workload":
                    self._mark_owner(obj)
                elif kind == "Pod":
                    self._index_pod(old, None if deleted else new)
                elif kind == "PriorityClass":
                    self._dirty.update(("Job", key) for key in self.informers[JOBS].store)
                    self._dirty.update(("Deployment", key) for key in self.informers[DEPLOYMENTS].store)
            self.wake.set()

        return handle

    def _index_pod(self, old: Obj | None, new: Obj | None) -> None:
        for pod, add in ((old, False), (new, True)):
            if pod is None:
                continue
            metadata = pod.get("metadata") or {}
            label = (metadata.get("labels") or {}).get(WORKLOAD_LABEL)
            if not label:
                continue
            workload_key = f"{metadata.get('namespace') or 'default'}/{label}"
            pods = self._pods_by_workload.setdefault(workload_key, set())
            if add:
                pods.add(object_key(pod))
            else:
                pods.discard(object_key(pod))
            workload = self.informers[WORKLOADS].store.get(workload_key)
            if workload is not None:
                self._mark_owner(workload)

    def _owner_reference(self, workload: Obj) -> tuple[str, str] | None:
        owner = (workload.get("spec") or {}).get("owner") or {}
        kind, name = owner.get("kind"), owner.get("name")
        if kind not in _OWNERS or not isinstance(name, str):
            return None
        namespace = (workload.get("metadata") or {}).get("namespace") or "default"
        return str(kind), f"{namespace}/{name}"

    def _mark_owner(self, workload: Obj) -> None:
        reference = self._owner_reference(workload)
        if reference is not None:
            self._dirty.add(reference)

    def _owner_of(self, workload: Obj) -> Obj | None:
        reference = self._owner_reference(workload)
        if reference is None:
            return None
        return self.informers[_OWNERS[reference[0]]].store.get(reference[1])

    def _conflict(self) -> None:
        self.resync = True
        self.wake.set()

    # -- a cycle ----------------------------------------------------------------------

    async def _sync_owner(self, kind: str, key: str) -> None:
        owner = self.informers[_OWNERS[kind]].store.get(key)
        if owner is None:
            return
        namespace, _, name = key.partition("/")
        workload = self.informers[WORKLOADS].store.get(f"{namespace}/{workload_name(kind, name)}")
        failures = self._writer.errors + self._writer.fenced
        if kind == "Job":
            await sync_job(self, owner, workload)
        else:
            await sync_deployment(self, owner, workload)
        if self._writer.errors + self._writer.fenced > failures:
            # A write failed (5xx, timeout): try again next cycle. Not at once — the
            # periodic cycle is the backoff for a server that is struggling.
            self._dirty.add((kind, key))

    async def _sync_owner_of(self, workload_key: str) -> None:
        workload = self.informers[WORKLOADS].store.get(workload_key)
        reference = None if workload is None else self._owner_reference(workload)
        if reference is not None:
            self._dirty.discard(reference)
            await self._sync_owner(*reference)

    async def sync_owners(self) -> int:
        """Sync every owner marked since the last call; returns how many."""
        dirty, self._dirty = self._dirty, set()
        await asyncio.gather(*(self._sync_owner(kind, key) for kind, key in sorted(dirty)))
        return len(dirty)

    async def cycle(self, *, actions: Sequence[str] | None = None) -> CycleReport:
        """One cycle (see the module docstring); ``actions`` overrides the configured ones."""
        actions = tuple(self.config.scheduler.actions if actions is None else actions)
        self.wake.clear()
        self.resync = False
        timings: dict[str, float] = {}
        started = time.perf_counter()
        synced = await self.sync_owners()
        timings["sync"] = time.perf_counter() - started
        started = time.perf_counter()
        inventory = self.inventory.inventory()
        snapshot = Snapshot.build(inventory, now=self.clock())
        timings["snapshot"] = time.perf_counter() - started
        registry = self.plugins.registry()
        decisions = run_session(snapshot, registry, actions=actions, timings=timings)
        self.plugin_failures.report(registry, log, time.monotonic())
        # No await since the snapshot: the cache holds exactly what the session saw.
        seen = seen_workloads(decisions, self.informers[WORKLOADS].store)
        self.decision_log(decisions, lambda key: w.queue if (w := snapshot.workloads.get(key)) else None)
        report = CycleReport(
            decisions, CommitStats(), synced, timings, actions,
            queues=_queue_counts(snapshot),
            plugin_failures=dict(registry.failures),
            plugin_vetoes=dict(registry.vetoes),
        )
        started = time.perf_counter()
        report.commit = await self.committer.commit(decisions, seen=seen)
        if not self.draining:
            await self._write_queue_status(snapshot)
        timings["commit"] = time.perf_counter() - started
        return report

    async def _write_queue_status(self, snapshot: Snapshot) -> None:
        """Each Queue's nominal quota, usage and workload counts, for ``kubectl get queues``."""
        store = self.informers[QUEUES].store
        writes = []
        for name, obj in store.items():
            status = _queue_status(name, snapshot)
            current = obj.get("status") or {}
            if all(current.get(k) == v for k, v in status.items()):
                continue
            writes.append(self._writer.patch(QUEUES, name, None, {"status": status}, subresource="status"))
        await asyncio.gather(*writes)


def _queue_status(name: str, snapshot: Snapshot) -> Obj:
    node = snapshot.tree.leaves.get(name)
    usage: dict[tuple[str, str], int] = {}
    for workload in snapshot.admitted_by_queue.get(name, ()):
        for fr, amount in snapshot.usage.get(workload.key, {}).items():
            usage[fr] = usage.get(fr, 0) + amount
    nominal: dict[tuple[str, str], int] = {}
    spec = node.spec if node is not None else None
    for group in spec.resource_groups if spec is not None else ():
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                nominal[(flavor.flavor, resource)] = quota.nominal
    return {
        "pendingWorkloads": len(snapshot.pending_by_queue.get(name, ())),
        "admittedWorkloads": len(snapshot.admitted_by_queue.get(name, ())),
        "nominal": _amounts(nominal),
        "usage": _amounts(usage),
    }


def _amounts(amounts: Mapping[tuple[str, str], int]) -> str:
    """``a100: cpu=4, nvidia.com/gpu=2; t4: cpu=1`` — what a printer column can show."""
    by_flavor: dict[str, list[str]] = {}
    for (flavor, resource), amount in sorted(amounts.items()):
        by_flavor.setdefault(flavor, []).append(f"{resource}={format_quantity(amount, resource)}")
    return "; ".join(f"{flavor}: {', '.join(parts)}" for flavor, parts in by_flavor.items())


def _queue_counts(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """Admitted, pending and evicted (eviction issued, quota still held) workloads per leaf queue."""
    counts: dict[str, dict[str, int]] = {name: {"admitted": 0, "pending": 0, "evicted": 0}
                                         for name in snapshot.tree.leaves}
    for name, workloads in snapshot.admitted_by_queue.items():
        queue = counts.setdefault(name, {"admitted": 0, "pending": 0, "evicted": 0})
        queue["admitted"] = len(workloads)
        queue["evicted"] = sum(1 for workload in workloads if workload.evicted)
    for name, workloads in snapshot.pending_by_queue.items():
        counts.setdefault(name, {"admitted": 0, "pending": 0, "evicted": 0})["pending"] = len(workloads)
    return counts
