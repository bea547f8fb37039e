"""Committing a session's decisions to the cluster.

Design note — how a commit stays correct when writes race, fail or stop halfway.

1. **The Workload status is written first and is the source of truth.** Each
   decision is one merge patch of the Workload's status subresource, carrying
   the resourceVersion of the Workload the session saw. Only after it succeeds is
   the Job or Deployment handed to the backend's owner reconciler, which makes
   it match its Workload (unsuspend with the flavor's node selector; suspend;
   parallelism; replicas) and keeps trying, with a per-owner backoff,
   until it does. This is level-triggered: the Workload's admission is the
   desired state, so a commit cancelled between the two writes, a failed owner
   write, a crash or a restart leaves a Workload that says what was decided and
   an owner that lags, never an owner left behind for good. Nothing is decided
   twice: an evicted Workload is seen as evicted by the next session (which
   re-uses it rather than choosing another victim), and an admitted one as
   admitted. A commit is over once every Workload status is written: that is
   when the next session may start, since its snapshot already holds them.
2. **Optimistic concurrency.** A 409 means the Workload changed after the
   snapshot (a user, another daemon, a late event). The decision was made on
   stale state, so it is dropped, never forced: the object is read again into
   the cache and another cycle is asked for at once, which decides afresh.
   Decisions of one session are independent per Workload (each was checked
   with all the others in place), so dropping one never invalidates another.
3. **Bounded concurrency.** Every write goes through one semaphore; a burst of
   a thousand admissions is a thousand short requests, ``concurrency`` at a time.
4. **Fenced by leadership.** ``gate`` is asked right before every request
   leaves (after the semaphore, so a write that queued behind others is judged
   when it is sent, not when it was planned): a replica that has stepped down
   writes nothing more, even in the middle of a commit. A refused write counts
   as ``fenced`` and is decided again by whoever leads next.
5. **Draining.** ``accepting`` is asked before each decision *starts*; on
   SIGTERM the daemon stops accepting, so the decisions under way finish (all
   their writes) and the rest are left for the next leader: nothing is left
   half applied by a shutdown.
6. **Pod marks come before the scale-down** that relies on them: the pod chosen
   as a Deployment's victim gets the lowest pod-deletion-cost, then the Workload's
   committed count is lowered, then the Deployment is scaled to it. A mark without
   the scale-down (a crash, or a 409 on the Workload) is harmless: the next
   session chooses again, and the Deployment's sync removes marks that no
   pending scale-down explains.
7. **A waiting workload's status changes with its meaning only.** Its
   ``QuotaReserved`` condition (and the Event that goes with it) is rewritten
   when its meaning changes: the reason, or the cause its message gives. The
   cause of a ``PendingPreemption`` is the set of victims it waits for (not the
   order they are named in); of an ``Inadmissible`` workload, its message as it
   is (it is read from the objects alone, so it moves only when they do); of
   any other reason, its words before the first figure or parenthesis (``needs
   2 more cpu`` moves with every other workload's usage, ``is not covered by
   queue`` is another cause). When only the wording of the victims or a detail
   would change, the message already written is kept.
8. **Events say what is notable, once.** With the default ``events = "changes"``
   a commit posts one Event per preemption, on the victim's Workload (naming the
   preemptor and the reason), and a Warning when a workload becomes
   Inadmissible; an admission or an ordinary pending reason is in the
   Workload's conditions only. ``events = "all"`` adds those, and the admission
   and preemption Events on the owner too (see ``events``).
9. **A victim's quota is given back by the next commit, with its next status.**
   Once an evicted owner has stopped (suspended or scaled to zero, no pod left:
   ``Integration.stopped``, for every kind) the inventory reads its Workload as released (``inventory``), so the session that follows queues
   it again. That session's commit writes the release (``admission`` removed,
   ``QuotaReserved``/``Admitted`` False with reason ``Evicted``, ``Evicted`` kept
   as the record) together with what the session decided for it — its pending
   reason, or its new admission — in one status write, instead of one write for
   the release and one more for the reason. A released Workload the session
   says nothing about still gets its release written, alone. Like any status
   write it carries the resourceVersion the session saw; a refused one is
   decided again, and the next inventory reads the same release from the same
   objects (nothing of it is remembered in memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from preemptd.framework.decisions import Admitted, Decisions, Pending, PodAction, Preempted
from preemptd.framework.model import DELETION_COST_ANNOTATION, FORCE_DELETE_ANNOTATION
from preemptd.framework.quantity import format_timestamp

from .client import PODS, WORKLOADS, ApiError, Kube, Obj, Resource
from .events import EventRecorder
from .informers import Informer
from .workloads import (
    admission_patch,
    eviction_finished_patch,
    eviction_patch,
    pending_patch,
    shrink_patch,
    with_status,
)

__all__ = ["VICTIM_DELETION_COST", "CommitStats", "Committer", "Writer", "failed_writes", "seen_workloads"]

log = logging.getLogger("preemptd.kubernetes.commit")

# The lowest pod-deletion-cost: the ReplicaSet removes this pod before any other.
VICTIM_DELETION_COST = "-2147483648"

# The writes refused or failed in the current task (and the tasks it starts), when counted.
_FAILED: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("preemptd_failed_writes", default=None)


@contextlib.contextmanager
def failed_writes() -> Iterator[list[int]]:
    """Count the writes of this task that did not go through: ``with failed_writes() as failed``;
    ``failed[0]`` is how many failed (5xx, timeout), were refused (409) or were fenced."""
    box = [0]
    token = _FAILED.set(box)
    try:
        yield box
    finally:
        _FAILED.reset(token)


def _count_failure() -> None:
    box = _FAILED.get()
    if box is not None:
        box[0] += 1


class Writer:
    """Every write of the backend: bounded, counted, and folded back into the caches.

    A write's answer (the object as the server stored it) is put into the
    resource's informer at once, so the next cycle sees it even before its watch
    event arrives. ``dry_run`` logs each write instead of sending it; ``gate``
    is asked right before each request (see the module docstring, point 4).
    """

    def __init__(
        self,
        kube: Kube,
        informers: Mapping[Resource, Informer],
        *,
        concurrency: int = 32,
        dry_run: bool = False,
        on_conflict: Callable[[], None] = lambda: None,
        gate: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube = kube
        self.informers = informers
        self.dry_run = dry_run
        self.on_conflict = on_conflict
        self.gate = gate
        self.semaphore = asyncio.Semaphore(concurrency)
        self.conflicts = 0
        self.errors = 0
        self.fenced = 0  # writes refused because this replica does not lead

    def _open(self, verb: str, resource: Resource, what: str) -> bool:
        if self.gate():
            return True
        self.fenced += 1
        _count_failure()
        log.warning("not leading: %s %s %s not sent", verb, resource.kind, what)
        return False

    def _cache(self, resource: Resource, obj: Obj) -> None:
        informer = self.informers.get(resource)
        if informer is not None:
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
            informer.put(obj)

    async def create(self, resource: Resource, body: Obj, namespace: str | None) -> Obj | None:
        if self.dry_run:
            log.debug("dry-run: would create %s %s/%s", resource.kind, namespace, body["metadata"]["name"])
            # Kept in the cache only, so the dry run's sessions see what a real run would:
            # the Workloads of Jobs nobody has admitted yet.
            imagined = {**body, "metadata": {**body["metadata"], "namespace": namespace,
                                             "uid": f"dry-run-{uuid.uuid4()}", "resourceVersion": "dry-run",
                                             "creationTimestamp": format_timestamp(time.time_ns() // 1_000_000)}}
            self._cache(resource, imagined)
            return imagined
        async with self.semaphore:
            if not self._open("create", resource, f"{namespace}/{body['metadata']['name']}"):
                return None
            try:
                created = await self.kube.create(resource, body, namespace)
            except ApiError as exc:
                if exc.conflict:  # AlreadyExists: a lagging cache; take the real one
                    await self._reread(resource, body["metadata"]["name"], namespace)
                    return None
                self._failed("create", resource, f"{namespace}/{body['metadata']['name']}", exc)
                return None
        self._cache(resource, created)
        return created

    async def patch(
        self,
        resource: Resource,
        name: str,
        namespace: str | None,
        body: Obj,
        *,
        subresource: str | None = None,
    ) -> Obj | None:
        """The patched object, or None when it was refused (409: re-read, and a new cycle asked for)."""
        if self.dry_run:
            # Every cycle would write it again: the decision itself is the INFO line.
            log.debug("dry-run: would patch %s %s/%s%s: %s", resource.kind, namespace, name,
                      f"/{subresource}" if subresource else "", json.dumps(body, sort_keys=True, default=str))
            return None
        async with self.semaphore:
            if not self._open("patch", resource, f"{namespace}/{name}"):
                return None
            try:
                patched = await self.kube.patch(resource, name, body, namespace, subresource=subresource)
            except ApiError as exc:
                if exc.conflict:
                    self.conflicts += 1
                    _count_failure()
                    log.info("conflict on %s %s/%s: re-reading, deciding again", resource.kind, namespace, name)
                    await self._reread(resource, name, namespace)
                    self.on_conflict()
                    return None
                if exc.not_found:
                    self._forget(resource, name, namespace)
                    return None
                self._failed("patch", resource, f"{namespace}/{name}", exc)
                return None
        self._cache(resource, patched)
        return patched

    async def delete(
        self, resource: Resource, name: str, namespace: str | None, *, grace_period_seconds: int | None = None
    ) -> bool:
        if self.dry_run:
            log.debug("dry-run: would delete %s %s/%s (grace %s)", resource.kind, namespace, name, grace_period_seconds)
            return False
        async with self.semaphore:
            if not self._open("delete", resource, f"{namespace}/{name}"):
                return False
            try:
                await self.kube.delete(resource, name, namespace, grace_period_seconds=grace_period_seconds)
            except ApiError as exc:
                if exc.not_found:
                    return True
                self._failed("delete", resource, f"{namespace}/{name}", exc)
                return False
        return True

    async def _reread(self, resource: Resource, name: str, namespace: str | None) -> None:
        try:
            fresh = await self.kube.get(resource, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                self._forget(resource, name, namespace)
            return
        self._cache(resource, fresh)

    def _forget(self, resource: Resource, name: str, namespace: str | None) -> None:
        informer = self.informers.get(resource)
        if informer is not None:
            informer.forget(f"{namespace}/{name}" if resource.namespaced else name)

    def _failed(self, verb: str, resource: Resource, what: str, exc: ApiError) -> None:
        self.errors += 1
        _count_failure()
        log.warning("%s %s %s failed: %s", verb, resource.kind, what, exc)


@dataclass(slots=True)
class CommitStats:
    decisions: int = 0
    applied: int = 0
    dropped: int = 0  # refused (conflict, gone) or failed: decided again next cycle


OwnerSync = Callable[[str], Awaitable[None]]
"""Bring the owner of the Workload ``namespace/name`` in line with it."""


class Committer:
    """Applies one session's :class:`Decisions` (see the module docstring)."""

    def __init__(
        self,
        writer: Writer,
        events: EventRecorder,
        *,
        workloads: Informer,
        pods: Informer,
        owners: Callable[[Obj], Obj | None],
        sync_owner: OwnerSync,
        accepting: Callable[[], bool] = lambda: True,
        concurrency: int = 32,
    ) -> None:
        self.writer = writer
        self.events = events
        self.workloads = workloads
        self.pods = pods
        self.owners = owners
        self.sync_owner = sync_owner
        self.accepting = accepting
        self._slots = asyncio.Semaphore(concurrency)

    async def commit(
        self, decisions: Decisions, *, seen: Mapping[str, Obj], released: frozenset[str] = frozenset()
    ) -> CommitStats:
        """``seen``: each decided Workload as the session saw it (its resourceVersion rules);
        ``released``: the evicted ones the session's inventory read as released (point 9)."""
        stats = CommitStats()
        steps: list[Callable[[], Awaitable[bool]]] = []
        now = decisions.now
        for preempted in decisions.preempted:
            steps.append(functools.partial(self._preempt, preempted, seen, now))
        for admitted in decisions.admitted:
            steps.append(functools.partial(self._admit, admitted, seen, now, admitted.workload in released))
        for action in decisions.pod_actions:
            steps.append(functools.partial(self._pod_action, action))
        told: set[str] = {a.workload for a in decisions.admitted}
        for pending in decisions.pending:
            if pending.workload in seen:
                told.add(pending.workload)
                scan = decisions.flavor_scans.get(pending.workload)
                release = pending.workload in released
                steps.append(functools.partial(self._pending, pending, scan, seen, now, release))
        for key in sorted(released - told):
            if key in seen:
                steps.append(functools.partial(self._release, key, seen, now))
        stats.decisions = len(decisions.preempted) + len(decisions.admitted) + len(decisions.pod_actions)
        results = await asyncio.gather(*(self._begin(step) for step in steps))
        applied = sum(1 for ok in results[: stats.decisions] if ok)
        stats.applied = applied
        stats.dropped = stats.decisions - applied
        return stats

    async def _begin(self, step: Callable[[], Awaitable[bool]]) -> bool:
        """Run one decision to its end, unless the commit stopped accepting before it began."""
        async with self._slots:
            if not self.accepting():
                return False
            return await step()

    def _involved(self, workload: Obj) -> list[Obj]:
        """Who hears of a decision: the Workload, and its owner too when every Event is wanted."""
        owner = self.owners(workload) if self.events.everything else None
        return [workload] if owner is None else [workload, owner]

    async def _write_status(self, key: str, patch: Obj) -> Obj | None:
        namespace, _, name = key.partition("/")
        return await self.writer.patch(WORKLOADS, name, namespace, patch, subresource="status")

    async def _admit(self, admitted: Admitted, seen: Mapping[str, Obj], now: int, release: bool = False) -> bool:
        workload = seen.get(admitted.workload)
        if workload is None:
            return False
        if release:  # its quota given back and taken again in one write (point 9)
            workload = with_status(workload, eviction_finished_patch(workload, now))
        written = await self._write_status(admitted.workload, admission_patch(workload, admitted, now))
        if written is None:
            return False
        if release:
            self._eviction_finished(written)
        flavors = sorted({f for ps in admitted.pod_sets for f in ps.flavors.values()})
        counts = ", ".join(f"{ps.name}={ps.count}" for ps in admitted.pod_sets)
        message = f"Admitted by Queue {admitted.queue} to flavor(s) {', '.join(flavors)} ({counts})"
        for involved in self._involved(written):
            self.events.record(involved, "Normal", "Admitted", message, routine=True)
        await self.sync_owner(admitted.workload)
        return True

    async def _preempt(self, preempted: Preempted, seen: Mapping[str, Obj], now: int) -> bool:
        workload = seen.get(preempted.workload)
        if workload is None:
            return False
        if preempted.count is None:
            patch = eviction_patch(workload, preempted, now)
        else:
            # The pods go first: the scale-down that follows must take these very pods.
            marks = [self._mark_pod(pod) for pod in preempted.pods]
            if not all(await asyncio.gather(*marks)):
                return False
            patch = shrink_patch(workload, preempted, now)
        written = await self._write_status(preempted.workload, patch)
        if written is None:
            return False
        what = "the workload" if preempted.count is None else f"{preempted.count} pod(s)"
        message = f"Preempted {what} to accommodate {preempted.preemptor} ({preempted.reason})"
        for involved in self._involved(written):
            self.events.record(involved, "Normal", "Preempted", message)
        await self.sync_owner(preempted.workload)
        return True

    async def _mark_pod(self, key: str) -> bool:
        pod = self.pods.store.get(key)
        if pod is None:
            return False
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if annotations.get(DELETION_COST_ANNOTATION) == VICTIM_DELETION_COST:
            return True
        namespace, _, name = key.partition("/")
        patch: Obj = {"metadata": {"annotations": {DELETION_COST_ANNOTATION: VICTIM_DELETION_COST}}}
        return await self.writer.patch(PODS, name, namespace, patch) is not None

    async def _pod_action(self, action: PodAction) -> bool:
        if action.action != "ForceDelete":
            log.warning("unknown pod action %s on %s", action.action, action.pod)
            return False
        namespace, _, name = action.pod.partition("/")
        pod = self.pods.store.get(action.pod)
        deleted = await self.writer.delete(PODS, name, namespace, grace_period_seconds=0)
        if deleted and pod is not None:
            message = f"Force-deleted terminating pod {action.pod} to make room for {action.preemptor}"
            self.events.record(pod, "Normal", "ForceDeleted", message)
        # Marked only after the delete went through: the mark says "already issued", and a
        # mark whose delete never happened would make every later session just wait.
        if deleted and pod is not None and action.pod in self.pods.store:
            patch: Obj = {"metadata": {"annotations": {FORCE_DELETE_ANNOTATION: "true"}}}
            await self.writer.patch(PODS, name, namespace, patch)
        return deleted

    async def _pending(
        self,
        pending: Pending,
        scan: Mapping[str, Mapping[str, int]] | None,
        seen: Mapping[str, Obj],
        now: int,
        release: bool = False,
    ) -> bool:
        workload = seen[pending.workload]
        base = None
        if release:  # the release and the reason it waits, in one write (point 9)
            base = eviction_finished_patch(workload, now)
            workload = with_status(workload, base)
        patch = pending_patch(workload, pending.reason, _message_of_meaning(workload, pending), scan, now)
        reason_written = patch is not None and "conditions" in patch["status"]
        if base is not None:
            patch = {**base, "status": {**base["status"], **(patch["status"] if patch is not None else {})}}
        if patch is None:
            return True
        written = await self._write_status(pending.workload, patch)
        if written is not None and base is not None:
            self._eviction_finished(written)
        if written is not None and reason_written:
            # Inadmissible needs the user (the workload cannot run as written); any other
            # reason is the queue's ordinary waiting, told by the condition just written.
            inadmissible = pending.reason == "Inadmissible"
            kind = "Warning" if inadmissible else "Normal"
            self.events.record(written, kind, pending.reason, pending.message, routine=not inadmissible)
        return written is not None

    async def _release(self, key: str, seen: Mapping[str, Obj], now: int) -> bool:
        """A released Workload the session decided nothing about: its release alone (point 9)."""
        written = await self._write_status(key, eviction_finished_patch(seen[key], now))
        if written is not None:
            self._eviction_finished(written)
        return written is not None

    def _eviction_finished(self, written: Obj) -> None:
        self.events.record(written, "Normal", "EvictionFinished", "All pods stopped; queued again", routine=True)


