"""`preemptd explain --cluster`: why a workload waits, read from a live cluster."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from .apiserver import ApiServer
from .cluster import flavor, queue
from .test_kube_loop import _kubeconfig

pytestmark = pytest.mark.asyncio


def _workload(name: str, cpu: str, *, admitted: bool, priority: int) -> dict[str, object]:
    obj: dict[str, object] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "team-a", "priority": priority,
                 "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}]},
    }
    if admitted:
        obj["status"] = {
            "admission": {"queue": "team-a", "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
            "admittedAt": "2026-01-01T00:01:00Z",
        }
    return obj


async def test_explain_reads_the_cluster_and_writes_nothing(server: ApiServer, tmp_path) -> None:
    """A workload blocked by a full queue is explained from the live objects, with no write."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("preemptd.io", "workloads", _workload("running", "4", admitted=True, priority=5))
    server.put("preemptd.io", "workloads", _workload("waiting", "2", admitted=False, priority=1))
    env = {**os.environ, "KUBECONFIG": str(_kubeconfig(tmp_path / "config", server))}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    before = len(server.requests)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd", "explain", "ml/waiting", "--cluster", "--now", "2026-01-01T01:00:00Z",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert 0 == process.returncode, err.decode()
    text = out.decode()
    # Queue nominal 4, all used by "running"; "waiting" needs 2 within nominal, and the
    # queue does not preempt (withinQueue Never): no candidates.
    assert "ml/waiting: pending (PreemptionNoCandidates)" in text
    writes = [r for r in server.requests[before:] if r.method in ("POST", "PUT", "PATCH", "DELETE")]
    assert [] == writes


async def test_explain_needs_snapshots_or_cluster() -> None:
    """Neither snapshot files nor --cluster is a usage error (exit 2)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd", "explain", "ml/waiting",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    await asyncio.wait_for(process.communicate(), 60)
    assert 2 == process.returncode
