"""The Kubernetes backend: informers in, one session per cycle, commits out.

One :class:`KubernetesBackend` owns the informers (one named task each), the
incremental inventory, the writer, the Event recorder and the owner reconciler
(``reconciler``). A cycle is:

1. **snapshot** the inventory (a frozen copy: later watch events do not reach
   it; its cost is what changed, see ``inventory``) and run one **session** in
   a worker thread, so that the event loop keeps renewing the Lease, answering
   ``/healthz``, following watches and taking signals while it decides;
2. **commit** the decisions (``commit``): each Workload's status, with bounded
   concurrency (a stopped victim's release goes with its next status, see
   ``commit`` point 9 and :meth:`KubernetesBackend._owner_stopped`); then write
   each Queue's status.

Owners are not synced inside a cycle: the owner reconciler, fed by watch
events and by the commit, creates the Workloads of new owners (Jobs,
Deployments, JobSets…, one kind per enabled integration: ``integrations``)
and drives every owner to what its Workload says (level-triggered, with a
backoff per owner). A cycle ends once its decisions are in the Workloads'
status, so the next session starts then, and its snapshot already holds them
(nothing is admitted or evicted twice). Before its snapshot a cycle waits at
most ``settle_owners`` seconds for the reconciler to catch up, so that a burst
of new Jobs is decided in one session, yet a slow API server never holds a
cycle for longer (the daemon's ``owner_settle``). With ``settle_owners`` infinite
(the default) a cycle also waits for the owners after its commit: one cycle is
then one whole step, which tests and one-shot tools rely on.

**An abandoned session.** When the loop abandons a cycle (its deadline, a lost
lease, shutdown) while the session runs, the thread cannot be stopped: it runs
to its end, and its decisions are discarded (logged, counted in
:attr:`sessions_discarded`), never committed. Only one session thread exists
at a time: the next cycle waits for the abandoned one to end before it starts
its own (and its own deadline bounds that wait). The thread is a daemon
thread, so a session that never ends cannot keep the process from exiting.

Watch events set :attr:`wake`; the loop (``daemon.loop``) runs a cycle soon
after it is set and at least every ``cycle_interval``. Cycles never overlap:
the loop awaits each one.

Every write asks ``gate`` (leader election: only the leader writes) right
before it is sent; :meth:`drain` stops decisions from starting so that a
shutdown leaves none half applied (``commit``'s design note).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from preemptd.framework.decisions import Decisions, QueueShare
from preemptd.framework.model import WORKLOAD_LABEL, Flavor
from preemptd.framework.objects import Inventory
from preemptd.framework.quantity import format_quantity
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot

from ...config import Config
from ...logging import DecisionLog
from ...plugins import FailureLog, Plugins
from .client import (
    FLAVORS,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
    Kube,
    Obj,
    Resource,
)
from .commit import CommitStats, Committer, Writer, seen_workloads
from .events import EventRecorder
from .informers import Informer, object_key, trim_metadata, trim_pod
from .integrations import Integration
from .integrations.registry import Integrations, resolve_integrations
from .inventory import ClusterInventory
from .reconciler import OwnerReconciler
from .sessions import RunsSessions, SessionThread
from .workloads import workload_name

__all__ = ["WATCHED", "CycleReport", "KubernetesBackend"]

log = logging.getLogger("preemptd.kubernetes")

WATCHED: tuple[Resource, ...] = (QUEUES, FLAVORS, PRIORITY_CLASSES, NODES, PODS, WORKLOADS,
                                  LOCAL_QUEUES, NAMESPACES, WORKLOAD_PRIORITY_CLASSES)
"""The resources the backend always lists and watches (the RBAC role grants list+watch on
each); each enabled integration adds its owner kind (``integrations``)."""

T = TypeVar("T")


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
    # the session's snapshot: the quota and pending gauges of /metrics read it
    snapshot: Snapshot | None = None


class KubernetesBackend(RunsSessions):
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
        settle_owners: float = math.inf,
        owner_retry: tuple[float, float] = (0.5, 30.0),
        integrations: Integrations | None = None,
    ) -> None:
        self.kube = kube
        self.config = config
        self.plugins = plugins
        self.dry_run = dry_run
        self.clock = clock
        self.wake = asyncio.Event()
        self.resync = False  # a write was refused: decide again at once
        self.draining = False  # shutting down: decisions not yet begun are left alone
        self.inventory = ClusterInventory(owner_stopped=self._owner_stopped)
        self.settle_owners = settle_owners
        first_retry, max_retry = owner_retry
        # Owner syncs take at most half the write slots: a burst of new Jobs never leaves the
        # commit of decisions waiting behind it.
        self.owners = OwnerReconciler(
            self._sync_owner, concurrency=max(1, concurrency // 2), gate=gate,
            first_retry=first_retry, max_retry=max_retry,
        )
        self.sessions = SessionThread("preemptd-session")
        self._pods_by_workload: dict[str, set[str]] = {}
        self._queue_status: dict[str, Obj] = {}
        if integrations is None:
            integrations, problems = resolve_integrations(config)
            for problem in problems:
                log.warning("%s", problem)
        self.integrations = integrations.by_kind()  # owner kind -> its integration
        self.informers: dict[Resource, Informer] = {}
        for resource in WATCHED:
            self.informers[resource] = Informer(
                kube,
                resource,
                on_event=self._handler(resource),
                trim=trim_pod if resource is PODS else trim_metadata,
                watch_timeout=watch_timeout,
            )
        for integration in self.integrations.values():
            self.informers[integration.resource] = Informer(
                kube,
                integration.resource,
                on_event=self._handler(integration.resource),
                label_selector=integration.label_selector,
                watch_timeout=watch_timeout,
                optional=integration.optional,
            )
            for read in integration.reads:
                if read not in self.informers:
                    self.informers[read] = Informer(
                        kube, read, on_event=self._read_handler(read), watch_timeout=watch_timeout,
                        optional=integration.optional,
                    )
        self._events = EventRecorder(
            kube, dry_run=dry_run, gate=gate, setting=lambda: self.config.daemon.events
        )
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

    def cached(self, resource: Resource, key: str) -> Obj | None:
        informer = self.informers.get(resource)
        return None if informer is None else informer.store.get(key)

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
        self._mark_every_owner()
        self._tasks.append(asyncio.create_task(self.owners.run(), name="owner-reconciler"))
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
            if (integration := self.integrations.get(kind)) is not None:
                integration.observe(old, None if deleted else new)
                self.owners.mark((kind, integration.owner_key(obj)))
            else:
                self.inventory.apply(kind, obj, deleted=deleted)
                if kind == "Workload":
                    self._mark_owner(obj)
                elif kind == "Pod":
                    self._index_pod(old, None if deleted else new)
                elif kind == "PriorityClass":
                    self._mark_every_owner()
            self.wake.set()

        return handle

    def _read_handler(self, resource: Resource) -> Callable[[str, Obj | None, Obj | None], None]:
        """A kind integrations read: its change syncs again every owner of those integrations."""

        def handle(event: str, old: Obj | None, new: Obj | None) -> None:
            for kind, integration in self.integrations.items():
                if resource in integration.reads:
                    store = self.informers[integration.resource].store
                    for key in sorted({integration.owner_key(obj) for obj in store.values()}):
                        self.owners.mark((kind, key))

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
            if add:
                self._pods_by_workload.setdefault(workload_key, set()).add(object_key(pod))
            elif (pods := self._pods_by_workload.get(workload_key)) is not None:
                pods.discard(object_key(pod))
                if not pods:  # forgotten with its last pod: churn leaves no empty entries behind
                    del self._pods_by_workload[workload_key]
            workload = self.informers[WORKLOADS].store.get(workload_key)
            if workload is not None:
                self._mark_owner(workload)

    def _owner_reference(self, workload: Obj) -> tuple[str, str] | None:
        owner = (workload.get("spec") or {}).get("owner") or {}
        kind, name = owner.get("kind"), owner.get("name")
        if kind not in self.integrations or not isinstance(name, str):
            return None
        namespace = (workload.get("metadata") or {}).get("namespace") or "default"
        return str(kind), f"{namespace}/{name}"

    def _owner_stopped(self, workload_key: str, workload: Obj) -> bool:
        """An evicted Workload's owner has stopped, as its integration says (held, no live pod:
        ``Integration.stopped``). Its quota is then free (``inventory``, "Released")."""
        reference = self._owner_reference(workload)
        if reference is None:
            return False
        integration = self.integrations[reference[0]]
        owner = integration.owner(self.informers[integration.resource].store, reference[1])
        return owner is not None and integration.stopped(self, owner, workload_key)

    def _mark_owner(self, workload: Obj) -> None:
        reference = self._owner_reference(workload)
        if reference is not None:
            self.owners.mark(reference)

    def _mark_every_owner(self) -> None:
        for kind, integration in self.integrations.items():
            store = self.informers[integration.resource].store
            for key in sorted({integration.owner_key(obj) for obj in store.values()}):
                self.owners.mark((kind, key))

    def _owner_of(self, workload: Obj) -> Obj | None:
        """The object the Events about the Workload's owner are about (``Integration.event_target``)."""
        reference = self._owner_reference(workload)
        if reference is None:
            return None
        integration = self.integrations[reference[0]]
        owner = integration.owner(self.informers[integration.resource].store, reference[1])
        return None if owner is None else integration.event_target(owner)

    def _conflict(self) -> None:
        self.resync = True
        self.wake.set()

    # -- owners -----------------------------------------------------------------------

    async def _sync_owner(self, kind: str, key: str) -> bool | None:
        """One pass of the owner reconciler: None or True when the owner matches its Workload."""
        integration: Integration | None = self.integrations.get(kind)
        owner = None if integration is None else integration.owner(self.informers[integration.resource].store, key)
        if integration is None or owner is None:
            return True
        namespace, _, name = key.partition("/")
        workload = self.informers[WORKLOADS].store.get(f"{namespace}/{workload_name(kind, name)}")
        return await _converged(integration.sync(self, owner, workload))

    async def _sync_owner_of(self, workload_key: str) -> None:
        """A decision about this Workload is written: hand its owner to the reconciler."""
        workload = self.informers[WORKLOADS].store.get(workload_key)
        reference = None if workload is None else self._owner_reference(workload)
        if reference is not None:
            self.owners.mark(reference, now=True)

    # -- a cycle ----------------------------------------------------------------------

    async def cycle(self, *, actions: Sequence[str] | None = None) -> CycleReport:
        """One cycle (see the module docstring); ``actions`` overrides the configured ones."""
        actions = tuple(self.config.scheduler.actions if actions is None else actions)
        self.wake.clear()
        self.resync = False
        timings: dict[str, float] = {}
        started = time.perf_counter()
        synced = self.owners.synced
        if self.settle_owners == math.inf:
            await self.owners.idle()
        elif self.settle_owners > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.owners.idle(), self.settle_owners)
        await self.sessions.previous()
        timings["sync"] = time.perf_counter() - started
        # A frozen view: the watch events applied while the session runs do not reach it,
        # and the Workloads as they are now are the versions its decisions are about.
        inventory = _frozen(self.inventory.inventory())
        released = self.inventory.released
        workloads = dict(self.informers[WORKLOADS].store)
        registry = self.plugins.registry()
        now = self.clock()

        def session() -> tuple[Snapshot, Decisions]:
            began = time.perf_counter()
            snapshot = Snapshot.build(inventory, now=now)
            timings["snapshot"] = time.perf_counter() - began
            return snapshot, run_session(snapshot, registry, actions=actions, timings=timings)

        snapshot, decisions = await self.sessions.run(session)
        self.plugin_failures.report(registry, log, time.monotonic())
        seen = seen_workloads(decisions, workloads, released)
        self.decision_log(decisions, lambda key: w.queue if (w := snapshot.workloads.get(key)) else None)
        report = CycleReport(
            decisions, CommitStats(), 0, timings, actions,
            queues=_queue_counts(snapshot),
            plugin_failures=dict(registry.failures),
            plugin_vetoes=dict(registry.vetoes),
            snapshot=snapshot,
        )
        started = time.perf_counter()
        held = {ref for obj in seen.values() if (ref := self._owner_reference(obj)) is not None}
        try:
            await self.owners.hold(held)
            report.commit = await self.committer.commit(decisions, seen=seen, released=released)
        finally:
            self.owners.release(held)
        if not self.draining:
            await self._write_queue_status(snapshot, decisions.shares)
        if self.settle_owners == math.inf:
            await self.owners.idle()
        timings["commit"] = time.perf_counter() - started
        report.synced_owners = self.owners.synced - synced
        return report

    async def _write_queue_status(self, snapshot: Snapshot, shares: list[QueueShare] | None = None) -> None:
        """Each Queue's nominal quota, usage and workload counts, for ``kubectl get queues``;
        with fair sharing, its weighted share (SEMANTICS §7.6)."""
        store = self.informers[QUEUES].store
        weighted = {share.queue: share.weighted_share for share in shares or ()}
        writes = []
        for name, obj in store.items():
            status = _queue_status(name, snapshot)
            if name in weighted:
                status["fairSharing"] = {"weightedShare": weighted[name]}
            current = obj.get("status") or {}
            if all(current.get(k) == v for k, v in status.items()):
                continue
            writes.append(self._writer.patch(QUEUES, name, None, {"status": status}, subresource="status"))
        await asyncio.gather(*writes)


async def _converged(sync: Awaitable[object]) -> bool:
    """A sync's answer: only False means "not there yet" (None, from a sync that does not say, is done)."""
    return (await sync) is not False


def _frozen(inventory: Inventory) -> Inventory:
    """A copy of the inventory's containers; their entries are replaced on change, never mutated."""
    return dataclasses.replace(
        inventory,
        flavors=dict(inventory.flavors),
        queues=dict(inventory.queues),
        workloads=dict(inventory.workloads),
        nodes=dict(inventory.nodes),
        pods=dict(inventory.pods),
        priority_classes=dict(inventory.priority_classes),
        problems=list(inventory.problems),
        warnings=list(inventory.warnings),
        inadmissible=dict(inventory.inadmissible),
        excluded_queues=set(inventory.excluded_queues),
    )


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
