"""The test API server refuses what the real one refuses, for the fields preemptd writes.

Each rule here is one a real kube-apiserver enforces and that an earlier version of
the test server let through, hiding a bug only a real cluster showed.
"""

from __future__ import annotations

import pytest
from preemptd.daemon.backends.kubernetes.client import JOBS, WORKLOADS, ApiError, Kube

from .apiserver import ApiServer
from .cluster import job

pytestmark = pytest.mark.asyncio

STARTED = "2026-01-01T00:00:00Z"


def _put_job(server: ApiServer, *, suspend: bool, started: bool, node_selector: dict[str, str] | None = None) -> None:
    obj = job("j", "q", {"cpu": "1"}, suspend=suspend, node_selector=node_selector)
    if started:
        obj["status"] = {"startTime": STARTED, "active": 0 if suspend else 1}
    server.put("batch", "jobs", obj)


async def _patch(kube: Kube, body: dict, *, subresource: str | None = None, resource=JOBS, name: str = "j") -> dict:
    return await kube.patch(resource, name, body, "default", subresource=subresource)


async def _refused(kube: Kube, body: dict, *, subresource: str | None = None, resource=JOBS, name: str = "j") -> ApiError:
    with pytest.raises(ApiError) as caught:
        await _patch(kube, body, subresource=subresource, resource=resource, name=name)
    return caught.value


async def test_running_job_template_is_immutable_even_together_with_suspend(server, kube) -> None:
    """Suspending and re-placing a running Job in one patch is refused: 422 spec.template immutable."""
    _put_job(server, suspend=False, started=True, node_selector={"gpu": "a100"})
    error = await _refused(kube, {"spec": {"suspend": True, "template": {"spec": {"nodeSelector": None}}}})
    assert (422, "Invalid") == (error.status, error.reason)
    assert "spec.template" in error.message and "immutable" in error.message
    assert {"gpu": "a100"} == server.get("batch", "jobs", "j", "default")["spec"]["template"]["spec"]["nodeSelector"]
    assert server.get("batch", "jobs", "j", "default")["spec"]["suspend"] is False


