"""The free GPUs the placements keep per node (``Placements.gpus``, read per pod room by a
victim walk in ``preemption/room.py``) are at every step the sum of the GPU kinds of the
node's room map, however the room changed: taken or given back, at once or tentatively
(as a statement and its rollback change it), synced, in a copy or in its original."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements

GPU = "nvidia.com/gpu"
OTHER_GPU = "amd.com/gpu"
FLAVORS = {"a": Flavor("a", {"pool": "a"}), "b": Flavor("b", {"zone": "z1"})}


def _placements(rng: random.Random) -> Placements:
    nodes = {}
    for i in range(8):
        labels = {"pool": rng.choice(("a", "c")), "zone": rng.choice(("z1", "z2"))}
        allocatable = {GPU: rng.choice((0, 4, 8)), OTHER_GPU: rng.choice((0, 2)), "cpu": 16_000}
        nodes[f"n{i}"] = Node(f"n{i}", labels, allocatable)
    pool = NodePool(nodes, FLAVORS)
    for name in nodes:
        if rng.random() < 0.5:
            pool.consume(name, {GPU: rng.randrange(0, 5), "cpu": 4_000})
    return Placements(pool)


def _summed(placements: Placements) -> dict[str, int]:
    """Per node of a flavor, the GPUs of every kind of its room map, summed by hand."""
    flavored = set().union(*placements.pool.members.values())
    return {name: room.get(GPU, 0) + room.get(OTHER_GPU, 0) for name, room in placements.free.items() if name in flavored}


def test_a_node_of_no_flavor_is_not_kept_and_one_of_a_flavor_starts_at_its_room() -> None:
    nodes = {
        "gpu": Node("gpu", {"pool": "a"}, {GPU: 8, OTHER_GPU: 2, "cpu": 8_000}),
        "none": Node("none", {"pool": "x"}, {GPU: 4, "cpu": 8_000}),
    }
    pool = NodePool(nodes, FLAVORS)
    pool.consume("gpu", {GPU: 3})
    placements = Placements(pool)
    assert placements.gpus == {"gpu": 7}  # 8 - 3 of one kind, 2 of the other
    placements.take_tentatively("gpu", {OTHER_GPU: 2, "cpu": 1_000})
    placements.take("none", {GPU: 1})
    assert placements.gpus == {"gpu": 5}


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_free_gpus_follow_every_change_of_room(seed: int) -> None:
    rng = random.Random(seed)
    placements = _placements(rng)
    copies = [placements]
    names = [*sorted(placements.free), "gone"]  # a node the placements do not know
    for _ in range(60):
        target = rng.choice(copies)
        step = rng.random()
        if step < 0.1:
            copies.append(target.copy())
        elif step < 0.2:
            target.sync()
        else:
            node = rng.choice(names)
            request = {rng.choice((GPU, OTHER_GPU)): rng.randrange(0, 3), "cpu": 500}
            if rng.random() < 0.3:
                request[GPU] = request.get(GPU, 0) + 1
            change = rng.choice(
                (target.take, target.give_back, target.take_tentatively, target.give_back_tentatively)
            )
            change(node, request)
        for placements in copies:
            assert placements.gpus == _summed(placements)
