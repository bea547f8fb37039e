"""The daemon against a failing API server: nothing lost, nothing done twice.

Each test runs the whole daemon (leader election, watches, the loop, commits)
against the in-process API server, with the Job controller and kubelet played
by a background task, and injects one fault while a preemption wave is being
committed: 5xx bursts, 409 storms, watches dropped with their history gone (410,
relist), an API server restart mid-commit, the lease lost mid-commit, and
``kill -9`` of the process. Each then checks the server's own history:

* **no lost admission**: every Job the quota has room for runs, and every
  admission the server holds is one its Job follows;
* **no duplicate eviction**: each victim is evicted once, and only as many
  victims as the wave needs;
* **no duplicate admission**: each Workload goes from pending to admitted once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import (
    BackendConfig,
    Config,
    DaemonConfig,
    LeaderElectionConfig,
    SchedulerConfig,
)
from preemptd.daemon.notify import Notifier
from preemptd.daemon.plugins import resolve_plugins
from preemptd.daemon.service import Daemon

from .apiserver import ApiFailure, ApiServer, Request
from .cluster import Controllers, flavor, job, node, priority_class, queue, until

pytestmark = pytest.mark.asyncio

LOW = [f"low-{n}" for n in range(4)]
HIGH = [f"high-{n}" for n in range(2)]
LEASE_MS = (1000, 600, 100)  # duration, renew deadline, retry period


def _config() -> Config:
    duration, deadline, retry = LEASE_MS
    return dataclasses.replace(
        Config(),
        backend=BackendConfig(kind="kubernetes"),
        scheduler=SchedulerConfig(cycle_interval=100),
        daemon=DaemonConfig(http_address="127.0.0.1:0"),
        leader_election=LeaderElectionConfig(lease_duration=duration, renew_deadline=deadline, retry_period=retry),
    )


def _cluster(server: ApiServer) -> None:
    """Room for four one-cpu Jobs; four low ones are about to run, two high ones will need two of them."""
    server.put("preemptd.io", "resourceflavors", flavor("default", {"pool": "batch"}))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}, preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"pool": "batch"}))
    for name in LOW:
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "1"}, priority_class_name="low"))


def _wave(server: ApiServer) -> None:
    for name in HIGH:
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "1"}, priority_class_name="high"))


def _running(server: ApiServer) -> set[str]:
    return {j["metadata"]["name"] for j in server.list("batch", "jobs") if j["spec"].get("suspend") is False}


def _transitions(server: ApiServer, became: Callable[[dict], bool]) -> Counter[str]:
    """How many times each Workload's ``became`` went from false to true, from the server's history."""
    counts: Counter[str] = Counter()
    before: dict[str, bool] = {}
    for event in server.journal:
        if event.kind.plural != "workloads":
            continue
        name = event.obj["metadata"]["name"]
        now = event.type != "DELETED" and became(event.obj)
        if now and not before.get(name, False):
            counts[name] += 1
        before[name] = now
    return counts


def _admitted(workload: dict) -> bool:
    return bool((workload.get("status") or {}).get("admission"))


def _evicted(workload: dict) -> bool:
    return any(c.get("type") == "Evicted" and c.get("status") == "True"
               for c in (workload.get("status") or {}).get("conditions") or [])


def _settled(server: ApiServer) -> bool:
    """The wave is done: both high Jobs and two low ones run, and nothing is being stopped."""
    running = _running(server)
    if not set(HIGH) <= running or len(running & set(LOW)) != 2:
        return False
    for workload in server.list("preemptd.io", "workloads"):
        owner = workload["spec"]["owner"]["name"]
        if _admitted(workload) != (owner in running) or (_evicted(workload) and _admitted(workload)):
            return False
    return True


def assert_nothing_lost_nothing_twice(server: ApiServer) -> None:
    running = _running(server)
    assert set(HIGH) <= running
    assert 2 == len(running & set(LOW))
    admitted = {w["spec"]["owner"]["name"] for w in server.list("preemptd.io", "workloads") if _admitted(w)}
    assert running == admitted  # every admission is followed by its Job, and only those run
    admissions = _transitions(server, _admitted)
    assert {f"job-{name}": 1 for name in LOW + HIGH} == dict(admissions)
    evictions = _transitions(server, _evicted)
    assert 2 == len(evictions)
    assert {1} == set(evictions.values())
    assert {f"job-{name}" for name in LOW} - {f"job-{name}" for name in running} == set(evictions)


@asynccontextmanager
async def _controllers(server: ApiServer) -> AsyncIterator[Controllers]:
    """The Job controller, scheduler and kubelets, every 20 ms (terminating pods end at once)."""
    controllers = Controllers(server)

    async def run() -> None:
        while True:
            controllers.step()
            controllers.finish_terminating()
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run(), name="test-controllers")
    try:
        yield controllers
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@dataclasses.dataclass
class _Daemon:
    daemon: Daemon
    task: asyncio.Task[int]
    kube: Kube

    async def crash(self) -> None:
        """The process dies: its tasks end where they are, nothing released."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.kube.close()

    async def stop(self) -> None:
        self.daemon.stop.set()
        try:
            await asyncio.wait_for(self.task, 10)
        finally:
            await self.kube.close()


