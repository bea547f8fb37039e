"""Shortcuts of the victim walk that must answer as the step-by-step walk does
(framework/preemption/room.py, fillback.py, walk.py).

Node room (``FreedRoom._follow``): a room freed on a node is judged on the GPUs alone
first; when the node's GPUs with that room added stay short of the pods' GPUs, the node
took none before and takes none after, and the count is left alone. At the boundary
(the freed GPUs reach the pods' exactly), over an over-committed node (negative free
GPUs) and over two victims on one node, the answers must be ``fit_all``'s on placements
given the same room.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.preemption.room import FreedRoom
from preemptd.framework.session import NodeRoom

FLAVORS = {"a": Flavor("a", {"pool": "a"})}
GPU = "nvidia.com/gpu"
OTHER_GPU = "amd.com/gpu"


def _placements(taken_gpus: dict[str, int]) -> Placements:
    """Nodes of flavor ``a`` with 8 GPUs and 8 cores, ``taken_gpus`` of them and 6 cores
    taken by bound pods (more GPUs than the node has: over-committed)."""
    nodes = {name: Node(name, {"pool": "a"}, {GPU: 8, "cpu": 8000}) for name in taken_gpus}
    pool = NodePool(nodes, FLAVORS)
    for name, taken in taken_gpus.items():
        pool.consume(name, {GPU: taken, "cpu": 6000})
    return Placements(pool)


def _victim(*room: tuple[str, dict[str, int]]) -> Any:
    return SimpleNamespace(room=tuple(NodeRoom(node, requests) for node, requests in room))


def _fit_all(placements: Placements, targets: list[tuple[PodSet, int, str]], victims: list[Any]) -> bool:
    copy = placements.copy()
    for victim in victims:
        for held in victim.room:
            node, requests = held.node_name, held.requests
            copy.give_back_tentatively(node, requests)
    return copy.fit_all(FLAVORS, targets, copy.take_tentatively)


@pytest.mark.parametrize("launcher", [False, True], ids=["one pod set", "launcher and workers"])
@pytest.mark.parametrize(
    ("taken", "steps", "fits_after"),
    [
        # Two victims on n0 free 2 GPUs each: the first leaves it short (2 of 4), the
        # second reaches the pods' 4 GPUs exactly, with cpu freed by the first.
        (8, [{GPU: 2, "cpu": 1000}, {GPU: 2}], [False, True]),
        # One victim frees exactly the pods' 4 GPUs on n0, the first room freed there.
        (8, [{GPU: 4}], [True]),
        # One victim frees 4 GPUs of the other kind: the kinds summed reach the pods' 4,
        # so n0 is judged, and takes none (it has no nvidia GPU free).
        (8, [{OTHER_GPU: 4}], [False]),
        # n0 is over-committed by 2 GPUs: 4 freed leave it 2 GPUs, 2 more reach 4.
        (10, [{GPU: 4}, {"cpu": 2000}, {GPU: 2}], [False, False, True]),
        # Three GPUs freed: one short of the pods' 4, at the boundary.
        (8, [{GPU: 1}, {GPU: 1}, {GPU: 1, "cpu": 2000}], [False, False, False]),
    ],
)
def test_room_freed_on_a_node_short_of_the_pods_gpus_counts_as_the_placements(
    launcher: bool, taken: int, steps: list[dict[str, int]], fits_after: list[bool]
) -> None:
    """One pod of 4 GPUs and 2 cores; n0 has ``8 - taken`` GPUs and 2 cores free, n1 none
    of its GPUs free. Each step frees room on n0 (and cpu on n1): the walk's room answers
    as the placements given the same room, which the expected answers restate."""
    placements = _placements({"n0": taken, "n1": 8})
    targets = [(PodSet("main", 1, {GPU: 4, "cpu": 2000}), 1, "a")]
    if launcher:
        targets.insert(0, (PodSet("launcher", 1, {"cpu": 1000}), 1, "a"))
    freed = FreedRoom(SimpleNamespace(placements=placements, snapshot=SimpleNamespace(flavors=FLAVORS), state={}), targets)  # type: ignore[arg-type]
    given: list[Any] = []
    answers = []
    for requests in steps:
        victim = _victim(("n0", requests), ("n1", {"cpu": 1000}))
        freed.give([victim])
        given.append(victim)
        answers.append(freed.fits())
        assert answers[-1] == _fit_all(placements, targets, given)
    assert answers == fits_after
