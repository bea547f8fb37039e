"""Deployments end to end: take-over, admission by replicas, and preemption of exactly the chosen pod."""

from __future__ import annotations

import pytest
from preemptd.daemon.backends.kubernetes.deployments import sync_deployment

from .apiserver import ApiServer
from .cluster import (
    COST,
    WORKLOAD_LABEL,
    Controllers,
    assert_least_privilege,
    deployment,
    flavor,
    node,
    priority_class,
    queue,
    settle,
    step,
    until,
)

pytestmark = pytest.mark.asyncio


DESIRED = "preemptd.io/desired-replicas"


def _setup(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}))
    server.put("preemptd.io", "queues", queue("serving", {"cpu": "16", "nvidia.com/gpu": "2"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("gpu-1", {"cpu": "32", "nvidia.com/gpu": "2"}, {"gpu": "a100"}))


async def test_deployment_is_taken_over_and_scaled_to_what_is_admitted(server, backend, controllers) -> None:
    """On first sight the desired count moves to the annotation and replicas to what is admitted."""
    _setup(server)
    server.put("apps", "deployments", deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=2,
                                                 priority_class_name="low"))
    await step(backend, server, controllers)
    llm = server.get("apps", "deployments", "llm", "default")
    assert "2" == llm["metadata"]["annotations"][DESIRED]
    assert "deployment-llm" == llm["spec"]["template"]["metadata"]["labels"][WORKLOAD_LABEL]
    workload = server.get("preemptd.io", "workloads", "deployment-llm", "default")
    assert 2 == workload["spec"]["podSets"][0]["count"]
    assert 2 == workload["status"]["admission"]["podSets"][0]["count"]
    assert 2 == llm["spec"]["replicas"]
    assert {"gpu": "a100"} == llm["spec"]["template"]["spec"]["nodeSelector"]
    assert 2 == len(controllers.pods_of(llm))


async def test_scale_down_removes_exactly_the_chosen_pod_then_admits_the_preemptor(
    server, backend, controllers: Controllers
) -> None:
    """The victim pod gets the lowest deletion cost before the scale-down, so the ReplicaSet
    removes that very pod; once it terminates (force-deleted) the preemptor is admitted."""
    _setup(server)
    server.put("apps", "deployments", deployment("low", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=2,
                                                 priority_class_name="low"))
    await step(backend, server, controllers)
    low = server.get("apps", "deployments", "low", "default")
    assert 2 == len(controllers.pods_of(low))

    server.put("apps", "deployments", deployment("high", "serving", {"cpu": "1", "nvidia.com/gpu": "1"},
                                                 priority_class_name="high"))
    report = await step(backend, server)  # takes it over, creates its Workload, preempts for it
    preempted = [(p.workload, p.count, p.pods) for p in report.decisions.preempted]
    assert 1 == len(preempted)
    workload, count, pods = preempted[0]
    assert ("default/deployment-low", 1) == (workload, count)
    (chosen,) = pods
    marked = [p["metadata"]["name"] for p in controllers.pods_of(low)
              if (p["metadata"].get("annotations") or {}).get(COST) == "-2147483648"]
    assert [chosen.partition("/")[2]] == marked
    assert 1 == server.get("apps", "deployments", "low", "default")["spec"]["replicas"]
    assert 1 == server.get("preemptd.io", "workloads", "deployment-low", "default")["status"]["admission"]["podSets"][0]["count"]

    controllers.step()  # the ReplicaSet scales down: exactly the marked pod terminates
    terminating = [p["metadata"]["name"] for p in controllers.pods_of(low, terminating=True)]
    assert [chosen.partition("/")[2]] == terminating

    # The terminating victim is force-deleted (grace 0): gone from the API at once.
    report = await step(backend, server)
    assert [(chosen, "ForceDelete")] == [(a.pod, a.action) for a in report.decisions.pod_actions]
    assert server.get("", "pods", chosen.partition("/")[2], "default") is None
    assert any(r.verb == "delete" and r.plural == "pods" for r in server.requests)

    report = await step(backend, server, controllers)
    assert ["default/deployment-high"] == [a.workload for a in report.decisions.admitted]
    high = server.get("apps", "deployments", "high", "default")
    assert 1 == high["spec"]["replicas"]
    assert 1 == len(controllers.pods_of(high))
    assert 1 == len(controllers.pods_of(low))
    assert_least_privilege(server)


async def test_lowering_desired_replicas_lowers_the_committed_count_first(server, backend, controllers) -> None:
    """The user scales down through the annotation: the Workload's committed count, then replicas."""
    _setup(server)
    server.put("apps", "deployments", deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=2))
    await step(backend, server, controllers)
    llm = server.get("apps", "deployments", "llm", "default")
    server.put("apps", "deployments", {**llm, "metadata": {**llm["metadata"],
                                                           "annotations": {**llm["metadata"]["annotations"], DESIRED: "1"}}})
    await step(backend, server, controllers)
    workload = server.get("preemptd.io", "workloads", "deployment-llm", "default")
    assert 1 == workload["spec"]["podSets"][0]["count"]
    assert 1 == workload["status"]["admission"]["podSets"][0]["count"]
    assert 1 == server.get("apps", "deployments", "llm", "default")["spec"]["replicas"]


