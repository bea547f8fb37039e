"""LeaderWorkerSets end to end: whole groups admitted, evicted to zero, admitted again."""

from __future__ import annotations

import pytest

from . import crds
from .cluster import (
    Controllers,
    assert_least_privilege,
    flavor,
    job,
    node,
    priority_class,
    queue,
    settle,
    step,
)
from .kinds import KindControllers, leaderworkerset, pod_template

pytestmark = pytest.mark.asyncio

GPU = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def _setup(server) -> None:
    crds.install(server, crds.LEADERWORKERSET)
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}, [GPU]))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "16", "nvidia.com/gpu": "8"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "32", "nvidia.com/gpu": "16"}, {"gpu": "a100"}))


async def test_a_leaderworkerset_runs_whole_groups_is_evicted_whole_and_runs_again(
    server, make_backend, controllers: Controllers
) -> None:
    """Two groups of a leader (2 cpu) and three GPU workers: pod sets leader=2 and workers=6;
    admitted, both templates go on the flavor and it scales to 2 groups; a high-priority Job
    needing 4 GPUs takes it whole (0 groups, no leader left without workers); once the Job
    is done it runs its two groups again."""
    _setup(server)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    leader = pod_template({"cpu": "2"}, "low")
    worker = pod_template({"cpu": "1", "nvidia.com/gpu": "1"}, "low")
    server.put("leaderworkerset.x-k8s.io", "leaderworkersets",
               leaderworkerset("serve", "team", leader, worker, size=4, replicas=2))
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "leaderworkerset-serve", "default")
    assert [("leader", 2), ("workers", 6)] == [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]
    assert all("minCount" not in ps for ps in workload["spec"]["podSets"])
    lws = server.get("leaderworkerset.x-k8s.io", "leaderworkersets", "serve", "default")
    assert ("2", 2) == (lws["metadata"]["annotations"]["preemptd.io/desired-replicas"], lws["spec"]["replicas"])
    for key in ("leaderTemplate", "workerTemplate"):
        template = lws["spec"]["leaderWorkerTemplate"][key]
        assert ({"gpu": "a100"}, [GPU]) == (template["spec"]["nodeSelector"], template["spec"]["tolerations"])
        assert "leaderworkerset-serve" == template["metadata"]["labels"]["preemptd.io/workload"]
    kinds.step()
    await settle(backend, server)
    assert 8 == len(kinds.pods(lws))

    server.put("batch", "jobs", job("urgent", "team", {"cpu": "1", "nvidia.com/gpu": "4"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/leaderworkerset-serve", None)] == [(p.workload, p.count) for p in report.decisions.preempted]
    assert 0 == server.get("leaderworkerset.x-k8s.io", "leaderworkersets", "serve", "default")["spec"]["replicas"]
    kinds.step()
    controllers.finish_terminating()
    await step(backend, server, controllers)
    assert "admission" not in server.get("preemptd.io", "workloads", "leaderworkerset-serve", "default")["status"]
    assert server.get("batch", "jobs", "urgent", "default")["spec"]["suspend"] is False

    done = server.get("batch", "jobs", "urgent", "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    await step(backend, server)
    await step(backend, server)
    lws = server.get("leaderworkerset.x-k8s.io", "leaderworkersets", "serve", "default")
    assert 2 == lws["spec"]["replicas"]
    kinds.step()
    await settle(backend, server)
    assert 8 == len(kinds.pods(lws))
    assert_least_privilege(server)


async def test_a_leaderworkerset_without_a_leader_template_and_of_size_one_is_one_pod_set(
    server, make_backend
) -> None:
    """Size 1: each group is its leader alone, from the worker template; one pod set."""
    _setup(server)
    backend = await make_backend()
    server.put("leaderworkerset.x-k8s.io", "leaderworkersets",
               leaderworkerset("solo", "team", None, pod_template({"cpu": "1"}), size=1, replicas=3))
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "leaderworkerset-solo", "default")
    assert [("leader", 3)] == [(ps["name"], ps["count"]) for ps in workload["spec"]["podSets"]]
    assert 3 == server.get("leaderworkerset.x-k8s.io", "leaderworkersets", "solo", "default")["spec"]["replicas"]
