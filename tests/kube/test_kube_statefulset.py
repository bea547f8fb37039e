"""StatefulSets end to end: scaled to what is admitted, shrunk from the highest ordinal."""

from __future__ import annotations

import pytest

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
from .kinds import KindControllers, statefulset

pytestmark = pytest.mark.asyncio


def _setup(server) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "8"}, preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"flavor": "default"}))


def _pods(server, kinds: KindControllers) -> list[str]:
    return [p["metadata"]["name"] for p in kinds.pods(server.get("apps", "statefulsets", "db", "default"))]


async def _running_db(server, backend, controllers: Controllers) -> KindControllers:
    kinds = KindControllers(server, controllers)
    server.put("apps", "statefulsets", statefulset("db", "team", {"cpu": "2"}, replicas=3, priority_class_name="low"))
    await step(backend, server)  # taken over, its Workload created and admitted
    db = server.get("apps", "statefulsets", "db", "default")
    assert ("3", 3) == (db["metadata"]["annotations"]["preemptd.io/desired-replicas"], db["spec"]["replicas"])
    assert "statefulset-db" == db["spec"]["template"]["metadata"]["labels"]["preemptd.io/workload"]
    workload = server.get("preemptd.io", "workloads", "statefulset-db", "default")
    assert [{"name": "main", "count": 3, "minCount": 1, "requests": {"cpu": "2"}}] == workload["spec"]["podSets"]
    kinds.step()
    await settle(backend, server)
    assert ["db-main-0", "db-main-1", "db-main-2"] == _pods(server, kinds)
    return kinds


async def test_a_statefulset_is_shrunk_from_its_highest_ordinal(server, backend, controllers) -> None:
    """A high-priority Job needing one replica's room takes it: replicas 3 -> 2, db-main-2 goes."""
    _setup(server)
    kinds = await _running_db(server, backend, controllers)
    server.put("batch", "jobs", job("urgent", "team", {"cpu": "4"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/statefulset-db", 1)] == [(p.workload, p.count) for p in report.decisions.preempted]
    assert 2 == server.get("apps", "statefulsets", "db", "default")["spec"]["replicas"]
    kinds.step()
    controllers.finish_terminating()
    await settle(backend, server)
    assert ["db-main-0", "db-main-1"] == _pods(server, kinds)
    await step(backend, server)
    admission = server.get("preemptd.io", "workloads", "job-urgent", "default")["status"]["admission"]
    assert 1 == admission["podSets"][0]["count"]
    assert_least_privilege(server)


async def test_an_evicted_statefulset_scales_to_zero_and_runs_again_when_room_is_back(
    server, backend, controllers
) -> None:
    """Needing the whole queue, a Job evicts it (replicas 0); once the Job is done, it is admitted
    again with all three replicas."""
    _setup(server)
    kinds = await _running_db(server, backend, controllers)
    server.put("batch", "jobs", job("urgent", "team", {"cpu": "8"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/statefulset-db", None)] == [(p.workload, p.count) for p in report.decisions.preempted]
    assert 0 == server.get("apps", "statefulsets", "db", "default")["spec"]["replicas"]
    kinds.step()
    controllers.finish_terminating()
    await step(backend, server, controllers)
    assert [] == _pods(server, kinds)
    assert server.get("batch", "jobs", "urgent", "default")["spec"]["suspend"] is False
    done = server.get("batch", "jobs", "urgent", "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    await step(backend, server)
    await step(backend, server)
    assert 3 == server.get("apps", "statefulsets", "db", "default")["spec"]["replicas"]
    kinds.step()
    await settle(backend, server)
    assert ["db-main-0", "db-main-1", "db-main-2"] == _pods(server, kinds)


async def test_an_hpa_scaling_a_statefulset_sets_its_desired_count_and_it_gets_what_the_quota_admits(
    server, backend, controllers
) -> None:
    """As for a Deployment (test_kube_autoscaling): a ``spec.replicas`` written by someone else
    (here 5, where preemptd set 3) is the new desired count; the quota (8 cpu, 2 each) admits 4,
    so the Workload asks for 5, the StatefulSet is set back to 4 and the counts are recorded."""
    _setup(server)
    kinds = await _running_db(server, backend, controllers)
    db = server.get("apps", "statefulsets", "db", "default")
    assert "3" == db["metadata"]["annotations"]["preemptd.io/scaled-replicas"]
    db["spec"]["replicas"] = 5  # an HPA's write through /scale, or a GitOps sync
    server.put("apps", "statefulsets", db)
    await step(backend, server)
    kinds.step()
    await settle(backend, server)
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "statefulset-db", "default")
    assert 5 == workload["spec"]["podSets"][0]["count"]
    assert 4 == workload["status"]["admission"]["podSets"][0]["count"]
    db = server.get("apps", "statefulsets", "db", "default")
    annotations = db["metadata"]["annotations"]
    assert (4, "5", "4") == (
        db["spec"]["replicas"], annotations["preemptd.io/desired-replicas"], annotations["preemptd.io/scaled-replicas"]
    )
