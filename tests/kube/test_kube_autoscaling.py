"""A managed Deployment beside an HPA (writing through ``/scale``) and a GitOps tool.

preemptd sets ``spec.replicas`` to what is admitted and records the count it set;
a ``spec.replicas`` written by anyone else is the new desired count. The HPA here
is the real client's ``read/replace_namespaced_deployment_scale``, as the HPA
controller calls them, and writes only when its count differs from the current
one, as the HPA controller does. A GitOps sync is a merge patch of the manifest:
with ``spec.replicas`` ignored (Argo CD ``ignoreDifferences`` with
``RespectIgnoreDifferences``) or left out of it (Flux), or applied with it.
"""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import AppsV1Api
from preemptd.daemon.backends.kubernetes.client import DEPLOYMENTS, Kube

from .apiserver import ApiServer
from .cluster import Controllers, deployment, flavor, node, priority_class, queue, settle, step

pytestmark = pytest.mark.asyncio

DESIRED = "preemptd.io/desired-replicas"
SCALED = "preemptd.io/scaled-replicas"
WRITES = ("create", "update", "patch", "delete")


def _setup(server: ApiServer, gpus: int) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}))
    server.put("preemptd.io", "queues", queue("serving", {"cpu": "16", "nvidia.com/gpu": str(gpus)},
                                              flavor_name="a100"))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("", "nodes", node("gpu-1", {"cpu": "32", "nvidia.com/gpu": "8"}, {"gpu": "a100"}))


async def _hpa(kube: Kube, name: str, replicas: int) -> bool:
    """One pass of an HPA that wants ``replicas``: it writes the Scale only when that differs."""
    apps = AppsV1Api(kube.api)
    scale = await apps.read_namespaced_deployment_scale(name, "default")
    if scale.spec.replicas == replicas:
        return False
    scale.spec.replicas = replicas
    await apps.replace_namespaced_deployment_scale(name, "default", scale)
    return True


def _llm(server: ApiServer) -> dict:
    found = server.get("apps", "deployments", "llm", "default")
    assert found is not None
    return found


def _counts(server: ApiServer) -> tuple[int, int]:
    """The Workload's desired (spec) and committed (admission) counts."""
    workload = server.get("preemptd.io", "workloads", "deployment-llm", "default")
    assert workload is not None
    admission = (workload.get("status") or {}).get("admission") or {}
    committed = sum(ps["count"] for ps in admission.get("podSets") or [])
    return workload["spec"]["podSets"][0]["count"], committed


def _writes(server: ApiServer, since: int, plural: str) -> list[str]:
    return [f"{r.verb}{'/' + r.subresource if r.subresource else ''}" for r in server.requests[since:]
            if r.verb in WRITES and r.plural == plural]


async def _running(server: ApiServer, backend, controllers: Controllers, *, gpus: int, replicas: int) -> None:  # type: ignore[no-untyped-def]
    _setup(server, gpus)
    server.put("apps", "deployments", deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"},
                                                 replicas=replicas, priority_class_name="low"))
    await step(backend, server, controllers)
    await step(backend, server, controllers)


async def test_an_hpa_scaling_up_sets_the_desired_count_and_gets_what_the_quota_admits(
    server, kube, backend, controllers: Controllers
) -> None:
    """The HPA asks for 3 through /scale; the quota holds 2: the Workload asks for 3, 2 run,
    and the desired count is the HPA's (not the 1 the Deployment was created with)."""
    await _running(server, backend, controllers, gpus=2, replicas=1)
    assert (1, 1) == _counts(server) and 1 == _llm(server)["spec"]["replicas"]

    assert await _hpa(kube, "llm", 3)
    await step(backend, server, controllers)
    await step(backend, server, controllers)
    assert (3, 2) == _counts(server)
    llm = _llm(server)
    assert 2 == llm["spec"]["replicas"]
    assert {DESIRED: "3", SCALED: "2"} == {k: llm["metadata"]["annotations"][k] for k in (DESIRED, SCALED)}
    assert 2 == len(controllers.pods_of(llm))


