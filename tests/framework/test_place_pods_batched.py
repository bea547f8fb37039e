"""``Placements.place_pods`` places the pods a node still holds on it without looking again,
and chooses exactly the nodes that placing one pod at a time, best fit (SEMANTICS §6: the
least free GPUs that still fit, then the least free cpu, then the node name), chooses."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"
FLAVORS = {"a100": Flavor("a100", {"pool": "a100"}), "h100": Flavor("h100", {"pool": "h100"})}


def _cluster(rng: random.Random) -> Placements:
    nodes = {}
    for i in range(rng.randint(1, 14)):
        labels = {"pool": rng.choice(("a100", "h100")), "zone": rng.choice(("z1", "z2"))}
        allocatable = {
            rng.choice((GPU, AMD)): rng.choice((0, 1, 2, 4, 8)),
            "cpu": rng.choice((2_000, 8_000, 16_000)),
            "memory": rng.choice((4, 16, 64)) << 30,
        }
        nodes[f"n{i:02}"] = Node(f"n{i:02}", labels, allocatable)
    pool = NodePool(nodes, FLAVORS)
    for free in pool.free.values():
        # Some room already taken (pods bound), some nodes beyond their allocatable.
        free["cpu"] -= rng.choice((0, 0, 1_000, 3_000, 20_000))
        # A GPU kind short or missing: the node's free GPUs of every kind add up to less.
        kind = rng.choice((GPU, AMD))
        free[kind] = free.get(kind, 0) - rng.choice((0, 0, 1, 2))
    return Placements(pool)


def _one_at_a_time(
    placements: Placements, flavor: str, requests: Mapping[str, int], count: int, selector: Mapping[str, str]
) -> list[str]:
    chosen: list[str] = []
    for _ in range(count):
        node = placements.best_fit(flavor, requests, selector, ())
        if node is None:
            break
        placements.take_tentatively(node, requests)
        chosen.append(node)
    return chosen


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_placing_pods_chooses_the_nodes_one_at_a_time_best_fit_chooses(seed: int) -> None:
    """Random nodes (some over-committed, some short of a GPU kind), a few pod sets of random shapes placed in turn,
    some taking a node's pods' room summed: the same nodes, in the same order, and the same room."""
    rng = random.Random(seed)
    batched, single = _cluster(rng), _cluster(random.Random(seed))
    for _ in range(rng.randint(1, 4)):
        flavor = rng.choice(sorted(FLAVORS))
        requests = {
            rng.choice((GPU, AMD)): rng.choice((0, 0, 1, 2, 4)),
            "cpu": rng.choice((0, 500, 1_000, 4_000)),
            "memory": rng.choice((0, 1 << 30, 8 << 30)),
        }
        count = rng.randint(0, 20)
        selector = rng.choice(({}, {"zone": "z1"}))
        additive = rng.random() < 0.5  # the room of a node's pods taken summed, in one call
        got = batched.place_pods(flavor, requests, count, selector, (), batched.take_tentatively, additive=additive)
        assert got == _one_at_a_time(single, flavor, requests, count, selector)
        assert batched.free == single.free
        if rng.random() < 0.3:
            batched.sync()
            single.sync()


def test_the_pods_a_node_still_holds_are_placed_without_looking_again() -> None:
    """Two nodes of 8 GPUs, one with 3 free: five 1-GPU pods go three to the fuller node
    (the least free GPUs that fit), then two to the other; with a summing ``take``, each
    node's room is taken once, for all its pods."""
    nodes = {
        "big": Node("big", {"pool": "a100"}, {GPU: 8, "cpu": 64_000}),
        "full": Node("full", {"pool": "a100"}, {GPU: 8, "cpu": 64_000}),
    }
    pool = NodePool(nodes, FLAVORS)
    pool.free["full"][GPU] = 3
    placements = Placements(pool)
    taken: list[tuple[str, dict[str, int]]] = []

    def take(node: str, requests: Mapping[str, int]) -> None:
        taken.append((node, dict(requests)))
        placements.take_tentatively(node, requests)

    chosen = placements.place_pods("a100", {GPU: 1, "cpu": 1_000}, 5, {}, (), take, additive=True)
    assert ["full", "full", "full", "big", "big"] == chosen
    assert [("full", {GPU: 3, "cpu": 3_000}), ("big", {GPU: 2, "cpu": 2_000})] == taken
    assert 0 == placements.free["full"][GPU] and 6 == placements.free["big"][GPU]
