"""Pods without GPUs freed on nodes short of the GPUs wait before their room is added
(framework/preemption/room.py, ``FreedRoom.pending``).

A walk of one pod set gives most of its victims' pods on nodes whose GPUs stay short of
the preemptor's pods; a pod without GPUs leaves such a node as short as it was, so its
room is not added to the node's map until something reads that map: the node reaching
the GPUs (a later pod with GPUs there); a first give kept for the next walk adds all.
Fill-back reads only the nodes that take some pods, which no waiting pod is on. Every
answer must stay that of ``Placements.fit_all`` on placements handed the same room.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import FLAVORS, GPU_KINDS, _fits, walk_and_fill_back

GPU = GPU_KINDS[0]


def _full_node() -> Placements:
    """One node of flavor ``a``: 8 GPUs and 64 cores, all GPUs and 62 cores taken."""
    nodes = {"n0": Node("n0", {"pool": "a"}, {GPU: 8, "cpu": 64_000, "memory": 512})}
    pool = NodePool(nodes, {"a": Flavor("a", {"pool": "a"})})
    pool.consume("n0", {GPU: 8, "cpu": 62_000, "memory": 256})
    return Placements(pool)


def _victim(requests: dict[str, int]) -> Any:
    return SimpleNamespace(room=(NodeRoom("n0", requests),))


def _session(placements: Placements) -> Any:
    return SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})


# One pod of 8 GPUs and 8 cores: the node has 2 cores free, so it needs 6 more and the GPUs.
TARGETS = [(PodSet("main", 1, {GPU: 8, "cpu": 8000}), 1, "a")]


def test_the_cores_of_pods_that_waited_count_when_their_node_reaches_the_gpus() -> None:
    """4 cores, then 2 (a pod that waits: the node is short of GPUs before and after), then
    the 8 GPUs: the node has the 8 cores the pod asks only with the 2 that waited. Taking
    back the victim of those 2 leaves it short again; undoing that fits again."""
    placements = _full_node()
    freed = FreedRoom(_session(placements), TARGETS)
    four, two, gpus = _victim({"cpu": 4000}), _victim({"cpu": 2000}), _victim({GPU: 8})
    freed.give([four])
    freed.give([two])
    assert freed.pending == [("n0", {"cpu": 2000})]
    assert not freed.fits()
    freed.give([gpus])
    assert freed.fits()  # 2 + 4 + 2 cores free, and 8 GPUs
    for without, fits in ((None, True), (two, False)):  # as the placements handed that room
        given_room = placements.copy()
        for victim in (four, two, gpus):
            if victim is not without:
                given_room.give_back_tentatively("n0", victim.room[0].requests)
        assert _fits(given_room, TARGETS) == fits
    assert not freed.pending
    saved = freed.saved()
    freed.take_back(two)
    assert not freed.fits()  # 6 cores
    freed.undo(two, saved)
    assert freed.fits()


def test_a_kept_first_give_holds_the_room_of_the_pods_that_waited() -> None:
    """A first give of two cpu-only victims on one node is kept for the next walk of the
    node epoch (its pods do not wait); that walk, given the same two and then the GPUs,
    fits only if the second victim's 2 cores are in the kept room."""
    placements = _full_node()
    session = _session(placements)
    four, two, gpus = _victim({"cpu": 4000}), _victim({"cpu": 2000}), _victim({GPU: 8})
    first = FreedRoom(session, TARGETS, 0)
    first.give([four, two])
    assert not first.fits()
    second = FreedRoom(session, TARGETS, 0)
    second.give([four, two])
    second.give([gpus])
    assert second.fits()


def _pool(rng: random.Random) -> NodePool:
    """Nodes of flavor ``a`` mostly short of GPUs, with some cores free."""
    nodes = {}
    for i in range(rng.randrange(1, 6)):
        nodes[f"n{i}"] = Node(f"n{i}", {"pool": "a"}, {GPU: 8, "cpu": 32_000, "memory": 64})
    pool = NodePool(nodes, {"a": Flavor("a", {"pool": "a"})})
    for name in nodes:
        pool.consume(name, {GPU: rng.choice((4, 6, 8, 8)), "cpu": rng.randrange(16_000, 32_001, 2000), "memory": 8})
    return pool


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_walks_of_pods_mostly_without_gpus_answer_as_the_placements(seed: int) -> None:
    """Victims freeing mostly cores on nodes short of the GPUs, now and then GPUs, given
    one or two at a time (first gives kept in one node epoch, or not kept), then taken back
    one by one: every answer as ``fit_all``'s on placements handed the same room."""
    rng = random.Random(seed)
    pool = _pool(rng)
    names = sorted(pool.nodes)
    placements = Placements(pool)
    session = _session(placements)
    spec = PodSet("main", 1, {GPU: rng.choice((2, 4, 8)), "cpu": rng.randrange(2000, 20_001, 2000)})
    targets = [(spec, rng.choice((1, 2)), "a")]

    def requests() -> dict[str, int]:
        found = {"cpu": rng.randrange(0, 8001, 2000), "memory": rng.randrange(0, 3)}
        if rng.random() < 0.2:
            found[GPU] = rng.choice((2, 4))
        return found

    victims = [
        SimpleNamespace(room=tuple(NodeRoom(rng.choice([*names, "gone"]), requests()) for _ in range(rng.randrange(1, 3))))
        for _ in range(rng.randrange(2, 14))
    ]
    before = {name: dict(room) for name, room in placements.free.items()}
    for _ in range(rng.randrange(1, 4)):
        order = rng.sample(victims, len(victims)) if rng.random() < 0.3 else list(victims)
        freed = FreedRoom(session, targets, 0 if rng.random() < 0.7 else None)
        walk_and_fill_back(rng, freed, placements.copy(), order, targets, batch=2, stop=0.6, keep=0.8)
        assert placements.free == before, "a walk's room never reaches the placements"
