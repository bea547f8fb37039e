"""PyTorchJob, RayJob and RayCluster end to end: admitted, preempted, admitted again;
a RayCluster's elastic worker group shrunk and given back its count."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from . import crds
from .cluster import (
    Controllers,
    assert_least_privilege,
    conditions,
    flavor,
    job,
    node,
    priority_class,
    queue,
    settle,
    step,
    until,
)
from .kinds import (
    KindControllers,
    cluster_training_runtime,
    pod_template,
    pytorchjob,
    ray_cluster_spec,
    raycluster,
    rayjob,
    trainjob,
    trainjob_templates,
)

pytestmark = pytest.mark.asyncio

GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
Obj = dict[str, Any]


def _setup(server, *definitions: Obj) -> None:
    crds.install(server, *definitions)
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}, [GPU]))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "16", "nvidia.com/gpu": "4"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "32", "nvidia.com/gpu": "8"}, {"gpu": "a100"}))


def _ray_spec(min_replicas: int | None = None) -> Obj:
    worker = pod_template({"cpu": "1", "nvidia.com/gpu": "1"})
    return ray_cluster_spec(pod_template({"cpu": "2"}, "low"), [("gpus", 4, worker)], min_replicas=min_replicas)


@dataclass(frozen=True)
class Kind:
    """One kind as the shared scenario drives it."""

    crd: Obj
    group: str
    plural: str
    workload: str
    build: Callable[[], Obj]
    pod_sets: list[tuple[str, int]]
    suspended: Callable[[Obj], bool]
    templates: Callable[[Obj], list[Obj]]


_RUNTIME = cluster_training_runtime("torch-distributed", [
    ("dataset-initializer", "dataset-initializer", 1, pod_template({"cpu": "2"}, "low")),
    ("node", "trainer", 1, {"spec": {"containers": [{"name": "node", "image": "torch",
                                                      "resources": {"requests": {"cpu": "1"}}}]}}),
])


def _pytorch() -> Obj:
    master = pod_template({"cpu": "2"}, "low")
    return pytorchjob("train", "team", {"Worker": (4, pod_template({"cpu": "1", "nvidia.com/gpu": "1"})),
                                         "Master": (1, master)})


KINDS = {
    "pytorchjob": Kind(
        crds.PYTORCHJOB, "kubeflow.org", "pytorchjobs", "pytorchjob-train", _pytorch,
        [("master", 1), ("worker", 4)],
        lambda o: o["spec"]["runPolicy"]["suspend"],
        lambda o: [o["spec"]["pytorchReplicaSpecs"][k]["template"] for k in ("Master", "Worker")],
    ),
    "trainjob": Kind(
        crds.TRAINJOB, "trainer.kubeflow.org", "trainjobs", "trainjob-train",
        lambda: trainjob("train", "team", "torch-distributed", num_nodes=4,
                         resources_per_node={"requests": {"nvidia.com/gpu": "1"}}),
        [("dataset-initializer", 1), ("node", 4)],
        lambda o: o["spec"]["suspend"],
        lambda o: [t for t, _ in trainjob_templates(o, _RUNTIME).values()],
    ),
    "rayjob": Kind(
        crds.RAYJOB, "ray.io", "rayjobs", "rayjob-train", lambda: rayjob("train", "team", _ray_spec()),
        [("head", 1), ("gpus", 4)],
        lambda o: o["spec"]["suspend"],
        lambda o: [o["spec"]["rayClusterSpec"]["headGroupSpec"]["template"],
                   o["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]],
    ),
    "raycluster": Kind(
        crds.RAYCLUSTER, "ray.io", "rayclusters", "raycluster-train", lambda: raycluster("train", "team", _ray_spec()),
        [("head", 1), ("gpus", 4)],
        lambda o: o["spec"]["suspend"],
        lambda o: [o["spec"]["headGroupSpec"]["template"], o["spec"]["workerGroupSpecs"][0]["template"]],
    ),
}


@pytest.mark.parametrize("name", sorted(KINDS))
async def test_a_suspendable_kind_is_admitted_preempted_and_admitted_again(
    name: str, server, make_backend, controllers: Controllers
) -> None:
    """Its Workload has one pod set per replica type or group; admission places every template
    on the flavor and resumes it; a high-priority Job needing every GPU suspends it; once the
    Job is done it runs again."""
    kind = KINDS[name]
    _setup(server, kind.crd)
    if name == "trainjob":
        crds.install(server, crds.CLUSTER_TRAINING_RUNTIME, crds.TRAINING_RUNTIME)
        server.put("trainer.kubeflow.org", "clustertrainingruntimes", _RUNTIME)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    server.put(kind.group, kind.plural, kind.build())
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", kind.workload, "default")
    assert kind.pod_sets == [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]
    assert 10 == workload["spec"]["priority"]
    owner = server.get(kind.group, kind.plural, "train", "default")
    assert kind.suspended(owner) is False
    for template in kind.templates(owner):
        assert ({"gpu": "a100"}, [GPU]) == (template["spec"]["nodeSelector"], template["spec"]["tolerations"])
        assert kind.workload == template["metadata"]["labels"]["preemptd.io/workload"]
    kinds.step()
    await settle(backend, server)
    assert 5 == len(kinds.pods(owner))

    server.put("batch", "jobs", job("urgent", "team", {"cpu": "1", "nvidia.com/gpu": "4"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [(f"default/{kind.workload}", None)] == [(p.workload, p.count) for p in report.decisions.preempted]
    assert kind.suspended(server.get(kind.group, kind.plural, "train", "default")) is True
    kinds.step()
    controllers.finish_terminating()
    await step(backend, server, controllers)
    assert "admission" not in server.get("preemptd.io", "workloads", kind.workload, "default")["status"]
    assert server.get("batch", "jobs", "urgent", "default")["spec"]["suspend"] is False

    done = server.get("batch", "jobs", "urgent", "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    await step(backend, server)
    await step(backend, server)
    owner = server.get(kind.group, kind.plural, "train", "default")
    assert kind.suspended(owner) is False
    assert all({"gpu": "a100"} == t["spec"]["nodeSelector"] for t in kind.templates(owner))
    assert_least_privilege(server)


async def test_a_finished_pytorchjob_and_rayjob_give_their_quota_back(server, make_backend) -> None:
    """A Succeeded condition, a Complete jobDeploymentStatus: the Workload is Finished."""
    _setup(server, crds.PYTORCHJOB, crds.RAYJOB)
    backend = await make_backend()
    server.put("kubeflow.org", "pytorchjobs", _pytorch())
    server.put("ray.io", "rayjobs", rayjob("ray", "team", _ray_spec()))
    await step(backend, server)
    torch = server.get("kubeflow.org", "pytorchjobs", "train", "default")
    torch["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "JobSucceeded",
                                       "message": "PyTorchJob train is successfully completed."}]}
    server.put("kubeflow.org", "pytorchjobs", torch)
    ray = server.get("ray.io", "rayjobs", "ray", "default")
    server.put("ray.io", "rayjobs", {**ray, "status": {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}})
    await step(backend, server)
    for name in ("pytorchjob-train", "rayjob-ray"):
        finished = conditions(server.get("preemptd.io", "workloads", name, "default"))["Finished"]
        assert ("True", "Succeeded") == (finished["status"], finished["reason"])


async def test_a_rayclusters_elastic_worker_group_is_shrunk_then_given_back_its_count(
    server, make_backend, controllers: Controllers
) -> None:
    """Workers 4 (minReplicas 1) are one elastic pod set: a Job needing two GPUs lowers them
    to 2 (the user's 4 saved); an eviction suspends the cluster with its 4 back, and the
    Workload asks for 4 again."""
    _setup(server, crds.RAYCLUSTER)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    server.put("ray.io", "rayclusters", raycluster("train", "team", _ray_spec(min_replicas=1)))
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "raycluster-train", "default")
    assert [None, 1] == [ps.get("minCount") for ps in workload["spec"]["podSets"]]
    kinds.step()
    await settle(backend, server)

    server.put("batch", "jobs", job("two", "team", {"cpu": "1", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/raycluster-train", 2)] == [(p.workload, p.count) for p in report.decisions.preempted]
    cluster = server.get("ray.io", "rayclusters", "train", "default")
    assert (False, 2) == (cluster["spec"]["suspend"], cluster["spec"]["workerGroupSpecs"][0]["replicas"])
    assert 4 == json.loads(cluster["metadata"]["annotations"]["preemptd.io/original-placement"])["gpus"]["count"]
    workload = server.get("preemptd.io", "workloads", "raycluster-train", "default")
    assert 4 == workload["spec"]["podSets"][1]["count"]  # it still asks for its user's count
    kinds.step()
    controllers.finish_terminating()
    await settle(backend, server)
    assert 3 == len(kinds.pods(cluster))

    server.put("batch", "jobs", job("all", "team", {"cpu": "1", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    server.put("batch", "jobs", job("more", "team", {"cpu": "14"}, priority_class_name="high"))
    await step(backend, server)
    cluster = server.get("ray.io", "rayclusters", "train", "default")
    assert (True, 4) == (cluster["spec"]["suspend"], cluster["spec"]["workerGroupSpecs"][0]["replicas"])


async def test_a_trainjob_waits_for_its_runtime_then_asks_for_the_trainers_resources_per_node(
    server, make_backend
) -> None:
    """Before its ClusterTrainingRuntime exists: a Warning naming it, no Workload. Once it is
    created, the TrainJob is synced again: the trainer's pod set has numNodes pods, each with
    the runtime's cpu and the TrainJob's GPU; placement is preemptd's own runtime patch."""
    _setup(server, crds.TRAINJOB, crds.CLUSTER_TRAINING_RUNTIME, crds.TRAINING_RUNTIME)
    backend = await make_backend()
    mine = trainjob("train", "team", "torch-distributed", num_nodes=2,
                    resources_per_node={"requests": {"nvidia.com/gpu": "1"}})
    mine["spec"]["runtimePatches"] = [{"manager": "someone.else/manager"}]
    server.put("trainer.kubeflow.org", "trainjobs", mine)
    await step(backend, server)
    assert server.get("preemptd.io", "workloads", "trainjob-train", "default") is None
    messages = [e["message"] for e in server.list("", "events", "default") if e["involvedObject"]["name"] == "train"]
    assert ["no Workload created: spec.runtimeRef: ClusterTrainingRuntime 'torch-distributed' not found"] == messages

    server.put("trainer.kubeflow.org", "clustertrainingruntimes", _RUNTIME)
    await until(lambda: server.get("preemptd.io", "workloads", "trainjob-train", "default") is not None,
                what="the TrainJob's Workload")
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "trainjob-train", "default")
    node_set = workload["spec"]["podSets"][1]
    assert ("node", 2, {"cpu": "1", "nvidia.com/gpu": "1"}) == (node_set["name"], node_set["count"], node_set["requests"])
    patches = server.get("trainer.kubeflow.org", "trainjobs", "train", "default")["spec"]["runtimePatches"]
    assert ["someone.else/manager", "preemptd.io/manager"] == [p["manager"] for p in patches]
    jobs = patches[1]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [("dataset-initializer", {"gpu": "a100"}), ("node", {"gpu": "a100"})] == [
        (j["name"], j["template"]["spec"]["template"]["spec"]["nodeSelector"]) for j in jobs
    ]
