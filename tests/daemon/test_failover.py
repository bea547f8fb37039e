"""Two daemons against the test API server: one leader, failover, nothing decided twice."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import aiohttp
import pytest
from kube.cluster import until
from preemptd.daemon.backends.kubernetes.lease import Elector
from running import (
    add_jobs,
    admissions_written,
    admitted_workloads,
    cluster,
    config,
    lease_holder,
    running_jobs,
    start,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]


async def scrape(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


class Overlap:
    """Samples both replicas' ``leading`` every few milliseconds; counts instants with two leaders."""

    def __init__(self, *electors: Elector | None) -> None:
        self.electors = electors
        self.both = 0
        self.samples = 0
        self.task = asyncio.create_task(self._watch(), name="overlap-watch")

    async def _watch(self) -> None:
        while True:
            leading = [e.leading for e in self.electors if e is not None]
            self.samples += 1
            self.both += leading.count(True) > 1
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def test_one_leader_commits_and_a_standby_takes_over_when_it_dies(server) -> None:
    """Two replicas: one holds the lease and admits; the other writes nothing. The leader dies
    without releasing: the standby takes over after the lease duration and admits what came
    since. Every Workload's admission is written exactly once."""
    cluster(server, jobs=3)
    a, b = start(server, "a"), start(server, "b")
    overlap = Overlap(a.daemon.elector, b.daemon.elector)
    try:
        await until(lambda: {"job-000", "job-001", "job-002"} <= running_jobs(server), what="the first jobs to run")
        leader, standby = (a, b) if lease_holder(server) == "a" else (b, a)
        assert leader.daemon.elector.leading and not standby.daemon.elector.leading
        written = {
            sample.labels["resource"]
            for family in standby.daemon.metrics.registry.collect()
            for sample in family.samples
            if sample.name == "preemptd_api_write_duration_seconds_count"
        }
        assert written <= {"leases.coordination.k8s.io"}  # at most its lost race to create the Lease
        for running, expected in ((leader, "ok: leading"), (standby, "ok: standing by (leader: ")):
            status, text = await scrape(f"{running.daemon.http.url}/readyz")
            assert (200, True) == (status, text.startswith(expected)), text
        _, metrics = await scrape(f"{leader.daemon.http.url}/metrics")
        assert "preemptd_leader 1.0" in metrics
        _, metrics = await scrape(f"{standby.daemon.http.url}/metrics")
        assert "preemptd_leader 0.0" in metrics

        await leader.crash()
        died = time.monotonic()
        add_jobs(server, range(3, 6))
        await until(lambda: standby.daemon.elector.leading, timeout=10, what="the standby to take over")
        took_over = time.monotonic() - died
        await until(lambda: {f"job-{n:03d}" for n in range(6)} <= running_jobs(server), what="the later jobs to run")
        assert lease_holder(server) == standby.daemon.elector.identity
    finally:
        await overlap.close()
        for running in (a, b):
            if not running.task.done():
                await running.stop()
    assert took_over >= 1.0 - 0.6  # the lease (1 s) ran out on the standby's clock, minus what it had seen pass
    assert 0 == overlap.both and overlap.samples > 50
    counts = admissions_written(server)
    assert {f"default/job-job-{n:03d}": 1 for n in range(6)} == dict(counts)
    assert {f"job-{n:03d}" for n in range(6)} == admitted_workloads(server)


async def test_a_leader_that_stops_hands_over_without_waiting_out_the_lease(server) -> None:
    """On SIGTERM the leader releases the lease: the standby leads at its next attempt,
    long before the (10 s) lease would have run out."""
    settings = config(lease_ms=(10_000, 6_000, 100))
    cluster(server, jobs=1)
    a, b = start(server, "a", settings), start(server, "b", settings)
    try:
        await until(lambda: lease_holder(server) in ("a", "b"), what="a leader")
        leader, standby = (a, b) if lease_holder(server) == "a" else (b, a)
        await until(lambda: "job-000" in running_jobs(server), what="the job to run")
        stopped = time.monotonic()
        assert 0 == await leader.stop()
        await until(lambda: standby.daemon.elector.leading, timeout=5, what="the standby to take over")
        assert time.monotonic() - stopped < 2.0
    finally:
        for running in (a, b):
            if not running.task.done():
                await running.stop()
    assert {1} == set(admissions_written(server).values())


async def test_with_leader_election_off_one_daemon_leads_alone(server) -> None:
    """[leader_election] enabled = false: no Lease is read or written, and the daemon commits."""
    settings = config()
    settings = dataclasses.replace(
        settings, leader_election=dataclasses.replace(settings.leader_election, enabled=False)
    )
    cluster(server, jobs=1)
    alone = start(server, "alone", settings)
    try:
        await until(lambda: "job-000" in running_jobs(server), what="the job to run")
        status, text = await scrape(f"{alone.daemon.http.url}/readyz")
    finally:
        assert 0 == await alone.stop()
    assert (200, "ok\n", None) == (status, text, lease_holder(server))
    assert not [r for r in server.requests if r.plural == "leases"]
