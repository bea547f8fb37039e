"""A victim's pods read once per session by the walks that free its room
(framework/preemption/freedpods.py, read by ``FreedRoom._follow`` in room.py).

A walk of one pod set judges each pod a victim frees on the pod's node, the pod's requests
and their GPUs of every kind summed. The same victims are given by many walks of a session,
so their pods are read into (node, requests, GPUs) once per victim room and kept in
``session.state``, by the room's id with the room itself (an id is a room's only while it
lives). Answers must stay those of ``Placements.fit_all`` on placements handed the same
room, whether a walk reads a room first or after other walks, in any order.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Node, PodSet
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import FLAVORS, _fits, _pool, _requests, walk_and_fill_back

GPU = "nvidia.com/gpu"
OTHER_GPU = "amd.com/gpu"


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_walks_of_one_session_reading_the_same_victims_answer_as_the_placements(seed: int) -> None:
    """Random nodes and victims; several walks of one pod set each (the followed case), in
    one session, each giving a random selection of the same victims in a random order: at
    every step of every walk the answer is ``fit_all``'s on placements handed the same
    room, and each victim room is read once for the session."""
    rng = random.Random(seed)
    pool = _pool(rng)
    names = sorted(pool.nodes)
    placements = Placements(pool)
    victims: list[Any] = [
        SimpleNamespace(room=tuple(NodeRoom(rng.choice([*names, "gone"]), _requests(rng)) for _ in range(rng.randrange(1, 4))))
        for _ in range(rng.randrange(1, 12))
    ]
    session: Any = SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})
    for _ in range(rng.randrange(1, 5)):
        flavor = rng.choice("aab")
        if not placements.has_nodes(flavor):
            continue
        targets = [(PodSet("main", 1, _requests(rng)), rng.choice((1, 1, 2, 3)), flavor)]
        freed = FreedRoom(session, targets)
        chosen = rng.sample(victims, rng.randrange(1, len(victims) + 1))
        walk_and_fill_back(rng, freed, placements.copy(), chosen, targets, batch=3, stop=0.7, keep=0.8)
    read = session.state.get("_freed_pods", {})
    for key, (room, pods) in read.items():
        assert key == id(room)
        assert pods == tuple((held.node_name, held.requests, held.requests.get(GPU, 0) + held.requests.get(OTHER_GPU, 0)) for held in room)


def _two_nodes() -> Placements:
    """n0 and n1 of flavor ``a``: 8 GPUs and 64 cores each, all GPUs and 60 cores taken."""
    nodes = {name: Node(name, {"pool": "a"}, {GPU: 8, "cpu": 64_000}) for name in ("n0", "n1")}
    pool = NodePool(nodes, {"a": FLAVORS["a"]})
    for name in nodes:
        pool.consume(name, {GPU: 8, "cpu": 60_000})
    return Placements(pool)


def test_a_victim_given_by_two_walks_is_read_once() -> None:
    """By hand: two walks of one session give the same victim (4 GPUs and 8 cores on n0,
    4 GPUs on n1); its pods are read once (the second walk finds the first's read). The pod
    asks 8 GPUs and 8 cores: neither node reaches 8 GPUs with the victim alone (0 + 4), so
    the first walk's pods do not fit; the second walk also gives the victim holding n0's
    other 4 GPUs, and one pod fits."""
    placements = _two_nodes()
    session: Any = SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})
    targets = [(PodSet("main", 1, {GPU: 8, "cpu": 8000}), 1, "a")]
    shared = SimpleNamespace(room=(NodeRoom("n0", {GPU: 4, "cpu": 8000}), NodeRoom("n1", {GPU: 4})))
    other = SimpleNamespace(room=(NodeRoom("n0", {GPU: 4}),))
    first = FreedRoom(session, targets)
    first.give([shared])
    assert not first.fits()
    read = session.state["_freed_pods"]
    pods = read[id(shared.room)][1]
    assert (("n0", {GPU: 4, "cpu": 8000}, 4), ("n1", {GPU: 4}, 4)) == pods
    second = FreedRoom(session, targets)
    second.give([shared])
    assert not second.fits()
    second.give([other])
    assert second.fits()  # n0: 8 GPUs, 4 + 8 cores
    assert read[id(shared.room)][1] is pods
    assert [id(shared.room), id(other.room)] == list(read)


def test_a_kept_read_of_another_room_at_the_same_id_is_not_used() -> None:
    """By hand: the session keeps, at the id of a victim's room, the read of another room
    (what an id freed and used again would leave): the walk reads the victim's own pods,
    and the pod fits as with nothing kept (n0 freed of its 8 GPUs)."""
    placements = _two_nodes()
    session: Any = SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})
    victim = SimpleNamespace(room=(NodeRoom("n0", {GPU: 8}),))
    stranger = (NodeRoom("n1", {"cpu": 1000}),)
    session.state["_freed_pods"] = {id(victim.room): (stranger, (("n1", {"cpu": 1000}, 0),))}
    targets = [(PodSet("main", 1, {GPU: 8, "cpu": 4000}), 1, "a")]
    freed = FreedRoom(session, targets)
    freed.give([victim])
    assert freed.fits()
    assert session.state["_freed_pods"][id(victim.room)] == (victim.room, (("n0", {GPU: 8}, 8),))
    given_room = placements.copy()
    given_room.give_back_tentatively("n0", {GPU: 8})
    assert _fits(given_room, targets)
