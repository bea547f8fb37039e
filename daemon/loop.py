"""The scheduling loop: when cycles run, how long they may take, what they may do.

Design note. One task, ``scheduler``, runs cycles of one backend; the rules:

* **Cycles never overlap.** The loop starts a cycle, waits for it to end
  (commits included), then waits for the next reason to run one:

  - a relevant watch event (the backend's ``wake``), debounced: after the
    first event the loop waits ``debounce`` more, so that a burst (a thousand
    Jobs created at once) is one cycle, not a thousand;
  - a refused write (409, the backend's ``resync``): the decision was made on
    stale state and is made again at once;
  - otherwise ``interval``, so time-based rules (min-runtime) move on even in
    a quiet cluster.

* **A deadline.** A cycle still running ``deadline`` seconds after it started
  is abandoned: its task is cancelled, the abandonment counted and logged,
  and the loop goes on. The backend runs each session in a worker thread, so
  the event loop (the Lease renewals, ``/healthz``, watches, signals, and this
  deadline) keeps running while a session decides; a session abandoned this
  way runs to its end in its thread, and its decisions are discarded, never
  committed (the backend's design note). A cycle is the unit the cluster can
  recover from: the Workload status is the source of truth, and the owner
  reconciler drives each Job and Deployment to it whatever happened to the
  cycle that decided it, so abandoning one is safe.
* **Only the leader cycles.** While ``leadership.elected`` is clear the loop
  stands by (caches stay warm); when ``deposed`` is set during a cycle, the
  cycle is abandoned at once. The writes themselves are fenced separately
  (the backend asks ``leadership.leading`` before each one).
* **A stale cache disables preemption.** When a watch has been down for
  ``stale_after``, the cache may lack the events that would have made a
  victim unnecessary (a Job that finished, a node that came back); choosing
  victims on it could evict running work for nothing. Sessions then run
  without ``preempt`` and ``reclaim`` until every watch is connected again.
  Admission on the stale cache stays allowed: the writes carry the
  resourceVersion the session saw, and a stale one is refused with 409.
* **Shutdown.** When ``stop`` is set during a cycle, the backend is told to
  ``drain`` (decisions not yet begun are dropped, those under way finish)
  and the cycle gets ``shutdown_timeout`` more to end before it is
  abandoned. No new cycle starts.
* **Progress.** :attr:`Scheduler.heartbeat` beats after every cycle and every
  wait; ``/healthz`` and the systemd watchdog read it. A loop that hangs stops
  beating; a slow cycle cannot make it look hung, because the deadline bounds
  every cycle and the window allows for a whole interval plus a deadline.

Every wait goes through a :class:`~preemptd.daemon.clock.Clock`, so the rules
above are tested on a manual clock without sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .clock import Clock, SystemClock, first_of

__all__ = [
    "PREEMPTING_ACTIONS",
    "AlwaysLeader",
    "CycleOutcome",
    "Cycler",
    "Heartbeat",
    "Leadership",
    "Scheduler",
]

log = logging.getLogger("preemptd.loop")


class Leadership(Protocol):
    """What the scheduler and the writers need to know about leading."""

    @property
    def leading(self) -> bool: ...

    @property
    def elected(self) -> asyncio.Event: ...

    @property
    def deposed(self) -> asyncio.Event: ...


class AlwaysLeader:
    """Leader election switched off (or a dry run): this replica leads alone."""

    def __init__(self) -> None:
        self._elected = asyncio.Event()
        self._elected.set()
        self._deposed = asyncio.Event()

    @property
    def leading(self) -> bool:
        return True

    @property
    def elected(self) -> asyncio.Event:
        return self._elected

    @property
    def deposed(self) -> asyncio.Event:
        return self._deposed

PREEMPTING_ACTIONS = frozenset({"preempt", "reclaim"})
"""The actions that choose victims: left out of sessions while the cache is stale."""


class Cycler(Protocol):
    """What the loop drives: the Kubernetes backend, or a test's stand-in."""

    @property
    def wake(self) -> asyncio.Event: ...

    @property
    def resync(self) -> bool: ...

    @property
    def healthy(self) -> bool: ...

    async def cycle(self, *, actions: Sequence[str] | None = None) -> object: ...

    def drain(self) -> None: ...


class Heartbeat:
    """When the loop last made progress, judged against a window of seconds."""

    def __init__(self, clock: Clock, *, window: float) -> None:
        self.clock = clock
        self.window = window
        self.beats = 0
        self.last: float | None = None  # None until the loop runs: starting is not hanging

    def beat(self) -> None:
        self.beats += 1
        self.last = self.clock.now()

    @property
    def age(self) -> float:
        return 0.0 if self.last is None else self.clock.now() - self.last

    def fresh(self) -> bool:
        return self.age <= self.window


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    outcome: Literal["ok", "failed", "abandoned"]
    seconds: float
    actions: tuple[str, ...]
    report: object = None  # what the backend's cycle returned (ok only)
    why: str = ""  # abandoned or failed: the reason


