"""A copy of the placements shares room maps until one side changes them, and then
answers exactly as a full copy would: neither side ever sees the other's changes."""

from __future__ import annotations

import random

import pytest
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements

GPU = "nvidia.com/gpu"
FLAVORS = {
    "a100": Flavor("a100", {"pool": "a100"}),
    "any": Flavor("any", {"zone": "z1"}),
    "h100": Flavor("h100", {"pool": "h100"}),
}


def _nodes(rng: random.Random) -> dict[str, Node]:
    nodes = {}
    for i in range(12):
        labels = {"pool": rng.choice(("a100", "h100")), "zone": rng.choice(("z1", "z2"))}
        allocatable = {GPU: rng.choice((2, 4, 8)), "cpu": rng.choice((8_000, 16_000))}
        nodes[f"n{i:02}"] = Node(f"n{i:02}", labels, allocatable)
    return nodes


def _fresh(nodes: dict[str, Node], room: dict[str, dict[str, int]]) -> Placements:
    """Placements built from scratch on ``room``: what any placements holding it answers."""
    pool = NodePool(nodes, FLAVORS)
    pool.free = {name: dict(free) for name, free in room.items()}
    return Placements(pool)


def _answers(placements: Placements) -> list[object]:
    found: list[object] = []
    for flavor in FLAVORS:
        for gpus in (1, 2, 3, 4, 8):
            request = {GPU: gpus, "cpu": 1_000 * gpus}
            found.append(placements.best_fit(flavor, request, {}, ()))
            found.append(placements.can_place(flavor, request, 3, {}, ()))
            tally = placements.tally(flavor, request, 5, {}, ())
            found.append(None if tally is None else placements.count(tally))
    return found


def change_at_random(
    rng: random.Random, placements: Placements, room: dict[str, dict[str, int]], names: list[str], *, tentative: bool
) -> None:
    """Take or give back (``tentative``: leaving the index stale) a random request on a
    random node, and keep ``room``, the room the placements must hold, up to date."""
    node = rng.choice(names)
    request = {GPU: rng.choice((1, 2)), "cpu": rng.choice((500, 1_000))}
    sign = rng.choice((1, -1))
    if sign < 0:
        (placements.take_tentatively if tentative else placements.take)(node, request)
    else:
        (placements.give_back_tentatively if tentative else placements.give_back)(node, request)
    for resource, amount in request.items():
        room[node][resource] += sign * amount


@pytest.mark.parametrize("seed", range(40))
def test_copies_answer_as_full_copies_after_random_takes_and_gives(seed: int) -> None:
    """Copies of copies, each changed at random (taken and given back, at once and
    tentatively, then synced), hold exactly the room of their own changes, and answer
    best fit, placement and counts as placements built afresh on that room."""
    rng = random.Random(seed)
    nodes = _nodes(rng)
    names = sorted(nodes)
    everyone = [Placements(NodePool(nodes, FLAVORS))]
    rooms = [{name: dict(node.allocatable) for name, node in nodes.items()}]
    for _ in range(60):
        step = rng.random()
        which = rng.randrange(len(everyone))
        placements, room = everyone[which], rooms[which]
        if step < 0.15:
            placements.sync()
            everyone.append(placements.copy())
            rooms.append({name: dict(free) for name, free in room.items()})
            continue
        change_at_random(rng, placements, room, names, tentative=step < 0.5)
        for other, expected in zip(everyone, rooms, strict=True):
            assert other.free == expected
    for placements, room in zip(everyone, rooms, strict=True):
        placements.sync()
        assert _answers(placements) == _answers(_fresh(nodes, room))


def test_changing_the_original_after_a_copy_leaves_the_copy_alone() -> None:
    """The original's room maps are shared with the copy too: the original copies a
    map before it changes it, as the copy does."""
    nodes = {"n1": Node("n1", {"pool": "a100"}, {GPU: 8, "cpu": 8_000})}
    original = Placements(NodePool(nodes, FLAVORS))
    copy = original.copy()
    original.take("n1", {GPU: 8})
    assert copy.free["n1"][GPU] == 8
    assert copy.best_fit("a100", {GPU: 8}, {}, ()) == "n1"
    assert original.best_fit("a100", {GPU: 8}, {}, ()) is None
    copy.take_tentatively("n1", {GPU: 2})
    assert original.free["n1"][GPU] == 0
