"""Time for the daemon's timing rules: lease expiry, cycle intervals, deadlines.

Every duration the daemon waits out goes through a :class:`Clock`, never
through ``asyncio.sleep`` or ``time.monotonic`` directly, so tests drive the
lease and the scheduler with a :class:`ManualClock` and check what happens at
second 9.9 and at second 10 of a renew deadline without sleeping at all.

Only timing *rules* use the clock. Request timeouts of the API client and the
informers' backoff stay on real time: they guard against a slow network, not
against a rule of the protocol, and a test that fakes time must not make a
healthy connection look dead.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Mapping
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "first_of"]


class Clock(Protocol):
    """Monotonic seconds, and a way to let them pass."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The process's monotonic clock and the event loop's timers."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when a test calls :meth:`advance`.

    Sleepers wake in deadline order; between two wake-ups the event loop runs
    until nothing is ready, so every task reacts to one instant before time
    moves on to the next.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._serial = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._serial), future))
        await future  # cancelling the sleeper cancels the future; advance() skips it

    @property
    def sleepers(self) -> int:
        """How many sleeps are under way (a test's view of who is waiting)."""
        return sum(1 for _, _, future in self._sleepers if not future.done())

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking each sleeper at its own instant."""
        target = self._now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            if future.done():
                continue
            self._now = max(self._now, deadline)
            future.set_result(None)
            await settle()
        self._now = target
        await settle()

    async def run_for(self, seconds: float, *, step: float = 0.125) -> None:
        """Advance in steps of ``step``: what a test does to watch a span of time go by."""
        end = self._now + seconds
        while self._now + step <= end + 1e-9:
            await self.advance(step)
        if end > self._now:
            await self.advance(end - self._now)


async def settle() -> None:
    """Let the event loop run until no callback is ready (nothing left to react)."""
    loop = asyncio.get_running_loop()
    quiet = 0
    while quiet < 3:
        await asyncio.sleep(0)
        # ``_ready`` is the loop's queue of callbacks; looptime and others read it too.
        quiet = 0 if getattr(loop, "_ready", None) else quiet + 1


async def first_of(
    clock: Clock, waits: Mapping[str, Awaitable[object]], *, timeout: float | None = None
) -> str | None:
    """Wait until one of ``waits`` is done, or ``timeout`` passes on ``clock``.

    Returns the name of the first done (in the mapping's order when several
    are), or None on timeout. Coroutines are run as tasks and cancelled
    afterwards; a task or future given in is only watched, never cancelled,
    so a cycle can be raced against its deadline and kept running.
    """
    owned: list[asyncio.Future[object]] = []
    watched: dict[str, asyncio.Future[object]] = {}
    for name, wait in waits.items():
        future = asyncio.ensure_future(wait)
        if future is not wait:
            owned.append(future)
        watched[name] = future
    if timeout is not None:
        sleeper: asyncio.Future[object] = asyncio.ensure_future(clock.sleep(max(0.0, timeout)))
        owned.append(sleeper)
    try:
        pending = [*watched.values(), *([sleeper] if timeout is not None else [])]
        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        # Decided before the clean-up below, which marks every owned task done.
        first = next((name for name, done in watched.items() if done.done()), None)
    finally:
        for task in owned:
            task.cancel()
        if owned:
            await asyncio.gather(*owned, return_exceptions=True)
    return first
