"""One bad object from the API server costs that object only; the daemon's view keeps moving.

A Workload or a Queue that cannot be read is reported and isolated exactly as
``cycle`` isolates it; healthy queues keep admitting, and later changes to the
queues (a new queue, a quota cut) are seen by the next cycle.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.daemon.backends.kubernetes import inventory as inventory_module
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.backends.kubernetes.inventory import ClusterInventory

from .apiserver import ApiServer
from .cluster import flavor, job, node, queue, step

TOO_LARGE = ["1e4300", "1e10000000", "99999999999999999999999Ei"]


async def cycle(backend: KubernetesBackend, server: ApiServer) -> Any:
    """One cycle as the daemon's loop runs it: a failed cycle is logged and the next one runs."""
    try:
        return await step(backend, server)
    except Exception:  # the loop's own behaviour, reproduced
        return None


def suspended(server: ApiServer, name: str) -> bool:
    found = server.get("batch", "jobs", name, "default")
    assert found is not None
    return bool(found["spec"]["suspend"])


def bad_workload(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}]},
    }


def setup_cluster(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "8"}))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"flavor": "default"}))


@pytest.mark.asyncio
@pytest.mark.parametrize("cpu", TOO_LARGE)
async def test_a_workload_with_a_huge_request_does_not_stop_a_healthy_job(
    server: ApiServer, backend: KubernetesBackend, cpu: str
) -> None:
    setup_cluster(server)
    server.put("preemptd.io", "workloads", bad_workload("huge", cpu))
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "2"}))
    for _ in range(3):
        await cycle(backend, server)
    assert not suspended(server, "train")
    inventory = backend.inventory.inventory()
    assert "default/huge" in inventory.inadmissible
    assert "spec.podSets[0].requests[cpu]" in inventory.inadmissible["default/huge"]


@pytest.mark.asyncio
@pytest.mark.parametrize("quota", TOO_LARGE)
async def test_a_bad_queue_is_isolated_and_later_queue_changes_are_seen(
    server: ApiServer, backend: KubernetesBackend, quota: str
) -> None:
    """The bad Queue's tree is out; a new queue's Job is admitted; a quota cut is honoured."""
    setup_cluster(server)
    server.put("preemptd.io", "queues", queue("broken", {"cpu": quota}))
    server.put("batch", "jobs", job("a1", "team-a", {"cpu": "2"}))
    await cycle(backend, server)
    await cycle(backend, server)
    assert not suspended(server, "a1")
    inventory = backend.inventory.inventory()
    assert "broken" in inventory.excluded_queues
    assert any(p.object == "Queue/broken" for p in inventory.problems)

    server.put("preemptd.io", "queues", queue("team-b", {"cpu": "4"}))
    server.put("batch", "jobs", job("b1", "team-b", {"cpu": "1"}))
    await cycle(backend, server)
    await cycle(backend, server)
    assert not suspended(server, "b1")

    # team-a uses 2 of 8; cut to 3: a further 2-cpu Job no longer fits.
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "3"}))
    server.put("batch", "jobs", job("a2", "team-a", {"cpu": "2"}))
    await cycle(backend, server)
    await cycle(backend, server)
    assert suspended(server, "a2")


def test_a_failed_catalog_rebuild_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild that raises leaves the catalog stale: the next call rebuilds it."""
    cluster = ClusterInventory()
    cluster.apply("ResourceFlavor", flavor("default"))
    cluster.apply("Queue", queue("team-a", {"cpu": "8"}))
    real = inventory_module.build_queue_tree
    calls = {"n": 0}

    def failing_once(parsed: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("transient")
        return real(parsed)

    monkeypatch.setattr(inventory_module, "build_queue_tree", failing_once)
    with pytest.raises(RuntimeError):
        cluster.inventory()
    assert ["team-a"] == sorted(cluster.inventory().queues)
    cluster.apply("Queue", queue("team-b", {"cpu": "1"}))
    assert ["team-a", "team-b"] == sorted(cluster.inventory().queues)


def test_a_queue_whose_reader_raises_is_isolated_like_an_invalid_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a reader that raises costs only that Queue's tree, reported at the Queue."""
    cluster = ClusterInventory()
    cluster.apply("ResourceFlavor", flavor("default"))
    cluster.apply("Queue", queue("team-a", {"cpu": "8"}))
    cluster.apply("Queue", queue("odd", {"cpu": "1"}))
    real = inventory_module.parse_queue

    def parse(entry: Any, catalog: Any) -> Any:
        if entry.name == "odd":
            raise OverflowError("cannot convert Infinity to integer")
        return real(entry, catalog)

    monkeypatch.setattr(inventory_module, "parse_queue", parse)
    found = cluster.inventory()
    assert (["team-a"], {"odd"}) == (sorted(found.queues), found.excluded_queues)
    assert ["Queue/odd"] == [p.object for p in found.problems]
