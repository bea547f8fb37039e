"""Shadow mode: preemptd beside Kueue, reading Kueue's objects and writing nothing.

``preemptd run --shadow kueue`` (README, "Shadow mode") replaces the backend of
the daemon with :class:`KueueShadow`. It watches what ``kubectl get
clusterqueues,cohorts,localqueues,resourceflavors,workloads,workloadpriorityclasses,
priorityclasses,namespaces -A -o yaml`` prints — Kueue's kinds in the version the
API server serves (``v1beta2`` if served, else ``v1beta1``; Cohort also
``v1alpha1``), found by listing each — and every cycle:

1. reads the stores as :func:`~preemptd.framework.objects.parse_objects` reads a
   dump of them (the Kueue reader, the same rules as ``preemptd cycle``), in the
   session thread, and only when a watch event came since the last read; no Node
   or Pod is read: only quota counts, as in Kueue;
2. runs one session over it, and a second one when Kueue has just admitted
   workloads that were pending at the last cycle (``divergence``);
3. hands the divergences to a :class:`~.divergence.DivergenceLog`.

It writes nothing, ever: it has no writer, no Event recorder, and no owner to
sync (its ``owners`` reconciler never has one). It does not campaign for a
Lease either: leader election exists so that only one replica writes, and a
shadow writes nothing; two shadow replicas simply report the same thing. Kueue's
own leader election is Kueue's business, and a shadow's Lease would only be
noise beside it. The cycle report it returns is the Kubernetes backend's, so the
loop, the deadline, ``/healthz`` and the metrics of cycles work unchanged.

The session thread follows the Kubernetes backend's rule: one at a time, and a
session whose cycle was abandoned runs to its end with its result discarded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from preemptd.framework.decisions import Decisions
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot
from prometheus_client import CollectorRegistry

from ...config import Config
from ...plugins import FailureLog, Plugins
from .backend import CycleReport, _queue_counts
from .client import PRIORITY_CLASSES, ApiError, Kube, Obj, Resource
from .commit import CommitStats
from .divergence import Divergence, DivergenceLog, admitted_without_preemptd, from_decisions
from .informers import Informer
from .inventory import SOURCE
from .reconciler import OwnerReconciler
from .sessions import RunsSessions, SessionThread

__all__ = ["KUEUE_KINDS", "SHADOW_SOURCES", "KueueShadow", "ShadowError", "served_resources"]

log = logging.getLogger("preemptd.shadow")

T = TypeVar("T")

SHADOW_SOURCES = ("kueue",)
"""What ``--shadow`` may name."""

GROUP = "kueue.x-k8s.io"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)

# kind -> (plural, namespaced, versions in order of preference, required)
KUEUE_KINDS: dict[str, tuple[str, bool, tuple[str, ...], bool]] = {
    "ResourceFlavor": ("resourceflavors", False, ("v1beta2", "v1beta1"), True),
    "ClusterQueue": ("clusterqueues", False, ("v1beta2", "v1beta1"), True),
    "Cohort": ("cohorts", False, ("v1beta2", "v1beta1", "v1alpha1"), False),
    "LocalQueue": ("localqueues", True, ("v1beta2", "v1beta1"), True),
    "Workload": ("workloads", True, ("v1beta2", "v1beta1"), True),
    "WorkloadPriorityClass": ("workloadpriorityclasses", False, ("v1beta2", "v1beta1"), False),
}


class ShadowError(Exception):
    """The cluster does not serve what the shadow reads (Kueue is not installed)."""


async def served_resources(kube: Kube, *, retry: tuple[float, float] = (0.5, 10.0)) -> list[Resource]:
    """Kueue's kinds in the versions served, then PriorityClass and Namespace.

    A version is served when listing it answers; 404 tries the next one. Any other
    failure (the server is away) is retried with a backoff. A required kind that is
    served in no version raises :class:`ShadowError`; an optional one is left out.
    """
    found: list[Resource] = []
    for kind, (plural, namespaced, versions, required) in KUEUE_KINDS.items():
        for version in versions:
            resource = Resource(GROUP, version, plural, kind, namespaced)
            delay = retry[0]
            while True:
                try:
                    await kube.list(resource)
                except ApiError as exc:
                    if exc.not_found:
                        break
                    log.warning("%s: %s; retrying in %.1fs", resource, exc, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, retry[1])
                    continue
                found.append(resource)
                break
            if found and found[-1].kind == kind:
                break
        else:
            if required:
                tried = ", ".join(versions)
                raise ShadowError(f"the cluster serves no {kind} of {GROUP} (tried {tried}): is Kueue installed?")
            log.info("the cluster serves no %s of %s; read without it", kind, GROUP)
    return [*found, PRIORITY_CLASSES, NAMESPACES]


class KueueShadow(RunsSessions):
    """See the module docstring. ``start`` before the first ``cycle``; ``stop`` at the end."""

    def __init__(
        self,
        kube: Kube,
        *,
        config: Config,
        plugins: Plugins,
        registry: CollectorRegistry | None = None,
        grace: float = 0.0,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        watch_timeout: int = 300,
    ) -> None:
        self.kube = kube
        self.config = config
        self.plugins = plugins
        self.clock = clock
        self.watch_timeout = watch_timeout
        self.dry_run = True
        self.wake = asyncio.Event()
        self.resync = False  # nothing is written, so nothing is refused
        self.draining = False
        self.settle_owners = math.inf  # kept for the daemon's reload; no owner is ever synced
        self.owners = OwnerReconciler(_no_owner, concurrency=1, gate=lambda: False)
        self.divergences = DivergenceLog(registry, grace=round(grace * 1000))
        self.informers: dict[str, Informer] = {}
        self.resources: list[Resource] = []
        self.sessions = SessionThread("preemptd-shadow-session", "shadow session")
        self.plugin_failures = FailureLog()
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = True  # a watch event since the stores were last read
        self._read: tuple[Inventory, dict[str, Obj]] | None = None
        self._admitted: set[str] | None = None  # workloads Kueue ran at the last cycle (None: before the first)
        self._judged: dict[str, Divergence] = {}  # would-not-admit, kept while Kueue keeps it admitted
        self._problems: set[str] = set()

    # -- lifecycle ------------------------------------------------------------------

    async def start(self, *, timeout: float | None = None) -> None:
        """Find the versions served, start an informer each; return once all have listed."""
        self.resources = await asyncio.wait_for(served_resources(self.kube), timeout)
        for resource in self.resources:
            informer = Informer(self.kube, resource, on_event=self._event, watch_timeout=self.watch_timeout)
            self.informers[resource.kind] = informer
            self._tasks.append(asyncio.create_task(informer.run(), name=informer.name))
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers.values())), timeout)
        log.info("shadowing Kueue: %s", ", ".join(f"{r.kind} {r.api_version}" for r in self.resources))
        self.wake.set()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    @property
    def healthy(self) -> bool:
        return all(informer.healthy for informer in self.informers.values())

    @property
    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers.values())

    def drain(self) -> None:
        self.draining = True

    def _event(self, event: str, old: Obj | None, new: Obj | None) -> None:
        self._changed = True
        self.wake.set()

    # -- a cycle ----------------------------------------------------------------------

    async def cycle(self, *, actions: Sequence[str] | None = None) -> CycleReport:
        """Read, decide, compare (see the module docstring); nothing is written."""
        actions = tuple(self.config.scheduler.actions if actions is None else actions)
        self.wake.clear()
        timings: dict[str, float] = {}
        started = time.perf_counter()
        await self.sessions.previous()
        stores = None
        if self._changed or self._read is None:
            stores = [dict(informer.store) for informer in self.informers.values()]
        self._changed = False
        previous = self._read
        running = self._admitted
        registry, again = self.plugins.registry(), self.plugins.registry()
        now = self.clock()

        def session() -> tuple[Inventory, dict[str, Obj], Snapshot, Decisions, set[str], Decisions | None]:
            began = time.perf_counter()
            if stores is not None or previous is None:
                inventory, objects = _read(stores or [])
            else:
                inventory, objects = previous
            snapshot = Snapshot.build(inventory, now=now)
            timings["snapshot"] = time.perf_counter() - began
            decisions = run_session(snapshot, registry, actions=actions, timings=timings)
            # Admitted by Kueue since the last cycle: what would preemptd have done with them?
            # The same state, with them pending again.
            judged = set() if running is None else _running(inventory) - running
            counterfactual = None
            if judged:
                workloads = dict(inventory.workloads)
                for key in judged:
                    workloads[key] = dataclasses.replace(workloads[key], admission=None, admitted_at=None)
                reverted = dataclasses.replace(inventory, workloads=workloads)
                counterfactual = run_session(Snapshot.build(reverted, now=now), again, actions=actions)
            return inventory, objects, snapshot, decisions, judged, counterfactual

        try:
            inventory, objects, snapshot, decisions, judged, counterfactual = await self.sessions.run(session)
        except BaseException:  # failed or abandoned: what it read is read again next time
            self._changed = self._changed or stores is not None
            raise
        self._read = (inventory, objects)
        self.plugin_failures.report(registry, log, time.monotonic())
        self._log_problems(inventory)
        found = from_decisions(decisions, inventory, objects)
        if counterfactual is not None:
            for divergence in admitted_without_preemptd(judged, counterfactual, inventory, objects):
                self._judged[divergence.workload] = divergence
        # A would-not-admit lasts while Kueue keeps the workload admitted.
        for key in list(self._judged):
            workload = inventory.workloads.get(key)
            if workload is None or workload.admission is None or workload.evicted:
                del self._judged[key]
        found.extend(self._judged.values())
        self.divergences.update(found, now)
        self._admitted = _running(inventory)
        timings["compare"] = time.perf_counter() - started
        return CycleReport(
            decisions, CommitStats(), 0, timings, actions,
            queues=_queue_counts(snapshot),
            plugin_failures=dict(registry.failures),
            plugin_vetoes=dict(registry.vetoes),
        )

    def _log_problems(self, inventory: Inventory) -> None:
        """Each invalid object's problems once, when they first appear."""
        current = {str(problem) for problem in inventory.problems}
        for text in sorted(current - self._problems):
            log.warning("invalid object, left out: %s", text)
        self._problems = current


def _running(inventory: Inventory) -> set[str]:
    """The workloads Kueue runs: admitted, and not being evicted."""
    return {key for key, w in inventory.workloads.items() if w.admission is not None and not w.evicted}


def _read(stores: Sequence[Mapping[str, Obj]]) -> tuple[Inventory, dict[str, Obj]]:
    """The stores read as one dump; and Kueue's Workloads by key, for what Kueue did."""
    documents = [(SOURCE, store[key]) for store in stores for key in sorted(store)]
    objects = {
        f"{(obj.get('metadata') or {}).get('namespace') or 'default'}/{(obj.get('metadata') or {}).get('name')}": obj
        for _, obj in documents
        if obj.get("kind") == "Workload"
    }
    return parse_objects(documents), objects


async def _no_owner(kind: str, key: str) -> bool:
    return True  # never called: a shadow marks no owner
