"""An elastic workload shrunk by a preemption grows back (docs/elastic.md), end to end.

The growth is an ``Admitted`` with ``grown = True``: its Workload's
``status.admission.podSets[].count`` is raised in place (queue, flavors,
``admittedAt`` and the ``Admitted`` condition kept: the run goes on), and the owner
is raised to the new count through its integration (a Job's ``parallelism``, a
RayCluster worker group's ``replicas``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from . import crds
from .cluster import Controllers, flavor, job, node, priority_class, queue, settle, step
from .conftest import NOW_MS
from .kinds import KindControllers, pod_template, ray_cluster_spec, raycluster

pytestmark = pytest.mark.asyncio

GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
ORIGINAL_TEMPLATE = "preemptd.io/original-template"


def _setup(server: Any) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}, [GPU]))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "16", "nvidia.com/gpu": "4"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "32", "nvidia.com/gpu": "8"}, {"gpu": "a100"}))


class Clock:
    """The session clock, moved on by hand: a growth a minute later must keep admittedAt."""

    def __init__(self) -> None:
        self.now = NOW_MS

    def __call__(self) -> int:
        return self.now


def _complete(server: Any, name: str) -> None:
    done = server.get("batch", "jobs", name, "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})


def _kept(workload: dict[str, Any]) -> tuple[Any, ...]:
    """What a growth keeps: the admission's queue and flavors, admittedAt, the Admitted condition."""
    status = workload["status"]
    admitted = [c for c in status["conditions"] if c["type"] == "Admitted"]
    return (
        status["admission"]["queue"],
        [ps["flavors"] for ps in status["admission"]["podSets"]],
        status["admittedAt"],
        [(c["status"], c["lastTransitionTime"]) for c in admitted],
    )


async def test_a_shrunk_elastic_job_grows_back_in_place_and_its_parallelism_follows(
    server, make_backend, controllers: Controllers
) -> None:
    """Parallelism 4 (min 2) gives one pod to a high-priority Job; once that Job completes, the
    next session grows it back to 4: the admission's count is raised in place (admittedAt and the
    rest kept) and the running Job's parallelism goes back to 4, without a suspension."""
    _setup(server)
    clock = Clock()
    backend = await make_backend(clock=clock)
    server.put("batch", "jobs", job("elastic", "team", {"cpu": "1", "nvidia.com/gpu": "1"}, parallelism=4,
                                    min_parallelism=2, priority_class_name="low"))
    await step(backend, server, controllers)
    server.put("batch", "jobs", job("high", "team", {"cpu": "1", "nvidia.com/gpu": "1"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert [("default/job-elastic", 1)] == [(p.workload, p.count) for p in report.decisions.preempted]
    controllers.finish_terminating()
    await settle(backend, server)
    before = server.get("preemptd.io", "workloads", "job-elastic", "default")
    assert 3 == before["status"]["admission"]["podSets"][0]["count"]
    assert 3 == server.get("batch", "jobs", "elastic", "default")["spec"]["parallelism"]

    _complete(server, "high")
    clock.now += 60_000
    # One cycle: the high Job's Workload finishes (its quota free) and the elastic Job grows.
    report = await step(backend, server, controllers)
    grown = [a for a in report.decisions.admitted if a.workload == "default/job-elastic"]
    assert [(True, 4)] == [(a.grown, a.pod_sets[0].count) for a in grown]
    await settle(backend, server)

    after = server.get("preemptd.io", "workloads", "job-elastic", "default")
    assert 4 == after["status"]["admission"]["podSets"][0]["count"]
    assert _kept(before) == _kept(after)
    elastic = server.get("batch", "jobs", "elastic", "default")
    assert (False, 4) == (elastic["spec"]["suspend"], elastic["spec"]["parallelism"])
    # The user's parallelism stays saved: a later eviction still restores it.
    assert 4 == json.loads(elastic["metadata"]["annotations"][ORIGINAL_TEMPLATE])["extra"]["parallelism"]
    controllers.step()
    assert 4 == len(controllers.pods_of(elastic))


async def test_a_rayclusters_shrunk_elastic_worker_group_grows_back_its_replicas(
    server, make_backend, controllers: Controllers
) -> None:
    """Workers 4 (minReplicas 1) lowered to 2 by a Job needing two GPUs grow back to 4 replicas
    once that Job completes, the cluster running on throughout."""
    crds.install(server, crds.RAYCLUSTER)
    _setup(server)
    clock = Clock()
    backend = await make_backend(clock=clock)
    kinds = KindControllers(server, controllers)
    worker = pod_template({"cpu": "1", "nvidia.com/gpu": "1"})
    spec = ray_cluster_spec(pod_template({"cpu": "2"}, "low"), [("gpus", 4, worker)], min_replicas=1)
    server.put("ray.io", "rayclusters", raycluster("train", "team", spec))
    await step(backend, server)
    kinds.step()
    await settle(backend, server)
    server.put("batch", "jobs", job("two", "team", {"cpu": "1", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/raycluster-train", 2)] == [(p.workload, p.count) for p in report.decisions.preempted]
    kinds.step()
    controllers.finish_terminating()
    await settle(backend, server)
    before = server.get("preemptd.io", "workloads", "raycluster-train", "default")
    assert [1, 2] == [ps["count"] for ps in before["status"]["admission"]["podSets"]]

    _complete(server, "two")
    clock.now += 60_000
    report = await step(backend, server)
    assert [("default/raycluster-train", True)] == [(a.workload, a.grown) for a in report.decisions.admitted]
    await settle(backend, server)

    after = server.get("preemptd.io", "workloads", "raycluster-train", "default")
    assert [1, 4] == [ps["count"] for ps in after["status"]["admission"]["podSets"]]
    assert _kept(before) == _kept(after)
    cluster = server.get("ray.io", "rayclusters", "train", "default")
    assert (False, 4) == (cluster["spec"]["suspend"], cluster["spec"]["workerGroupSpecs"][0]["replicas"])
    kinds.step()
    assert 5 == len(kinds.pods(cluster))
