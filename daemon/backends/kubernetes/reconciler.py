"""The owner reconciler: every owner (Job, Deployment, JobSet…) driven to what its Workload says.

Design note. Commit is level-triggered: a Workload's status (admitted, evicted,
shrunk, no quota) is the desired state of its owner, and this task keeps
driving each owner to it until it matches, whatever happened to the cycle that
decided it. It runs beside the scheduling loop, never inside a cycle:

* **Fed by marks.** A watch event on an owner, on its Workload or on one of its
  pods marks the owner; so does a commit once it has written a Workload's
  status, and the start (every owner, once the caches are synced). Marks are
  deduplicated: an owner marked ten times before its turn is synced once; one
  marked while its sync runs is synced once more after it.
* **Bounded concurrency.** At most ``concurrency`` owners are synced at once;
  a burst of a thousand new Jobs is a thousand Workload creations, that many at
  a time, while sessions go on deciding about the Workloads already there.
* **Converged or not.** A sync answers True (or None) when the owner now
  matches its Workload, False when it needs another pass later (a victim's
  suspend done, its pods not stopped yet: once they have, the next commit
  gives its quota back). False, an exception,
  or a write of the sync that failed, was refused (409) or fenced, is "not
  converged": the owner is synced again after a backoff of its own,
  ``first_retry`` doubled at each failure in a row up to ``max_retry``. After a
  failure (an exception, or a write that failed, was refused or fenced) a mark
  from a watch event does not cut the backoff short: the failing owner's own
  writes must not turn into a busy loop. After a plain False with every write
  accepted, the owner is *waiting* for the cluster (a suspended Job's pods to
  stop, say): the next watch event about it is what it waits for, so that mark
  syncs it at once, and the backoff is only the fallback when no event comes.
  Such a sync writes only what is still missing, so the marks its own writes
  cause end as soon as there is nothing left to write. A new decision cuts any
  backoff short (``mark(..., now=True)``). A converged owner forgets its
  failures.
* **Held while committed.** The owners of the Workloads a commit is writing are
  held: a mark meanwhile (the commit's own pod marks, say) waits for the
  release, so an owner is never synced halfway through a decision about it
  (a Deployment's sync would take back the pod marks of a scale-down whose
  Workload status is not written yet).
* **Only the leader writes.** While ``gate`` says no, marks are kept and nothing
  is synced; they are synced once this replica leads.

Memory is bounded by the owners in the cluster: an owner is in the ready set,
running, or backing off, at most once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from .commit import failed_writes

__all__ = ["OwnerReconciler", "OwnerRef"]

log = logging.getLogger("preemptd.kubernetes.owners")

OwnerRef = tuple[str, str]
"""(kind, key) of an owner: its kind and ``namespace/name`` (a pod group's ``namespace/group``)."""

OwnerSync = Callable[[str, str], Awaitable[bool | None]]


class OwnerReconciler:
    """See the module docstring. ``run`` in a task; ``mark`` from anywhere on the loop."""

    def __init__(
        self,
        sync: OwnerSync,
        *,
        concurrency: int = 32,
        gate: Callable[[], bool] = lambda: True,
        first_retry: float = 0.5,
        max_retry: float = 30.0,
    ) -> None:
        self.on_retry: Callable[[], None] = lambda: None  # hears of every retry scheduled (metrics)
        self._sync = sync
        self._gate = gate
        self.concurrency = concurrency
        self.first_retry = first_retry
        self.max_retry = max_retry
        self._ready: dict[OwnerRef, None] = {}  # insertion-ordered set
        self._running: set[OwnerRef] = set()
        self._again: set[OwnerRef] = set()  # marked while its sync ran
        self._retry: dict[OwnerRef, asyncio.TimerHandle] = {}
        self._held: set[OwnerRef] = set()
        self._deferred: set[OwnerRef] = set()  # marked while held
        self._waiting: set[OwnerRef] = set()  # backing off after a plain False: a mark ends it
        self.failures: dict[OwnerRef, int] = {}  # failures in a row, per owner not converged
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()  # something finished or was marked: idle() looks again
        self._tasks: set[asyncio.Task[None]] = set()
        self.synced = 0  # syncs finished, whatever their outcome
        self.retries = 0  # syncs that did not converge and were scheduled again

    # -- marks ----------------------------------------------------------------------------

    def mark(self, ref: OwnerRef, *, now: bool = False) -> None:
        """Sync ``ref`` soon; ``now`` cuts its backoff short (a new decision about it)."""
        if ref in self._held:
            self._deferred.add(ref)
            return
        if ref in self._running:
            self._again.add(ref)
            return
        retry = self._retry.get(ref)
        if retry is not None:
            if not now and ref not in self._waiting:
                return
            retry.cancel()
            del self._retry[ref]
            self._waiting.discard(ref)
        self._ready[ref] = None
        self._wake.set()
        self._changed.set()

    async def hold(self, refs: set[OwnerRef]) -> None:
        """Sync none of ``refs`` until :meth:`release`; returns once none of them is being synced."""
        self._held |= refs
        while self._running & refs:
            self._changed.clear()
            await self._changed.wait()

    def release(self, refs: set[OwnerRef]) -> None:
        """End a :meth:`hold`: the owners marked meanwhile are synced now."""
        self._held -= refs
        for ref in sorted(self._deferred & refs):
            self._deferred.discard(ref)
            self.mark(ref, now=True)

    def _due(self, ref: OwnerRef) -> None:
        self._retry.pop(ref, None)
        self._waiting.discard(ref)
        self.mark(ref)

    @property
    def backing_off(self) -> int:
        return len(self._retry)

    def busy(self) -> bool:
        """Owners are being synced, or are ready and would be now (this replica leads)."""
        return bool(self._running) or (bool(self._ready) and self._gate())

    async def idle(self) -> None:
        """Return once no owner is being synced or waits for its turn (backoffs aside)."""
        while self.busy():
            self._changed.clear()
            await self._changed.wait()

    # -- the task ---------------------------------------------------------------------------

    async def run(self) -> None:
        slots = asyncio.Semaphore(self.concurrency)
        try:
            while True:
                if not self._ready or not self._gate():
                    self._wake.clear()
                    # Not leading: look again now and then (leadership has no event here).
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), None if self._gate() else 0.5)
                    continue
                await slots.acquire()
                if not self._ready:
                    slots.release()
                    continue
                ref = next(iter(self._ready))
                del self._ready[ref]
                self._running.add(ref)
                task = asyncio.create_task(self._one(ref, slots), name=f"owner-sync:{ref[1]}")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for handle in self._retry.values():
                handle.cancel()
            self._retry.clear()
            self._waiting.clear()

    async def _one(self, ref: OwnerRef, slots: asyncio.Semaphore) -> None:
        converged = waiting = False
        try:
            with failed_writes() as failed:
                answer = await self._sync(*ref)
            converged = answer is not False and failed[0] == 0
            waiting = answer is False and failed[0] == 0
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if ref not in self.failures:  # once per streak, not at every retry
                log.warning("syncing %s %s failed: %s: %s", ref[0], ref[1], type(exc).__name__, exc)
        finally:
            slots.release()
            self._running.discard(ref)
            self.synced += 1
            self._changed.set()
        if converged:
            self.failures.pop(ref, None)
        else:
            count = self.failures[ref] = self.failures.get(ref, 0) + 1
            delay = min(self.max_retry, self.first_retry * 2 ** (count - 1))
            self.retries += 1
            self.on_retry()
            self._again.discard(ref)  # the retry covers it
            self._retry[ref] = asyncio.get_running_loop().call_later(delay, self._due, ref)
            if waiting:
                self._waiting.add(ref)
            return
        if ref in self._again:
            self._again.discard(ref)
            self.mark(ref)
