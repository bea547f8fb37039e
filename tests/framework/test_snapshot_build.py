"""Snapshot.build lists pods in key order and takes the room of bound pods (SEMANTICS §6)
whatever order the inventory gives them in, and reserves room on the nodes only for the
pods of an admitted workload that have no Pod object yet."""

from __future__ import annotations

import pytest
from preemptd.framework.model import (
    Admission,
    Flavor,
    FlavorQuotas,
    Node,
    Pod,
    PodSet,
    PodSetAdmission,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.snapshot import Snapshot


def inventory(pods: list[Pod], *, count: int = 3) -> Inventory:
    """Node n1 (cpu 10) of flavor f, queue q, and workload ns/w admitted with ``count``
    pods of cpu 1 on f."""
    inv = Inventory()
    inv.flavors["f"] = Flavor("f", {"pool": "f"})
    groups = (ResourceGroup(("cpu",), (FlavorQuotas("f", {"cpu": ResourceQuota(100)}),)),)
    inv.queues["q"] = QueueSpec("q", None, groups)
    inv.nodes["n1"] = Node("n1", {"pool": "f"}, {"cpu": 10})
    admission = Admission("q", (PodSetAdmission("main", count, {"cpu": "f"}),))
    pod_set = PodSet("main", count, {"cpu": 1})
    inv.workloads["ns/w"] = Workload("ns", "w", "q", (pod_set,), admission=admission, admitted_at=1)
    inv.pods = {pod.key: pod for pod in pods}
    return inv


def pod(name: str, phase: str = "Running") -> Pod:
    return Pod("ns", name, {"cpu": 1}, node_name="n1", workload="ns/w", phase=phase)


def test_pods_given_out_of_order_are_listed_in_key_order_and_take_their_room() -> None:
    pods = [pod("w-2"), pod("w-0"), pod("w-done", phase="Succeeded"), pod("w-1")]
    snapshot = Snapshot.build(inventory(pods), now=10)
    assert list(snapshot.pods) == ["ns/w-0", "ns/w-1", "ns/w-2", "ns/w-done"]
    assert [p.name for p in snapshot.pods_by_workload["ns/w"]] == ["w-0", "w-1", "w-2"]
    assert snapshot.node_pool.free["n1"] == {"cpu": 7}  # the finished pod holds nothing
    assert snapshot.reserved_pods == ()


def test_pods_given_in_order_give_the_same_snapshot() -> None:
    pods = [pod("w-0"), pod("w-1"), pod("w-2"), pod("w-done", phase="Succeeded")]
    ordered = Snapshot.build(inventory(pods), now=10)
    shuffled = Snapshot.build(inventory([pods[2], pods[0], pods[3], pods[1]]), now=10)
    assert list(ordered.pods.items()) == list(shuffled.pods.items())
    assert ordered.pods_by_workload == shuffled.pods_by_workload
    assert ordered.node_pool.free == shuffled.node_pool.free


def test_only_the_pods_without_an_object_are_reserved_on_the_nodes() -> None:
    snapshot = Snapshot.build(inventory([pod("w-0")], count=3), now=10)
    assert [(p.workload, p.pod_set, p.node) for p in snapshot.reserved_pods] == [("ns/w", "main", "n1")] * 2
    assert snapshot.node_pool.free["n1"] == {"cpu": 7}  # one bound pod, two reserved


def test_a_workload_with_more_pods_than_admitted_reserves_nothing() -> None:
    snapshot = Snapshot.build(inventory([pod("w-0"), pod("w-1"), pod("w-2")], count=2), now=10)
    assert snapshot.reserved_pods == ()
    assert snapshot.node_pool.free["n1"] == {"cpu": 7}


def test_the_pods_parse_objects_reads_are_read_only_in_key_order_and_not_copied_again() -> None:
    objects = [
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": "n1"}}
        for name in ("b", "c", "a")
    ]
    inventory = parse_objects([("f.json", objects)])
    assert list(inventory.pods) == ["ns/a", "ns/b", "ns/c"]
    with pytest.raises(TypeError):
        inventory.pods["ns/d"] = inventory.pods["ns/a"]
    assert Snapshot.build(inventory, now=10).pods is inventory.pods
