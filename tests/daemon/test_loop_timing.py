"""When cycles run, on a manual clock: periodic, debounced, never overlapping, under a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio
from doubles import CyclingBackend
from preemptd.daemon.clock import ManualClock
from preemptd.daemon.loop import AlwaysLeader, CycleOutcome, Scheduler

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]


class Lead:
    """Leadership a test hands out and takes back."""

    def __init__(self, *, leading: bool) -> None:
        self.elected = asyncio.Event()
        self.deposed = asyncio.Event()
        self.set(leading)

    def set(self, leading: bool) -> None:
        self.leading = leading
        (self.elected.set if leading else self.elected.clear)()
        (self.deposed.clear if leading else self.deposed.set)()


class Run:
    """A scheduler running in its task, and what it reported."""

    def __init__(self, scheduler: Scheduler, backend: CyclingBackend) -> None:
        self.scheduler = scheduler
        self.backend = backend
        self.stop = asyncio.Event()
        self.outcomes: list[CycleOutcome] = []
        scheduler.on_cycle = self.outcomes.append
        self.task = asyncio.create_task(scheduler.run(self.stop), name="scheduler")

    def starts(self) -> list[float]:
        return self.backend.started


Start = Callable[..., Run]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=0.0)


@pytest_asyncio.fixture
async def start(clock: ManualClock) -> AsyncIterator[Start]:
    runs: list[Run] = []

    def begin(*, duration: float | None = 0.5, leadership: object = None, **timings: float) -> Run:
        backend = CyclingBackend(clock, duration=duration)
        settings = {"interval": 10.0, "debounce": 0.25, "deadline": 5.0, "stale_after": 3.0, "shutdown_timeout": 2.0}
        settings.update(timings)
        scheduler = Scheduler(backend, clock=clock, leadership=leadership or AlwaysLeader(), **settings)  # type: ignore[arg-type]
        runs.append(Run(scheduler, backend))
        return runs[-1]

    yield begin
    for run in runs:
        run.stop.set()
    await clock.advance(10.0)
    for run in runs:
        run.task.cancel()
    await asyncio.gather(*(run.task for run in runs), return_exceptions=True)


async def test_cycles_run_every_interval_in_a_quiet_cluster(clock, start) -> None:
    """With no event, a cycle starts an interval after the previous one ended."""
    run = start()
    await clock.run_for(25.0)
    assert [0.0, 10.5, 21.0] == run.starts()


async def test_a_burst_of_watch_events_is_one_debounced_cycle(clock, start) -> None:
    """A hundred events after a cycle start one cycle, a debounce after the first event."""
    run = start()
    await clock.advance(1.0)
    for _ in range(100):
        run.backend.wake.set()
        await clock.advance(0.001)
    await clock.run_for(5.0)
    assert [0.0, 1.25] == run.starts()


async def test_events_during_a_cycle_start_one_more_after_it_never_two_at_once(clock, start) -> None:
    """Events that arrive while a cycle runs give one more cycle after it ends; never an overlap."""
    run = start(duration=3.0)
    for _ in range(20):
        await clock.advance(0.125)
        run.backend.wake.set()
    await clock.run_for(10.0)
    assert 1 == run.backend.most
    assert [0.0, 3.25] == run.starts()


async def test_a_cycle_past_its_deadline_is_abandoned_and_counted(clock, start) -> None:
    """A cycle that hangs is cancelled at its deadline, counted, and the loop goes on."""
    run = start(duration=None)
    await clock.run_for(5.0 - 0.125)
    assert (0, 1) == (run.scheduler.abandoned, run.backend.running)
    await clock.run_for(0.25)
    assert (1, 1, 0) == (run.scheduler.abandoned, run.backend.cancelled, run.backend.running)
    assert ["abandoned"] == [o.outcome for o in run.outcomes]
    assert "deadline" in run.outcomes[0].why
    await clock.run_for(10.0)
    assert [0.0, 15.0] == run.starts()


async def test_a_refused_write_runs_the_next_cycle_at_once(clock, start) -> None:
    """After a 409 (resync) the next cycle does not wait for an event or the interval."""
    run = start()
    run.backend.resync = True
    await clock.run_for(1.25)
    assert [0.0, 0.5, 1.0] == run.starts()[:3]


async def test_a_stale_cache_disables_preemption_until_it_is_fresh(clock, start) -> None:
    """A watch down for stale_after: sessions run without preempt/reclaim; once it is back, with them."""
    run = start(interval=1.0, actions=("allocate", "reclaim", "preempt"))
    await clock.advance(1.0)
    run.backend.healthy = False  # the cycle at t=1.5 sees it first
    await clock.run_for(4.0)  # cycles at 1.5, 3.0 (down 1.5 s), 4.5 (down 3 s: stale)
    run.backend.healthy = True
    await clock.run_for(1.5)  # the cycle at 6.0 sees fresh watches
    full, allocate = ("allocate", "reclaim", "preempt"), ("allocate",)
    assert [0.0, 1.5, 3.0, 4.5, 6.0] == run.starts()
    assert [full, full, full, allocate, full] == run.backend.actions


async def test_a_standby_does_not_cycle_until_it_is_elected(clock, start) -> None:
    """No cycle runs while another replica leads; the first runs as soon as this one is elected."""
    lead = Lead(leading=False)
    run = start(leadership=lead)
    await clock.run_for(30.0, step=1.0)
    assert [] == run.starts()
    lead.set(True)
    await clock.advance(0)
    assert [30.0] == run.starts()


async def test_losing_the_lease_abandons_the_cycle_under_way(clock, start) -> None:
    """A cycle is cancelled the moment its replica is deposed; no further cycle starts."""
    lead = Lead(leading=True)
    run = start(duration=3.0, leadership=lead)
    await clock.advance(1.0)
    lead.set(False)
    await clock.advance(0)
    assert (1, 0) == (run.backend.cancelled, run.backend.running)
    assert "lost the lease" == run.outcomes[0].why
    await clock.run_for(30.0, step=1.0)
    assert [0.0] == run.starts()


async def test_stop_lets_the_cycle_under_way_finish_and_starts_no_other(clock, start) -> None:
    """On SIGTERM the backend drains and the cycle under way ends normally; the loop returns."""
    run = start(duration=1.0)
    await clock.advance(0.5)
    run.stop.set()
    await clock.advance(0)
    assert (True, False) == (run.backend.drained, run.task.done())
    await clock.advance(0.5)
    assert run.task.done()
    assert (["ok"], [1.0]) == ([o.outcome for o in run.outcomes], run.backend.ended)


async def test_stop_abandons_a_cycle_that_does_not_finish_in_time(clock, start) -> None:
    """A cycle still running shutdown_timeout after SIGTERM is abandoned, and the loop returns."""
    run = start(duration=None)
    await clock.advance(0.5)
    run.stop.set()
    await clock.advance(2.0 - 0.125)
    assert not run.task.done()
    await clock.advance(0.25)
    assert run.task.done()
    assert (1, "abandoned") == (run.backend.cancelled, run.outcomes[0].outcome)


async def test_the_heartbeat_beats_while_the_loop_runs_and_ages_when_it_stops(clock, start) -> None:
    """The loop's progress (for /healthz and the watchdog) stays fresh while it cycles, goes stale
    a window (interval + debounce + deadline + 1 s) after it stops."""
    run = start()
    heartbeat = run.scheduler.heartbeat
    for _ in range(60):
        await clock.advance(1.0)
        assert heartbeat.fresh()
    run.task.cancel()  # a loop that no longer moves
    await asyncio.gather(run.task, return_exceptions=True)
    await clock.advance(10.0 + 0.25 + 5.0 + 1.0 + 0.5)
    assert not heartbeat.fresh()
