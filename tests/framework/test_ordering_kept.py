"""The victim order of a search merged into the last one's (``preemption/search.py``,
``in_order``).

A search with the base order puts its candidates in the order the last search of the same
leaf, needed flavor-resources and node room sorted them, the new ones placed by bisection.
Held here to the stable sort of the candidates as they come, on chains of searches whose
candidates come and go, with keys equal between candidates, a unit given twice and a key
replaced between two searches; and on generated clusters, to the plain sort: the same
decisions, explanations and veto counts.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import search
from preemptd.framework.preemption.search import Ordered, in_order
from preemptd.framework.run import run_session
from preemptd.framework.session import CLASS_OTHER_QUEUE, Candidate, Registry
from preemptd.framework.snapshot import Snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, Size, generate_spec, growth_spec


def _unit(key: tuple[int, ...]) -> Candidate:
    unit = Candidate(None, None, {}, "InQueue", CLASS_OTHER_QUEUE)  # type: ignore[arg-type]
    unit.sort_key = key
    return unit


def _stable(candidates: list[Candidate]) -> list[Candidate]:
    """What ``sort_candidates`` makes of them with the base order: the stable sort."""
    return sorted(candidates, key=lambda c: c.sort_key)


def _ordered(last: Ordered | None, candidates: list[Candidate]) -> tuple[list[Candidate], Ordered | None]:
    given = list(candidates)
    found = in_order(last, given)
    return (given if found is None else found.units), found


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=2, max_value=400))
def test_a_chain_of_searches_orders_its_candidates_as_the_stable_sort(seed: int, spread: int) -> None:
    """Each search keeps some of the last one's candidates, drops some and adds new ones
    (in any order, keys sometimes equal); the order is always the stable sort's."""
    rng = random.Random(seed)
    pool = [_unit((rng.randrange(2), rng.randrange(spread), rng.randrange(spread))) for _ in range(60)]
    last: Ordered | None = None
    for _ in range(8):
        candidates = rng.sample(pool, rng.randrange(0, len(pool)))
        if candidates and rng.random() < 0.1:
            candidates.append(rng.choice(candidates))  # a unit given twice
        order, last = _ordered(last, candidates)
        assert order == _stable(candidates)
        if rng.random() < 0.2:
            replaced = rng.choice(pool)
            replaced.sort_key = (rng.randrange(2), rng.randrange(spread), rng.randrange(spread))


def test_new_units_are_placed_among_the_kept_ones_by_their_keys() -> None:
    a, b, c, d, e = (_unit((i,)) for i in (10, 20, 30, 40, 50))
    _, last = _ordered(None, [e, c, a])
    order, last = _ordered(last, [d, a, b, e])  # c gone, b and d new
    assert order == [a, b, d, e]
    assert last is not None and last.keys == [(10,), (20,), (40,), (50,)]


def test_a_new_unit_with_the_key_of_a_kept_one_keeps_the_order_the_candidates_came_in() -> None:
    """Equal keys: the stable sort keeps the candidates' own order, which the last
    search's order cannot know."""
    a, b, c = _unit((1,)), _unit((2,)), _unit((3,))
    _, last = _ordered(None, [c, b, a])
    twin = _unit((2,))
    assert _ordered(last, [twin, c, b, a])[0] == [a, twin, b, c]
    assert _ordered(last, [c, b, twin, a])[0] == [a, b, twin, c]


def test_a_kept_unit_given_twice_is_sorted_as_the_candidates_came() -> None:
    a, b, c = _unit((1,)), _unit((2,)), _unit((3,))
    _, last = _ordered(None, [a, b, c])
    new = _unit((0,))
    assert _ordered(last, [b, new, a, c])[0] == [new, a, b, c]  # three kept, one new
    assert _ordered(last, [b, new, a, b])[0] == [new, a, b, b]  # c gone, b twice


def test_a_unit_whose_key_changed_is_ordered_by_its_new_key() -> None:
    a, b, c = _unit((1,)), _unit((2,)), _unit((3,))
    _, last = _ordered(None, [a, b, c])
    a.sort_key = (4,)
    assert _ordered(last, [a, b, c])[0] == [b, c, a]


CLUSTERS = {
    "deep-2500-seed-3": (growth_spec("deep", 2_500), 3),
    "queues-1500-seed-2": (growth_spec("queues", 1_500), 2),
}


def _decide(snapshot: Snapshot, registry: Registry, actions: tuple[str, ...]) -> str:
    decisions = run_session(snapshot, registry, actions=actions)
    return decisions.to_json() + repr(sorted(registry.vetoes.items())) + repr(sorted(registry.failures.items()))


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_searches_ordered_from_the_last_one_decide_as_the_plain_sort_on_generated_clusters(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, seed = CLUSTERS[name]
    assert isinstance(spec, Size)
    objects = generate_spec(spec, f"ordering/{name}/{seed}")
    snapshot = Snapshot.build(parse_objects([("g.json", o) for o in objects]), now=NOW_MS)
    actions, registry = default_session()
    kept: list[int] = []
    merged = search._merged

    def counted(*args: object) -> object:
        found = merged(*args)  # type: ignore[arg-type]
        kept.append(found is not None)
        return found

    def without_runs(*args: object, **kwargs: object) -> tuple[list[Candidate], None]:
        return collect(*args, **kwargs)[0], None  # type: ignore[arg-type]

    # Candidates that come as runs are merged from them (test_merged_runs.py): here every
    # search takes the path of candidates without runs.
    collect = search.collect_runs
    monkeypatch.setattr(search, "collect_runs", without_runs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "_HINTED", 0)
        patch.setattr(search, "_merged", counted)
        fast = _decide(snapshot, registry(), actions)
    assert sum(kept) > 10  # the searches did take the last one's order
    monkeypatch.setattr(search, "_HINTED", 10**9)
    plain = _decide(snapshot, registry(), actions)
    assert fast == plain
