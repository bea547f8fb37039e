"""Best-fit placement: the one loop every caller places pods through."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements, gpu_amount
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.session import Statement


def placements(**free_cpu: int) -> Placements:
    """Nodes of one flavor ``f`` with the given free cpu (milli-cores)."""
    nodes = {name: Node(name, {"pool": "f"}, {"cpu": cpu}) for name, cpu in free_cpu.items()}
    return Placements(NodePool(nodes, {"f": Flavor("f", {"pool": "f"})}))


def test_place_pods_fills_the_tightest_node_first_and_takes_room_pod_by_pod() -> None:
    """Three 2-cpu pods on n1 (4 free) and n2 (2 free): n2 is the tighter fit, then n1
    twice; each pod's room is gone before the next is placed."""
    room = placements(n1=4000, n2=2000)
    assert ["n2", "n1", "n1"] == room.place_pods("f", {"cpu": 2000}, 3, {}, ())
    assert {"n1": {"cpu": 0}, "n2": {"cpu": 0}} == room.free


def test_place_pods_stops_at_the_first_pod_that_fits_nowhere() -> None:
    """Four 2-cpu pods where only three fit: three nodes come back, so the caller knows."""
    room = placements(n1=4000, n2=2000)
    assert 3 == len(room.place_pods("f", {"cpu": 2000}, 4, {}, ()))


def test_place_pods_takes_room_through_the_given_callable() -> None:
    """With ``take``, the caller (a statement, a simulated bind) takes each pod's room."""
    room = placements(n1=4000)
    taken: list[tuple[str, Mapping[str, int]]] = []

    def take(node: str, requests: Mapping[str, int]) -> None:
        taken.append((node, requests))
        room.take(node, requests)

    assert ["n1", "n1"] == room.place_pods("f", {"cpu": 1500}, 2, {}, (), take)
    assert [("n1", {"cpu": 1500}), ("n1", {"cpu": 1500})] == taken
    assert {"cpu": 1000} == room.free["n1"]


def _gpu_placements(rng: random.Random, count: int) -> Placements:
    """Nodes of flavor ``f`` with random free GPUs, cpu and memory; a few labelled ``zone: b``."""
    nodes = {
        f"n{i:02d}": Node(
            f"n{i:02d}",
            {"pool": "f", "zone": rng.choice("ab")},
            {"nvidia.com/gpu": rng.randrange(9), "cpu": rng.randrange(0, 8000, 500), "memory": rng.randrange(1, 9)},
        )
        for i in range(count)
    }
    return Placements(NodePool(nodes, {"f": Flavor("f", {"pool": "f"})}))


def _fresh(room: Placements) -> Placements:
    """Placements over the same nodes whose index is built from ``room``'s free room as it is now."""
    fresh = Placements(room.pool)
    fresh.free = {name: dict(free) for name, free in room.free.items()}
    for index in fresh._index.values():
        index.buckets.clear()
        index.keys.clear()
    for flavor, members in room.pool.by_flavor.items():
        for name in members:
            free = fresh.free[name]
            fresh._index[flavor].insert(gpu_amount(free), free.get("cpu", 0), name)
    return fresh


@pytest.mark.parametrize("seed", range(25))
def test_tentative_room_changes_answer_as_a_fresh_index_and_sync_moves_the_nodes(seed: int) -> None:
    """Room taken and given back tentatively leaves the sorted index alone, yet best fit
    and ``can_place`` answer exactly as an index built from the room as it is now; after
    ``sync`` the index is that fresh index."""
    rng = random.Random(seed)
    room = _gpu_placements(rng, 30)
    before = {k: list(v) for k, v in room._index["f"].buckets.items()}
    for _ in range(rng.randrange(1, 40)):
        node = f"n{rng.randrange(30):02d}"
        requests = {"nvidia.com/gpu": rng.randrange(3), "cpu": rng.randrange(0, 3000, 500)}
        if rng.random() < 0.5:
            room.take_tentatively(node, requests)
        else:
            room.give_back_tentatively(node, requests)
    assert before == room._index["f"].buckets, "tentative changes do not move nodes in the index"
    fresh = _fresh(room)
    for _ in range(30):
        requests = {"nvidia.com/gpu": rng.randrange(5), "cpu": rng.randrange(0, 6000, 500), "memory": rng.randrange(3)}
        selector = {"zone": "b"} if rng.random() < 0.3 else {}
        count = rng.randrange(1, 12)
        assert room.best_fit("f", requests, selector, ()) == fresh.best_fit("f", requests, selector, ())
        assert room.can_place("f", requests, count, selector, ()) == fresh.can_place(
            "f", requests, count, selector, ()
        )
    room.sync()
    assert room._index["f"].buckets == fresh._index["f"].buckets
    assert room._index["f"].keys == fresh._index["f"].keys


@pytest.mark.parametrize("seed", range(25))
def test_a_stale_node_is_judged_on_its_room_now_whatever_mix_of_changes_moved_it(seed: int) -> None:
    """Tentative and immediate changes, of either GPU kind, mixed on the same nodes: every
    stale node is judged by its (gpus, cpu) as they are now, a node back at its indexed
    place is not stale, and ``sync`` leaves the index of the room as it is."""
    rng = random.Random(seed)
    room = _gpu_placements(rng, 12)
    for _ in range(rng.randrange(1, 60)):
        node = f"n{rng.randrange(12):02d}"
        gpu = rng.choice(("nvidia.com/gpu", "amd.com/gpu"))
        requests = {gpu: rng.randrange(3), "cpu": rng.randrange(0, 3000, 500), "memory": rng.randrange(2)}
        change = rng.choice((room.take_tentatively, room.give_back_tentatively, room.take, room.give_back))
        change(node, requests)
        for name, now in room._moved.items():
            free = room.free[name]
            assert now == (gpu_amount(free), free.get("cpu", 0))
            assert now != room._stale[name]
        assert room._moved.keys() == room._stale.keys()
    fresh = _fresh(room)
    room.sync()
    assert room._index["f"].buckets == fresh._index["f"].buckets
    assert room._index["f"].keys == fresh._index["f"].keys


def test_a_statement_moves_nodes_in_the_index_on_commit_not_per_operation() -> None:
    """A victim search's evictions change free room only; the commit (or a rollback back
    to the last commit) brings the sorted index up to date."""
    room = placements(n1=4000, n2=2000)
    statement = Statement(Accounting(QuotaTree({})), room)
    buckets = {k: list(v) for k, v in room._index["f"].buckets.items()}
    statement.give_room("n2", {"cpu": 3000})
    assert room._index["f"].buckets == buckets
    assert room.best_fit("f", {"cpu": 4500}, {}, ()) == "n2"  # judged on its actual room
    statement.rollback()
    assert room._index["f"].buckets == buckets
    assert room.best_fit("f", {"cpu": 3000}, {}, ()) == "n1"
    statement.give_room("n2", {"cpu": 3000})
    statement.commit()
    assert room._index["f"].keys == [0]
    assert room._index["f"].entries(0) == [(4000, "n1"), (5000, "n2")]
