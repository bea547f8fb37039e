"""Stand-ins for the daemon's tests: an in-memory Lease store and a backend that only cycles."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from preemptd.daemon.backends.kubernetes.client import ApiError, Resource
from preemptd.daemon.clock import Clock

Obj = dict[str, Any]


class MemoryLeases:
    """Leases as the API server keeps them: resourceVersions, 404 and 409, and faults on demand.

    ``down``: every request fails with 503; ``hang``: every request waits forever.
    :meth:`link` gives one replica its own connection, with faults of its own.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.version = 0
        self.down = False
        self.hang = False
        self.writes: list[tuple[str, str]] = []  # (verb, holderIdentity written)

    def holder(self, name: str = "preemptd", namespace: str = "preemptd-system") -> str | None:
        lease = self.objects.get((namespace, name))
        return None if lease is None else str(lease["spec"].get("holderIdentity") or "")

    async def _fault(self) -> None:
        if self.hang:
            await asyncio.get_running_loop().create_future()
        if self.down:
            raise ApiError(503, "ServiceUnavailable", "injected")

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        await self._fault()
        found = self.objects.get((namespace or "", name))
        if found is None:
            raise ApiError(404, "NotFound", f"leases {name!r} not found")
        return copy.deepcopy(found)

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None) -> Obj:
        await self._fault()
        key = (namespace or "", str(body["metadata"]["name"]))
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", "exists")
        return self._store(key, body, "create")

    async def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        await self._fault()
        key = (namespace or "", name)
        current = self.objects.get(key)
        if current is None:
            raise ApiError(404, "NotFound", "gone")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(key, body, "update")

    def link(self) -> Link:
        return Link(self)

    def _store(self, key: tuple[str, str], body: Mapping[str, Any], verb: str) -> Obj:
        self.version += 1
        stored = copy.deepcopy(dict(body))
        stored["metadata"] = {**stored["metadata"], "namespace": key[0], "resourceVersion": str(self.version)}
        self.objects[key] = stored
        self.writes.append((verb, str(stored["spec"].get("holderIdentity") or "")))
        return copy.deepcopy(stored)


class Link:
    """One replica's connection to a :class:`MemoryLeases`: cut it (``down``) or stall it (``hang``)."""

    def __init__(self, store: MemoryLeases) -> None:
        self.store = store
        self.down = False
        self.hang = False

    async def _fault(self) -> None:
        if self.hang:
            await asyncio.get_running_loop().create_future()
        if self.down:
            raise ApiError(0, "ClientConnectorError", "injected: connection refused")

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        await self._fault()
        return await self.store.get(resource, name, namespace)

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None) -> Obj:
        await self._fault()
        return await self.store.create(resource, body, namespace)

    async def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj:
        await self._fault()
        return await self.store.replace(resource, name, body, namespace)


class CyclingBackend:
    """A backend whose cycle takes ``duration`` seconds of the clock (forever when None)."""

    def __init__(self, clock: Clock, *, duration: float | None = 0.5) -> None:
        self.clock = clock
        self.duration = duration
        self.wake = asyncio.Event()
        self.resync = False
        self.healthy = True
        self.drained = False
        self.running = 0
        self.most = 0
        self.started: list[float] = []  # clock time of each cycle's start
        self.ended: list[float] = []
        self.actions: list[tuple[str, ...]] = []
        self.cancelled = 0

    def drain(self) -> None:
        self.drained = True

    async def cycle(self, *, actions: Sequence[str] | None = None) -> str:
        self.wake.clear()
        self.running += 1
        self.most = max(self.most, self.running)
        self.started.append(self.clock.now())
        self.actions.append(tuple(actions or ()))
        try:
            if self.duration is None:
                await asyncio.get_running_loop().create_future()
            else:
                await self.clock.sleep(self.duration)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        self.ended.append(self.clock.now())
        return "report"
