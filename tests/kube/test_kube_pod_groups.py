"""Plain pods in a group: one Workload, released all at once, deleted when preempted."""

from __future__ import annotations

import pytest
from preemptd.daemon.backends.kubernetes.integrations.podgroup import PodGroupIntegration

from .cluster import (
    QUEUE_LABEL,
    Controllers,
    assert_least_privilege,
    conditions,
    flavor,
    job,
    node,
    priority_class,
    queue,
    settle,
    step,
    until,
)
from .kinds import pod_template

pytestmark = pytest.mark.asyncio

GATE = "preemptd.io/admission"
TAINT = {"key": "pool", "operator": "Exists", "effect": "NoSchedule"}


def _setup(server, cpu: str = "8") -> None:
    server.put("preemptd.io", "resourceflavors", flavor("pool", {"pool": "a"}, [TAINT]))
    server.put("preemptd.io", "queues", queue("team", {"cpu": cpu}, flavor_name="pool",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"pool": "a"}))


def grouped_pod(name: str, group: str, total: int, *, gated: bool = True, total_text: str | None = None) -> dict:
    template = pod_template({"cpu": "2"}, "low")
    spec = template["spec"]
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {QUEUE_LABEL: "team", "preemptd.io/pod-group": group},
            "annotations": {"preemptd.io/pod-group-total-count": total_text or str(total)},
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _bind_released(server, controllers: Controllers) -> None:
    """The scheduler: every pod without gates and without a node is bound where it fits."""
    for pod in server.list("", "pods", "default"):
        if pod["spec"].get("schedulingGates") or pod["spec"].get("nodeName"):
            continue
        chosen = controllers._schedule(pod)
        if chosen is not None:
            server.put("", "pods", {**pod, "spec": {**pod["spec"], "nodeName": chosen}, "status": {"phase": "Running"}})


async def test_a_pod_group_is_admitted_whole_preempted_by_deletion_and_admitted_again(
    server, backend, controllers: Controllers
) -> None:
    """No Workload until all three pods exist; then one of three pods, and admission releases every
    pod at once on the flavor; a high-priority Job evicts the group (its pods deleted, its Workload
    gone with them); the group created again queues and runs again."""
    _setup(server)
    server.put("", "pods", grouped_pod("train-0", "train", 3))
    server.put("", "pods", grouped_pod("train-1", "train", 3))
    await step(backend, server)
    assert server.get("preemptd.io", "workloads", "podgroup-train", "default") is None
    server.put("", "pods", grouped_pod("train-2", "train", 3))
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "podgroup-train", "default")
    assert {"apiVersion": "v1", "kind": "PodGroup", "name": "train"} == workload["spec"]["owner"]
    assert [{"name": "main", "count": 3, "requests": {"cpu": "2"}}] == workload["spec"]["podSets"]
    assert 10 == workload["spec"]["priority"]
    assert 3 == workload["status"]["admission"]["podSets"][0]["count"]
    for name in ("train-0", "train-1", "train-2"):
        pod = server.get("", "pods", name, "default")
        assert "schedulingGates" not in pod["spec"]
        assert ({"pool": "a"}, [TAINT]) == (pod["spec"]["nodeSelector"], pod["spec"]["tolerations"])
        assert "podgroup-train" == pod["metadata"]["labels"]["preemptd.io/workload"]
    _bind_released(server, controllers)
    await settle(backend, server)

    server.put("batch", "jobs", job("urgent", "team", {"cpu": "8"}, priority_class_name="high"))
    report = await step(backend, server)
    assert [("default/podgroup-train", None)] == [(p.workload, p.count) for p in report.decisions.preempted]
    assert all(p["metadata"].get("deletionTimestamp") for p in server.list("", "pods", "default")
               if p["metadata"]["name"].startswith("train-"))
    assert "True" == conditions(server.get("preemptd.io", "workloads", "podgroup-train", "default"))["Evicted"]["status"]
    controllers.finish_terminating()
    # The group has no pod left: its Workload goes (the owner reconciler, level-triggered).
    await until(lambda: server.get("preemptd.io", "workloads", "podgroup-train", "default") is None,
                what="the group's Workload deleted")
    await step(backend, server, controllers)
    assert server.get("batch", "jobs", "urgent", "default")["spec"]["suspend"] is False

    done = server.get("batch", "jobs", "urgent", "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    for name in ("train-0", "train-1", "train-2"):
        server.put("", "pods", grouped_pod(name, "train", 3))
    await step(backend, server)
    await step(backend, server)
    assert 3 == server.get("preemptd.io", "workloads", "podgroup-train", "default")["status"]["admission"]["podSets"][0]["count"]
    assert not any(p["spec"].get("schedulingGates") for p in server.list("", "pods", "default"))
    assert_least_privilege(server)


async def test_a_pod_group_that_does_not_fit_whole_releases_no_pod(server, backend) -> None:
    """All or nothing: three 2-cpu pods in a 4-cpu queue wait, every one still gated."""
    _setup(server, cpu="4")
    for name in ("big-0", "big-1", "big-2"):
        server.put("", "pods", grouped_pod(name, "big", 3))
    await step(backend, server)
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "podgroup-big", "default")
    assert "admission" not in workload["status"]
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in server.list("", "pods", "default"))


