"""``Placements.place_pods`` walks the flavor's index once per call and judges each node
stale at the call's start once (``nodes/filling.py``), and still chooses for every pod the
node placing one pod at a time, best fit, chooses (SEMANTICS §6: of the nodes where the pod
fits, the least free GPUs of every kind together, then free cpu, then name), whatever
``take`` does with the room: tentatively (nodes stale until a sync), moving the node in the
index at once, summed per node or pod by pod."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, Taint, Toleration
from preemptd.framework.nodes import NodePool, Placements, gpu_amount, node_matches

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"
MEM = "memory"
FLAVORS = {"a100": Flavor("a100", {"pool": "a100"}), "h100": Flavor("h100", {"pool": "h100"})}
TAINT = Taint("dedicated", "batch", "NoSchedule")


class _CountedRoom(dict[str, dict[str, int]]):
    """A placements' room map that counts, per node, how often its room is read."""

    def __init__(self, rooms: Mapping[str, dict[str, int]]) -> None:
        super().__init__(rooms)
        self.reads: dict[str, int] = {}

    def __getitem__(self, name: str) -> dict[str, int]:
        self.reads[name] = self.reads.get(name, 0) + 1
        return super().__getitem__(name)


def _counted(placements: Placements) -> _CountedRoom:
    room = placements.free = _CountedRoom(placements.free)
    return room


def _memory_nodes(count: int, memory: int) -> Placements:
    nodes = {
        f"n{i}": Node(f"n{i}", {"pool": "a100"}, {GPU: 8, "cpu": 64_000, MEM: memory})
        for i in range(count)
    }
    return Placements(NodePool(nodes, FLAVORS))


def test_nodes_filled_earlier_in_the_call_are_not_judged_again() -> None:
    """Six nodes of 8 GPUs and memory for two pods: twelve cpu-and-memory pods go two to
    each node in name order (the same free GPUs and cpu, then the name). A node the call
    filled keeps free GPUs and cpu enough for another pod and a key below the next node's,
    yet it is not judged again for the later pods: each node's room is read at most twice
    (judged, then counted), 12 reads in all; judging every filled node again for each
    later pod reads 27."""
    placements = _memory_nodes(6, 2)
    reads = _counted(placements)
    chosen = placements.place_pods(
        "a100", {"cpu": 1_000, MEM: 1}, 12, {}, (), placements.take_tentatively, additive=True
    )
    read = dict(reads.reads)
    assert [f"n{i}" for i in range(6) for _ in range(2)] == chosen
    assert all(placements.free[f"n{i}"][MEM] == 0 for i in range(6))
    assert 12 == sum(read.values())
    assert max(read.values()) <= 2


def test_stale_nodes_that_do_not_fit_are_judged_once_per_call() -> None:
    """Five nodes left without memory by an earlier, uncommitted placement (stale: their
    place in the index is the old one) have the least keys; four pods then go one to each
    of four fresh nodes. Each stale node is judged once in the call, not once per pod."""
    placements = _memory_nodes(9, 1)
    for i in range(5):
        placements.take_tentatively(f"n{i}", {"cpu": 8_000, MEM: 1})
    reads = _counted(placements)
    chosen = placements.place_pods("a100", {"cpu": 1_000, MEM: 1}, 4, {}, (), placements.take_tentatively)
    assert [1, 1, 1, 1, 1] == [reads.reads.get(f"n{i}", 0) for i in range(5)]
    assert ["n5", "n6", "n7", "n8"] == chosen


def test_a_stale_node_that_fits_is_chosen_between_index_nodes_by_its_key() -> None:
    """A stale node with 3 GPUs left sits between index nodes of 2 and 8 free GPUs: 1-GPU
    pods fill the 2-GPU node, then the stale one, then the 8-GPU node, each in turn the
    least free GPUs that fit."""
    nodes = {n: Node(n, {"pool": "a100"}, {GPU: 8, "cpu": 64_000}) for n in ("a", "b", "c")}
    pool = NodePool(nodes, FLAVORS)
    pool.free["a"][GPU] = 2
    placements = Placements(pool)
    placements.take_tentatively("b", {GPU: 5})
    chosen = placements.place_pods("a100", {GPU: 1}, 7, {}, (), placements.take_tentatively)
    assert ["a", "a", "b", "b", "b", "c", "c"] == chosen
    assert [0, 0, 6] == [placements.free[n][GPU] for n in ("a", "b", "c")]


def _cluster(rng: random.Random) -> Placements:
    nodes = {}
    for i in range(rng.randint(1, 30)):
        name = f"n{i:02}"
        labels = {"pool": rng.choice(("a100", "h100")), "zone": rng.choice(("z1", "z2"))}
        allocatable = {
            rng.choice((GPU, AMD)): rng.choice((0, 1, 2, 4, 8)),
            "cpu": rng.choice((2_000, 8_000, 16_000)),
            MEM: rng.choice((2, 4, 16)),
        }
        taints = (TAINT,) if rng.random() < 0.15 else ()
        nodes[name] = Node(name, labels, allocatable, rng.random() < 0.05, taints)
    pool = NodePool(nodes, FLAVORS)
    return Placements(bound_pods_taken(pool, rng))


