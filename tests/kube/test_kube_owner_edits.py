"""A suspended owner edited while it waits: its Workload follows the edit before admission."""

from __future__ import annotations

import json

import pytest

from .cluster import flavor, job, node, priority_class, queue, settle, step, until

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
