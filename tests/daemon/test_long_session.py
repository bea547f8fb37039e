"""A session longer than the lease: the daemon keeps leading, answering and obeying signals.

Sessions run in a worker thread: while one decides, the event loop renews the Lease, answers
``/healthz``, follows watches and handles SIGTERM. ``cycle_deadline`` bounds a session: one
past it is abandoned, its decisions never committed, and the next cycle decides afresh.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import threading
import time
from typing import Any

import aiohttp
import pytest
from kube.apiserver import ApiServer
from kube.cluster import until
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import Config
from preemptd.daemon.notify import Notifier
from preemptd.daemon.plugins import resolve_plugins
from preemptd.daemon.service import Daemon
from preemptd.framework.session import hookimpl
from running import (
    LEASE,
    Running,
    add_jobs,
    admissions_written,
    cluster,
    config,
    lease_holder,
    running_jobs,
)

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]


class Sleeper:
    """A plugin that blocks its thread in ``session_close`` (the decisions are made by then), as
    a slow policy would; only in sessions that admit something, up to ``sessions`` of them."""

    def __init__(self, seconds: float, *, sessions: int | None = None) -> None:
        self.seconds = seconds
        self.sessions = sessions
        self.slept = 0
        self.running = 0
        self.most = 0
        self.asleep = threading.Event()
        self.release = threading.Event()
        self.decided: list[list[str]] = []  # what each sleeping session admitted
        self.lock = threading.Lock()

    @hookimpl
    def session_close(self, session: Any) -> None:
        admitted = [a.workload for a in session.decisions.admitted]
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            sleeps = bool(admitted) and (self.sessions is None or self.slept < self.sessions)
            if sleeps:
                self.slept += 1
                self.decided.append(admitted)
        try:
            if sleeps:
                self.asleep.set()
                self.release.wait(self.seconds)
                self.asleep.clear()
        finally:
            with self.lock:
                self.running -= 1


def start_with(server: ApiServer, sleeper: Sleeper, settings: Config) -> Running:
    plugins, problems = resolve_plugins(settings)
    assert not problems
    plugins = dataclasses.replace(plugins, enabled=(*plugins.enabled, ("sleeper", sleeper, None)))
    kube = Kube.from_configuration(Configuration(host=server.url))
    daemon = Daemon(kube, settings, plugins, holder_identity="a", notifier=Notifier())
    return Running(daemon, asyncio.create_task(daemon.run(), name="daemon-a"), kube)


def renew_time(server: ApiServer) -> str:
    group, plural, name, namespace = LEASE
    lease = server.get(group, plural, name, namespace) or {}
    return str((lease.get("spec") or {}).get("renewTime"))


async def test_a_session_longer_than_the_lease_keeps_it_and_later_cycles_commit(server) -> None:
    """Each admitting session sleeps 1.5 s (lease 1 s, renew deadline 0.6 s): meanwhile the
    Lease is renewed and /healthz answers; the daemon never loses the lease, and every Job runs."""
    cluster(server, jobs=3)
    sleeper = Sleeper(1.5)
    running = start_with(server, sleeper, config())
    try:
        await until(sleeper.asleep.is_set, timeout=5, what="a session to sleep")
        before = renew_time(server)
        async with aiohttp.ClientSession() as http:
            asked = time.monotonic()
            async with http.get(f"{running.daemon.http.url}/healthz") as response:
                assert 200 == response.status
            assert time.monotonic() - asked < 0.3
        await asyncio.sleep(0.4)
        assert sleeper.asleep.is_set()  # all of the above happened while the session slept
        assert before != renew_time(server)
        await until(lambda: {"job-000", "job-001", "job-002"} <= running_jobs(server), timeout=10,
                    what="the first Jobs to run")
        add_jobs(server, range(3, 5))
        await until(lambda: {"job-003", "job-004"} <= running_jobs(server), timeout=10, what="later Jobs to run")
        elector = running.daemon.elector
        assert elector is not None
        assert (1, True, "a") == (elector.terms, elector.leading, lease_holder(server))
        assert 0 == running.daemon.backend.writer.fenced
        assert 0 == running.daemon.scheduler.abandoned
    finally:
        sleeper.release.set()
        assert 0 == await running.stop()


async def test_a_session_past_the_cycle_deadline_is_abandoned_and_its_decisions_never_written(server) -> None:
    """The first admitting session sleeps 2 s with a 0.5 s cycle deadline: its cycle is abandoned
    and counted, the decisions it made are discarded (not written when it wakes), no second
    session runs beside it, and the next cycle admits each Workload exactly once."""
    cluster(server, jobs=3)
    sleeper = Sleeper(2.0, sessions=1)
    running = start_with(server, sleeper, config(cycle_deadline=500, owner_settle=100))
    try:
        await until(sleeper.asleep.is_set, timeout=5, what="a session to sleep")
        await until(lambda: running.daemon.scheduler.abandoned >= 1, timeout=2, what="the cycle to be abandoned")
        assert sleeper.asleep.is_set()
        decided = sleeper.decided[0]
        admitted_meanwhile = {w for w in decided
                              if (server.get("preemptd.io", "workloads", w.partition("/")[2], "default") or {})
                              .get("status", {}).get("admission")}
        assert set() == admitted_meanwhile
        await until(lambda: running.daemon.backend.sessions_discarded == 1, timeout=5,
                    what="the abandoned session to end")
        await until(lambda: {"job-000", "job-001", "job-002"} <= running_jobs(server), timeout=10,
                    what="the Jobs to run")
        assert 1 == sleeper.most
        assert {1} == set(admissions_written(server).values())
        assert 3 == len(admissions_written(server))
        elector = running.daemon.elector
        assert elector is not None and 1 == elector.terms
        families = {f.name: f for f in running.daemon.metrics.registry.collect()}
        abandoned = [s.value for s in families["preemptd_cycles"].samples
                     if s.name == "preemptd_cycles_total" and s.labels.get("outcome") == "abandoned"]
        assert abandoned and abandoned[0] >= 1
        discarded = [s.value for s in families["preemptd_sessions_discarded"].samples
                     if s.name == "preemptd_sessions_discarded_total"]
        assert [1.0] == discarded
    finally:
        sleeper.release.set()
        assert 0 == await running.stop()


async def test_healthz_fails_once_an_abandoned_session_outlives_the_heartbeat_window(server) -> None:
    """A session stuck for good (here 8 s; deadline 0.5 s, interval 0.2 s: a window of 1.75 s)
    holds back every later one: /healthz answers 200 at first, then 503 naming the session."""
    cluster(server, jobs=2)
    sleeper = Sleeper(8.0)
    running = start_with(server, sleeper, config(cycle_deadline=500, owner_settle=100))
    try:
        await until(sleeper.asleep.is_set, timeout=5, what="a session to sleep")
        url = f"{running.daemon.http.url}/healthz"
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as response:
                assert 200 == response.status
            await asyncio.sleep(2.0)
            async with http.get(url) as response:
                text = await response.text()
                assert (503, True) == (response.status, "a session has been running for" in text), text
        assert sleeper.asleep.is_set()
    finally:
        sleeper.release.set()
        assert 0 == await running.stop()


async def test_sigterm_mid_session_exits_within_shutdown_timeout_and_releases_the_lease(server) -> None:
    """SIGTERM while a session sleeps for 5 s: the daemon returns 0 within shutdown_timeout
    (0.5 s) plus the step-down, the Lease is released, and the session's decisions are not written."""
    cluster(server, jobs=2)
    sleeper = Sleeper(5.0)
    running = start_with(server, sleeper, config(shutdown_timeout=500))
    try:
        await until(sleeper.asleep.is_set, timeout=5, what="a session to sleep")
        assert sleeper.asleep.is_set()
        signalled = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        code = await asyncio.wait_for(running.task, 10)
        took = time.monotonic() - signalled
        assert sleeper.asleep.is_set()  # it returned while the session still slept
    finally:
        sleeper.release.set()
        await running.kube.close()
    assert 0 == code
    assert took < 1.5
    assert "" == lease_holder(server)
    assert 0 == len(admissions_written(server))