def bound_pods_taken(pool: NodePool, rng: random.Random) -> NodePool:
    """``pool`` with random room taken by bound pods: some nodes beyond their allocatable,
    a GPU kind short."""
    for free in pool.free.values():
        free["cpu"] -= rng.choice((0, 0, 1_000, 3_000, 20_000))
        kind = rng.choice((GPU, AMD))
        free[kind] = free.get(kind, 0) - rng.choice((0, 0, 0, 1, 2))
    return pool


def _one_by_one(
    rooms: dict[str, dict[str, int]],
    placements: Placements,
    flavor: str,
    requests: Mapping[str, int],
    count: int,
    selector: Mapping[str, str],
    tolerations: tuple[Toleration, ...],
) -> list[str]:
    """Each pod on the least (free GPUs, free cpu, name) of every node of the flavor where
    it fits (its free GPUs of every kind together and its free cpu reach the pod's, every
    requested resource, zero ones too, is there, the node matches), its room taken before
    the next pod: the plain placement, on plain room maps."""
    chosen: list[str] = []
    for _ in range(count):
        best: tuple[int, int, str] | None = None
        for name in placements.pool.by_flavor.get(flavor, ()):
            room = rooms[name]
            if gpu_amount(room) < gpu_amount(requests) or room.get("cpu", 0) < requests.get("cpu", 0):
                continue
            if any(room.get(r, 0) < a for r, a in requests.items()):
                continue
            if not node_matches(placements.pool.nodes[name], selector, tolerations):
                continue
            key = (gpu_amount(room), room.get("cpu", 0), name)
            if best is None or key < best:
                best = key
        if best is None:
            break
        room = rooms[best[2]]
        for resource, amount in requests.items():
            room[resource] = room.get(resource, 0) - amount
        chosen.append(best[2])
    return chosen


def tentative_changes(placements: Placements, rng: random.Random) -> None:
    """Up to eight random changes of room, taken (most) or given back, left tentative:
    stale nodes above and below where later pods fit best."""
    names = sorted(placements.free)
    for _ in range(rng.randint(0, 8)):
        change = {rng.choice((GPU, AMD)): rng.choice((0, 1, 2)), "cpu": rng.choice((0, 500, 4_000)), MEM: rng.choice((0, 1))}
        placements.defer(rng.choice(names), change, -1 if rng.random() < 0.6 else 1)


def pod_requests(rng: random.Random) -> dict[str, int]:
    """A random pod: a GPU kind (sometimes none of it), cpu and memory, zeros included."""
    return {
        rng.choice((GPU, AMD)): rng.choice((0, 0, 1, 2, 4)),
        "cpu": rng.choice((0, 500, 1_000, 4_000)),
        MEM: rng.choice((0, 1, 2)),
    }


def _take(placements: Placements, how: str) -> tuple[Callable[[str, Mapping[str, int]], None] | None, bool]:
    if how == "at once":
        return None, False  # Placements.take: the node moves in the index at once
    return placements.take_tentatively, how == "summed"


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_placing_pods_chooses_what_placing_them_one_by_one_chooses(seed: int) -> None:
    """Random nodes (over-committed, short of a GPU kind, tainted, unschedulable), room
    taken and given back tentatively before (stale nodes above and below the pods' best
    fit), a few pod sets of random shapes and counts placed in turn with each kind of
    ``take``: the same nodes, in the same order, and the same room as placing each pod on
    the best node of a plain scan; after a sync, the same index as a fresh one."""
    rng = random.Random(seed)
    placements = _cluster(rng)
    tentative_changes(placements, rng)
    if rng.random() < 0.2:
        placements.sync()
    rooms = {name: dict(room) for name, room in placements.free.items()}
    for _ in range(rng.randint(1, 4)):
        flavor = rng.choice(sorted(FLAVORS))
        requests = pod_requests(rng)
        count = rng.randint(0, 40)
        selector = rng.choice(({}, {"zone": "z1"}))
        tolerations = rng.choice(((), (Toleration("dedicated", "Equal", "batch", "NoSchedule"),)))
        take, additive = _take(placements, rng.choice(("at once", "one by one", "summed")))
        got = placements.place_pods(flavor, requests, count, selector, tolerations, take, additive=additive)
        assert got == _one_by_one(rooms, placements, flavor, requests, count, selector, tolerations)
        assert placements.free == rooms
        if rng.random() < 0.3:
            placements.sync()
    placements.sync()
    for flavor, index in placements._index.items():
        expected = sorted(
            (gpu_amount(rooms[name]), rooms[name].get("cpu", 0), name) for name in placements.pool.by_flavor[flavor]
        )
        assert expected == [(k, cpu, name) for k in index.keys for cpu, name in index.entries(k)]
