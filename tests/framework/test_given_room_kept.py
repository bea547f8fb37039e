"""A walk's first give of node room, kept for the next walk of the same pod set in the same
node epoch (framework/preemption/givenroom.py, ``FreedRoom`` in room.py).

Walks of one node epoch on committed room that follow one pod set start from the room the
last such walk's first victims freed when their own first victims begin with those, and give
only the rest. Every answer must stay that of ``Placements.fit_all`` on placements handed the
same room, and that of a walk that keeps nothing, at every step: the first give, the single
victims after it, fill-back's takes and undos. A kept state must not see what a later walk
does to its copy (the room maps are shared until changed).
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import FLAVORS, GPU_KINDS, _fits, _pool, _requests


class _Victim:
    """A victim whose room counts how often it is read."""

    __slots__ = ("_room", "reads")

    def __init__(self, room: tuple[NodeRoom, ...]) -> None:
        self._room = room
        self.reads = 0

    @property
    def room(self) -> tuple[NodeRoom, ...]:
        self.reads += 1
        return self._room


class _Session:
    def __init__(self, placements: Placements) -> None:
        self.placements = placements
        self.snapshot = type("Snap", (), {"flavors": FLAVORS})()
        self.state: dict[str, Any] = {}


def _walk(
    rng: random.Random,
    session: _Session,
    epoch: int,
    targets: list[tuple[PodSet, int, str]],
    first: list[Any],
    more: list[Any],
) -> None:
    """One walk: ``first`` given at once, then ``more`` one by one until the pods fit, then
    fill-back; each step against a walk that keeps nothing and ``fit_all`` on placements
    handed the same room."""
    placements = session.placements
    freed = FreedRoom(session, targets, epoch)  # type: ignore[arg-type]
    plain = FreedRoom(session, targets)  # type: ignore[arg-type]
    given_room = placements.copy()
    before = {name: dict(room) for name, room in placements.free.items()}
    taken: list[Any] = []
    for step in [first, *([victim] for victim in more)]:
        freed.give(step)
        plain.give(step)
        for victim in step:
            for held in victim.room:
                node, requests = held.node_name, held.requests
                given_room.give_back_tentatively(node, requests)
        taken.extend(step)
        fits = freed.fits()
        assert fits == plain.fits() == _fits(given_room, targets)
        assert freed.totals == plain.totals
        if fits and rng.random() < 0.7:
            break
    for victim in reversed(taken[:-1]):
        saved, saved_plain = freed.saved(), plain.saved()
        freed.take_back(victim)
        plain.take_back(victim)
        back = given_room.copy()
        for held in victim.room:
            node, requests = held.node_name, held.requests
            back.take_tentatively(node, requests)
        fits = freed.fits()
        assert fits == plain.fits() == _fits(back, targets)
        if fits and rng.random() < 0.8:
            given_room = back
        else:
            freed.undo(victim, saved)
            plain.undo(victim, saved_plain)
            assert freed.fits() == plain.fits() == _fits(given_room, targets)
        assert freed.totals == plain.totals
    assert placements.free == before, "a walk's room never reaches the placements"


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_walks_starting_from_a_kept_first_give_answer_as_walks_that_keep_nothing(seed: int) -> None:
    rng = random.Random(seed)
    pool = _pool(rng)
    names = sorted(pool.nodes)
    placements = Placements(pool)
    spec = PodSet("main", 1, _requests(rng))
    flavor = rng.choice("aab")
    if not placements.has_nodes(flavor):
        return
    targets = [(spec, rng.choice((1, 1, 2, 3)), flavor)]
    session = _Session(placements)

    def victim() -> _Victim:
        rooms = [NodeRoom(rng.choice([*names, "gone"]), _requests(rng)) for _ in range(rng.randrange(1, 4))]
        return _Victim(tuple(rooms))

    pool_of_victims = [victim() for _ in range(rng.randrange(2, 14))]
    for _ in range(rng.randrange(2, 6)):
        # Mostly the same leading victims, sometimes one more or one fewer, sometimes others.
        length = rng.randrange(2, len(pool_of_victims) + 1)
        first = pool_of_victims[:length] if rng.random() < 0.8 else [victim() for _ in range(length)]
        more = [victim() for _ in range(rng.randrange(0, 4))]
        _walk(rng, session, 0, targets, first, more)


def _busy_nodes(count: int) -> Placements:
    """``count`` nodes of flavor ``a`` with 8 GPUs and 64 cores, all GPUs and 60 cores taken."""
    nodes = {
        f"n{i}": Node(f"n{i}", {"pool": "a"}, {GPU_KINDS[0]: 8, "cpu": 64_000, "memory": 512}) for i in range(count)
    }
    pool = NodePool(nodes, {"a": Flavor("a", {"pool": "a"})})
    for name in nodes:
        pool.consume(name, {GPU_KINDS[0]: 8, "cpu": 60_000, "memory": 256})
    return Placements(pool)


def test_a_walk_whose_first_victims_begin_with_the_kept_ones_reads_only_the_rest() -> None:
    """Thirty victims free 2 cores on each of thirty nodes whose GPUs stay taken. The next
    walk of the same pod set in the same node epoch gives the same thirty and five more at
    once: it reads the rooms of the five only. A walk of the next epoch, of another pod set,
    or whose first victims begin otherwise reads every room it gives."""
    placements = _busy_nodes(40)
    session = _Session(placements)
    main = PodSet("main", 1, {GPU_KINDS[0]: 8, "cpu": 16_000, "memory": 64})
    targets = [(main, 1, "a")]
    victims = [_Victim((NodeRoom(f"n{i}", {"cpu": 2000, "memory": 4}),)) for i in range(35)]

    def first_give(epoch: int, given: list[_Victim], on: list[tuple[PodSet, int, str]]) -> list[int]:
        for v in victims:
            v.reads = 0
        freed = FreedRoom(session, on, epoch)  # type: ignore[arg-type]
        freed.give(given)
        assert not freed.fits()  # no node reaches 8 GPUs
        return [v.reads for v in victims]

    assert first_give(0, victims[:30], targets) == [1] * 30 + [0] * 5
    assert first_give(0, victims, targets) == [0] * 30 + [1] * 5
    assert first_give(0, victims, targets) == [0] * 35  # the very same victims: nothing read
    assert first_give(1, victims, targets) == [1] * 35  # another node epoch
    other = [(PodSet("main", 1, {GPU_KINDS[0]: 8, "cpu": 16_000, "memory": 64}), 1, "a")]
    assert first_give(1, victims, other) == [1] * 35  # another pod set
    assert first_give(1, victims[1:], targets) == [0] + [1] * 34  # begins otherwise
