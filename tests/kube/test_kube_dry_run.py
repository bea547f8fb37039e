"""`preemptd run --dry-run` over many cycles: each decision is one structured INFO line, logged
and counted once, and the replica does not claim to lead (issue 20, point 10)."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import BackendConfig, Config, DaemonConfig, SchedulerConfig
from preemptd.daemon.logging import configure_logging
from preemptd.daemon.notify import Notifier
from preemptd.daemon.plugins import resolve_plugins
from preemptd.daemon.service import Daemon

from .apiserver import ApiServer
from .cluster import flavor, job, queue, until

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


def sample(daemon: Daemon, name: str, labels: dict[str, str] | None = None) -> float:
    value = daemon.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


async def test_a_dry_run_logs_and_counts_each_decision_once_and_does_not_lead(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    settings = dataclasses.replace(
        Config(),
        backend=BackendConfig(kind="kubernetes"),
        scheduler=SchedulerConfig(cycle_interval=50),
        daemon=DaemonConfig(http_address="127.0.0.1:0"),
    )
    plugins, problems = resolve_plugins(settings)
    assert not problems
    stream = io.StringIO()
    configure_logging(log_format="json", level="info", stream=stream)
    kube = Kube.from_configuration(Configuration(host=server.url))
    daemon = Daemon(kube, settings, plugins, dry_run=True, holder_identity="a", notifier=Notifier())
    task = asyncio.create_task(daemon.run(), name="daemon-dry-run")
    try:
        await until(lambda: sample(daemon, "preemptd_cycles_total", {"outcome": "ok"}) >= 6, timeout=20,
                    what="six dry-run cycles")
        assert 0 == sample(daemon, "preemptd_leader")
        assert 1 == sample(daemon, "preemptd_dry_run")
        assert 1 == sample(daemon, "preemptd_admissions_total", {"queue": "team-a"})
    finally:
        daemon.stop.set()
        try:
            assert 0 == await asyncio.wait_for(task, 10)
        finally:
            await kube.close()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    admits = [line for line in lines if line["event"] == "admit"]
    assert [("default/job-train", "team-a", ["default"], True)] == [
        (a["workload"], a["queue"], a["flavors"], a["dry_run"]) for a in admits
    ]
    info = [line for line in lines if line["level"] == "info"]
    assert [] == [line for line in info if "{'" in line["event"] or "': " in line["event"]]  # no dict reprs
    assert [] == [line for line in info if line["event"].startswith("dry-run:")]
    assert [] == [r for r in server.requests if r.verb not in ("get", "list", "watch")]
