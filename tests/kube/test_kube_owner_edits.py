"""A suspended owner edited while it waits: its Workload follows the edit before admission."""

from __future__ import annotations

import json

import pytest

from .cluster import deployment, flavor, job, node, priority_class, queue, settle, step, until

pytestmark = pytest.mark.asyncio


def _setup(server) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team", {"cpu": "4"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"flavor": "default"}))


def _pod_set(server, name: str) -> dict:
    return server.get("preemptd.io", "workloads", name, "default")["spec"]["podSets"][0]


async def test_a_waiting_jobs_edited_template_and_parallelism_reach_its_workload(server, backend) -> None:
    """Too big to fit (3 × 2 cpu in a 4-cpu queue), the Job is edited to 2 × 1 cpu at high
    priority: its Workload asks for that, and is then admitted as edited."""
    _setup(server)
    server.put("batch", "jobs", job("train", "team", {"cpu": "2"}, parallelism=3, priority_class_name="low"))
    await step(backend, server)
    await step(backend, server)
    assert {"name": "main", "count": 3, "requests": {"cpu": "2"}} == _pod_set(server, "job-train")
    assert "admission" not in server.get("preemptd.io", "workloads", "job-train", "default")["status"]

    edited = server.get("batch", "jobs", "train", "default")
    edited["spec"]["parallelism"] = 2
    edited["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    edited["spec"]["template"]["spec"]["priorityClassName"] = "high"
    server.put("batch", "jobs", edited)
    await until(lambda: _pod_set(server, "job-train")["count"] == 2, what="the Workload to follow the edit")
    workload = server.get("preemptd.io", "workloads", "job-train", "default")
    assert {"name": "main", "count": 2, "requests": {"cpu": "1"}} == workload["spec"]["podSets"][0]
    assert (1000, "high") == (workload["spec"]["priority"], workload["spec"]["priorityClassName"])
    await step(backend, server)
    admitted = server.get("preemptd.io", "workloads", "job-train", "default")["status"]["admission"]
    assert [{"name": "main", "count": 2, "flavors": {"cpu": "default"}}] == admitted["podSets"]
    assert server.get("batch", "jobs", "train", "default")["spec"]["suspend"] is False


async def test_a_preempted_job_waiting_again_follows_a_new_parallelism(server, backend) -> None:
    """A Job placed before (its original parallelism saved while it ran shrunk) and queued
    again is edited to a new parallelism while it waits: the Workload asks for the new one."""
    _setup(server)
    waiting = job("train", "team", {"cpu": "2"}, parallelism=3)
    saved = {"nodeSelector": {}, "tolerations": [], "extra": {"parallelism": 3}}
    waiting["metadata"]["annotations"] = {"preemptd.io/original-template": json.dumps(saved)}
    server.put("batch", "jobs", waiting)
    await until(lambda: server.get("preemptd.io", "workloads", "job-train", "default") is not None,
                what="the Workload")
    assert 3 == _pod_set(server, "job-train")["count"]
    edited = server.get("batch", "jobs", "train", "default")
    edited["spec"]["parallelism"] = 2
    server.put("batch", "jobs", edited)
    await until(lambda: _pod_set(server, "job-train")["count"] == 2, what="the Workload to follow the edit")
    await settle(backend, server)
    await step(backend, server)
    admitted = server.get("preemptd.io", "workloads", "job-train", "default")["status"]["admission"]
    assert 2 == admitted["podSets"][0]["count"]


def _metadata(server, name: str) -> tuple[dict, dict]:
    """The Workload's labels and annotations, without the record of which are its owner's."""
    metadata = server.get("preemptd.io", "workloads", name, "default")["metadata"]
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if k != "preemptd.io/owner-metadata"}
    return metadata.get("labels") or {}, annotations


async def test_a_workload_carries_its_owners_labels_and_annotations_and_follows_them_while_it_waits(
    server, backend
) -> None:
    """Created with the Job's labels and annotations (not kubectl's nor preemptd's own
    bookkeeping), so the session's model sees them; an edit while it waits reaches the Workload
    in one write, a key removed from the Job is removed, one set on the Workload by someone else
    is kept, and a cycle with nothing changed writes nothing."""
    _setup(server)
    waiting = job("train", "team", {"cpu": "8"}, priority_class_name="low")  # more than the queue has
    waiting["metadata"]["labels"]["preemption"] = "never"
    waiting["metadata"]["annotations"] = {
        "team.example/owner": "ana",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "preemptd.io/original-template": json.dumps({"nodeSelector": {}, "tolerations": [], "extra": {}}),
    }
    server.put("batch", "jobs", waiting)
    await step(backend, server)
    await step(backend, server)
    labels, annotations = _metadata(server, "job-train")
    assert {"preemptd.io/queue-name": "team", "preemption": "never"} == labels
    assert {"team.example/owner": "ana"} == annotations
    seen = backend.inventory.inventory().workloads["default/job-train"]
    assert ("never", "ana") == (seen.labels["preemption"], seen.annotations["team.example/owner"])

    theirs = server.get("preemptd.io", "workloads", "job-train", "default")
    theirs["metadata"]["annotations"]["ops.example/ticket"] = "7"
    server.put("preemptd.io", "workloads", theirs)
    edited = server.get("batch", "jobs", "train", "default")
    edited["metadata"]["labels"]["preemption"] = "allowed"
    del edited["metadata"]["annotations"]["team.example/owner"]
    edited["metadata"]["annotations"]["team.example/cost-center"] = "42"
    since = len(server.requests)
    server.put("batch", "jobs", edited)
    await until(lambda: _metadata(server, "job-train")[0].get("preemption") == "allowed",
                what="the Workload to follow the labels")
    await step(backend, server)
    labels, annotations = _metadata(server, "job-train")
    assert {"preemptd.io/queue-name": "team", "preemption": "allowed"} == labels
    assert {"team.example/cost-center": "42", "ops.example/ticket": "7"} == annotations
    spec_writes = [r for r in server.requests[since:]
                   if r.verb == "patch" and r.plural == "workloads" and r.subresource is None]
    assert 1 == len(spec_writes)

    since = len(server.requests)
    await step(backend, server)
    await step(backend, server)
    assert [] == [r for r in server.requests[since:]
                  if r.verb in ("patch", "update") and r.plural in ("workloads", "jobs")]


async def test_a_deployments_workload_carries_its_users_annotations_not_its_bookkeeping(server, backend) -> None:
    """A Deployment's own state (preemptd's desired and scaled replicas, the controller's
    revision) stays on the Deployment; what its user wrote reaches the Workload."""
    _setup(server)
    served = deployment("web", "team", {"cpu": "1"}, replicas=2)
    served["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": "3", "team.example/tier": "gold"}
    server.put("apps", "deployments", served)
    await step(backend, server)
    await step(backend, server)
    annotations = server.get("apps", "deployments", "web", "default")["metadata"]["annotations"]
    assert {"preemptd.io/desired-replicas", "preemptd.io/scaled-replicas"} <= set(annotations)
    assert {"team.example/tier": "gold"} == _metadata(server, "deployment-web")[1]
