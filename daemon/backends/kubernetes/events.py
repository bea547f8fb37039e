"""Kubernetes Events on Workloads, Jobs and Deployments: what ``kubectl describe`` shows.

Events are a courtesy to users, never part of a decision: they are queued and
written by their own task with their own small concurrency, so a slow or
failing events API never delays or fails a commit. The same (object, reason,
message) is not repeated within ``repeat_after`` seconds, so a workload that
stays pending for the same reason does not flood the namespace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable

from preemptd.framework.quantity import format_timestamp

from .client import EVENTS, ApiError, Kube, Obj

__all__ = ["EventRecorder"]

log = logging.getLogger("preemptd.kubernetes.events")

COMPONENT = "preemptd"


class EventRecorder:
    def __init__(
        self,
        kube: Kube,
        *,
        dry_run: bool = False,
        concurrency: int = 4,
        repeat_after: float = 600.0,
        remembered: int = 10_000,
        gate: Callable[[], bool] = lambda: True,
    ) -> None:
        self.kube = kube
        self.dry_run = dry_run
        self.gate = gate  # asked before each write: a replica that does not lead says nothing
        self.concurrency = concurrency
        self.repeat_after = repeat_after
        self.remembered = remembered
        self.written = 0
        self.failed = 0
        self._queue: asyncio.Queue[Obj] = asyncio.Queue()
        self._recent: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._instance = os.environ.get("HOSTNAME", "") or "preemptd"

    def record(self, involved: Obj, kind: str, reason: str, message: str) -> None:
        """Queue an Event about ``involved`` (``kind``: Normal or Warning); never blocks."""
        metadata = involved.get("metadata") or {}
        name = metadata.get("name")
        namespace = metadata.get("namespace") or "default"
        if not name:
            return
        key = (str(metadata.get("uid") or f"{namespace}/{name}"), reason, message)
        now = time.monotonic()
        seen = self._recent.get(key)
        if seen is not None and now - seen < self.repeat_after:
            return
        self._recent[key] = now
        self._recent.move_to_end(key)
        while len(self._recent) > self.remembered:
            self._recent.popitem(last=False)
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
            "message": message[:1024],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if self.dry_run:
            log.info("dry-run: event %s %s/%s: %s", reason, namespace, name, message)
            return
        self._queue.put_nowait(event)

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
            event = await self._queue.get()
            try:
                if not self.gate():
                    self.failed += 1
                    continue
                await self.kube.create(EVENTS, event, event["metadata"]["namespace"])
                self.written += 1
            except ApiError as exc:
                self.failed += 1
                log.debug("event not written: %s", exc)
            finally:
                self._queue.task_done()

    async def flush(self) -> None:
        """Wait until every queued Event is written (or failed)."""
        await self._queue.join()
