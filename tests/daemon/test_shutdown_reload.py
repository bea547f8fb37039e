"""Signals: SIGTERM in the middle of a commit, SIGHUP with a bad and a good configuration."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from kube.apiserver import Request
from kube.cluster import until
from running import (
    admitted_workloads,
    cluster,
    config,
    lease_holder,
    running_jobs,
    start,
    write_config,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]

GOOD = """
[scheduler]
cycle_interval = "200ms"
[backend]
kind = "kubernetes"
[daemon]
http_address = "127.0.0.1:0"
[leader_election]
lease_duration = "1s"
renew_deadline = "600ms"
retry_period = "100ms"
"""


def signal_self(signum: signal.Signals) -> None:
    """Send ``signum`` to this process, once the daemon's loop handles it (never the default action)."""
    assert signal.getsignal(signum) not in (signal.SIG_DFL, signal.SIG_IGN, None), "no handler installed"
    os.kill(os.getpid(), signum)


async def test_sigterm_mid_commit_exits_0_releases_the_lease_and_half_applies_nothing(server) -> None:
    """SIGTERM arrives while the first admissions are being written: decisions under way finish
    (Workload admitted *and* Job unsuspended), those not begun are left whole for the next leader,
    the lease is released, and the daemon returns 0."""
    # More decisions than two rounds of the commit's 32 slots: a decision is one Workload status
    # write, so a round finishes before the signal is handled, and the next one begins.
    cluster(server, jobs=96)
    server.latency = 0.01  # every request takes a while: the commit is in flight when the signal lands
    sent: list[Request] = []
    ended: list[int] = []

    def terminate_on_first_admission(request: Request) -> None:
        if not sent and request.plural == "workloads" and request.subresource == "status":
            sent.append(request)
            ended.append(running.daemon.scheduler.cycles)  # cycles over before this one
            signal_self(signal.SIGTERM)

    server.before_write = terminate_on_first_admission
    # A lease that a busy machine cannot let lapse mid-commit: a replica that stops leading
    # sends nothing more (by design), which is not what this test is about.
    running = start(server, "a", config(lease_ms=(10_000, 6_000, 100)))
    code = await asyncio.wait_for(running.task, 20)
    await running.kube.close()
    server.before_write = None
    assert (0, 1, "") == (code, len(sent), lease_holder(server))
    admitted, unsuspended = admitted_workloads(server), running_jobs(server)
    assert admitted == unsuspended  # no Workload admitted whose Job was left suspended, nor the reverse
    assert 0 < len(admitted) < 96  # some decisions had begun, the rest were not started
    assert [running.daemon.scheduler.cycles - 1] == ended  # no cycle after the one the signal landed in


async def test_sighup_with_a_bad_configuration_keeps_the_old_one(server, tmp_path) -> None:
    """A reload is checked first: a file with a mistake is refused whole (and said why);
    a good one is applied at the next cycle."""
    path = write_config(tmp_path / "preemptd.toml", GOOD)
    cluster(server, jobs=1)
    running = start(server, "a", config(), config_path=path)
    daemon = running.daemon
    try:
        await until(lambda: "job-000" in running_jobs(server), what="the job to run")
        before = daemon.config
        write_config(path, GOOD.replace('cycle_interval = "200ms"', 'cycle_interval = "5s"\ncycle_intervl = "1s"'))
        signal_self(signal.SIGHUP)
        await until(lambda: daemon.metrics.reloads.labels("rejected")._value.get() == 1, what="the refusal")
        assert (before, 0.2) == (daemon.config, daemon.scheduler.interval)

        write_config(path, GOOD.replace('cycle_interval = "200ms"', 'cycle_interval = "3s"')
                     .replace('http_address = "127.0.0.1:0"', 'http_address = "127.0.0.1:1"'))
        signal_self(signal.SIGHUP)
        await until(lambda: daemon.metrics.reloads.labels("applied")._value.get() == 1, what="the reload")
        assert 3.0 == daemon.scheduler.interval
        assert "127.0.0.1:0" == daemon.config.daemon.http_address  # restart-only: the running value stays
    finally:
        assert 0 == await running.stop()
