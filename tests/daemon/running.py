"""Daemons against the test API server, and what the server's history says they did."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml
from kube.apiserver import ApiServer
from kube.cluster import flavor, job, queue
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

LEASE = ("coordination.k8s.io", "leases", "preemptd", "preemptd-system")


def config(*, lease_ms: tuple[int, int, int] = (1000, 600, 100), interval_ms: int = 200, **daemon: int) -> Config:
    """A kubernetes configuration with short timings (lease duration, renew deadline, retry period)."""
    duration, deadline, retry = lease_ms
    return dataclasses.replace(
        Config(),
        backend=BackendConfig(kind="kubernetes"),
        scheduler=SchedulerConfig(cycle_interval=interval_ms),
        daemon=DaemonConfig(http_address="127.0.0.1:0", **daemon),  # type: ignore[arg-type]
        leader_election=LeaderElectionConfig(lease_duration=duration, renew_deadline=deadline, retry_period=retry),
    )


@dataclass
class Running:
    daemon: Daemon
    task: asyncio.Task[int]
    kube: Kube

    async def crash(self) -> None:
        """The process dies: tasks cancelled where they are, nothing released."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.kube.close()

    async def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM's path: stop, drain, release; the exit code."""
        self.daemon.stop.set()
        try:
            return await asyncio.wait_for(self.task, timeout)
        finally:
            await self.kube.close()


def start(server: ApiServer, name: str, settings: Config | None = None, *, config_path: Path | None = None) -> Running:
    settings = settings or config()
    plugins, problems = resolve_plugins(settings)
    assert not problems
    kube = Kube.from_configuration(Configuration(host=server.url))
    daemon = Daemon(kube, settings, plugins, holder_identity=name, notifier=Notifier(), config_path=config_path)
    return Running(daemon, asyncio.create_task(daemon.run(), name=f"daemon-{name}"), kube)


def cluster(server: ApiServer, jobs: int, *, cpu: str = "100") -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": cpu}))
    add_jobs(server, range(jobs))


def add_jobs(server: ApiServer, numbers: range) -> None:
    for number in numbers:
        server.put("batch", "jobs", job(f"job-{number:03d}", "team-a", {"cpu": "1"}))


def lease_holder(server: ApiServer) -> str | None:
    group, plural, name, namespace = LEASE
    lease = server.get(group, plural, name, namespace)
    return None if lease is None else str(lease["spec"].get("holderIdentity") or "")


def running_jobs(server: ApiServer) -> set[str]:
    return {j["metadata"]["name"] for j in server.list("batch", "jobs") if j["spec"].get("suspend") is False}


def admitted_workloads(server: ApiServer) -> set[str]:
    """Workloads (by their Job's name) whose status holds an admission."""
    return {
        (w["spec"].get("owner") or {}).get("name", "")
        for w in server.list("preemptd.io", "workloads")
        if (w.get("status") or {}).get("admission")
    }


def admissions_written(server: ApiServer) -> Counter[str]:
    """How many times each Workload went from not admitted to admitted, from the server's history."""
    counts: Counter[str] = Counter()
    admitted: dict[str, bool] = {}
    for event in server.history:
        if event.kind.plural != "workloads":
            continue
        metadata = event.obj["metadata"]
        key = f"{metadata.get('namespace')}/{metadata['name']}"
        now = bool((event.obj.get("status") or {}).get("admission")) and event.type != "DELETED"
        if now and not admitted.get(key, False):
            counts[key] += 1
        admitted[key] = now
    return counts


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def kubeconfig(path: Path, server: ApiServer) -> Path:
    document = {
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": {"server": server.url}}],
        "users": [{"name": "test", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
    }
    path.write_text(yaml.safe_dump(document))
    return path
