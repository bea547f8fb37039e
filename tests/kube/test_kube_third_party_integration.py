"""The example third-party integration (examples/integrations), installed for real and enabled.

It is installed with pip into the interpreter running the tests, found through the
``preemptd.integrations`` entry point, turned on by ``[integrations.sweep]`` — by
``preemptd manifests`` in a subprocess, and by a backend in this process that then
admits, preempts and admits again a Sweep.
"""

from __future__ import annotations

import dataclasses
import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.backends.kubernetes.integrations.registry import resolve_integrations
from preemptd.daemon.config import BackendConfig, parse_config
from preemptd.daemon.plugins import resolve_plugins

from . import crds
from .cluster import (
    QUEUE_LABEL,
    Controllers,
    assert_least_privilege,
    flavor,
    job,
    node,
    priority_class,
    queue,
    step,
)
from .conftest import NOW_MS, client_for
from .kinds import pod_template

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "integrations" / "preemptd-example-integration"
DISTRIBUTION = "preemptd-example-integration"
ENABLED = "[integrations.sweep]\nenabled = true\n"

SWEEP_CRD = crds.crd(
    "example.com", "v1", "Sweep", "sweeps",
    spec={"type": "object", "properties": {
        "suspend": {"type": "boolean"}, "parallelism": {"type": "integer"}, "template": crds.KEPT}},
    status={"type": "object", "properties": {"phase": {"type": "string"}}},
)


def pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
        capture_output=True, text=True, timeout=300,
    )
    if result.returncode != 0:
        pytest.fail(f"pip {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The example package, installed (not editable) into the running interpreter."""
    source = tmp_path_factory.mktemp("example") / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip("install", "--quiet", "--no-deps", "--no-build-isolation", str(source))
    importlib.invalidate_caches()
    yield
    pip("uninstall", "--yes", "--quiet", DISTRIBUTION)
    sys.modules.pop("preemptd_sweep", None)


def manifests(tmp_path: Path, table: str) -> str:
    config = tmp_path / "preemptd.toml"
    config.write_text(table, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "preemptd", "manifests", "--config", str(config)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert 0 == result.returncode, result.stderr
    return result.stdout


SWEEP_RULE = "- apiGroups: [example.com]\n  resources: [sweeps]\n  verbs: [get, list, patch, watch]\n"


def test_the_installed_integration_is_off_until_enabled_then_in_the_cluster_role(installed, tmp_path: Path) -> None:
    """Installing the package changes nothing; [integrations.sweep] enabled adds its rule."""
    assert SWEEP_RULE not in manifests(tmp_path, "")
    assert SWEEP_RULE in manifests(tmp_path, ENABLED)


@pytest.mark.asyncio
async def test_the_enabled_integration_admits_preempts_and_admits_again_a_sweep(
    installed, server, controllers: Controllers
) -> None:
    """Through the entry point: a Sweep gets a Workload, runs on the flavor, is suspended for
    a high-priority Job, and runs again when the Job is done."""
    crds.install(server, SWEEP_CRD)
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "4"}, preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"flavor": "default"}))
    config, problems = parse_config(ENABLED, source="preemptd.toml")
    assert [] == problems
    config = dataclasses.replace(config, backend=BackendConfig(kind="kubernetes"))
    integrations, problems = resolve_integrations(config)
    assert [] == problems
    assert "sweep" in integrations.names
    plugins, _ = resolve_plugins(config)
    client = client_for(server)
    backend = KubernetesBackend(client, config=config, plugins=plugins, clock=lambda: NOW_MS, integrations=integrations)
    await backend.start(timeout=5)
    try:
        sweep = {
            "apiVersion": "example.com/v1", "kind": "Sweep",
            "metadata": {"name": "lr", "namespace": "default", "labels": {QUEUE_LABEL: "team"}},
            "spec": {"suspend": True, "parallelism": 4, "template": pod_template({"cpu": "1"})},
        }
        server.put("example.com", "sweeps", sweep)
        await step(backend, server)
        workload = server.get("preemptd.io", "workloads", "sweep-lr", "default")
        assert [("trials", 4)] == [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]
        running = server.get("example.com", "sweeps", "lr", "default")
        assert running["spec"]["suspend"] is False
        assert {"flavor": "default"} == running["spec"]["template"]["spec"]["nodeSelector"]

        server.put("batch", "jobs", job("urgent", "team", {"cpu": "4"}, priority_class_name="high"))
        await step(backend, server, controllers)
        assert server.get("example.com", "sweeps", "lr", "default")["spec"]["suspend"] is True
        await step(backend, server, controllers)  # no pod of the Sweep ran here: quota back at once
        assert server.get("batch", "jobs", "urgent", "default")["spec"]["suspend"] is False
        done = server.get("batch", "jobs", "urgent", "default")
        server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
        await step(backend, server)
        await step(backend, server)
        assert server.get("example.com", "sweeps", "lr", "default")["spec"]["suspend"] is False
        assert_least_privilege_with_sweeps(server)
    finally:
        await backend.stop()
        await client.close()


def assert_least_privilege_with_sweeps(server) -> None:
    """Every request is one the shipped ClusterRole allows, or one of the Sweep's rule
    (what `preemptd manifests` adds with the integration enabled)."""
    sweeps = {v for g, r, v in server.verbs() if (g, r) == ("example.com", "sweeps")}
    assert sweeps and sweeps <= {"get", "list", "patch", "watch"}
    server.requests[:] = [r for r in server.requests if (r.group, r.plural) != ("example.com", "sweeps")]
    assert_least_privilege(server)
