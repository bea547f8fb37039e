"""Node room a victim walk keeps beside the placements (framework/preemption/room.py).

A walk frees its victims' room in :class:`FreedRoom` instead of the placements, and asks
it whether the preemptor's pods fit. Its answer must be the one ``Placements.fit_all``
gives on placements that were handed the same room, at every step of a walk: victims
freed in batches until the pods fit, then taken back one by one in reverse (fill-back),
a step undone when the pods no longer fit. Random nodes of two flavors sharing some nodes,
GPUs of both kinds, over-committed nodes (bound pods beyond allocatable), stale nodes
(room changed tentatively before the walk) and one to three pod sets.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements, pod_terms
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

FLAVORS = {"a": Flavor("a", {"pool": "a"}), "b": Flavor("b", {"kind": "b"})}
GPU_KINDS = ("nvidia.com/gpu", "amd.com/gpu")


def _pool(rng: random.Random) -> NodePool:
    nodes = {}
    for i in range(rng.randrange(2, 14)):
        labels = {"zone": rng.choice("xy")}
        if rng.random() < 0.8:
            labels["pool"] = "a"
        if rng.random() < 0.4:
            labels["kind"] = "b"
        gpu = rng.choice(GPU_KINDS)
        allocatable = {gpu: rng.choice((0, 4, 8)), "cpu": rng.randrange(0, 16_000, 1000), "memory": rng.randrange(0, 9)}
        nodes[f"n{i:02d}"] = Node(f"n{i:02d}", labels, allocatable)
    pool = NodePool(nodes, FLAVORS)
    for name in nodes:
        # Bound pods; sometimes beyond the node's allocatable (its room goes negative).
        pool.consume(name, {"cpu": rng.randrange(0, 12_000, 1000), "memory": rng.randrange(0, 10)})
    return pool


def _requests(rng: random.Random) -> dict[str, int]:
    requests = {"cpu": rng.randrange(0, 5000, 1000), "memory": rng.randrange(0, 3)}
    if rng.random() < 0.6:
        requests[rng.choice(GPU_KINDS)] = rng.choice((1, 2, 4, 8))
    return requests


def _fits(placements: Placements, targets: list[tuple[PodSet, int, str]]) -> bool:
    """``fit_all`` on a copy, so that its placements do not stay."""
    copy = placements.copy()
    return copy.fit_all(FLAVORS, targets, copy.take_tentatively)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_freed_room_answers_as_the_placements_given_the_same_room(seed: int) -> None:
    rng = random.Random(seed)
    pool = _pool(rng)
    names = sorted(pool.nodes)
    placements = Placements(pool)
    for _ in range(rng.randrange(0, 4)):  # stale nodes before the walk
        node = rng.choice(names)
        requests = {"cpu": rng.randrange(0, 3000, 1000), rng.choice(GPU_KINDS): rng.randrange(0, 3)}
        if rng.random() < 0.5:
            placements.take_tentatively(node, requests)
        else:
            placements.give_back_tentatively(node, requests)
    targets = []
    for i in range(rng.choice((1, 1, 2, 2, 3))):
        selector = {"zone": rng.choice("xy")} if rng.random() < 0.2 else {}
        spec = PodSet(f"ps{i}", 1, _requests(rng), node_selector=selector)
        flavor = rng.choice("aab")
        if placements.has_nodes(flavor):  # as the walk keeps them
            targets.append((spec, rng.choice((1, 1, 2, 3)), flavor))
    if not targets:
        return
    victims: list[Any] = [
        SimpleNamespace(room=tuple(NodeRoom(rng.choice([*names, "gone"]), _requests(rng)) for _ in range(rng.randrange(1, 4))))
        for _ in range(rng.randrange(1, 12))
    ]
    session: Any = SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})
    freed = FreedRoom(session, targets)
    given_room = placements.copy()  # the same room, given to the placements
    before = {name: dict(room) for name, room in placements.free.items()}

    walk_and_fill_back(rng, freed, given_room, victims, targets, batch=3, stop=0.7, keep=0.8)
    assert placements.free == before, "the walk's room never reaches the placements"


def walk_and_fill_back(
    rng: random.Random,
    freed: FreedRoom,
    given_room: Placements,
    victims: list[Any],
    targets: list[tuple[PodSet, int, str]],
    *,
    batch: int,
    stop: float,
    keep: float,
) -> None:
    """A walk's steps on ``freed``, each checked against ``fit_all`` on ``given_room``
    handed the same room: victims freed in batches of up to ``batch`` until the pods fit
    (stopping there with probability ``stop``), then taken back one by one in reverse
    (fill-back), a step undone when the pods no longer fit (or, with probability
    ``1 - keep``, as a scenario filter would)."""
    taken: list[Any] = []
    while victims:
        step = [victims.pop() for _ in range(min(len(victims), rng.randrange(1, batch + 1)))]
        freed.give(step)
        for victim in step:
            for held in victim.room:
                node, requests = held.node_name, held.requests
                given_room.give_back_tentatively(node, requests)
        taken.extend(step)
        assert freed.fits() == _fits(given_room, targets)
        if freed.fits() and rng.random() < stop:
            break
    for victim in reversed(taken[:-1]):
        saved = freed.saved()
        freed.take_back(victim)
        back = given_room.copy()
        for held in victim.room:
            node, requests = held.node_name, held.requests
            back.take_tentatively(node, requests)
        fits = freed.fits()
        assert fits == _fits(back, targets)
        if fits and rng.random() < keep:
            given_room = back
        else:
            freed.undo(victim, saved)
            assert freed.fits() == _fits(given_room, targets)


def _overcommitted() -> Placements:
    """n1 holds bound pods beyond its memory (4 allocatable, 8 bound); n2 has room."""
    nodes = {
        "n1": Node("n1", {"pool": "a"}, {"cpu": 4000, "memory": 4}),
        "n2": Node("n2", {"pool": "a"}, {"cpu": 4000, "memory": 8}),
    }
    pool = NodePool(nodes, FLAVORS)
    pool.consume("n1", {"memory": 8})
    return Placements(pool)


def test_an_overcommitted_node_takes_no_pod_and_cancels_none_that_others_take() -> None:
    """SEMANTICS §6: a pod fits a node when each of its requests fits the node's free
    room. n1's memory is 4 short: it takes none of the 1-cpu, 2-memory pods, and n2 takes
    four (4 cpu, 8 memory), so four fit. Counted as -2 pods, n1 used to cancel two."""
    room = _overcommitted()
    spec = PodSet("main", 4, {"cpu": 1000, "memory": 2})
    selector, tolerations = pod_terms(FLAVORS["a"], spec)
    assert room.can_place("a", spec.requests, 4, selector, tolerations)
    assert not room.can_place("a", spec.requests, 5, selector, tolerations)
    assert room.place_pods("a", spec.requests, 4, selector, tolerations) == ["n2"] * 4
