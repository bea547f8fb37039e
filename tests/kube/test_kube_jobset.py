"""JobSet end to end: one pod set per replicated Job, admitted, preempted and admitted again."""

from __future__ import annotations

import json

import pytest
from preemptd.daemon.backends.kubernetes import informers

from . import crds
from .cluster import (
    Controllers,
    assert_least_privilege,
    conditions,
    flavor,
    node,
    priority_class,
    queue,
    settle,
    step,
    until,
)
from .kinds import KindControllers, jobset, pod_template

pytestmark = pytest.mark.asyncio

GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def _setup(server) -> None:
    crds.install(server, crds.JOBSET)
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}, [GPU]))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "8", "nvidia.com/gpu": "4"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16", "nvidia.com/gpu": "8"}, {"gpu": "a100", "zone": "z1"}))


def _low() -> dict:
    driver = pod_template({"cpu": "1"}, "low")
    driver["spec"]["nodeSelector"] = {"zone": "z1"}
    return jobset("low", "team", [("driver", 1, 1, driver), ("workers", 2, 2, pod_template({"cpu": "1", "nvidia.com/gpu": "1"}))])


async def test_a_jobset_is_one_pod_set_per_replicated_job_admitted_preempted_and_admitted_again(
    server, make_backend, controllers: Controllers
) -> None:
    """The Workload has a driver (1 pod) and a workers pod set (2 Jobs × 2 pods = 4); admission
    places every template on the flavor and resumes the JobSet in one write; a higher-priority
    JobSet suspends it, and it runs again from its user's own placement once room is back."""
    _setup(server)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    server.put("jobset.x-k8s.io", "jobsets", _low())
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "jobset-low", "default")
    assert [
        {"name": "driver", "count": 1, "requests": {"cpu": "1"}, "nodeSelector": {"zone": "z1"}},
        {"name": "workers", "count": 4, "requests": {"cpu": "1", "nvidia.com/gpu": "1"}},
    ] == workload["spec"]["podSets"]
    assert (10, "low") == (workload["spec"]["priority"], workload["spec"]["priorityClassName"])
    assert [("JobSet", "low")] == [(r["kind"], r["name"]) for r in workload["metadata"]["ownerReferences"]]

    await step(backend, server)
    low = server.get("jobset.x-k8s.io", "jobsets", "low", "default")
    assert low["spec"]["suspend"] is False
    driver, workers = (rj["template"]["spec"]["template"] for rj in low["spec"]["replicatedJobs"])
    assert {"zone": "z1", "gpu": "a100"} == driver["spec"]["nodeSelector"]
    assert {"gpu": "a100"} == workers["spec"]["nodeSelector"]
    assert [GPU] == workers["spec"]["tolerations"]
    assert "jobset-low" == workers["metadata"]["labels"]["preemptd.io/workload"]
    kinds.step()
    await settle(backend, server)
    assert 1 == len(kinds.pods(low, "driver")) and 4 == len(kinds.pods(low, "workers"))

    gpus = pod_template({"cpu": "1", "nvidia.com/gpu": "1"}, "high")
    server.put("jobset.x-k8s.io", "jobsets", jobset("high", "team", [("main", 1, 2, gpus)]))
    await step(backend, server)  # the Workload of "high"
    await step(backend, server)  # "low" preempted: suspended
    low = server.get("jobset.x-k8s.io", "jobsets", "low", "default")
    assert low["spec"]["suspend"] is True
    assert "True" == conditions(server.get("preemptd.io", "workloads", "jobset-low", "default"))["Evicted"]["status"]
    kinds.step()
    controllers.finish_terminating()
    await step(backend, server)  # pods gone: quota back, "high" admitted
    assert "admission" not in server.get("preemptd.io", "workloads", "jobset-low", "default")["status"]
    assert server.get("jobset.x-k8s.io", "jobsets", "high", "default")["spec"]["suspend"] is False
    # While it waits, its Workload asks for its user's placement, not the flavor's.
    saved = json.loads(low["metadata"]["annotations"]["preemptd.io/original-placement"])
    assert {"driver": {"nodeSelector": {"zone": "z1"}, "tolerations": []},
            "workers": {"nodeSelector": {}, "tolerations": []}} == saved
    assert {"zone": "z1"} == server.get("preemptd.io", "workloads", "jobset-low", "default")["spec"]["podSets"][0][
        "nodeSelector"]

    high = server.get("jobset.x-k8s.io", "jobsets", "high", "default")
    high["status"] = {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                                      "message": "jobset completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                      "terminalState": "Completed"}
    server.put("jobset.x-k8s.io", "jobsets", high)
    await until(lambda: "Finished" in conditions(server.get("preemptd.io", "workloads", "jobset-high", "default")),
                what="the finished JobSet's Workload")
    await step(backend, server)
    low = server.get("jobset.x-k8s.io", "jobsets", "low", "default")
    assert low["spec"]["suspend"] is False
    driver = low["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert {"zone": "z1", "gpu": "a100"} == driver["spec"]["nodeSelector"]
    assert_least_privilege(server)


async def test_a_waiting_jobsets_edit_reaches_its_workload(server, make_backend) -> None:
    """Before admission, an edited replica count and a new replicated Job are the Workload's."""
    _setup(server)
    backend = await make_backend()
    server.put("preemptd.io", "queues", queue("team", {"cpu": "1"}, flavor_name="a100"))
    server.put("jobset.x-k8s.io", "jobsets", jobset("big", "team", [("main", 2, 1, pod_template({"cpu": "1"}))]))
    await step(backend, server)
    await step(backend, server)
    assert [2] == [ps["count"] for ps in server.get("preemptd.io", "workloads", "jobset-big", "default")["spec"]["podSets"]]
    edited = server.get("jobset.x-k8s.io", "jobsets", "big", "default")
    edited["spec"]["replicatedJobs"][0]["replicas"] = 3
    edited["spec"]["replicatedJobs"].append({"name": "aux", "template": {"spec": {"template": pod_template({"cpu": "500m"})}}})
    server.put("jobset.x-k8s.io", "jobsets", edited)

    def shape() -> list[tuple[str, int]]:
        workload = server.get("preemptd.io", "workloads", "jobset-big", "default")
        return [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]

    await until(lambda: [("main", 3), ("aux", 1)] == shape(), what="the Workload to follow the edit")


async def test_a_jobset_with_zero_replicas_gets_a_warning_naming_the_field(server, make_backend) -> None:
    """No Workload, and an Event on the JobSet that says which field is wrong."""
    _setup(server)
    backend = await make_backend()
    broken = jobset("broken", "team", [("main", 1, 1, pod_template({"cpu": "1"}))])
    broken["spec"]["replicatedJobs"][0]["replicas"] = 0
    server.put("jobset.x-k8s.io", "jobsets", broken)
    await step(backend, server)
    assert server.get("preemptd.io", "workloads", "jobset-broken", "default") is None
    messages = [e["message"] for e in server.list("", "events", "default") if e["involvedObject"]["name"] == "broken"]
    assert ["no Workload created: spec.replicatedJobs[0].replicas: expected a positive integer, got 0"] == messages


async def test_the_jobset_crd_installed_after_the_start_is_picked_up(server, make_backend, monkeypatch) -> None:
    """Without its CRD the kind is an empty, healthy cache; once installed, its JobSets are managed."""
    monkeypatch.setattr(informers, "ABSENT_RETRY", 0.05)
    backend = await make_backend()
    informer = next(i for r, i in backend.informers.items() if r.kind == "JobSet")
    await until(lambda: backend.healthy, what="every watch connected")
    assert informer.absent and informer.synced.is_set()
    _setup(server)
    server.put("jobset.x-k8s.io", "jobsets", jobset("late", "team", [("main", 1, 1, pod_template({"cpu": "1"}))]))
    await until(lambda: server.get("preemptd.io", "workloads", "jobset-late", "default") is not None,
                timeout=10, what="the late JobSet's Workload")
    assert not informer.absent



async def test_a_jobset_crd_deleted_while_watched_leaves_an_empty_healthy_cache(
    server, make_backend, monkeypatch
) -> None:
    """Its watch answers 404: the kind is absent again (its JobSets forgotten), every watch
    counts as healthy, and a CRD installed again is watched again."""
    monkeypatch.setattr(informers, "ABSENT_RETRY", 0.05)
    _setup(server)
    backend = await make_backend()
    informer = next(i for r, i in backend.informers.items() if r.kind == "JobSet")
    server.put("jobset.x-k8s.io", "jobsets", jobset("one", "team", [("main", 1, 1, pod_template({"cpu": "1"}))]))
    await until(lambda: "default/one" in informer.store, what="the JobSet cached")
    del server.kinds[("jobset.x-k8s.io", "jobsets")]  # the CRD deleted: the kind is not served
    server.drop_watches()
    await until(lambda: informer.absent and not informer.store, what="the kind absent")
    await until(lambda: backend.healthy, what="every watch healthy")
    _setup(server)
    await until(lambda: not informer.absent and "default/one" in informer.store, timeout=10, what="watched again")
