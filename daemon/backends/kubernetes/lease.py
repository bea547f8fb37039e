"""Leader election on a ``coordination.k8s.io/v1`` Lease: one replica commits.

:class:`Elector` is the Kubernetes side of the
:class:`~preemptd.daemon.loop.Leadership` protocol the scheduler cycles under
(``AlwaysLeader``, its other side, needs no cluster and lives with the loop).

Design note — the same protocol as client-go's ``leaderelection``, and why
each rule is there.

* **Acquire.** A candidate reads the Lease every ``retry_period``. It may take
  it when nobody holds it (no Lease, or ``holderIdentity`` empty: released),
  or when the holder has not renewed for ``leaseDurationSeconds``. "Not
  renewed" is measured on the candidate's own monotonic clock, from the moment
  it *observed* the current record (its resourceVersion) — never by comparing
  the ``renewTime`` written by another machine with its own wall clock, which
  may be skewed.
* **Optimistic concurrency.** Every write is a PUT carrying the
  resourceVersion that was read; when two candidates race for a free Lease,
  the server accepts one and refuses the other with 409. A refused write is a
  failed attempt, nothing more.
* **Renew.** The leader renews every ``retry_period``. If it cannot renew
  (API down, 409, a hung request) it keeps trying until ``renew_deadline``
  after the start of its last successful renewal, and then steps down. As
  ``renew_deadline < lease_duration``, it stops *before* any other replica
  may take over: the other side waits a full ``lease_duration`` from when it
  saw that renewal, which is after the renewal was sent.
* **Fencing.** :attr:`Elector.leading` is computed from the clock at every
  call, not only flipped by this module's task: right before each write the
  backend asks it, so even an elector starved of the event loop cannot let a
  write through after the deadline. A write already on the wire when the
  deadline passes may still land; the ``lease_duration - renew_deadline``
  margin (5 s by default) is for those.
* **Release.** On shutdown the leader writes ``holderIdentity: ""`` and a
  one-second duration, so the next replica takes over at its next attempt
  instead of waiting out the lease.

``elected`` and ``deposed`` are events the scheduler waits on: it cycles
while ``elected`` is set and abandons the cycle under way when ``deposed``
is set.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ...clock import Clock, first_of
from .client import LEASES, ApiError, Resource

__all__ = ["Elector", "LeaseApi", "identity"]

log = logging.getLogger("preemptd.leader")

Obj = dict[str, Any]


class LeaseApi(Protocol):
    """The verbs used on Leases (``Kube`` has them; tests give an in-memory store)."""

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj: ...

    async def create(self, resource: Resource, body: Mapping[str, Any], namespace: str | None = None) -> Obj: ...

    async def replace(
        self, resource: Resource, name: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> Obj: ...


def identity(environ: Mapping[str, str] | None = None) -> str:
    """This replica's holder identity: pod name (or host name) and a random suffix.

    The suffix keeps a restarted pod with the same name from mistaking the
    lease of its previous life for its own.
    """
    environ = os.environ if environ is None else environ
    name = environ.get("POD_NAME") or environ.get("HOSTNAME") or socket.gethostname() or "preemptd"
    return f"{name}_{uuid.uuid4().hex[:8]}"


def _micro_time() -> str:
    """A Kubernetes MicroTime for the record (informational: expiry uses the local clock)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    """Campaigns for the Lease until cancelled (see the module docstring)."""

    def __init__(
        self,
        kube: LeaseApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        clock: Clock,
        on_change: Callable[[bool], None] = lambda leading: None,
    ) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("leader election needs 0 < retry_period < renew_deadline < lease_duration")
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.on_change = on_change
        self.holder = ""  # the holder last observed ("" = none, or released)
        self.terms = 0  # times this replica became leader
        self.last_contact: float | None = None  # the last exchange with the server that went through
        self._elected = asyncio.Event()
        self._deposed = asyncio.Event()
        self._deposed.set()
        self._renewed_at: float | None = None  # start of the last successful acquire/renew
        self._record: Obj | None = None  # the Lease as last read or written
        self._observed_version = ""
        self._observed_at = 0.0

    # -- what others ask ------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        """True while the last renewal is younger than ``renew_deadline`` — asked before every write."""
        return self._renewed_at is not None and self.clock.now() < self._renewed_at + self.renew_deadline

    @property
    def elected(self) -> asyncio.Event:
        return self._elected

    @property
    def deposed(self) -> asyncio.Event:
        return self._deposed

    def in_contact(self) -> bool:
        """Whether the server answered within the last ``lease_duration`` (readiness of a standby)."""
        return self.last_contact is not None and self.clock.now() - self.last_contact < self.lease_duration

    # -- the campaign ---------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, hold until a renewal fails for ``renew_deadline``, start again; until cancelled."""
        try:
            while True:
                await self._acquire()
                await self._hold()
        finally:
            if self._renewed_at is not None:
                self._step_down("the campaign ended", level=logging.INFO)

    async def _acquire(self) -> None:
        while True:
            started = self.clock.now()
            if await self._attempt(timeout=self.renew_deadline):
                self._renewed_at = started
                self.terms += 1
                self._elected.set()
                self._deposed.clear()
                log.info("leading: lease %s/%s acquired as %s", self.namespace, self.name, self.identity)
                self.on_change(True)
                return
            await self.clock.sleep(self.retry_period)

    async def _hold(self) -> None:
        while True:
            await self.clock.sleep(self.retry_period)
            while True:
                assert self._renewed_at is not None
                left = self._renewed_at + self.renew_deadline - self.clock.now()
                if left <= 0:
                    self._step_down(f"no renewal for {self.renew_deadline:g}s")
                    return
                started = self.clock.now()
                if await self._attempt(timeout=left):
                    self._renewed_at = started
                    break
                if self.holder not in ("", self.identity):
                    self._step_down(f"the lease is held by {self.holder}")
                    return
                left = self._renewed_at + self.renew_deadline - self.clock.now()
                if left <= 0:
                    self._step_down(f"no renewal for {self.renew_deadline:g}s")
                    return
                await self.clock.sleep(min(self.retry_period, left))

    def _step_down(self, why: str, *, level: int = logging.WARNING) -> None:
        self._renewed_at = None
        self._elected.clear()
        self._deposed.set()
        log.log(level, "stepped down: %s", why)
        self.on_change(False)

    async def _attempt(self, *, timeout: float) -> bool:
        """One try to acquire or renew, given up after ``timeout`` on the clock."""
        attempt = asyncio.ensure_future(self._try_acquire_or_renew())
        try:
            if await first_of(self.clock, {"attempt": attempt}, timeout=timeout) is None:
                log.warning("lease %s/%s: no answer within %.1fs", self.namespace, self.name, timeout)
                return False
        finally:
            if not attempt.done():
                attempt.cancel()
                await asyncio.gather(attempt, return_exceptions=True)
        try:
            return attempt.result()
        except ApiError as exc:
            if exc.status:  # the server answered (409, 5xx): in contact, only refused
                self.last_contact = self.clock.now()
            log.info("lease %s/%s: %s", self.namespace, self.name, exc)
        except Exception:  # a malformed Lease, a bug: one failed attempt, never the end of the campaign
            log.exception("lease %s/%s: attempt failed", self.namespace, self.name)
        return False

    async def _try_acquire_or_renew(self) -> bool:
        now = self.clock.now()
        try:
            current = await self.kube.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if not exc.not_found:
                raise
            created = await self.kube.create(LEASES, self._lease(None), self.namespace)
            self._observe(created)
            return True
        self._observe(current)
        spec = current.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.identity and not self._expired(spec, now):
            return False
        replaced = await self.kube.replace(LEASES, self.name, self._lease(current), self.namespace)
        self._observe(replaced)
        return True

    def _observe(self, lease: Obj) -> None:
        self.last_contact = self.clock.now()
        self._record = lease
        self.holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        version = str((lease.get("metadata") or {}).get("resourceVersion", ""))
        if version != self._observed_version:
            self._observed_version = version
            self._observed_at = self.clock.now()

    def _expired(self, spec: Mapping[str, Any], now: float) -> bool:
        seconds = spec.get("leaseDurationSeconds")
        duration = float(seconds) if isinstance(seconds, int | float) and seconds > 0 else self.lease_duration
        return now >= self._observed_at + duration

    def _lease(self, current: Obj | None, *, release: bool = False) -> Obj:
        """The Lease to write: ``current`` (read before, its resourceVersion kept) made ours, or released."""
        metadata = dict((current or {}).get("metadata") or {"name": self.name, "namespace": self.namespace})
        metadata.pop("managedFields", None)
        old = (current or {}).get("spec") or {}
        ours = old.get("holderIdentity") == self.identity
        now = _micro_time()
        spec: Obj = {
            "holderIdentity": "" if release else self.identity,
            "leaseDurationSeconds": 1 if release else max(1, math.ceil(self.lease_duration)),
            "acquireTime": old.get("acquireTime") if ours and not release and old.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": int(old.get("leaseTransitions") or 0) + (0 if ours or release else 1),
        }
        if current is None:
            spec["leaseTransitions"] = 0
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    # -- shutdown -------------------------------------------------------------------------

    async def release(self, *, timeout: float = 5.0) -> bool:
        """Give the Lease up if this replica holds it; True when it was released.

        Stops leading first: nothing is written by this replica after the
        release starts. Call it after cancelling :meth:`run`.
        """
        if self._renewed_at is not None:
            self._step_down("shutting down", level=logging.INFO)
        if self._record is None or self.holder != self.identity:
            return False
        release = asyncio.ensure_future(self._release())
        try:
            if await first_of(self.clock, {"release": release}, timeout=timeout) is None:
                log.warning("lease %s/%s: release not answered within %.1fs", self.namespace, self.name, timeout)
                return False
        finally:
            if not release.done():
                release.cancel()
                await asyncio.gather(release, return_exceptions=True)
        try:
            released = release.result()
        except ApiError as exc:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
            return False
        if released:
            log.info("lease %s/%s released", self.namespace, self.name)
        return released

    async def _release(self) -> bool:
        current = self._record
        for _ in range(2):  # a 409: read again; still ours, try once more
            assert current is not None
            try:
                written = await self.kube.replace(LEASES, self.name, self._lease(current, release=True), self.namespace)
            except ApiError as exc:
                if not exc.conflict:
                    raise
                current = await self.kube.get(LEASES, self.name, self.namespace)
                self._observe(current)
                if self.holder != self.identity:
                    return False
                continue
            self._observe(written)
            return True
        return False
