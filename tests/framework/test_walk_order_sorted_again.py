"""A list of candidates sorted again as it was sorted before (framework/preemption/search.py,
``sorted_again``).

Searches that walk sort their candidates into victim order; with the base order and
fewer than ``_HINTED`` candidates, each list is sorted as it comes. Searches of a session
are often handed the same list again. The last list sorted of each length and first unit
is kept, as it came and sorted; a list equal to it (the same units, by identity, in the
same order) is given the kept order: a unit's ``sort_key`` never changes and the sort is
stable, so that is the sort's answer.

Held to the stable sort by ``sort_key`` on random lists drawn from one pool of units
whose keys often tie (so the order they come in decides the order of equal keys): the
same list again, in another order with the same first unit, one unit swapped for
another, one left out. By hand: two lists of the same units, with the same first unit
and equal keys, come out in their own orders.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption.search import sorted_again
from preemptd.framework.session import Candidate


def _unit(name: str, key: tuple[Any, ...]) -> Candidate:
    workload: Any = None
    queue: Any = None
    return Candidate(workload, queue, {}, name, 1, sort_key=key)


def _drawn(rng: random.Random, pool: list[Candidate], last: list[Candidate]) -> list[Candidate]:
    pick = rng.random()
    if last and pick < 0.3:
        return list(last)
    if len(last) > 2 and pick < 0.5:
        rest = last[1:]
        rng.shuffle(rest)
        return [last[0], *rest]  # the same length and first unit, another order
    if last and pick < 0.6:
        changed = list(last)
        changed[rng.randrange(len(changed))] = rng.choice(pool)
        return changed
    if last and pick < 0.7:
        return last[:-1]
    found = rng.sample(pool, rng.randrange(0, len(pool) + 1))
    return found


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_list_sorted_again_is_in_the_stable_sorts_order(seed: int) -> None:
    rng = random.Random(seed)
    pool = [_unit(f"u{i}", (rng.randrange(3), rng.choice(["a", "b"]))) for i in range(rng.randrange(1, 12))]
    state: dict[str, Any] = {}
    last: list[Candidate] = []
    for _ in range(15):
        last = _drawn(rng, pool, last)
        expected = sorted(last, key=lambda unit: unit.sort_key)
        found = list(last)
        sorted_again(state, found)
        assert [unit.reason for unit in found] == [unit.reason for unit in expected]
        assert all(map(lambda a, b: a is b, found, expected))


def test_the_same_units_in_another_order_sort_in_their_own() -> None:
    """By hand: a, b, c with a key of 1 and d with 0. [a, b, c, d] sorts to [d, a, b, c];
    then [a, c, b, d] (same length, same first unit) to [d, a, c, b], not the first
    list's order; and [a, b, c, d] again to [d, a, b, c]."""
    a, b, c, d = _unit("a", (1,)), _unit("b", (1,)), _unit("c", (1,)), _unit("d", (0,))
    state: dict[str, Any] = {}
    first = [a, b, c, d]
    sorted_again(state, first)
    assert first == [d, a, b, c]
    second = [a, c, b, d]
    sorted_again(state, second)
    assert second == [d, a, c, b]
    again = [a, b, c, d]
    sorted_again(state, again)
    assert again == [d, a, b, c]
