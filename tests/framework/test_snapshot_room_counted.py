"""Snapshot.build takes the room of bound pods once per node and request map, with the
pods' count (``snapshot._take_room``): the room is what ``NodePool.consume`` pod by pod
leaves, each node's resources in the same order, whatever maps the pods share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, FrozenDict, Node, Pod
from preemptd.framework.nodes import NodePool
from preemptd.framework.snapshot import _take_room

NODES = {name: Node(name, {"pool": "f"}, {"cpu": 64, "memory": 256}) for name in ("n1", "n2", "n3")}
FLAVORS = {"f": Flavor("f", {"pool": "f"})}
SHARED = [FrozenDict({"cpu": 1}), FrozenDict({"cpu": 2, "memory": 8}), FrozenDict()]
# A map the node lists no resource of; one equal to a shared map but another object.
ODD = [FrozenDict({"nvidia.com/gpu": 1}), FrozenDict({"memory": 8, "example.com/fpga": 2}), FrozenDict({"cpu": 1})]

pods = st.lists(
    st.builds(
        lambda name, node, requests: Pod("ns", name, requests, node_name=node, workload="ns/w"),
        st.text("abc", min_size=1, max_size=3),
        st.sampled_from(["n1", "n2", "n3", "gone"]),
        st.sampled_from(SHARED) | st.sampled_from(ODD),
    ),
    max_size=30,
)


def pod_by_pod(holding: list[Pod]) -> dict[str, list[tuple[str, int]]]:
    pool = NodePool(NODES, FLAVORS)
    for pod in holding:
        pool.consume(pod.node_name, pod.requests)  # type: ignore[arg-type]
    return {name: list(room.items()) for name, room in pool.free.items()}


@given(pods)
def test_room_taken_by_counts_is_the_room_taken_pod_by_pod(holding: list[Pod]) -> None:
    pool = NodePool(NODES, FLAVORS)
    _take_room(pool, holding)
    assert {name: list(room.items()) for name, room in pool.free.items()} == pod_by_pod(holding)


def test_many_pods_of_few_maps_take_their_room_in_sums() -> None:
    """Each node holds 50 pods of each map (i mod 6 takes every pair of i mod 2, i mod 3
    50 times): 64 - 50 x 1 - 50 x 2 cpu, 256 - 50 x 8 memory."""
    holding = [Pod("ns", f"p{i}", SHARED[i % 2], node_name=f"n{i % 3 + 1}") for i in range(300)]
    pool = NodePool(NODES, FLAVORS)
    _take_room(pool, holding)
    assert pool.free == {name: {"cpu": -86, "memory": -144} for name in ("n1", "n2", "n3")}
    assert {name: list(room.items()) for name, room in pool.free.items()} == pod_by_pod(holding)