def _start(server: ApiServer, identity: str = "a") -> _Daemon:
    settings = _config()
    plugins, problems = resolve_plugins(settings)
    assert not problems
    kube = Kube.from_configuration(Configuration(host=server.url))
    daemon = Daemon(kube, settings, plugins, holder_identity=identity, notifier=Notifier())
    # Owner syncs that fail are retried on a short backoff here: twenty failures in a row
    # would otherwise back off for minutes, and these tests are about what is written.
    daemon.backend.owners.first_retry, daemon.backend.owners.max_retry = 0.02, 0.5
    return _Daemon(daemon, asyncio.create_task(daemon.run(), name=f"daemon-{identity}"), kube)


def _evicting(record: Request) -> bool:
    return record.plural == "workloads" and record.subresource == "status"


@contextmanager
def _once_at_first(server: ApiServer, when: Callable[[Request], bool], fault: Callable[[], None]) -> Iterator[list[float]]:
    """Run ``fault`` (which may raise an ApiFailure for that request) at the first write ``when`` matches."""
    fired: list[float] = []

    def hook(record: Request) -> None:
        if fired or not when(record):
            return
        fired.append(time.monotonic())
        fault()

    server.before_write = hook
    try:
        yield fired
    finally:
        server.before_write = None


async def _run_wave(server: ApiServer, arm: Callable[[], AbstractContextManager[object]]) -> None:
    _cluster(server)
    async with _controllers(server):
        daemon = _start(server)
        try:
            await until(lambda: set(LOW) <= _running(server), timeout=10, what="the low Jobs to run")
            with arm():
                _wave(server)
                await until(lambda: _settled(server), timeout=20, what="the wave to settle")
            await asyncio.sleep(0.5)  # a few more cycles: nothing more may happen
        finally:
            await daemon.stop()
    assert_nothing_lost_nothing_twice(server)


@contextmanager
def _now(fault: Callable[[], None]) -> Iterator[None]:
    """``fault`` at once (failures the server serves to the next matching requests)."""
    fault()
    yield


def _writes_to(*plurals: str, verbs: tuple[str, ...] = ("create", "update", "patch")) -> Callable[[Request], bool]:
    return lambda r: r.verb in verbs and r.plural in plurals


async def test_5xx_burst_during_a_preemption_wave(server) -> None:
    """Twenty 500s on Workload and Job writes, from the wave's first commit on."""
    await _run_wave(server, lambda: _now(
        lambda: server.fail(20, code=500, reason="InternalError", when=_writes_to("workloads", "jobs"))))


async def test_409_storm_during_a_preemption_wave(server) -> None:
    """Workload and Job patches conflict (stale resourceVersion), twenty times in a row."""
    await _run_wave(server, lambda: _now(
        lambda: server.fail(20, code=409, reason="Conflict", when=_writes_to("workloads", "jobs", verbs=("patch",)))))


async def test_watches_dropped_with_history_gone_mid_commit(server) -> None:
    """At the wave's first eviction, every watch is cut and the history compacted: resuming gets 410, relist."""

    def cut() -> None:
        server.compact()
        server.drop_watches(abrupt=True)

    await _run_wave(server, lambda: _once_at_first(server, _evicting, cut))


async def test_api_server_restart_mid_commit(server) -> None:
    """At the wave's first eviction the server restarts: that write fails (503), versions jump to a
    new epoch, watches are cut and must relist."""

    def restart() -> None:
        server.restart()
        raise ApiFailure(503, "ServiceUnavailable", "the server is restarting")

    await _run_wave(server, lambda: _once_at_first(server, _evicting, restart))