async def test_an_hpa_scaling_down_lowers_the_committed_count_and_then_nobody_writes(
    server, kube, backend, controllers: Controllers
) -> None:
    """The HPA asks for 1 of the 2 running: the committed count comes down to 1 and the
    Deployment stays at the HPA's count, so neither side writes again."""
    await _running(server, backend, controllers, gpus=4, replicas=2)
    assert (2, 2) == _counts(server)

    assert await _hpa(kube, "llm", 1)
    await step(backend, server, controllers)
    assert (1, 1) == _counts(server)
    assert 1 == _llm(server)["spec"]["replicas"]
    assert "1" == _llm(server)["metadata"]["annotations"][DESIRED]
    assert 1 == len(controllers.pods_of(_llm(server)))

    since = len(server.requests)
    assert not await _hpa(kube, "llm", 1)  # its next pass: the count is already its own
    await step(backend, server, controllers)
    await settle(backend, server)
    assert [] == _writes(server, since, "deployments") + _writes(server, since, "workloads")


async def test_while_the_quota_holds_an_hpa_back_each_of_its_writes_costs_one_scale_back(
    server, kube, backend, controllers: Controllers
) -> None:
    """Above what is admitted, the HPA writes its count at each of its passes and preemptd sets
    the admitted count back: one Deployment write per HPA write, no Workload write, no loop."""
    await _running(server, backend, controllers, gpus=2, replicas=2)
    assert await _hpa(kube, "llm", 4)
    await step(backend, server, controllers)
    assert (4, 2) == _counts(server)

    for _ in range(2):
        since = len(server.requests)
        assert await _hpa(kube, "llm", 4)  # sees 2, still wants 4
        await step(backend, server, controllers)
        await step(backend, server, controllers)
        assert ["update/scale", "patch"] == _writes(server, since, "deployments")
        assert [] == _writes(server, since, "workloads")
        assert 2 == _llm(server)["spec"]["replicas"]
        assert (4, 2) == _counts(server)


async def test_a_gitops_sync_that_leaves_spec_replicas_out_changes_nothing_preemptd_owns(
    server, kube, backend, controllers: Controllers
) -> None:
    """Argo CD with spec.replicas ignored (and RespectIgnoreDifferences), or Flux with it left out
    of the manifest: a sync of the manifest neither fights the admitted count nor moves the
    desired one; a desired count kept in Git, in the annotation, is followed."""
    await _running(server, backend, controllers, gpus=4, replicas=2)
    manifest = deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, priority_class_name="low")
    del manifest["spec"]["replicas"]
    manifest["metadata"]["labels"]["team"] = "serving"

    since = len(server.requests)
    await kube.patch(DEPLOYMENTS, "llm", manifest, "default")
    await step(backend, server, controllers)
    assert ["patch"] == _writes(server, since, "deployments")  # the sync's own, nothing after it
    assert (2, 2) == _counts(server) and 2 == _llm(server)["spec"]["replicas"]

    manifest["metadata"]["annotations"] = {DESIRED: "1"}
    await kube.patch(DEPLOYMENTS, "llm", manifest, "default")
    await step(backend, server, controllers)
    assert (1, 1) == _counts(server) and 1 == _llm(server)["spec"]["replicas"]


async def test_a_gitops_sync_that_applies_spec_replicas_is_taken_as_the_desired_count(
    server, kube, backend, controllers: Controllers
) -> None:
    """Without ignoreDifferences the sync writes the manifest's replicas: that is what the user
    asked for in Git, so it becomes the desired count, not a value to overwrite."""
    await _running(server, backend, controllers, gpus=4, replicas=1)
    manifest = deployment("llm", "serving", {"cpu": "1", "nvidia.com/gpu": "1"}, replicas=3, priority_class_name="low")
    await kube.patch(DEPLOYMENTS, "llm", manifest, "default")
    await step(backend, server, controllers)
    await step(backend, server, controllers)
    assert (3, 3) == _counts(server)
    assert 3 == _llm(server)["spec"]["replicas"] and "3" == _llm(server)["metadata"]["annotations"][DESIRED]