def _message_of_meaning(workload: Obj, pending: Pending) -> str:
    """The message to write for ``pending``: the one already there when it means the same.

    A waiting workload's meaning is its reason and its message's cause (:func:`_cause`),
    not the words of its message (which may name its victims in another order, or carry
    figures that move at every cycle); so a status is rewritten, and an Event asked for,
    only when the reason or the cause changes (design note, point 7).
    """
    status = workload.get("status") or {}
    current = next(
        (c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "QuotaReserved"),
        None,
    )
    if current is None or current.get("status") != "False" or current.get("reason") != pending.reason:
        return pending.message
    text = current.get("message")
    if not isinstance(text, str) or _cause(pending.reason, text) != _cause(pending.reason, pending.message):
        return pending.message
    return text


_DETAIL = re.compile(r"[\d(]")  # where a message's figures and details begin


def _cause(reason: str, message: str) -> object:
    """What a pending message says, for ``reason``, beyond its wording (design note, point 7)."""
    if message.startswith("preempting "):
        return _victims_named(message)
    if reason == "Inadmissible":
        return message
    return _DETAIL.split(message, maxsplit=1)[0].rstrip(" ;:,")


def _victims_named(message: str) -> frozenset[str]:
    """The victims a "preempting a, b; admitted once ..." message names (none for any other)."""
    if not message.startswith("preempting "):
        return frozenset()
    named = message.removeprefix("preempting ").partition(";")[0]
    return frozenset(name.strip() for name in named.split(",") if name.strip())


def seen_workloads(
    decisions: Decisions, store: Mapping[str, Obj], released: frozenset[str] = frozenset()
) -> dict[str, Obj]:
    """The Workload objects a session decided about (and those it read as ``released``), as the
    cache holds them right now.

    Called right after the session, with no await since the snapshot was taken, so
    these are exactly the versions the session saw.
    """
    keys: set[str] = {a.workload for a in decisions.admitted}
    keys.update(p.workload for p in decisions.preempted)
    keys.update(p.workload for p in decisions.pending)
    keys.update(released)
    return {key: store[key] for key in keys if key in store}
