"""The Kubernetes backend resolves ``preemptd.io/queue-name`` through LocalQueues, holds
workloads to their queue's namespaceSelector, and follows both as they change."""

from __future__ import annotations

import pytest

from .apiserver import ApiServer
from .cluster import conditions, flavor, job, queue, step

pytestmark = pytest.mark.asyncio

GROUP = "preemptd.io/v1alpha1"


def local_queue(namespace: str, name: str, target: str) -> dict:
    return {"apiVersion": GROUP, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"queue": target}}


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def admitted_queue(server: ApiServer, name: str, namespace: str = "default") -> str | None:
    workload = server.get("preemptd.io", "workloads", name, namespace)
    assert workload is not None, name
    admission = (workload.get("status") or {}).get("admission")
    return None if admission is None else admission["queue"]


async def test_the_queue_name_label_reaches_the_local_queues_queue(server, backend) -> None:
    """A Job labelled ``team-a`` in ``default``, where the LocalQueue ``team-a`` leads to
    ``other``, is admitted to ``other``; the same label in ``web`` (no LocalQueue) still
    means the Queue ``team-a``."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("preemptd.io", "queues", queue("other", {"cpu": "4"}))
    server.put("preemptd.io", "localqueues", local_queue("default", "team-a", "other"))
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    server.put("batch", "jobs", job("serve", "team-a", {"cpu": "1"}, namespace="web"))
    await step(backend, server)  # the Workloads are created
    await step(backend, server)  # and admitted
    assert "other" == admitted_queue(server, "job-train")
    assert "team-a" == admitted_queue(server, "job-serve", "web")
    assert server.get("batch", "jobs", "train", "default")["spec"]["suspend"] is False


async def test_a_local_queue_created_later_takes_the_workloads_that_wait_for_it(server, backend) -> None:
    """Before its LocalQueue exists the Job's queue name is unknown (Inadmissible); once it
    is created, the watch brings it in and the next cycle admits through it."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("gpu", {"cpu": "4"}))
    server.put("batch", "jobs", job("train", "mine", {"cpu": "1"}))
    await step(backend, server)
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "job-train", "default")
    quota = conditions(workload)["QuotaReserved"]
    assert ("False", "Inadmissible") == (quota["status"], quota["reason"])
    assert "unknown queue 'mine'" in quota["message"]

    server.put("preemptd.io", "localqueues", local_queue("default", "mine", "gpu"))
    await step(backend, server)
    assert "gpu" == admitted_queue(server, "job-train")


async def test_a_namespace_outside_the_selector_waits_until_it_is_labelled_in(server, backend) -> None:
    """The queue admits namespaces labelled ``team: ml``. A Job of ``web`` is pending
    Inadmissible, saying why; relabelling the Namespace (a watch event) admits it."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", {**queue("gpu", {"cpu": "4"}), "spec": {
        **queue("gpu", {"cpu": "4"})["spec"], "namespaceSelector": {"matchLabels": {"team": "ml"}}}})
    server.put("", "namespaces", namespace("ml", team="ml"))
    server.put("", "namespaces", namespace("web", team="web"))
    server.put("preemptd.io", "localqueues", local_queue("web", "jobs", "gpu"))
    server.put("batch", "jobs", job("ok", "gpu", {"cpu": "1"}, namespace="ml"))
    server.put("batch", "jobs", job("refused", "jobs", {"cpu": "1"}, namespace="web"))
    await step(backend, server)
    await step(backend, server)
    assert "gpu" == admitted_queue(server, "job-ok", "ml")
    assert admitted_queue(server, "job-refused", "web") is None
    quota = conditions(server.get("preemptd.io", "workloads", "job-refused", "web"))["QuotaReserved"]
    assert ("False", "Inadmissible") == (quota["status"], quota["reason"])
    assert (
        "namespace 'web' is not selected by the namespaceSelector of queue 'gpu' (through LocalQueue 'web/jobs')"
        == quota["message"]
    )

    server.put("", "namespaces", namespace("web", team="ml"))
    await step(backend, server)
    assert "gpu" == admitted_queue(server, "job-refused", "web")