async def test_an_ungated_pod_or_a_bad_count_is_a_warning_and_no_workload(server, backend) -> None:
    """A grouped pod created without the gate cannot be held; a count that is not one is named."""
    _setup(server)
    server.put("", "pods", grouped_pod("loose-0", "loose", 1, gated=False))
    server.put("", "pods", grouped_pod("odd-0", "odd", 1, total_text="two"))
    await step(backend, server)
    assert server.get("preemptd.io", "workloads", "podgroup-loose", "default") is None
    assert server.get("preemptd.io", "workloads", "podgroup-odd", "default") is None
    messages = {e["involvedObject"]["name"]: e["message"] for e in server.list("", "events", "default")}
    assert f"pod group loose: not held by the scheduling gate {GATE}; not managed" == messages["loose-0"]
    assert ("no Workload created: Pod odd-0: metadata.annotations[preemptd.io/pod-group-total-count]: "
            "expected the group's pod count, got 'two'") == messages["odd-0"]


async def test_with_every_event_a_pod_groups_events_are_about_its_first_pod(server, make_backend) -> None:
    """A pod group is no object of the API: its CreatedWorkload and Admitted Events (events =
    "all") are about its first pod by name, never about a "PodGroup" nobody can describe."""
    _setup(server)
    backend = await make_backend(events="all")
    for name in ("train-1", "train-0"):
        server.put("", "pods", grouped_pod(name, "train", 2))
    await step(backend, server)
    await step(backend, server)
    assert server.get("preemptd.io", "workloads", "podgroup-train", "default")["status"]["admission"]
    await backend.events.flush()
    involved = {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
                for e in server.list("", "events", "default")}
    assert not [i for i in involved if i[0] == "PodGroup"]
    assert {("Pod", "train-0", "CreatedWorkload"), ("Pod", "train-0", "Admitted"),
            ("Workload", "podgroup-train", "Admitted")} <= involved
    first = server.get("", "pods", "train-0", "default")["metadata"]["uid"]
    assert all(e["involvedObject"]["uid"] == first for e in server.list("", "events", "default")
               if e["involvedObject"]["kind"] == "Pod")


class _NoScan(dict):
    """A watch cache that may be read by key only: a sync that scans every pod fails."""

    def items(self):  # type: ignore[override]
        raise AssertionError("scanned every pod")

    def values(self):  # type: ignore[override]
        raise AssertionError("scanned every pod")

    def __iter__(self):
        raise AssertionError("scanned every pod")


async def test_a_pod_group_is_read_from_its_own_pods_by_their_group_label() -> None:
    """The group's pods come from an index kept by the watch events, not from a scan of every
    grouped pod; a pod relabelled into another group, or deleted, leaves it."""
    integration = PodGroupIntegration()
    pods = {f"default/{p['metadata']['name']}": p
            for p in (grouped_pod("a-0", "a", 2), grouped_pod("a-1", "a", 2), grouped_pod("b-0", "b", 1))}
    for pod in pods.values():
        integration.observe(None, pod)
    store = _NoScan(pods)
    group = integration.owner(store, "default/a")
    assert ["a-0", "a-1"] == [p["metadata"]["name"] for p in group["pods"]]

    moved = grouped_pod("a-1", "b", 1)
    integration.observe(pods["default/a-1"], moved)
    integration.observe(pods["default/b-0"], None)
    store = _NoScan({"default/a-0": pods["default/a-0"], "default/a-1": moved})
    assert ["a-0"] == [p["metadata"]["name"] for p in integration.owner(store, "default/a")["pods"]]
    assert ["a-1"] == [p["metadata"]["name"] for p in integration.owner(store, "default/b")["pods"]]