async def test_leader_loss_during_a_commit_stops_every_write(server) -> None:
    """The wave's first eviction is written, then the lease can no longer be renewed (and the
    server slows down, so the commit is still under way). Checks that the leader steps down
    within its renew deadline and that nothing but lease requests reaches the server once it
    has stepped down or once its lease has run out. Then the old replica dies, the server heals
    and a new replica takes over and finishes the wave: nothing lost, nothing twice."""
    _cluster(server)
    writes: list[tuple[float, Request]] = []
    last_renewal = [0.0]
    lost: list[float] = []
    armed: list[bool] = []

    def hook(record: Request) -> None:
        now = record.at
        if record.plural == "leases":
            if not lost:
                last_renewal[0] = now
            return
        if not armed:
            return
        writes.append((now, record))
        if not lost and _evicting(record):
            lost.append(now)
            server.fail(10**6, code=500, reason="InternalError", when=lambda r: r.plural == "leases")
            server.latency = 0.5  # a slow server: the commit is still under way when the lease is lost

    server.before_write = hook
    async with _controllers(server):
        first = _start(server, "a")
        second: _Daemon | None = None
        try:
            await until(lambda: set(LOW) <= _running(server), timeout=10, what="the low Jobs to run")
            armed.append(True)
            _wave(server)
            await until(lambda: bool(lost), timeout=10, what="the first eviction")
            await until(lambda: not first.daemon.elector.leading, timeout=LEASE_MS[1] / 1000 + 1,
                        what="the leader to step down")
            stepped_down = time.monotonic()
            await asyncio.sleep(LEASE_MS[0] / 1000 + 0.3)
            late = [(t, r.plural, r.name) for t, r in writes if t > stepped_down + 0.05]
            assert [] == late
            expired = last_renewal[0] + LEASE_MS[0] / 1000
            assert [] == [(t, r.plural, r.name) for t, r in writes if t > expired]
            server.before_write = None
            server.latency = 0.0
            await first.crash()
            server.heal()
            second = _start(server, "b")
            await until(lambda: _settled(server), timeout=20, what="the wave to settle once the lease is back")
            await asyncio.sleep(0.5)
        finally:
            server.before_write = None
            for running in (first, second):
                if running is not None and not running.task.done():
                    await running.stop()
    assert_nothing_lost_nothing_twice(server)


CONFIG = """
[scheduler]
cycle_interval = "100ms"
[backend]
kind = "kubernetes"
[daemon]
log_format = "json"
[leader_election]
lease_duration = "1s"
renew_deadline = "600ms"
retry_period = "100ms"
"""


def _kubeconfig(path: Path, server: ApiServer) -> Path:
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "test", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


async def _process(server: ApiServer, tmp_path: Path, name: str) -> asyncio.subprocess.Process:
    config = tmp_path / "preemptd.toml"
    config.write_text(CONFIG)
    env = {**os.environ, "KUBECONFIG": str(_kubeconfig(tmp_path / "kubeconfig", server)), "POD_NAME": name}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    env.pop("NOTIFY_SOCKET", None)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd.daemon.cli", "run", "--config", str(config), "--log-level", "error",
        "--http-address", "127.0.0.1:0", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )


async def test_kill_9_mid_commit_and_restart(server, tmp_path: Path) -> None:
    """`preemptd run` is killed with SIGKILL right after the wave's first eviction is written (its
    other writes cut off where they are); a new process takes over once the lease runs out and
    finishes the wave: no duplicate eviction, no lost or repeated admission."""
    _cluster(server)
    first_eviction: list[float] = []

    def hook(record: Request) -> None:
        if _evicting(record) and not first_eviction:
            first_eviction.append(time.monotonic())

    async with _controllers(server):
        first = await _process(server, tmp_path, "preemptd-0")
        second: asyncio.subprocess.Process | None = None
        try:
            await until(lambda: set(LOW) <= _running(server), timeout=20, what="the low Jobs to run")
            server.latency = 0.02  # writes take a while: the kill lands mid-commit
            server.before_write = hook
            _wave(server)
            await until(lambda: bool(first_eviction), timeout=10, what="the first eviction")
            first.send_signal(signal.SIGKILL)
            await first.wait()
            server.latency = 0.0
            second = await _process(server, tmp_path, "preemptd-1")
            await until(lambda: _settled(server), timeout=30, what="the wave to settle after the restart")
            await asyncio.sleep(0.5)
        finally:
            server.before_write = None
            for process in (first, second):
                if process is not None and process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(process.wait(), 10)
                    except TimeoutError:
                        process.kill()
                        await process.wait()
    assert_nothing_lost_nothing_twice(server)


async def test_conflict_on_the_preemptors_job_loses_no_admission(server) -> None:
    """The preemptors' Workloads are admitted, then each unsuspend of their Jobs meets a 409 once.
    The admission is the desired state: the Jobs are still unsuspended."""
    await _run_wave(server, lambda: _now(lambda: server.fail(
        len(HIGH), code=409, reason="Conflict",
        when=lambda r: r.plural == "jobs" and r.verb == "patch" and (r.name or "").startswith("high-"))))
