"""The admission webhook and the integrations: what each enabled kind is answered at creation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from preemptd.daemon.backends.kubernetes.integrations.registry import resolve_integrations
from preemptd.daemon.config import Config, parse_config
from preemptd.daemon.webhook import Verdict, pod_groups, review_admission, suspend_fields

from .apiserver import json_patch
from .cluster import deployment, job
from .kinds import pod_template, pytorchjob

ENABLED = resolve_integrations(Config())[0].enabled
SERVED = suspend_fields(ENABLED)
QUEUE = "preemptd.io/queue-name"
GROUP = "preemptd.io/pod-group"


def request(obj: dict[str, Any], *, group: str, kind: str, operation: str = "CREATE") -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e", "operation": operation, "object": obj,
            "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
            "kind": {"group": group, "version": "v1", "kind": kind},
        },
    }


def answer(obj: dict[str, Any], *, group: str, kind: str, operation: str = "CREATE", gated: bool = True) -> Verdict:
    return review_admission(request(obj, group=group, kind=kind, operation=operation), SERVED, pod_groups=gated)


def after(verdict: Verdict, obj: dict[str, Any]) -> dict[str, Any]:
    return json_patch(copy.deepcopy(obj), list(verdict.patch))


def grouped_pod(*gates: str) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "g-0", "namespace": "team", "labels": {QUEUE: "team", GROUP: "g"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return pod


def test_a_new_labelled_job_is_created_suspended() -> None:
    created = job("train", "team", {"cpu": "1"}, suspend=False)
    assert after(answer(created, group="batch", kind="Job"), created)["spec"]["suspend"] is True


def test_a_pytorchjob_without_a_run_policy_gets_one_that_suspends_it() -> None:
    created = pytorchjob("train", "team", {"Worker": (2, pod_template({"cpu": "1"}))})
    del created["spec"]["runPolicy"]
    verdict = answer(created, group="kubeflow.org", kind="PyTorchJob")
    assert {"suspend": True} == after(verdict, created)["spec"]["runPolicy"]


def test_a_grouped_pod_gets_the_admission_gate_beside_its_own() -> None:
    pod = grouped_pod("theirs")
    verdict = answer(pod, group="", kind="Pod")
    assert "suspended" == verdict.outcome, verdict.reason
    assert [{"name": "theirs"}, {"name": "preemptd.io/admission"}] == after(verdict, pod)["spec"]["schedulingGates"]


def test_a_grouped_pod_without_gates_gets_a_list_holding_the_admission_gate() -> None:
    pod = grouped_pod()
    assert [{"name": "preemptd.io/admission"}] == after(answer(pod, group="", kind="Pod"), pod)["spec"]["schedulingGates"]


def test_a_grouped_pod_already_gated_is_allowed_without_a_patch() -> None:
    verdict = answer(grouped_pod("preemptd.io/admission"), group="", kind="Pod")
    assert ((), "already-suspended") == (verdict.patch, verdict.outcome)


def test_grouped_pods_are_not_gated_while_the_pod_group_integration_is_disabled() -> None:
    """A gate nobody removes would hold the pod for ever."""
    config, problems = parse_config('[integrations.pod-group]\nenabled = false\n', source="p.toml")
    assert [] == problems
    enabled = resolve_integrations(config)[0].enabled
    assert not pod_groups(enabled) and pod_groups(ENABLED)
    verdict = review_admission(request(grouped_pod(), group="", kind="Pod"), suspend_fields(enabled),
                               pod_groups=pod_groups(enabled))
    assert ((), "other-kind") == (verdict.patch, verdict.outcome)


def test_a_grouped_pod_controlled_by_a_served_kind_is_left_to_its_owner() -> None:
    pod = grouped_pod()
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "u-1", "controller": True}]
    verdict = answer(pod, group="", kind="Pod")
    assert ((), "owned") == (verdict.patch, verdict.outcome)


@pytest.mark.parametrize(
    ("what", "obj", "group", "kind", "operation", "outcome"),
    [
        ("already suspended", job("a", "team", {"cpu": "1"}), "batch", "Job", "CREATE", "already-suspended"),
        ("no queue label", {**job("b", "team", {"cpu": "1"}, suspend=False), "metadata": {"name": "b"}},
         "batch", "Job", "CREATE", "unmanaged"),
        ("an update", job("c", "team", {"cpu": "1"}, suspend=False), "batch", "Job", "UPDATE", "other-operation"),
        ("no switch: a Deployment", deployment("d", "team", {"cpu": "1"}), "apps", "Deployment", "CREATE",
         "other-kind"),
        ("a pod of no group", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {QUEUE: "t"}},
                               "spec": {}}, "", "Pod", "CREATE", "unmanaged"),
    ],
)
def test_everything_else_is_allowed_unchanged(
    what: str, obj: dict[str, Any], group: str, kind: str, operation: str, outcome: str
) -> None:
    verdict = answer(obj, group=group, kind=kind, operation=operation)
    assert ((), outcome) == (verdict.patch, verdict.outcome), what
    assert {"uid": "7f0b2c1e", "allowed": True} == verdict.response()["response"], what
