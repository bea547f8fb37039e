"""List+watch caches of one resource each, feeding the backend's indexes.

An :class:`Informer` lists its resource once, then watches from the list's
resourceVersion with bookmarks on, so a quiet resource still moves its
version forward and a reconnect resumes close to where it left off. It keeps
a store of (trimmed) objects and calls ``on_event(kind, old, new)`` for every
change, so the indexes downstream are updated per change and never rebuilt.

The protocol's failure modes, and what each does here:

* the server ends the stream (``timeoutSeconds``, a restart): watch again from
  the last version seen, at once;
* ``410 Gone`` (as an ``ERROR`` event or an HTTP status) — the version is older
  than the server's history, after a compaction or an apiserver restart with a
  new epoch: relist; the relist is diffed against the store, so consumers see
  exactly the ADDED / MODIFIED / DELETED that happened while nobody watched;
* anything else (connection refused or dropped, 5xx, 429, a malformed line):
  back off exponentially (capped, reset by the next healthy stream) and resume
  the watch from the last version; a list that fails is retried the same way.

An ``optional`` resource (a custom resource whose CRD may not be installed) that
the server does not know (404 on the list) is an empty, synced, healthy cache,
listed again every ``absent_retry`` seconds until it exists; then it is watched
like any other, and a 404 on its watch (the CRD deleted) sends it back to a list.

``synced`` is set after the first successful list and never cleared: a cache
that lags is still the best view there is. ``healthy`` says whether the watch
is currently connected (from the server's acceptance of the stream to its
first failure), for whoever decides how stale is too stale: the daemon's loop
runs without preemption while a watch stays down (``daemon.loop``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import Any

from .client import ApiError, Kube, Obj, Resource

__all__ = ["Informer", "object_key", "trim_metadata", "trim_pod"]

log = logging.getLogger("preemptd.kubernetes.informers")

ABSENT_RETRY = 30.0
"""Seconds between two lists of an optional resource the server does not know."""

EventHandler = Callable[[str, Obj | None, Obj | None], None]
"""``(type, old, new)``: type is ADDED, MODIFIED or DELETED; old or new is None where absent."""


class _Gone(Exception):
    """The watch's resourceVersion is too old: the cache must be rebuilt by a list."""


def object_key(obj: Obj) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


