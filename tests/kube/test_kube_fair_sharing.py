"""Fair sharing against the test API server: the Queue's weight survives the CRD's
pruning, and each Queue's status carries its weighted share (SEMANTICS §7.6)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.config import BackendConfig, Config
from preemptd.daemon.plugins import resolve_plugins

from .apiserver import ApiServer, validate
from .cluster import MANIFESTS, flavor, queue, step
from .conftest import NOW_MS, client_for


@pytest.mark.asyncio
async def test_each_queue_status_shows_its_weighted_share(server: ApiServer) -> None:
    """Cohort lab (implicit) of team-a {cpu 2, weight 2} and team-b {cpu 2}; team-a runs a
    3-cpu workload: it borrows 1 of the 4 its parent can lend → 1000 × 1 / 4 = 250, halved
    by its weight → 125; team-b borrows nothing → 0."""
    server.put("preemptd.io", "resourceflavors", flavor("default", {}, []))
    team_a = queue("team-a", {"cpu": "2"}, parent="lab")
    team_a["spec"]["fairSharing"] = {"weight": "2"}
    server.put("preemptd.io", "queues", team_a)
    server.put("preemptd.io", "queues", queue("team-b", {"cpu": "2"}, parent="lab"))
    server.put("preemptd.io", "workloads", {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "big", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "3"}}]},
        "status": {
            "admission": {"queue": "team-a", "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
            "admittedAt": "2026-01-01T00:00:00Z",
        },
    })
    config = dataclasses.replace(
        Config(), backend=BackendConfig(kind="kubernetes"), plugins={"fair-sharing": {"enabled": True}}
    )
    plugins, problems = resolve_plugins(config)
    assert not problems
    client = client_for(server)
    backend = KubernetesBackend(client, config=config, plugins=plugins, clock=lambda: NOW_MS)
    await backend.start(timeout=5)
    try:
        await step(backend, server)
    finally:
        await backend.stop()
        await client.close()
    assert {"weightedShare": 125} == server.get("preemptd.io", "queues", "team-a")["status"]["fairSharing"]
    assert {"weightedShare": 0} == server.get("preemptd.io", "queues", "team-b")["status"]["fairSharing"]


def test_the_queue_crd_keeps_the_weight_and_the_status_share() -> None:
    """The API server prunes what a structural schema does not list: the Queue CRD lists
    spec.fairSharing.weight (a quantity) and status.fairSharing.weightedShare."""
    (crd,) = [
        d for d in yaml.safe_load_all((MANIFESTS / "10-crds.yaml").read_text()) if d["spec"]["names"]["kind"] == "Queue"
    ]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    errors: list[str] = []
    spec = validate(schema["spec"], {"parent": "lab", "fairSharing": {"weight": "0.5"}}, ".spec", errors)
    status = validate(schema["status"], {"fairSharing": {"weightedShare": 2**63 - 1}}, ".status", errors)
    assert not errors
    assert {"weight": "0.5"} == spec["fairSharing"]
    assert {"weightedShare": 2**63 - 1} == status["fairSharing"]
    validate(schema["spec"], {"fairSharing": {"weight": "-1"}}, ".spec", errors)
    assert errors  # a negative weight is refused at the API server already
