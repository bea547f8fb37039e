"""The room ``Placements.place_pods`` hands for the pods a node holds (``nodes/filling.py``):
with ``taken`` or an ``additive`` take, one map per node, the request times the pods placed
there, each a map of its own (the request itself when the node holds one pod, never changed);
with a take pod by pod, the request once per pod."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements

GPU = "nvidia.com/gpu"
MEM = "memory"
FLAVORS = {"a100": Flavor("a100", {"pool": "a100"})}


def _placements(rng: random.Random) -> Placements:
    nodes = {
        f"n{i}": Node(
            f"n{i}",
            {"pool": "a100"},
            {GPU: rng.choice((0, 2, 4, 8)), "cpu": rng.choice((2_000, 8_000, 32_000)), MEM: rng.choice((1, 4, 16))},
        )
        for i in range(rng.randint(1, 8))
    }
    return Placements(NodePool(nodes, FLAVORS))


def _requests(rng: random.Random) -> dict[str, int]:
    """A pod, zero requests included (they count no pods but are handed on as asked)."""
    return {GPU: rng.choice((0, 1, 2)), "cpu": rng.choice((0, 500, 2_000)), MEM: rng.choice((0, 1, 2))}


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_each_node_is_handed_the_request_times_its_pods(seed: int) -> None:
    """Random nodes and pods placed three ways on twins: with ``taken``, with an additive
    take and pod by pod. The same nodes; per node, ``taken`` and the additive take get one
    map equal to the request times the node's pods (with the request's keys in its order),
    the request itself exactly when the node holds one pod; pod by pod gets the request once
    per pod; the request is left as it was."""
    rng = random.Random(seed)
    base = _placements(rng)
    requests = _requests(rng)
    asked = dict(requests)
    count = rng.randint(1, 30)
    summed: list[tuple[str, Mapping[str, int]]] = []
    one_by_one: list[tuple[str, Mapping[str, int]]] = []
    taken: list[tuple[str, Mapping[str, int]]] = []

    additive_twin, pod_twin, taken_twin = base.copy(), base.copy(), base.copy()

    def take_summed(node: str, amounts: Mapping[str, int]) -> None:
        summed.append((node, amounts))
        additive_twin.take_tentatively(node, amounts)

    def take_one(node: str, amounts: Mapping[str, int]) -> None:
        one_by_one.append((node, amounts))
        pod_twin.take_tentatively(node, amounts)

    chosen = taken_twin.place_pods("a100", requests, count, {}, (), taken=taken)
    assert chosen == additive_twin.place_pods("a100", requests, count, {}, (), take_summed, additive=True)
    assert chosen == pod_twin.place_pods("a100", requests, count, {}, (), take_one)
    assert asked == requests
    pods = {node: chosen.count(node) for node in dict.fromkeys(chosen)}
    for handed in (taken, summed):
        assert [node for node, _ in handed] == list(pods)
        for node, amounts in handed:
            assert list(amounts.items()) == [(r, a * pods[node]) for r, a in requests.items()]
            assert (amounts is requests) == (pods[node] == 1)
    assert one_by_one == [(node, requests) for node in chosen]
    assert all(amounts is requests for _, amounts in one_by_one)
    assert taken_twin.free == additive_twin.free == pod_twin.free


def test_two_nodes_of_three_and_one_pods() -> None:
    """By hand: nodes "a" (4 GPUs) and "b" (8), four 1-GPU pods of 1,000 cpu. Best fit puts
    all four on "a" (the fewer free GPUs): one map of 4 GPUs and 4,000 cpu. Five pods: four on
    "a", the fifth on "b", handed the request itself."""
    nodes = {
        "a": Node("a", {"pool": "a100"}, {GPU: 4, "cpu": 64_000}),
        "b": Node("b", {"pool": "a100"}, {GPU: 8, "cpu": 64_000}),
    }
    requests = {GPU: 1, "cpu": 1_000}
    placements = Placements(NodePool(nodes, FLAVORS))
    taken: list[tuple[str, Mapping[str, int]]] = []
    assert ["a"] * 4 == placements.place_pods("a100", requests, 4, {}, (), taken=taken)
    assert [("a", {GPU: 4, "cpu": 4_000})] == taken
    placements = Placements(NodePool(nodes, FLAVORS))
    taken = []
    assert ["a"] * 4 + ["b"] == placements.place_pods("a100", requests, 5, {}, (), taken=taken)
    assert [("a", {GPU: 4, "cpu": 4_000}), ("b", requests)] == taken
    assert taken[1][1] is requests
