"""`preemptd run`: the loop against the test API server, found through a kubeconfig."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from preemptd.daemon.config import BackendConfig, Config, SchedulerConfig
from preemptd.daemon.loop import Scheduler
from preemptd.daemon.plugins import resolve_plugins
from preemptd.daemon.service import run_daemon

from .apiserver import ApiServer
from .cluster import flavor, job, queue, until

pytestmark = pytest.mark.asyncio


def _kubeconfig(path: Path, server: ApiServer) -> Path:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "test", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def _cluster(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))


def _running(server: ApiServer) -> bool:
    found = server.get("batch", "jobs", "train", "default")
    return found is not None and found["spec"]["suspend"] is False


async def test_run_daemon_admits_through_a_kubeconfig_and_stops_cleanly(server, tmp_path, monkeypatch) -> None:
    """KUBECONFIG finds the cluster; the loop admits the Job soon after its watch event; stop → 0."""
    _cluster(server)
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "config", server)))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"),
                                 scheduler=SchedulerConfig(cycle_interval=60_000))
    plugins, _ = resolve_plugins(config)
    stop = asyncio.Event()
    daemon = asyncio.create_task(run_daemon(config, plugins, stop=stop, http_address="127.0.0.1:0"), name="daemon")
    await until(lambda: _running(server), what="the Job to run")
    # Not the minute-long interval: watch events woke the loop.
    server.put("batch", "jobs", job("second", "team-a", {"cpu": "1"}))
    await until(lambda: (server.get("batch", "jobs", "second", "default") or {}).get("spec", {}).get("suspend") is False,
                what="the second Job to run")
    stop.set()
    assert 0 == await asyncio.wait_for(daemon, 5)
    ours = ("informer:", "events", "scheduler", "informers-sync", "leader-election", "watchdog", "cycle")
    assert [] == [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(ours)]


async def test_preemptd_run_exits_0_on_sigterm(server, tmp_path) -> None:
    """The command, as a process: it schedules, and SIGTERM ends it with exit code 0."""
    _cluster(server)
    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "kubernetes"\n')
    env = {**os.environ, "KUBECONFIG": str(_kubeconfig(tmp_path / "config", server))}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd.daemon.cli", "run", "--config", str(config), "--log-level", "warning",
        "--http-address", "127.0.0.1:0", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        await until(lambda: _running(server), timeout=20, what="the Job to run")
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert 0 == process.returncode, stderr.decode()


async def test_dry_run_process_writes_nothing(server, tmp_path) -> None:
    """`preemptd run --dry-run` reads the cluster and logs its decisions; the server sees no write."""
    _cluster(server)
    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "kubernetes"\n')
    env = {**os.environ, "KUBECONFIG": str(_kubeconfig(tmp_path / "config", server))}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd.daemon.cli", "run", "--dry-run", "--config", str(config),
        "--http-address", "127.0.0.1:0", env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        await until(lambda: any(r.verb == "watch" and r.plural == "jobs" for r in server.requests), timeout=20,
                    what="the daemon to watch")
        await asyncio.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert 0 == process.returncode
    assert [] == [r for r in server.requests if r.verb not in ("get", "list", "watch")]
    lines = [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    admitted = [line for line in lines if line.get("event") == "admit"]
    assert [("default/job-train", "team-a", True)] == [(a["workload"], a["queue"], a["dry_run"]) for a in admitted]


class _Backend:
    """A stand-in that records how cycles overlap and what woke them."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.resync = False
        self.healthy = True
        self.running = 0
        self.most = 0
        self.cycles = 0

    def drain(self) -> None:
        pass

    async def cycle(self, *, actions: object = None) -> None:
        self.wake.clear()
        self.running += 1
        self.most = max(self.most, self.running)
        self.cycles += 1
        await asyncio.sleep(0.02)
        self.running -= 1


async def test_cycles_never_overlap_and_a_burst_of_events_is_one_cycle() -> None:
    """Events during a cycle start one more cycle after it, debounced; never two at once."""
    backend = _Backend()
    scheduler = Scheduler(backend, interval=60, debounce=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop), name="scheduler")
    await until(lambda: backend.cycles == 1, what="the first cycle")
    for _ in range(100):
        backend.wake.set()
        await asyncio.sleep(0)
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.wait_for(task, 1)
    assert 1 == backend.most
    assert 2 == backend.cycles