async def test_suspended_job_that_never_started_may_change_its_scheduling_directives(server, kube) -> None:
    """Node selector, tolerations, node affinity, template labels/annotations and gates may change."""
    _put_job(server, suspend=True, started=False)
    template = {
        "metadata": {"labels": {"preemptd.io/workload": "job-j"}, "annotations": {"a": "b"}},
        "spec": {
            "nodeSelector": {"gpu": "a100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}}},
            "schedulingGates": [{"name": "example.com/gate"}],
        },
    }
    patched = await _patch(kube, {"spec": {"template": template}})
    assert {"gpu": "a100"} == patched["spec"]["template"]["spec"]["nodeSelector"]
    # Anything else in the template stays immutable, suspended or not.
    error = await _refused(kube, {"spec": {"template": {"spec": {"restartPolicy": "Never"}}}})
    assert 422 == error.status


async def test_suspended_job_that_started_keeps_its_template_until_start_time_is_cleared(server, kube) -> None:
    """A Job that ran keeps status.startTime when suspended; its directives change only once it is cleared."""
    _put_job(server, suspend=True, started=True, node_selector={"gpu": "a100"})
    error = await _refused(kube, {"spec": {"template": {"spec": {"nodeSelector": None}}}})
    assert 422 == error.status
    await _patch(kube, {"status": {"startTime": None}}, subresource="status")
    patched = await _patch(kube, {"spec": {"template": {"spec": {"nodeSelector": None}}}})
    assert "nodeSelector" not in patched["spec"]["template"]["spec"]


async def test_a_suspended_job_that_never_started_may_be_re_placed_and_resumed_in_one_patch(server, kube) -> None:
    """The rule is judged on the Job before the write (the Job strategy's
    AllowMutableSchedulingDirectives: the old Job suspended and without startTime), so the same
    patch may carry the new directives and ``suspend: false``; a Job that ran must have its
    startTime cleared first."""
    _put_job(server, suspend=True, started=True, node_selector={"gpu": "a100"})
    resume = {"spec": {"suspend": False, "template": {"spec": {"nodeSelector": {"gpu": "h100"}}}}}
    error = await _refused(kube, resume)
    assert 422 == error.status and "spec.template" in error.message
    await _patch(kube, {"status": {"startTime": None}}, subresource="status")
    resumed = await _patch(kube, resume)
    assert (False, {"gpu": "h100"}) == (resumed["spec"]["suspend"], resumed["spec"]["template"]["spec"]["nodeSelector"])


async def test_start_time_of_a_running_job_cannot_be_cleared(server, kube) -> None:
    _put_job(server, suspend=False, started=True)
    error = await _refused(kube, {"status": {"startTime": None}}, subresource="status")
    assert (422, "Invalid") == (error.status, error.reason)
    assert STARTED == server.get("batch", "jobs", "j", "default")["status"]["startTime"]


async def test_status_subresource_ignores_spec_and_main_resource_ignores_status(server, kube) -> None:
    _put_job(server, suspend=True, started=False)
    through_status = await _patch(kube, {"spec": {"suspend": False}, "status": {"active": 3}}, subresource="status")
    assert (True, 3) == (through_status["spec"]["suspend"], through_status["status"]["active"])
    through_main = await _patch(kube, {"spec": {"parallelism": 2}, "status": {"active": 7}})
    assert (2, 3) == (through_main["spec"]["parallelism"], through_main["status"]["active"])


async def test_stale_resource_version_is_a_conflict_on_patch_and_update(server, kube) -> None:
    _put_job(server, suspend=True, started=False)
    stale = server.get("batch", "jobs", "j", "default")["metadata"]["resourceVersion"]
    await _patch(kube, {"spec": {"parallelism": 2}})
    error = await _refused(kube, {"metadata": {"resourceVersion": stale}, "spec": {"parallelism": 3}})
    assert (409, "Conflict") == (error.status, error.reason)
    error = await _refused(kube, {"metadata": {"resourceVersion": stale}, "status": {"active": 1}}, subresource="status")
    assert 409 == error.status
    body = {**server.get("batch", "jobs", "j", "default"), "metadata": {
        **server.get("batch", "jobs", "j", "default")["metadata"], "resourceVersion": stale}}
    with pytest.raises(ApiError) as caught:
        await kube.replace(JOBS, "j", body, "default")
    assert 409 == caught.value.status
    assert 2 == server.get("batch", "jobs", "j", "default")["spec"]["parallelism"]


def _workload() -> dict:
    return {
        "apiVersion": "preemptd.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "1"}}]},
    }


async def test_custom_resource_update_needs_a_resource_version(server, kube) -> None:
    created = await kube.create(WORKLOADS, _workload(), "default")
    body = {**created, "metadata": {k: v for k, v in created["metadata"].items() if k != "resourceVersion"}}
    with pytest.raises(ApiError) as caught:
        await kube.replace(WORKLOADS, "w", body, "default")
    assert (422, "Invalid") == (caught.value.status, caught.value.reason)
    assert "resourceVersion" in caught.value.message


async def test_workload_status_is_validated_by_the_shipped_schema(server, kube) -> None:
    """Malformed timestamps and two conditions of one type are refused, as the real server does
    with the CRD's ``format: date-time`` and ``x-kubernetes-list-type: map``."""
    await kube.create(WORKLOADS, _workload(), "default")
    bad_time = {"status": {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": "yesterday"}]}}
    error = await _refused(kube, bad_time, subresource="status", resource=WORKLOADS, name="w")
    assert 422 == error.status and "lastTransitionTime" in error.message
    twice = {"status": {"conditions": [{"type": "Admitted", "status": "True"}, {"type": "Admitted", "status": "False"}]}}
    error = await _refused(kube, twice, subresource="status", resource=WORKLOADS, name="w")
    assert 422 == error.status and "Duplicate" in error.message
    fine = {"status": {"conditions": [{"type": "Admitted", "status": "True", "lastTransitionTime": STARTED}]}}
    assert "conditions" in (await _patch(kube, fine, subresource="status", resource=WORKLOADS, name="w"))["status"]
