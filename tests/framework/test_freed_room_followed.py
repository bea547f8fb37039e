"""The one pod set a victim walk's room follows is judged only where it may land
(framework/preemption/room.py, ``FreedRoom``).

A node short of the followed pods' GPUs or cpu (their tally's first filters, on the node's
room plus what the walk freed there) takes none of them: the walk's room asks that on the
room itself and judges the node with the tally only when it passes. Most of what a walk
frees is cpu on nodes whose GPUs stay taken, so most of its room is never judged. The
answers must stay those of ``Placements.fit_all`` on placements given the same room, at
every step: victims freed, then taken back (fill-back) and given again (undo).
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements, PodTally
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

from tests.framework.test_freed_room import walk_and_fill_back

FLAVORS = {"a": Flavor("a", {"pool": "a"})}
GPU = "nvidia.com/gpu"
OTHER_GPU = "amd.com/gpu"


def _cluster(busy: int) -> Placements:
    """``busy`` nodes of flavor ``a`` with all 8 GPUs and 60 of 64 cores taken."""
    nodes = {f"n{i}": Node(f"n{i}", {"pool": "a"}, {GPU: 8, "cpu": 64_000, "memory": 512}) for i in range(busy)}
    pool = NodePool(nodes, FLAVORS)
    for name in nodes:
        pool.consume(name, {GPU: 8, "cpu": 60_000, "memory": 256})
    return Placements(pool)


def _victim(*room: tuple[str, dict[str, int]]) -> Any:
    return SimpleNamespace(room=tuple(NodeRoom(node, requests) for node, requests in room))


def _session(placements: Placements) -> Any:
    return SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={})


def _judged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes every tally judges from now on, in order: those it counts pods on, past
    its first filter (``PodTally.short``)."""
    judged: list[str] = []
    takes = PodTally.takes_past_short

    def counting(self: PodTally, name: str, free: Any, extra: Any) -> int:
        judged.append(name)
        return takes(self, name, free, extra)

    monkeypatch.setattr(PodTally, "takes_past_short", counting)
    return judged


@pytest.mark.parametrize("launcher", [False, True], ids=["one pod set", "launcher and workers"])
def test_cpu_freed_on_nodes_whose_gpus_stay_taken_is_not_judged(
    monkeypatch: pytest.MonkeyPatch, launcher: bool
) -> None:
    """One pod of 8 GPUs and 16 cores (with or without a 2-core launcher, which fits from
    the start) on 20 nodes with 4 cores and no GPU free. Forty victims free 2 cores each,
    two per node: no node reaches 8 GPUs, and none is judged. A victim frees n7's 8 GPUs:
    n7 has 8 cores, short of 16, and is not judged either. A last victim frees 8 more cores
    there: n7 passes both filters, is judged once, and takes the pod."""
    placements = _cluster(20)
    main = PodSet("main", 1, {GPU: 8, "cpu": 16_000, "memory": 64})
    targets = [(main, 1, "a")]
    if launcher:
        targets.insert(0, (PodSet("launcher", 1, {"cpu": 2000, "memory": 8}), 1, "a"))
    freed = FreedRoom(_session(placements), targets)
    freed.give([])  # starts the count on the walk's starting room
    judged = _judged(monkeypatch)
    freed.give([_victim((f"n{i % 20}", {"cpu": 2000, "memory": 4})) for i in range(40)])
    assert judged == []
    assert not freed.fits()
    freed.give([_victim(("n7", {GPU: 8}))])
    assert judged == []
    assert not freed.fits()
    freed.give([_victim(("n7", {"cpu": 8000}))])
    assert judged == ["n7"]
    assert freed.fits()


def test_a_node_of_another_gpu_kind_reaches_the_pods_gpus_with_both_kinds_summed() -> None:
    """A node's GPUs are every kind summed (the tally's filter): n0 has 4 nvidia GPUs
    free; a victim frees 4 amd GPUs there, and a pod of 4 of each kind fits on n0."""
    nodes = {"n0": Node("n0", {"pool": "a"}, {GPU: 4, OTHER_GPU: 4, "cpu": 32_000})}
    pool = NodePool(nodes, FLAVORS)
    pool.consume("n0", {OTHER_GPU: 4})
    freed = FreedRoom(_session(Placements(pool)), [(PodSet("main", 1, {GPU: 4, OTHER_GPU: 4}), 1, "a")])
    freed.give([_victim(("n0", {"cpu": 1000}))])
    assert not freed.fits()
    freed.give([_victim(("n0", {OTHER_GPU: 4}))])
    assert freed.fits()


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_walk_mostly_freeing_cpu_answers_as_the_placements_given_the_same_room(seed: int) -> None:
    """Random busy nodes (some GPUs free, some over-committed on cpu), GPU pods of one or two
    pod sets; victims free mostly cpu, sometimes GPUs of either kind; fill-back takes them
    back and undoes at random. Every answer is ``fit_all``'s on the same room."""
    rng = random.Random(seed)
    nodes = {}
    for i in range(rng.randrange(1, 9)):
        labels = {"pool": "a"} if rng.random() < 0.9 else {}
        nodes[f"n{i}"] = Node(f"n{i}", labels, {GPU: 8, OTHER_GPU: rng.choice((0, 4)), "cpu": 64_000, "memory": 64})
    pool = NodePool(nodes, FLAVORS)
    for name in nodes:
        pool.consume(name, {GPU: rng.randrange(4, 9), "cpu": rng.randrange(40_000, 72_000, 4000), "memory": 32})
    placements = Placements(pool)
    names = sorted(nodes)
    gpus = rng.choice((0, 1, 4, 8))
    targets = [(PodSet("main", 1, {GPU: gpus, "cpu": rng.choice((4000, 16_000)), "memory": 8}), rng.choice((1, 2)), "a")]
    if rng.random() < 0.5:
        targets.insert(0, (PodSet("launcher", 1, {"cpu": 2000, "memory": rng.choice((1, 40))}), 1, "a"))
    if not placements.has_nodes("a"):
        return

    def room() -> dict[str, int]:
        if rng.random() < 0.8:
            return {"cpu": rng.randrange(1000, 9000, 1000), "memory": rng.randrange(0, 9)}
        return {rng.choice((GPU, OTHER_GPU)): rng.choice((1, 2, 4)), "cpu": rng.randrange(0, 9000, 1000)}

    victims = [_victim(*((rng.choice([*names, "gone"]), room()) for _ in range(rng.randrange(1, 4)))) for _ in range(30)]
    freed = FreedRoom(_session(placements), targets)
    given_room = placements.copy()
    walk_and_fill_back(rng, freed, given_room, victims, targets, batch=5, stop=1.0, keep=0.7)