async def test_sync_deployment_says_whether_the_deployment_matches_its_workload(server, backend, controllers) -> None:
    """True once taken over and scaled to what is admitted (and again, writing nothing); False when
    a write is refused, so that the owner is driven again later."""
    _setup(server)
    server.put("apps", "deployments", deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=2,
                                                 priority_class_name="low"))
    await step(backend, server, controllers)

    def current() -> tuple[dict, dict]:
        return (server.get("apps", "deployments", "llm", "default"),
                server.get("preemptd.io", "workloads", "deployment-llm", "default"))

    since = len(server.requests)
    assert await sync_deployment(backend, *current()) is True
    assert [] == [r for r in server.requests[since:] if r.verb != "get"]
    llm, workload = current()
    server.fail(1, code=503, reason="ServiceUnavailable", when=lambda r: r.plural == "deployments")
    assert await sync_deployment(backend, {**llm, "spec": {**llm["spec"], "replicas": 1}}, workload) is False


async def test_an_evicted_deployment_on_its_last_flavor_asks_for_its_users_placement(server, backend) -> None:
    """Scaled to nothing with the flavor's node selector still in its template (its user's saved in
    the annotation), a Deployment keeps a Workload that asks for the user's placement, not the
    flavor's: created from it, and brought back to it while nothing is admitted."""
    _setup(server)
    evicted = deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=0)
    evicted["metadata"]["annotations"] = {
        DESIRED: "2",
        "preemptd.io/original-template": '{"extra":{},"nodeSelector":{"zone":"z1"},"tolerations":[]}',
    }
    evicted["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "z1", "gpu": "a100"}
    server.put("apps", "deployments", evicted)
    await until(lambda: server.get("preemptd.io", "workloads", "deployment-llm", "default") is not None,
                what="the Workload")
    workload = server.get("preemptd.io", "workloads", "deployment-llm", "default")
    wanted = {"name": "main", "count": 2, "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
              "nodeSelector": {"zone": "z1"}}
    assert wanted == workload["spec"]["podSets"][0]

    server.put("preemptd.io", "workloads", {**workload, "spec": {**workload["spec"], "podSets": [
        {**wanted, "nodeSelector": {"zone": "z1", "gpu": "a100"}}]}})
    # The Workload's change drives its owner's sync, which brings the spec back.
    await until(lambda: wanted == server.get("preemptd.io", "workloads", "deployment-llm", "default")["spec"][
        "podSets"][0], what="the Workload's pod set back to the user's")
    await settle(backend, server)
    assert 0 == backend.writer.errors
