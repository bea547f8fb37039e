"""A pod tally judges one node (``PodTally.on``, and ``PodTally.takes`` for a node known to
serve the tally's flavor, which the victim walk's room asks on the nodes it follows) as the
tally's notes say: a node of the flavor whose free GPUs (every kind summed) and cpu reach
the request's, matching the pods' selector, takes as many pods as every requested resource
allows, none if one is short, at most ``count``. Random nodes with negative room (bound
pods beyond allocatable), room kept beside the placements, both GPU kinds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import GPU_RESOURCES, Flavor, Node
from preemptd.framework.nodes import NodePool, Placements, node_matches

FLAVORS = {"a": Flavor("a", {"pool": "a"})}
GPU_KINDS = ("nvidia.com/gpu", "amd.com/gpu")


def _expected(node: Node, room: dict[str, int], requests: dict[str, int], count: int, serves: bool) -> int:
    if not serves or not node_matches(node, {"pool": "a"}, ()):
        return 0
    if sum(room.get(r, 0) for r in GPU_RESOURCES) < sum(requests.get(r, 0) for r in GPU_RESOURCES):
        return 0
    if room.get("cpu", 0) < requests.get("cpu", 0):
        return 0
    fits = count
    for resource, amount in requests.items():
        if amount > 0:
            fits = min(fits, room.get(resource, 0) // amount)
            if fits <= 0:
                return 0
    return fits


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_node_takes_what_every_requested_resource_allows(seed: int) -> None:
    rng = random.Random(seed)
    nodes = {}
    for i in range(rng.randrange(1, 10)):
        labels = {"pool": "a"} if rng.random() < 0.7 else {}
        allocatable = {rng.choice(GPU_KINDS): rng.choice((0, 4, 8)), "cpu": rng.randrange(0, 16_000, 1000)}
        nodes[f"n{i}"] = Node(f"n{i}", labels, allocatable)
    pool = NodePool(nodes, FLAVORS)
    for name in nodes:
        pool.consume(name, {"cpu": rng.randrange(0, 20_000, 1000)})
    placements = Placements(pool)
    requests = {"cpu": rng.randrange(0, 5000, 1000)}
    if rng.random() < 0.7:
        requests[rng.choice(GPU_KINDS)] = rng.choice((1, 2, 4))
    count = rng.randrange(0, 9)
    tally = placements.tally("a", requests, count, {"pool": "a"}, ())
    if tally is None:
        return
    for name, node in nodes.items():
        free = placements.free[name]
        extra = None
        if rng.random() < 0.5:
            extra = {rng.choice(GPU_KINDS): rng.choice((-2, 0, 4)), "cpu": rng.randrange(-2000, 8000, 1000)}
        room = {r: free.get(r, 0) + (extra or {}).get(r, 0) for r in {*free, *(extra or {})}}
        serves = node.labels.get("pool") == "a"
        expected = _expected(node, room, requests, count, serves)
        assert tally.on(name, free, extra) == expected
        if serves:
            assert tally.takes(name, free, extra) == expected