def trim_metadata(obj: Obj) -> Obj:
    """The object without ``managedFields`` (often its largest part, never read)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        obj = {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
    return obj


_POD_LABELS = ("preemptd.io/workload",)
_POD_ANNOTATIONS = ("preemptd.io/force-delete", "controller.kubernetes.io/pod-deletion-cost")


def trim_pod(pod: Obj) -> Obj:
    """What the scheduler reads of a pod (CONTRACT §1), and nothing else.

    Pods are the most numerous objects by far; each cached one keeps its identity,
    the two annotations and one label that matter, where it runs, its priority,
    its containers' requests and its phase.
    """
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    kept_metadata: Obj = {
        key: metadata[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
        if key in metadata
    }
    if isinstance(labels, dict):
        kept_metadata["labels"] = {k: labels[k] for k in _POD_LABELS if k in labels}
    if isinstance(annotations, dict):
        kept_metadata["annotations"] = {k: annotations[k] for k in _POD_ANNOTATIONS if k in annotations}
    kept_spec: Obj = {key: spec[key] for key in ("nodeName", "priority") if key in spec}
    for containers in ("containers", "initContainers"):
        found = spec.get(containers)
        if isinstance(found, list):
            kept_spec[containers] = [_requests_only(c) for c in found]
        elif found is not None:
            kept_spec[containers] = found  # malformed: kept for the parser to report
    status = pod.get("status") or {}
    kept: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": kept_metadata, "spec": kept_spec}
    if isinstance(status, dict) and "phase" in status:
        kept["status"] = {"phase": status["phase"]}
    return kept


def _requests_only(container: Any) -> Any:
    if not isinstance(container, dict):
        return container  # left for the parser to report
    resources = container.get("resources")
    if not isinstance(resources, dict) or "requests" not in resources:
        return {}
    return {"resources": {"requests": resources["requests"]}}


class Informer:
    """A list+watch cache of one resource (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        on_event: EventHandler,
        trim: Callable[[Obj], Obj] = trim_metadata,
        label_selector: str | None = None,
        watch_timeout: int = 300,
        backoff: tuple[float, float] = (0.1, 10.0),
        optional: bool = False,
        absent_retry: float | None = None,
    ) -> None:
        self.optional = optional
        self.absent_retry = ABSENT_RETRY if absent_retry is None else absent_retry
        self.absent = False  # an optional resource the server does not know (yet)
        self.kube = kube
        self.resource = resource
        self.on_event = on_event
        self.trim = trim
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.store: dict[str, Obj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.healthy = False
        self.relists = 0  # lists after the first one
        self.failures = 0  # failed lists or watches, each followed by a backoff

    @property
    def name(self) -> str:
        return f"informer:{self.resource}"

    async def run(self) -> None:
        """List, then watch forever; returns only by cancellation."""
        delay = self.backoff[0]
        must_list = True
        while True:
            try:
                if must_list:
                    if not await self._list():
                        await asyncio.sleep(self.absent_retry)
                        continue
                    must_list = False
                await self._watch()
                delay = self.backoff[0]
            except _Gone:
                log.info("%s: resourceVersion %s is gone; relisting", self.resource, self.resource_version)
                must_list = True
                self.relists += 1
            except (ApiError, ValueError) as exc:
                if self.optional and isinstance(exc, ApiError) and exc.not_found:
                    must_list = True  # the kind went away (its CRD deleted): the list tells
                    continue
                # ValueError: a line that is not JSON — the stream is broken, not the cache.
                self.healthy = False
                self.failures += 1
                log.warning("%s: %s; retrying in %.1fs", self.resource, exc, delay)
                await asyncio.sleep(delay * (0.75 + random.random() / 2))
                delay = min(delay * 2, self.backoff[1])

    async def _list(self) -> bool:
        """List into the store; False when an optional resource does not exist."""
        try:
            items, version = await self.kube.list(self.resource, label_selector=self.label_selector)
        except ApiError as exc:
            if not (self.optional and exc.not_found):
                raise
            if not self.absent:
                log.info("%s: not installed; looking again every %.0fs", self.resource, self.absent_retry)
            self.absent = self.healthy = True
            items, version = [], ""
        else:
            self.absent = False
        fresh: dict[str, Obj] = {}
        for item in items:
            item.setdefault("apiVersion", self.resource.api_version)
            item.setdefault("kind", self.resource.kind)
            trimmed = self.trim(item)
            fresh[object_key(trimmed)] = trimmed
        old = self.store
        self.store = fresh
        self.resource_version = version
        # Only what changed since the last list is told, as if it had been watched.
        for key, gone in old.items():
            if key not in fresh:
                self.on_event("DELETED", gone, None)
        for key, after in fresh.items():
            before = old.get(key)
            if before is None:
                self.on_event("ADDED", None, after)
            elif _version(before) != _version(after):
                self.on_event("MODIFIED", before, after)
        self.synced.set()
        return not self.absent

    async def _watch(self) -> None:
        stream = self.kube.watch(
            self.resource,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_timeout,
            connected=self._connected,
        )
        try:
            async for event in stream:
                self.healthy = True
                self._handle(event)
        finally:
            await stream.aclose()

    def _connected(self) -> None:
        self.healthy = True

    def _handle(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without an object: {json.dumps(event)[:200]}")
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Gone
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
        version = _version(obj)
        if kind == "BOOKMARK":
            if version:
                self.resource_version = version
            return
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            raise ValueError(f"unknown watch event type {kind!r}")
        if version:
            self.resource_version = version
        trimmed = self.trim(obj)
        key = object_key(trimmed)
        before = self.store.get(key)
        if before is not None and _version(before) == version:
            return  # the echo of this daemon's own write, already taken by ``put``
        if before is not None and _newer(_version(before), version):
            # The daemon's own write already put a newer version here (``put``); this
            # event is its past. Taking it would make the next write carry a stale version.
            return
        if kind == "DELETED":
            self.store.pop(key, None)
            self.on_event("DELETED", before, trimmed)
        else:
            self.store[key] = trimmed
            self.on_event("MODIFIED" if before is not None else "ADDED", before, trimmed)

    def put(self, obj: Obj) -> None:
        """Take an object this daemon just wrote (the server's answer) before its watch event.

        The next session then sees the write even if the event is late. The watch
        event, when it comes, is then either this version again (no change) or newer.
        """
        trimmed = self.trim(obj)
        key = object_key(trimmed)
        before = self.store.get(key)
        if before is not None and _newer(_version(before), _version(trimmed)):
            return
        self.store[key] = trimmed
        self.on_event("MODIFIED" if before is not None else "ADDED", before, trimmed)

    def forget(self, key: str) -> None:
        """Drop an object this daemon just deleted."""
        before = self.store.pop(key, None)
        if before is not None:
            self.on_event("DELETED", before, None)


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _newer(a: str, b: str) -> bool:
    """Whether version ``a`` is newer than ``b``.

    resourceVersions are opaque strings in the API; comparing them is only a guard
    against replacing a newer cached object with an older answer, so it is done
    only when both are integers (etcd's, and the test server's) and never otherwise.
    """
    return a.isdigit() and b.isdigit() and int(a) > int(b)
