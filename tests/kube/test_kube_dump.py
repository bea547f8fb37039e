"""`preemptd dump --cluster`: what the scheduler sees, in one file that the other commands read."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from .apiserver import ApiServer
from .cluster import flavor, queue
from .test_kube_explain import _workload
from .test_kube_loop import _kubeconfig

pytestmark = pytest.mark.asyncio

NOW = "2026-01-01T01:00:00Z"


async def preemptd(*argv: str) -> tuple[int, str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("KUBERNETES_SERVICE_HOST", "KUBECONFIG")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd", *argv, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


async def test_dump_of_a_cluster_decides_as_the_cluster_does(server: ApiServer, tmp_path: Path) -> None:
    """The dump holds every object the scheduler reads and the configuration's tables;
    `cycle` on it decides what `explain --cluster` says, and the cluster is not written."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("preemptd.io", "workloads", _workload("running", "4", admitted=True, priority=5))
    server.put("preemptd.io", "workloads", _workload("waiting", "2", admitted=False, priority=1))
    kubeconfig = str(_kubeconfig(tmp_path / "config", server))
    config = tmp_path / "preemptd.toml"
    config.write_text('[backend]\nkind = "kubernetes"\n[plugins.fair-sharing]\nenabled = false\n')
    dump = tmp_path / "dump.yaml"
    before = len(server.requests)
    code, _, err = await preemptd(
        "dump", "--cluster", "--kubeconfig", kubeconfig, "--context", "test", "--config", str(config),
        "--now", NOW, "--out", str(dump),
    )
    assert 0 == code, err
    assert [] == [r for r in server.requests[before:] if r.method in ("POST", "PUT", "PATCH", "DELETE")]
    written = yaml.safe_load(dump.read_text())
    assert (NOW, {"backend": {"kind": "kubernetes"}, "plugins": {"fair-sharing": {"enabled": False}}}) == (
        written["start"], written["config"]
    )
    kinds = sorted((obj["kind"], obj["metadata"]["name"]) for obj in written["objects"])
    assert [("Queue", "team-a"), ("ResourceFlavor", "default"), ("Workload", "running"), ("Workload", "waiting")] == kinds
    code, out, err = await preemptd("cycle", str(dump), "-o", "json")
    assert 0 == code, err
    pending = json.loads(out)["pending"]
    # Queue nominal 4, all used by "running"; the queue does not preempt (withinQueue Never).
    assert [("ml/waiting", "PreemptionNoCandidates")] == [(p["workload"], p["reason"]) for p in pending]


async def test_dump_as_test_of_a_cluster_is_a_scenario_case(server: ApiServer, tmp_path: Path) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("preemptd.io", "workloads", _workload("waiting", "2", admitted=False, priority=1))
    kubeconfig = str(_kubeconfig(tmp_path / "config", server))
    case = tmp_path / "case.yaml"
    code, _, err = await preemptd("dump", "--cluster", "--kubeconfig", kubeconfig, "--now", NOW, "--as-test", "--out", str(case))
    assert 0 == code, err
    written = yaml.safe_load(case.read_text())
    assert (NOW, ["ml/waiting"]) == (written["now"], [a["workload"] for a in written["expect"]["admitted"]])
