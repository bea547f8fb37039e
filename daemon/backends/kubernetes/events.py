"""Kubernetes Events on Workloads, Jobs and Deployments: what ``kubectl describe`` shows.

Events are a courtesy to users, never part of a decision: they are queued and
written by their own task with their own small concurrency, so a slow or
failing events API never delays or fails a commit.

They are aggregated as the Kubernetes event recorder (client-go's event
correlator) aggregates them, so a workload that stays pending for the same
reason does not flood the namespace nor spend the API server's writes:

* **Repeats.** The same (object, type, reason, message) within ``window``
  seconds is the same Event: its ``count`` and ``lastTimestamp`` go up. The
  count is kept in memory and written by a patch at most once per
  ``patch_after`` seconds (the next patch carries every repeat since), instead
  of one write per repeat.
* **Similar messages.** More than ``similar`` different messages for one
  (object, type, reason) within ``window`` become one Event whose message is
  ``(combined from similar events): <latest>``, counted like a repeat (each
  patch carries the latest message).
* **Rate limit.** Each object has a token bucket (``burst`` writes, one more
  every ``refill`` seconds, the recorder's spam filter); an Event over the limit
  is dropped and counted in ``dropped``.

A repeat whose Event is gone (expired by the server's TTL) is written anew.

Which Events are posted at all is the ``[daemon] events`` setting, read through
``setting`` at each record so a reload applies at once:

* ``"changes"`` (the default): only what is notable about a workload — its
  preemption, a reason it cannot be admitted as written, a force delete. Each
  is posted once, on the object it is about (a preemption on the victim's
  Workload, never again on its Job). Routine steps — a Workload created,
  admitted, its eviction finished, an ordinary pending reason — are recorded
  with ``routine=True`` and dropped: the Workload's status conditions say them,
  and each Event would be one more write per workload.
* ``"all"``: routine Events too, and the admission and preemption Events on the
  owner (Job, Deployment) as well as on its Workload.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from preemptd.framework.quantity import format_timestamp

from .client import EVENTS, ApiError, Kube, Obj

__all__ = ["EventRecorder"]

log = logging.getLogger("preemptd.kubernetes.events")

COMPONENT = "preemptd"
COMBINED = "(combined from similar events): "


@dataclass(slots=True)
class _Seen:
    """One Event as written (or queued): where it is and what its count is."""

    name: str
    namespace: str
    message: str  # the latest (a combined Event shows the latest of its messages)
    count: int
    first: float  # when the window of this Event began (monotonic)
    written_at: float  # when its count was last sent (monotonic)
    patch_queued: bool = False


@dataclass(slots=True)
class _Similar:
    """The different messages seen for one (object, type, reason) in the current window."""

    first: float
    messages: set[str]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        *,
        dry_run: bool = False,
        concurrency: int = 4,
        window: float = 600.0,
        patch_after: float = 60.0,
        similar: int = 10,
        burst: int = 25,
        refill: float = 300.0,
        remembered: int = 10_000,
        gate: Callable[[], bool] = lambda: True,
        setting: Callable[[], str] = lambda: "changes",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.setting = setting  # the [daemon] events setting, asked at each record
        self.dry_run = dry_run
        self.gate = gate  # asked before each write: a replica that does not lead says nothing
        self.concurrency = concurrency
        self.window = window
        self.patch_after = patch_after
        self.similar = similar
        self.burst = burst
        self.refill = refill
        self.remembered = remembered
        self.clock = clock
        self.written = 0  # Events created
        self.patched = 0  # count/lastTimestamp updates of existing Events
        self.failed = 0
        self.dropped = 0  # over an object's rate limit
        self._queue: asyncio.Queue[tuple[str, Obj, _Seen | None]] = asyncio.Queue()
        self._seen: OrderedDict[tuple[str, str, str, str], _Seen] = OrderedDict()
        self._similar: OrderedDict[tuple[str, str, str], _Similar] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._instance = os.environ.get("HOSTNAME", "") or "preemptd"

    @property
    def writes(self) -> int:
        """Every write sent: creates and patches."""
        return self.written + self.patched

    @property
    def everything(self) -> bool:
        """Whether routine Events are posted too (``events = "all"``)."""
        return self.setting() == "all"

    def record(self, involved: Obj, kind: str, reason: str, message: str, *, routine: bool = False) -> None:
        """Queue an Event about ``involved`` (``kind``: Normal or Warning); never blocks.

        A ``routine`` Event (one the Workload's status already tells) is posted only
        when the setting asks for every Event.
        """
        if routine and not self.everything:
            return
        metadata = involved.get("metadata") or {}
        name = metadata.get("name")
        namespace = metadata.get("namespace") or "default"
        if not name:
            return
        now = self.clock()
        identity = str(metadata.get("uid") or f"{namespace}/{name}")
        message = self._aggregate(identity, kind, reason, message[:1024], now)
        # Every combined message is one Event: its key leaves the message out.
        key = (identity, kind, reason, COMBINED if message.startswith(COMBINED) else message)
        seen = self._seen.get(key)
        if seen is not None and now - seen.first < self.window:
            seen.count += 1
            seen.message = message
            self._seen.move_to_end(key)
            if seen.patch_queued or now - seen.written_at < self.patch_after:
                return  # carried by the next patch
            if not self._take(identity, now):
                return
            seen.patch_queued = True
            if self.dry_run:
                log.debug("dry-run: event %s %s/%s (x%d): %s", reason, namespace, name, seen.count, message)
                seen.patch_queued = False
                seen.written_at = now
                return
            self._queue.put_nowait(("patch", {}, seen))
            return
        if not self._take(identity, now):
            return
        stamp = format_timestamp(time.time_ns() // 1_000_000)
        event: Obj = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": name,
                "namespace": namespace,
                "uid": metadata.get("uid", ""),
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        entry = _Seen(event["metadata"]["name"], namespace, message, 1, now, now)
        self._seen[key] = entry
        self._seen.move_to_end(key)
        while len(self._seen) > self.remembered:
            self._seen.popitem(last=False)
        if self.dry_run:
            log.debug("dry-run: event %s %s/%s: %s", reason, namespace, name, message)
            return
        self._queue.put_nowait(("create", event, entry))

    def _aggregate(self, identity: str, kind: str, reason: str, message: str, now: float) -> str:
        """The message to record: ``message``, or the combined one once there are too many."""
        key = (identity, kind, reason)
        similar = self._similar.get(key)
        if similar is None or now - similar.first >= self.window:
            similar = _Similar(now, set())
            self._similar[key] = similar
        self._similar.move_to_end(key)
        while len(self._similar) > self.remembered:
            self._similar.popitem(last=False)
        similar.messages.add(message)
        if len(similar.messages) > self.similar:
            return COMBINED + message
        return message

    def _take(self, identity: str, now: float) -> bool:
        """One token of the object's bucket; False (and counted) when it is empty."""
        bucket = self._buckets.get(identity)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
            self._buckets[identity] = bucket
        else:
            bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) / self.refill)
            bucket.at = now
        self._buckets.move_to_end(identity)
        while len(self._buckets) > self.remembered:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1.0:
            self.dropped += 1
            return False
        bucket.tokens -= 1.0
        return True

    async def run(self) -> None:
        """Write queued Events until cancelled."""
        workers = [
            asyncio.create_task(self._worker(), name=f"events-writer-{i}") for i in range(self.concurrency)
        ]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            verb, event, seen = await self._queue.get()
            try:
                if not self.gate():
                    self.failed += 1
                    continue
                if verb == "create":
                    await self.kube.create(EVENTS, event, event["metadata"]["namespace"])
                    self.written += 1
                elif seen is not None:
                    await self._patch(seen)
            except ApiError as exc:
                self.failed += 1
                log.debug("event not written: %s", exc)
            finally:
                if seen is not None and verb == "patch":
                    seen.patch_queued = False
                self._queue.task_done()

    async def _patch(self, seen: _Seen) -> None:
        count = seen.count
        body: Obj = {
            "count": count,
            "message": seen.message,
            "lastTimestamp": format_timestamp(time.time_ns() // 1_000_000),
        }
        try:
            await self.kube.patch(EVENTS, seen.name, body, seen.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            # Gone (the server's Event TTL): the next repeat is written as a new Event.
            seen.first = float("-inf")
            return
        self.patched += 1
        seen.written_at = self.clock()

    async def flush(self) -> None:
        """Wait until every queued Event is written (or failed)."""
        await self._queue.join()