class Scheduler:
    """Runs cycles of one backend until ``stop`` is set (see the module docstring).

    Durations are seconds. ``on_cycle`` hears of every cycle's outcome (the
    metrics' feed); it must not raise.
    """

    def __init__(
        self,
        backend: Cycler,
        *,
        interval: float,
        actions: Sequence[str] = ("allocate", "preempt"),
        debounce: float = 0.05,
        deadline: float = 20.0,
        stale_after: float = 10.0,
        shutdown_timeout: float = 10.0,
        clock: Clock | None = None,
        leadership: Leadership | None = None,
        on_cycle: Callable[[CycleOutcome], None] = lambda outcome: None,
        on_stale: Callable[[bool], None] = lambda stale: None,
    ) -> None:
        self.backend = backend
        self.clock: Clock = clock or SystemClock()
        self.leadership: Leadership = leadership or AlwaysLeader()
        self.on_cycle = on_cycle
        self.on_stale = on_stale
        self.debounce = debounce
        self.heartbeat = Heartbeat(self.clock, window=0.0)
        self.reconfigure(
            interval=interval, actions=actions, deadline=deadline, stale_after=stale_after,
            shutdown_timeout=shutdown_timeout,
        )
        self.cycles = 0  # cycles that ended, whatever their outcome
        self.failures = 0
        self.abandoned = 0
        self.stale = False
        self._down_since: float | None = None

    def reconfigure(
        self, *, interval: float, actions: Sequence[str], deadline: float, stale_after: float, shutdown_timeout: float
    ) -> None:
        """New timings and actions (a reload); the cycle under way keeps its own."""
        self.interval = interval
        self.actions = tuple(actions)
        self.deadline = deadline
        self.stale_after = stale_after
        self.shutdown_timeout = shutdown_timeout
        # One wait (interval, then debounce) and one whole cycle, with a second to spare.
        self.heartbeat.window = interval + self.debounce + deadline + 1.0

    # -- the stale cache --------------------------------------------------------------------

    def cycle_actions(self) -> tuple[str, ...]:
        """The actions of the next session: without preemption while the cache is stale."""
        now = self.clock.now()
        if self.backend.healthy:
            self._down_since = None
        elif self._down_since is None:
            self._down_since = now
        stale = self._down_since is not None and now - self._down_since >= self.stale_after
        if stale != self.stale:
            self.stale = stale
            if stale:
                log.warning("cache stale: a watch has been down for %.0fs; sessions run without preemption",
                            now - (self._down_since or now))
            else:
                log.info("cache fresh again: preemption is back on")
            self.on_stale(stale)
        if stale:
            return tuple(a for a in self.actions if a not in PREEMPTING_ACTIONS)
        return self.actions

    # -- the loop ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        clock = self.clock
        elected, deposed = self.leadership.elected, self.leadership.deposed
        while not stop.is_set():
            self.heartbeat.beat()
            if not elected.is_set():
                await first_of(clock, {"stop": stop.wait(), "elected": elected.wait()}, timeout=self.interval)
                continue
            outcome = await self.run_cycle(stop)
            self.heartbeat.beat()
            if stop.is_set():
                break
            if outcome.outcome == "ok" and self.backend.resync:
                continue
            woke = await first_of(
                clock,
                {"stop": stop.wait(), "deposed": deposed.wait(), "wake": self.backend.wake.wait()},
                timeout=self.interval,
            )
            if woke == "wake" and self.debounce > 0:
                self.heartbeat.beat()
                await first_of(clock, {"stop": stop.wait(), "deposed": deposed.wait()}, timeout=self.debounce)
        self.heartbeat.beat()

    async def run_cycle(self, stop: asyncio.Event) -> CycleOutcome:
        """One cycle under the deadline, the lease and ``stop`` (see the module docstring)."""
        clock = self.clock
        actions = self.cycle_actions()
        started = clock.now()
        deadline = started + self.deadline
        draining = False
        task = asyncio.create_task(self.backend.cycle(actions=actions), name="cycle")
        try:
            while True:
                waits: dict[str, Awaitable[object]] = {"cycle": task}
                waits["deposed"] = self.leadership.deposed.wait()
                if not draining:
                    waits["stop"] = stop.wait()
                first = await first_of(clock, waits, timeout=deadline - clock.now())
                if first == "cycle":
                    break
                if first == "stop":
                    draining = True
                    self.backend.drain()
                    deadline = min(deadline, clock.now() + self.shutdown_timeout)
                    log.info("stopping: letting the cycle under way finish (at most %.0fs)", deadline - clock.now())
                    continue
                if first == "deposed":
                    why = "lost the lease"
                elif draining:
                    why = f"still running at shutdown after {self.shutdown_timeout:g}s"
                else:
                    why = f"still running after the {self.deadline:g}s deadline"
                return self._ended("abandoned", started, actions, why=why)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        error = task.exception()
        if error is not None:
            log.error("cycle failed", exc_info=error)
            return self._ended("failed", started, actions, why=f"{type(error).__name__}: {error}")
        return self._ended("ok", started, actions, report=task.result())

    def _ended(
        self, outcome: Literal["ok", "failed", "abandoned"], started: float, actions: tuple[str, ...],
        *, report: object = None, why: str = "",
    ) -> CycleOutcome:
        self.cycles += 1
        if outcome == "failed":
            self.failures += 1
        elif outcome == "abandoned":
            self.abandoned += 1
            log.warning("cycle abandoned: %s", why)
        ended = CycleOutcome(outcome, self.clock.now() - started, actions, report, why)
        try:
            self.on_cycle(ended)
        except Exception:  # a metrics bug must not stop scheduling
            log.exception("on_cycle failed")
        return ended
