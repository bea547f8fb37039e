"""A flavor index keeps each bucket's entries as one integer per node, ``cpu << shift |
rank`` (``nodes/pool.py``): the integers must order the nodes exactly as (free cpu, name)
pairs do, for any names (their string order, not their length or a number in them), any
number of nodes (the rank's bits end at a power of two) and any free cpu (negative for a
node whose bound pods exceed its allocatable, and far beyond a node's size). Each answer
of the placements is checked against a plain scan of the room (SEMANTICS §6: of the
nodes where a pod fits, the least free GPUs, then free cpu, then name)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements, gpu_amount
from preemptd.framework.nodes.pool import _FlavorIndex
from preemptd.framework.nodes.witness import fit_witness

GPU = "nvidia.com/gpu"
FLAVORS = {"f": Flavor("f", {"pool": "f"})}

_names = st.lists(st.text(alphabet="ab9Z-é0", min_size=1, max_size=5), min_size=1, max_size=70, unique=True)
_cpu = st.integers(min_value=-(10**12), max_value=10**12)


def _placements(names: list[str], rng: random.Random, spread: int) -> Placements:
    """Nodes of flavor ``f`` (and a few of none) named ``names``, given in shuffled order,
    with random GPUs and cpu; bound pods taking up to ``spread`` cpu, some beyond the
    node's allocatable."""
    shuffled = list(names)
    rng.shuffle(shuffled)
    nodes = {}
    for name in shuffled:
        labels = {"pool": "f"} if rng.random() < 0.9 else {}
        nodes[name] = Node(name, labels, {GPU: rng.choice((0, 1, 2, 8)), "cpu": rng.choice((0, 1_000, 64_000))})
    pool = NodePool(nodes, FLAVORS)
    for name in names:
        pool.consume(name, {"cpu": rng.randint(-spread, spread), GPU: rng.choice((0, 0, 1))})
    return Placements(pool)


def _plain(placements: Placements) -> list[tuple[int, int, str]]:
    """The flavor's nodes as a fresh index orders them: by (free GPUs, free cpu, name)."""
    free = placements.free
    members = placements.pool.by_flavor.get("f", [])
    return sorted((gpu_amount(free[name]), free[name].get("cpu", 0), name) for name in members)


def _indexed(placements: Placements) -> list[tuple[int, int, str]]:
    index = placements._index.get("f")
    if index is None:
        return []
    return [(k, cpu, name) for k in index.keys for cpu, name in index.entries(k)]


def _plain_best(placements: Placements, requests: dict[str, int]) -> str | None:
    fitting = [key for key in _plain(placements) if all(placements.free[key[2]].get(r, 0) >= a for r, a in requests.items())]
    return min(fitting)[2] if fitting else None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from((-1, 0, 3)), _cpu), min_size=1, max_size=70), st.randoms())
def test_integer_entries_order_nodes_as_cpu_and_name_pairs(rooms: list[tuple[int, int]], rng: random.Random) -> None:
    """Nodes of random names and room inserted in random order, then moved at random (within
    their bucket and across): every bucket lists them as sorted (cpu, name) pairs, and
    deleting one takes out that node's entry."""
    names = sorted(f"{rng.choice('abZ')}{rng.randrange(1000)}-{i}" for i in range(len(rooms)))
    index = _FlavorIndex(names)
    places = dict(zip(names, rooms, strict=True))
    for name in rng.sample(names, len(names)):
        index.insert(*places[name], name)
    for _ in range(20):
        name = rng.choice(names)
        gpus, cpu = places[name]
        new = (rng.choice((gpus, -1, 0, 3)), cpu + rng.choice((-(10**9), -1, 0, 1, 10**9)))
        index.move(gpus, cpu, *new, name)
        places[name] = new
    if rng.random() < 0.5:
        gone = rng.choice(names)
        index.delete(*places.pop(gone), gone)
    expected: dict[int, list[tuple[int, str]]] = {}
    for name, (gpus, cpu) in places.items():
        expected.setdefault(gpus, []).append((cpu, name))
    assert sorted(expected) == index.keys
    for gpus, pairs in expected.items():
        assert sorted(pairs) == index.entries(gpus)


@settings(max_examples=200, deadline=None)
@given(_names, st.integers(min_value=0, max_value=10**9), st.sampled_from((0, 2_000, 10**12)))
def test_placements_answer_as_a_plain_scan_for_any_names_and_room(names: list[str], seed: int, spread: int) -> None:
    """Nodes named by random strings (so name order is string order), 1 to 70 of them
    (ranks of one to seven bits), free cpu from far below zero to far above a node's: the
    index lists them as a plain sort does, best fit and ``place_pods`` choose what a plain
    scan chooses, ``can_place`` and the fit witness count as it does, and after tentative
    takes and a sync the index is again the plain sort."""
    rng = random.Random(seed)
    placements = _placements(names, rng, spread)
    assert _plain(placements) == _indexed(placements)
    for _ in range(6):
        requests = {GPU: rng.choice((0, 1, 2)), "cpu": rng.choice((0, 500, 60_000, 10**11))}
        assert _plain_best(placements, requests) == placements.best_fit("f", requests, {}, ())
        plain = [key for key in _plain(placements) if all(placements.free[key[2]].get(r, 0) >= a for r, a in requests.items())]
        count = rng.randint(1, 4)
        fits = placements.can_place("f", requests, count, {}, ())
        assert fits == (_held(placements, plain, requests, count) >= count)
        if not placements._stale:  # a witness is read on committed room only
            witness = fit_witness(placements, "f", FLAVORS["f"], PodSet("p", count, requests), count)
            assert (witness is not None) == fits
        chosen = placements.place_pods("f", requests, count, {}, (), placements.take_tentatively)
        for name in chosen:  # undone, then placed one by one on the plain scan
            placements.give_back_tentatively(name, requests)
        expected = []
        for _ in range(count):
            best = _plain_best(placements, requests)
            if best is None:
                break
            expected.append(best)
            placements.take_tentatively(best, requests)
        assert expected == chosen
        if rng.random() < 0.5:
            placements.sync()
            assert _plain(placements) == _indexed(placements)
    placements.sync()
    assert _plain(placements) == _indexed(placements)


def _held(placements: Placements, plain: list[tuple[int, int, str]], requests: dict[str, int], most: int) -> int:
    """The pods the fitting nodes hold together, each node by every positive request
    (``most`` when none is positive)."""
    wanted = [(r, a) for r, a in requests.items() if a > 0]
    total = 0
    for _, _, name in plain:
        room = placements.free[name]
        total += min((room.get(r, 0) // a for r, a in wanted), default=most)
    return total
