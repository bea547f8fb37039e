"""Copies of the placements share their flavor indexes (framework/nodes/shared.py) until one
side changes an index or hands one out in a tally; a tally handed out by any of them, before
or after a copy, keeps counting on the room of the placements that made it."""

from __future__ import annotations

import random

import pytest
from preemptd.framework.model import Node
from preemptd.framework.nodes import NodePool, Placements, PodTally

from tests.framework.test_placements_copy import FLAVORS, GPU, _fresh, _nodes, change_at_random


def _count(placements: Placements, flavor: str, request: dict[str, int]) -> int:
    tally = placements.tally(flavor, request, 6, {}, ())
    assert tally is not None
    return min(6, placements.count(tally))  # counted up to 6: it may stop past it


def test_a_tally_made_before_a_copy_follows_its_placements_as_they_change() -> None:
    nodes = {name: Node(name, {"pool": "a100"}, {GPU: 8, "cpu": 8_000}) for name in ("n1", "n2")}
    original = Placements(NodePool(nodes, FLAVORS))
    request = {GPU: 4, "cpu": 1_000}
    tally = original.tally("a100", request, 6, {}, ())
    assert tally is not None and original.count(tally) == 4
    copy = original.copy()
    original.take("n1", {GPU: 8})
    assert original.count(tally) == 2  # the original's own index, moved by its take
    assert _count(copy, "a100", request) == 4  # the copy's room is whole
    copy.take("n2", {GPU: 4})
    assert original.count(tally) == 2
    assert _count(copy, "a100", request) == 3


def test_a_tally_made_by_a_copy_is_not_moved_by_its_original() -> None:
    nodes = {name: Node(name, {"pool": "a100"}, {GPU: 8, "cpu": 8_000}) for name in ("n1", "n2")}
    original = Placements(NodePool(nodes, FLAVORS))
    copy = original.copy()
    second = copy.copy()  # shares the original's indexes too
    request = {GPU: 8, "cpu": 1_000}
    tally = copy.tally("a100", request, 6, {}, ())
    assert tally is not None
    original.take("n1", {GPU: 8})
    second.take("n2", {GPU: 8})
    assert copy.count(tally) == 2
    assert _count(original, "a100", request) == 1
    assert _count(second, "a100", request) == 1


@pytest.mark.parametrize("seed", range(30))
def test_tallies_of_copies_count_their_own_room_through_random_changes(seed: int) -> None:
    """A family of copies (copies of copies), changed at random at once and tentatively,
    synced now and then, each handing out tallies at random moments: every tally ever
    handed out counts what placements built afresh on its own placements' room count."""
    rng = random.Random(seed)
    nodes = _nodes(rng)
    names = sorted(nodes)
    everyone = [Placements(NodePool(nodes, FLAVORS))]
    rooms = [{name: dict(node.allocatable) for name, node in nodes.items()}]
    tallies: list[tuple[int, str, dict[str, int], PodTally]] = []
    for _ in range(80):
        step = rng.random()
        which = rng.randrange(len(everyone))
        placements, room = everyone[which], rooms[which]
        if step < 0.12:
            everyone.append(placements.copy())
            rooms.append({name: dict(free) for name, free in room.items()})
        elif step < 0.25:
            flavor = rng.choice(sorted(FLAVORS))
            request = {GPU: rng.choice((1, 2, 4)), "cpu": 1_000}
            tally = placements.tally(flavor, request, 6, {}, ())
            if tally is not None:
                tallies.append((which, flavor, request, tally))
        elif step < 0.32:
            placements.sync()
        else:
            change_at_random(rng, placements, room, names, tentative=step < 0.6)
        for which, flavor, request, tally in tallies:
            fresh = _fresh(nodes, rooms[which])
            assert min(6, everyone[which].count(tally)) == _count(fresh, flavor, request)
