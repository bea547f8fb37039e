"""``_FlavorIndex.move`` (what ``Placements.sync`` moves a stale node with) leaves the index
as deleting the node's entry and inserting its new one does: within its bucket (replaced
where it is when the entries beside it still enclose it, or shifted either way), to another
bucket, out of a bucket it leaves empty."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.nodes.pool import _FlavorIndex


def _twins(rng: random.Random) -> tuple[_FlavorIndex, _FlavorIndex, dict[str, tuple[int, int]]]:
    count = rng.randint(1, 25)
    names = [f"n{i:02}" for i in range(count)]
    moved, plain = _FlavorIndex(names), _FlavorIndex(names)
    places: dict[str, tuple[int, int]] = {}
    for i in range(count):
        name = f"n{i:02}"
        places[name] = (rng.choice((-1, 0, 1, 2, 8)), rng.choice((-500, 0, 1_000, 2_000, 4_000)))
        moved.insert(*places[name], name)
        plain.insert(*places[name], name)
    return moved, plain, places


def test_a_node_that_keeps_its_place_is_replaced_where_it_is() -> None:
    """Three nodes of one bucket by cpu 1,000 / 2,000 / 3,000: the middle one going to 1,500
    or 2,500 keeps its place, to 500 or 3,500 it passes a neighbour; a node may also leave
    its bucket, which then goes."""
    index = _FlavorIndex(("a", "b", "c", "d"))
    for cpu, name in ((1_000, "a"), (2_000, "b"), (3_000, "c")):
        index.insert(8, cpu, name)
    index.move(8, 2_000, 8, 1_500, "b")
    assert [(1_000, "a"), (1_500, "b"), (3_000, "c")] == index.entries(8)
    index.move(8, 1_500, 8, 2_500, "b")
    assert [(1_000, "a"), (2_500, "b"), (3_000, "c")] == index.entries(8)
    index.move(8, 2_500, 8, 500, "b")
    assert [(500, "b"), (1_000, "a"), (3_000, "c")] == index.entries(8)
    index.move(8, 500, 8, 3_500, "b")
    assert [(1_000, "a"), (3_000, "c"), (3_500, "b")] == index.entries(8)
    index.insert(2, 0, "d")
    index.move(2, 0, 8, 3_000, "d")
    assert [8] == index.keys and [(1_000, "a"), (3_000, "c"), (3_000, "d"), (3_500, "b")] == index.entries(8)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_moving_a_node_equals_deleting_and_inserting_it(seed: int) -> None:
    """Random buckets (negative room too, ties on cpu broken by name), random moves of
    random nodes, small and far, within a bucket and across: the same keys and buckets."""
    rng = random.Random(seed)
    moved, plain, places = _twins(rng)
    for _ in range(rng.randint(1, 30)):
        name = rng.choice(sorted(places))
        gpus, cpu = places[name]
        new_gpus = gpus if rng.random() < 0.7 else rng.choice((-1, 0, 1, 2, 8))
        new_cpu = cpu + rng.choice((-2_000, -500, -1, 1, 500, 2_000))
        moved.move(gpus, cpu, new_gpus, new_cpu, name)
        plain.delete(gpus, cpu, name)
        plain.insert(new_gpus, new_cpu, name)
        places[name] = (new_gpus, new_cpu)
        assert moved.keys == plain.keys and moved.buckets == plain.buckets
