"""A statement's node room changes and the index moves at commit (``Statement`` and
``Placements.defer`` / ``sync``): a room change is one call into the placements, and after
every commit or
rollback to the last commit each flavor's index is the one a fresh index of the room would
be (free GPUs of every kind together, then free cpu, then name: SEMANTICS §6), as when the
same changes move the index at once (``Placements.take`` / ``give_back``)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from types import FrameType

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements, gpu_amount
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.session import NodeRoom, Statement
from preemptd.framework.testing import queue

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"
FLAVORS = {
    "a100": Flavor("a100", {"pool": "a100"}),
    "zone": Flavor("zone", {"zone": "z1"}),  # shares nodes with a100
    "h100": Flavor("h100", {"pool": "h100"}),
}


def _placements(rng: random.Random | None = None, count: int = 6) -> Placements:
    nodes = {}
    for i in range(count):
        labels = {"pool": rng.choice(("a100", "a100", "h100", "other")) if rng is not None else "a100"}
        if rng is not None and rng.random() < 0.5:
            labels["zone"] = "z1"
        gpus = rng.choice((0, 4, 8)) if rng is not None else 8
        cpu = rng.choice((8_000, 16_000, 64_000)) if rng is not None else 64_000
        nodes[f"n{i}"] = Node(f"n{i}", labels, {GPU: gpus, AMD: 0, "cpu": cpu})
    return Placements(NodePool(nodes, FLAVORS))


def _statement(placements: Placements) -> Statement:
    return Statement(Accounting(QuotaTree({"q": queue("q", cpu=4)})), placements)


def _calls_into_nodes(action: Callable[[], object]) -> list[str]:
    """The Python functions of ``framework/nodes`` called while ``action`` runs."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and "/framework/nodes/" in frame.f_code.co_filename:
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return called


def _fresh(placements: Placements) -> dict[str, list[tuple[int, int, str]]]:
    """Per flavor, its nodes as a fresh index of the room orders them."""
    free = placements.free
    return {
        flavor: sorted((gpu_amount(free[name]), free[name].get("cpu", 0), name) for name in members)
        for flavor, members in placements.pool.by_flavor.items()
    }


def _indexed(placements: Placements) -> dict[str, list[tuple[int, int, str]]]:
    return {
        flavor: [(k, cpu, name) for k in index.keys for cpu, name in index.entries(k)]
        for flavor, index in placements._index.items()
    }


def test_a_statements_room_change_is_one_call_into_the_placements() -> None:
    """Taking or giving a node's room tentatively, and undoing it, reaches the placements
    with one call each (the room change itself), not through a wrapper per sign."""
    statement = _statement(_placements())
    assert _calls_into_nodes(lambda: statement.take_room("n1", {GPU: 2, "cpu": 1_000})) == ["defer"]
    assert _calls_into_nodes(lambda: statement.give_room("n2", {"cpu": 500})) == ["defer"]
    assert _calls_into_nodes(lambda: statement.give_rooms((NodeRoom("n3", {"cpu": 1}), NodeRoom("n4", {"cpu": 2})))) == [
        "defer",
        "defer",
    ]
    mark = statement.checkpoint()
    statement.take_room("n5", {"cpu": 7})
    assert _calls_into_nodes(lambda: statement.rollback(mark)) == ["defer"]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_the_index_after_each_commit_is_a_fresh_index_of_the_room(seed: int) -> None:
    """Random nodes (some in two flavors, some in none), random room taken and given through
    a statement (beyond the node's room too, back to where it was, several times on one
    node), nested checkpoints rolled back, holds released and commits: after each commit
    and each return to the last commit, every index is a fresh index of the room, and the
    same as a twin's whose index moves at once with every change."""
    rng = random.Random(seed)
    count, nodes_seed = rng.randint(1, 12), rng.randrange(10**9)
    placements = _placements(random.Random(nodes_seed), count)
    twin = _placements(random.Random(nodes_seed), count)
    statement = _statement(placements)
    names = sorted(placements.free)
    done: list[tuple[str, dict[str, int], int]] = []  # changes since the last commit
    marks: list[int] = []
    for _ in range(rng.randint(1, 40)):
        step = rng.randrange(8)
        node = rng.choice(names)
        change = {GPU: rng.choice((0, 1, 2)), AMD: rng.choice((0, 0, 1)), "cpu": rng.choice((0, 1, 500, 4_000))}
        if step <= 2:
            statement.take_room(node, change)
            done.append((node, change, -1))
        elif step == 3:
            statement.give_room(node, change)
            done.append((node, change, 1))
        elif step == 4:
            marks.append(len(done))
            statement.hold() if rng.random() < 0.3 else statement.checkpoint()
        elif step == 5 and marks:
            mark = marks.pop()
            (statement.release if rng.random() < 0.5 else statement.rollback)(mark)
            del done[mark:]
        else:
            statement.commit()
            marks.clear()
            for node, change, sign in done:
                (twin.give_back if sign > 0 else twin.take)(node, change)
            done.clear()
            assert placements.free == twin.free
            assert _indexed(placements) == _fresh(placements) == _indexed(twin)
        if not statement.ops and done == []:
            assert not placements._stale
            assert _indexed(placements) == _fresh(placements)
