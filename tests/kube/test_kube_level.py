"""Commit is level-triggered: each owner is driven to its Workload whatever happened to a cycle.

The API server's own fault injection answers a request with an error; a request that
*hangs* is built here, around the backend's client: the first Job write matching a test's
condition waits before it is sent, so the cycle that asked for it runs past its deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.backends.kubernetes.client import JOBS, PODS, WORKLOADS, Resource
from preemptd.daemon.config import BackendConfig, Config
from preemptd.daemon.loop import Scheduler
from preemptd.daemon.plugins import resolve_plugins

from .apiserver import ApiServer
from .cluster import flavor, job, queue, until
from .conftest import NOW_MS, client_for

pytestmark = pytest.mark.asyncio


class JobWrites:
    """The backend's Job patches: when each was asked for, and a hold on the first that ``hangs``."""

    def __init__(self, backend: KubernetesBackend, hangs: Callable[[dict[str, Any]], bool], seconds: float) -> None:
        self.asked: list[tuple[float, dict[str, Any]]] = []
        self.held = 0
        self.kube = backend.writer.kube
        self.hangs = hangs
        self.seconds = seconds
        backend.writer.kube = self  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def patch(self, resource: Resource, name: str, body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if resource is JOBS:
            self.asked.append((time.monotonic(), body))
            if not self.held and self.hangs(body):
                self.held += 1
                await asyncio.sleep(self.seconds)
        return await self.kube.patch(resource, name, body, *args, **kwargs)


def _unsuspends(body: dict[str, Any]) -> bool:
    return (body.get("spec") or {}).get("suspend") is False


def _running(server: ApiServer, name: str) -> bool:
    found = server.get("batch", "jobs", name, "default")
    return found is not None and found["spec"].get("suspend") is False


@pytest_asyncio.fixture
async def backends(server: ApiServer) -> AsyncIterator[Callable[..., Any]]:
    started: list[KubernetesBackend] = []

    async def make(**options: Any) -> KubernetesBackend:
        config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
        plugins, _ = resolve_plugins(config)
        backend = KubernetesBackend(client_for(server), config=config, plugins=plugins, clock=lambda: NOW_MS,
                                    **options)
        await backend.start(timeout=5)
        started.append(backend)
        return backend

    yield make
    for backend in started:
        await backend.stop()
        await backend.kube.close()


def _cluster(server: ApiServer, *names: str) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    for name in names:
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "1"}))


async def _scheduling(backend: KubernetesBackend, **timings: float) -> tuple[Scheduler, asyncio.Event, asyncio.Task[None]]:
    scheduler = Scheduler(backend, **{"interval": 0.1, "debounce": 0.01, "deadline": 0.3, **timings})
    stop = asyncio.Event()
    return scheduler, stop, asyncio.create_task(scheduler.run(stop), name="scheduler")


async def test_a_cycle_deadline_that_cancels_a_job_unsuspend_leaves_no_job_suspended(server, backends) -> None:
    """The cycle that admits two Jobs waits for their owners and runs past its deadline while one
    unsuspend hangs: the cycle is abandoned, yet both Jobs run soon after, Workloads admitted once."""
    _cluster(server, "first", "second")
    backend = await backends()  # settle_owners: the cycle waits for the owners it decided about
    writes = JobWrites(backend, _unsuspends, seconds=1.0)
    scheduler, stop, task = await _scheduling(backend)
    try:
        await until(lambda: scheduler.abandoned >= 1, what="the cycle to be abandoned")
        assert 1 == writes.held
        await until(lambda: _running(server, "first") and _running(server, "second"), timeout=5,
                    what="both Jobs to run")
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    admitted = [w for w in server.list("preemptd.io", "workloads") if (w.get("status") or {}).get("admission")]
    assert 2 == len(admitted)


