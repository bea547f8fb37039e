"""Leader election on a Lease, on a manual clock: acquire, renew, step down, take over, release."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from doubles import Link, MemoryLeases
from preemptd.daemon.backends.kubernetes.client import LEASES, ApiError
from preemptd.daemon.backends.kubernetes.lease import Elector, LeaseApi, identity
from preemptd.daemon.clock import ManualClock

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]

# The defaults of [leader_election]: 15 s / 10 s / 2 s.
DURATION, DEADLINE, RETRY = 15.0, 10.0, 2.0


class Campaigns:
    """Electors campaigning in their own tasks, on one clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def __call__(self, name: str, leases: LeaseApi) -> Elector:
        elector = Elector(
            leases, namespace="preemptd-system", name="preemptd", identity=name,
            lease_duration=DURATION, renew_deadline=DEADLINE, retry_period=RETRY, clock=self.clock,
        )
        self.tasks[name] = asyncio.create_task(elector.run(), name="leader-election")
        return elector

    async def crash(self, elector: Elector) -> None:
        """The replica dies: its campaign stops, nothing is released."""
        task = self.tasks.pop(elector.identity)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start=0.0)


@pytest.fixture
def leases() -> MemoryLeases:
    return MemoryLeases()


@pytest_asyncio.fixture
async def start(clock: ManualClock) -> AsyncIterator[Campaigns]:
    """Start electors; every campaign ends with the test."""
    campaigns = Campaigns(clock)
    yield campaigns
    for task in campaigns.tasks.values():
        task.cancel()
    await asyncio.gather(*campaigns.tasks.values(), return_exceptions=True)


async def test_a_candidate_acquires_a_lease_nobody_holds(clock, leases, start) -> None:
    """With no Lease, the first candidate creates it naming itself, and leads at once."""
    a = start("a", leases)
    await clock.advance(0)
    assert (True, "a", [("create", "a")]) == (a.leading, leases.holder(), leases.writes)
    assert a.elected.is_set() and not a.deposed.is_set()


async def test_the_leader_renews_every_retry_period(clock, leases, start) -> None:
    """A leader writes its lease every 2 s and keeps leading as long as the writes go through."""
    a = start("a", leases)
    await clock.run_for(10.0, step=0.5)
    assert [("create", "a")] + [("update", "a")] * 5 == leases.writes
    assert a.leading


async def test_a_leader_that_cannot_renew_stops_committing_before_its_lease_expires(clock, leases, start) -> None:
    """Cut off after its renewal at t=2, the leader steps down at t=12 (renew deadline);
    the standby may take over only from t=17 (lease duration): never two leaders."""
    link_a, link_b = leases.link(), leases.link()
    a = start("a", link_a)
    await clock.advance(0)
    b = start("b", link_b)
    await clock.advance(2.0)  # a renews at t=2
    link_a.down = True
    leading: dict[str, list[float]] = {"a": [], "b": []}
    while clock.now() < 30.0:
        await clock.advance(0.25)  # exact in binary: the instants below are exact too
        for name, elector in (("a", a), ("b", b)):
            if elector.leading:
                leading[name].append(clock.now())
    assert 11.75 == max(leading["a"])
    assert a.deposed.is_set()
    assert min(leading["b"]) >= 2.0 + DURATION
    assert "b" == leases.holder()


async def test_another_candidate_takes_over_after_the_lease_expires(clock, leases, start) -> None:
    """A leader that dies without a word is replaced once its last renewal is a lease duration old."""
    a = start("a", leases)
    await clock.advance(0)
    b = start("b", leases)
    await clock.advance(4.0)  # a's renewal at t=4 is the last one
    await start.crash(a)
    await clock.run_for(4.0 + DURATION - 4.0 - 0.1, step=0.1)
    assert (False, "a") == (b.leading, leases.holder())
    await clock.run_for(RETRY + 0.2, step=0.1)
    assert (True, "b") == (b.leading, leases.holder())
    assert 1 == leases.objects[("preemptd-system", "preemptd")]["spec"]["leaseTransitions"]


async def test_release_on_shutdown_lets_the_standby_take_over_at_once(clock, leases, start) -> None:
    """A leader that releases its lease is replaced at the standby's next attempt, not a lease later."""
    a = start("a", leases)
    await clock.advance(0)
    b = start("b", leases)
    await clock.advance(1.0)
    await start.crash(a)
    assert await a.release()
    assert ("", False) == (leases.holder(), a.leading)
    await clock.run_for(RETRY, step=0.1)
    assert (True, "b") == (b.leading, leases.holder())


async def test_a_hung_request_does_not_keep_a_leader_leading(clock, leases, start) -> None:
    """The renew deadline is kept by the clock, not by the request: a renewal that never returns
    still ends the leadership at the deadline."""
    link = leases.link()
    a = start("a", link)
    await clock.advance(0)
    link.hang = True
    await clock.run_for(DEADLINE - 0.1, step=0.1)
    assert a.leading
    await clock.run_for(0.2, step=0.1)
    assert (False, True) == (a.leading, a.deposed.is_set())


async def test_two_candidates_racing_for_a_free_lease_elect_one(clock, leases, start) -> None:
    """Both read the free lease at once; the server takes one write and refuses the other (409)."""
    a, b = start("a", leases), start("b", leases)
    for _ in range(300):
        await clock.advance(0.1)
        assert 1 == [a.leading, b.leading].count(True)
    assert {"a"} == {holder for _, holder in leases.writes}


async def test_a_leader_that_sees_another_holder_steps_down_at_once(clock, leases, start) -> None:
    """If the lease names someone else (it was taken while this replica stalled), it stops now."""
    a = start("a", leases)
    await clock.advance(0)
    lease = leases.objects[("preemptd-system", "preemptd")]
    await leases.replace(LEASES, "preemptd", {**lease, "spec": {**lease["spec"], "holderIdentity": "x"}},
                         "preemptd-system")
    await clock.advance(RETRY)
    assert (False, "x") == (a.leading, a.holder)


async def test_optimistic_concurrency_refuses_a_write_on_a_stale_version(leases) -> None:
    """A PUT carrying an old resourceVersion is refused with 409, as the API server does."""
    created = await leases.create(LEASES, {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}, "ns")
    await leases.replace(LEASES, "l", created, "ns")
    with pytest.raises(ApiError) as refused:
        await leases.replace(LEASES, "l", created, "ns")
    assert 409 == refused.value.status


async def test_timings_must_leave_room_to_step_down_before_expiry() -> None:
    """renew_deadline must be shorter than lease_duration, retry_period shorter than both."""
    with pytest.raises(ValueError):
        Elector(Link(MemoryLeases()), namespace="n", name="l", identity="a", lease_duration=10, renew_deadline=10,
                retry_period=2, clock=ManualClock())


async def test_identity_is_the_pod_name_with_a_random_suffix() -> None:
    """POD_NAME (else HOSTNAME) starts the holder identity; a suffix tells restarts apart."""
    first, second = identity({"POD_NAME": "preemptd-7f9-abc"}), identity({"POD_NAME": "preemptd-7f9-abc"})
    assert first.startswith("preemptd-7f9-abc_") and first != second
    assert identity({"HOSTNAME": "node-1"}).startswith("node-1_")
