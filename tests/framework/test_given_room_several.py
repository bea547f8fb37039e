"""Several first gives kept per pod set in a node epoch (framework/preemption/givenroom.py,
``FreedRoom._give_first`` in room.py).

The searches of one node epoch alternate between a few victim lists for the same pod set.
The last ``KEPT`` first gives are kept, and a walk starts from the one with the most victims
its own first victims begin with: it reads the rooms of the rest only. The answers stay
those of a walk that keeps nothing (``test_given_room_kept.py`` checks every step of random
walks against ``Placements.fit_all``).
"""

from __future__ import annotations

from collections.abc import Callable

from preemptd.framework.model import PodSet
from preemptd.framework.preemption.givenroom import KEPT
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import GPU_KINDS
from tests.framework.test_given_room_kept import _busy_nodes, _Session, _Victim

MAIN = PodSet("main", 1, {GPU_KINDS[0]: 8, "cpu": 16_000, "memory": 64})


def _reads() -> tuple[list[_Victim], Callable[[list[_Victim]], list[int]]]:
    """Sixty victims, each freeing 2 cores on its own node of sixty whose GPUs stay taken,
    and a first give of some of them that answers the rooms each read."""
    placements = _busy_nodes(60)
    session = _Session(placements)
    victims = [_Victim((NodeRoom(f"n{i}", {"cpu": 2000, "memory": 4}),)) for i in range(60)]

    def first_give(given: list[_Victim]) -> list[int]:
        for v in victims:
            v.reads = 0
        freed = FreedRoom(session, [(MAIN, 1, "a")], 0)  # type: ignore[arg-type]
        freed.give(given)
        assert not freed.fits()  # no node reaches 8 GPUs
        assert freed.totals == [0]
        return [v.reads for v in victims]

    return victims, first_give


def test_a_walk_starts_from_an_older_kept_give_its_victims_begin_with() -> None:
    """A (victims 0–9), then B (20–29), then 0–14: it begins with A, not with B, the last
    kept; only 10–14 are read. Then 20–34 begins with B: only 30–34 are read."""
    victims, first_give = _reads()
    v = victims
    assert first_give(v[:10]) == [1] * 10 + [0] * 50
    assert first_give(v[20:30]) == [0] * 20 + [1] * 10 + [0] * 30
    assert first_give(v[:15]) == [0] * 10 + [1] * 5 + [0] * 45
    assert first_give(v[20:35]) == [0] * 30 + [1] * 5 + [0] * 25


def test_a_walk_starts_from_the_longest_kept_give_it_begins_with() -> None:
    """0–9 and 0–14 are both kept; 0–19 begins with both and starts from 0–14: only
    15–19 are read."""
    victims, first_give = _reads()
    v = victims
    first_give(v[:10])
    first_give(v[:15])
    assert first_give(v[:20]) == [0] * 15 + [1] * 5 + [0] * 40


def test_only_the_last_kept_gives_are_kept() -> None:
    """After 0–9, four other first gives (40–41, 42–43, 44–45, 46–47): 0–9 is dropped and
    0–11 reads all twelve; 46–49 still starts from 46–47."""
    assert KEPT == 4
    victims, first_give = _reads()
    v = victims
    first_give(v[:10])
    for start in (40, 42, 44, 46):
        first_give(v[start : start + 2])
    assert first_give(v[:12]) == [1] * 12 + [0] * 48
    assert first_give(v[46:50]) == [0] * 48 + [1] * 2 + [0] * 10