async def test_a_failed_job_unsuspend_is_retried_with_a_growing_backoff_not_every_cycle(server, backends) -> None:
    """Three 500s on the unsuspend: the Job is tried again after 0.2 s, 0.4 s, 0.8 s (its own
    backoff), not at each of the 0.1 s cycles, and then runs."""
    _cluster(server, "train")
    server.fail(3, code=500, when=lambda r: r.plural == "jobs" and r.verb == "patch")
    backend = await backends(settle_owners=0, owner_retry=(0.2, 5.0))
    writes = JobWrites(backend, lambda body: False, seconds=0)
    _, stop, task = await _scheduling(backend)
    try:
        await until(lambda: _running(server, "train"), timeout=5, what="the Job to run")
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    unsuspends = [at for at, body in writes.asked if _unsuspends(body)]
    assert 4 == len(unsuspends)
    gaps = [later - earlier for earlier, later in itertools.pairwise(unsuspends)]
    for gap, backoff in zip(gaps, (0.2, 0.4, 0.8), strict=True):
        assert backoff <= gap < backoff + 0.3, gaps
    assert 3 == backend.owners.retries
    assert {("Job", "default/train")} & set(backend.owners.failures) == set()  # converged: forgotten


async def test_the_pod_index_forgets_a_workload_once_its_last_pod_is_gone(server, backends) -> None:
    """Churn leaves nothing behind in the pods-by-Workload index: 50 Workloads' pods come and go,
    and no entry (not even an empty one) stays for them."""
    _cluster(server)
    backend = await backends(settle_owners=0)
    for number in range(50):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"p-{number}", "namespace": "default",
                            "labels": {"preemptd.io/workload": f"job-gone-{number}"}},
               "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": {"phase": "Running"}}
        server.put("", "pods", pod)
    await until(lambda: len(backend.informers[PODS].store) == 50, what="the pods to be seen")
    assert 50 == len(backend._pods_by_workload)
    for number in range(50):
        server.remove("", "pods", f"p-{number}", "default")
    await until(lambda: not backend.informers[PODS].store, what="the pods to be gone")
    assert {} == backend._pods_by_workload


class SlowWrites:
    """Every Workload create and Job patch of the backend takes ``seconds``; counts those in flight."""

    def __init__(self, backend: KubernetesBackend, seconds: float) -> None:
        self.kube = backend.writer.kube
        self.seconds = seconds
        self.in_flight = 0
        self.most = 0
        backend.writer.kube = self  # type: ignore[assignment]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def _slowly(self) -> None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.in_flight -= 1

    async def create(self, resource: Resource, body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if resource.kind == "Workload":
            await self._slowly()
        return await self.kube.create(resource, body, *args, **kwargs)

    async def patch(self, resource: Resource, name: str, body: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if resource is JOBS:
            await self._slowly()
        return await self.kube.patch(resource, name, body, *args, **kwargs)


async def test_workloads_are_created_from_the_watch_outside_the_cycle_and_nothing_is_admitted_twice(
    server, backends
) -> None:
    """New Jobs' Workloads are created by the owner reconciler (two at a time here), not by a
    cycle: a cycle while they are being created takes no time. Once they exist one cycle admits
    them all; the next cycle, run while their Jobs are still being unsuspended, sees them
    admitted and decides nothing again."""
    _cluster(server)
    backend = await backends(settle_owners=0, concurrency=4)  # owners get half the write slots
    slow = SlowWrites(backend, seconds=0.3)
    names = [f"job-{number}" for number in range(6)]
    for name in names:
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "0.5"}))
    await until(lambda: len(backend.informers[JOBS].store) == 6 and slow.in_flight > 0, what="creations to begin")
    began = time.monotonic()
    report = await backend.cycle()
    assert time.monotonic() - began < 0.2
    assert [] == report.decisions.admitted
    await until(lambda: len(server.list("preemptd.io", "workloads")) == 6, what="the Workloads")
    assert 2 == slow.most
    await until(lambda: len(backend.informers[WORKLOADS].store) == 6, what="the Workloads in the cache")
    report = await backend.cycle()
    assert 6 == len(report.decisions.admitted)
    assert slow.in_flight > 0  # the Jobs are still being unsuspended
    again = await backend.cycle()
    assert ([], []) == (again.decisions.admitted, again.decisions.preempted)
    await until(lambda: all(_running(server, name) for name in names), what="every Job to run")


async def test_a_cycle_waits_for_new_workloads_at_most_owner_settle(server, backends) -> None:
    """Each Workload create takes 1 s: a cycle waits 0.2 s for them, then decides on what is there."""
    _cluster(server)
    backend = await backends(settle_owners=0.2)
    slow = SlowWrites(backend, seconds=1.0)
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    await until(lambda: slow.in_flight > 0, what="the creation to begin")
    began = time.monotonic()
    await backend.cycle()
    assert 0.2 <= time.monotonic() - began < 0.5
