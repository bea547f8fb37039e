"""A re-check's pods placed with their room taken by the placements themselves
(``Placements.place_pods`` with ``taken``, recorded by ``Statement.took_rooms``), and the
node-match test left out where every node of the flavor matches (``NodePool.matches_all``):
the same nodes, the same room, the same stale nodes, index places and statement operations
as placing them through a statement's ``take_room`` (what ``Placements.defer`` does per node)
with every node judged by ``node_matches``."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, Taint, Toleration
from preemptd.framework.nodes import NodePool, Placements, gpu_amount, node_matches
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.session import Statement
from preemptd.framework.testing import queue

from tests.framework.test_place_pods_one_walk import (
    bound_pods_taken,
    pod_requests,
    tentative_changes,
)

GPU = "nvidia.com/gpu"
AMD = "amd.com/gpu"
MEM = "memory"
FLAVORS = {
    "a100": Flavor("a100", {"pool": "a100"}),
    "zone": Flavor("zone", {"zone": "z1"}),  # shares nodes with a100 and h100
    "h100": Flavor("h100", {"pool": "h100"}),
}
TAINT = Taint("dedicated", "batch", "NoSchedule")
SOFT = Taint("dedicated", "batch", "PreferNoSchedule")
TOLERATION = Toleration("dedicated", "Equal", "batch", "NoSchedule")


def _nodes(rng: random.Random, closed: float) -> dict[str, Node]:
    """Random nodes; a share ``closed`` of them tainted NoSchedule or unschedulable."""
    nodes = {}
    for i in range(rng.randint(1, 24)):
        name = f"n{i:02}"
        labels = {"pool": rng.choice(("a100", "h100"))}
        if rng.random() < 0.5:
            labels["zone"] = "z1"
        if rng.random() < 0.3:
            labels["rack"] = rng.choice(("r1", "r2"))
        allocatable = {
            rng.choice((GPU, AMD)): rng.choice((0, 1, 2, 4, 8)),
            "cpu": rng.choice((2_000, 8_000, 16_000)),
            MEM: rng.choice((2, 4, 16)),
        }
        taints: tuple[Taint, ...] = (SOFT,) if rng.random() < 0.2 else ()
        unschedulable = False
        if rng.random() < closed:
            if rng.random() < 0.5:
                taints += (TAINT,)
            else:
                unschedulable = True
        nodes[name] = Node(name, labels, allocatable, unschedulable, taints)
    return nodes


def _cluster(rng: random.Random) -> Placements:
    return Placements(bound_pods_taken(NodePool(_nodes(rng, rng.choice((0.0, 0.0, 0.1))), FLAVORS), rng))


def _statement(placements: Placements) -> Statement:
    return Statement(Accounting(QuotaTree({"q": queue("q", cpu=4)})), placements)


def _state(placements: Placements) -> tuple[object, ...]:
    """Everything a placement changes, dict orders included."""
    return (
        {name: list(room.items()) for name, room in placements.free.items()},
        list(placements._stale.items()),
        list(placements._moved.items()),
        list(placements.gpus.items()),
        {flavor: [(k, list(index.entries(k))) for k in index.keys] for flavor, index in placements._index.items()},
    )


def _plain_place_pods(
    placements: Placements,
    flavor: str,
    requests: Mapping[str, int],
    count: int,
    selector: Mapping[str, str],
    tolerations: tuple[Toleration, ...],
    statement: Statement,
) -> list[str]:
    """The placement through ``take_room`` with every node judged by ``node_matches``."""
    pool = placements.pool
    kept = pool.open
    pool.open = {}  # no flavor matched whole
    try:
        return placements.place_pods(flavor, requests, count, selector, tolerations, statement.take_room, additive=True)
    finally:
        pool.open = kept


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_room_taken_by_the_placements_is_what_take_room_takes(seed: int) -> None:
    """Twins with the same room, tentative changes (stale nodes above and below the best
    fit) and sometimes a sync; pod sets of random shapes, counts, selectors and tolerations
    placed in turn on each, one through ``take_room`` and every node judged, the other with
    ``taken``: the same nodes in the same order, the same room, stale nodes and free GPUs
    (in the same order), the same operations recorded, and after a commit or a rollback
    (and a sync) the same indexes, each that of a fresh index of the room."""
    rng = random.Random(seed)
    plain = _cluster(rng)
    tentative_changes(plain, rng)
    if rng.random() < 0.2:
        plain.sync()
    fast = plain.copy()
    plain_statement, fast_statement = _statement(plain), _statement(fast)
    for _ in range(rng.randint(1, 4)):
        flavor = rng.choice(sorted(FLAVORS))
        requests = pod_requests(rng)
        count = rng.randint(0, 40)
        selector = rng.choice(({}, {"zone": "z1"}, {"pool": "a100"}, {"rack": "r1"}, {"pool": "h100", "zone": "z1"}))
        tolerations = rng.choice(((), (TOLERATION,)))
        expected = _plain_place_pods(plain, flavor, requests, count, selector, tolerations, plain_statement)
        taken: list[tuple[str, Mapping[str, int]]] = []
        got = fast.place_pods(flavor, requests, count, selector, tolerations, taken=taken)
        fast_statement.took_rooms(taken)
        assert got == expected
        assert [node for node, _ in taken] == list(dict.fromkeys(got))
        assert _state(fast) == _state(plain)
        assert fast_statement.ops == plain_statement.ops
        assert fast_statement._nodes_touched == plain_statement._nodes_touched
    if rng.random() < 0.5:
        plain_statement.commit()
        fast_statement.commit()
    else:
        plain_statement.rollback()
        fast_statement.rollback()
    assert _state(fast) == _state(plain)
    plain.sync()  # the changes made before the statement, when it had none to commit
    fast.sync()
    assert _state(fast) == _state(plain)
    for flavor, index in fast._index.items():
        rooms = fast.free
        expected_index = sorted(
            (gpu_amount(rooms[name]), rooms[name].get("cpu", 0), name) for name in fast.pool.by_flavor[flavor]
        )
        assert expected_index == [(k, cpu, name) for k in index.keys for cpu, name in index.entries(k)]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_flavor_matched_whole_has_every_node_matching(seed: int) -> None:
    """Random nodes, some tainted or unschedulable, random selectors: where
    ``matches_all`` says yes, ``node_matches`` says yes of every node of the flavor, with
    or without tolerations; where every node of the flavor is open and carries the
    selector's labels as the flavor's, it says yes."""
    rng = random.Random(seed)
    pool = NodePool(_nodes(rng, rng.choice((0.0, 0.1, 0.5))), FLAVORS)
    for flavor, members in pool.by_flavor.items():
        for selector in ({}, {"zone": "z1"}, {"pool": "a100"}, {"pool": "h100"}, {"rack": "r1"}, {"zone": "z2"}):
            if pool.matches_all(flavor, selector):
                for name in members:
                    for tolerations in ((), (TOLERATION,)):
                        assert node_matches(pool.nodes[name], selector, tolerations)
            elif all(key in FLAVORS[flavor].node_labels for key in selector):
                # Asking only the flavor's labels: no, only when a node is closed or a label differs.
                assert any(
                    pool.nodes[name].unschedulable or TAINT in pool.nodes[name].taints for name in members
                ) or any(FLAVORS[flavor].node_labels[key] != value for key, value in selector.items())


def test_a_tainted_node_or_a_label_beyond_the_flavors_leaves_the_nodes_judged() -> None:
    """By hand: a flavor with one NoSchedule-tainted node is not matched whole (a pod
    without the toleration may not go there); a PreferNoSchedule taint does not close it;
    a selector asking a label the flavor does not set is judged node by node."""
    nodes = {
        "a": Node("a", {"pool": "a100"}, {"cpu": 8_000}),
        "b": Node("b", {"pool": "a100", "rack": "r1"}, {"cpu": 8_000}, taints=(SOFT,)),
        "c": Node("c", {"pool": "h100"}, {"cpu": 8_000}, taints=(TAINT,)),
        "d": Node("d", {"pool": "h100"}, {"cpu": 8_000}),
    }
    pool = NodePool(nodes, FLAVORS)
    assert pool.matches_all("a100", {})
    assert pool.matches_all("a100", {"pool": "a100"})
    assert not pool.matches_all("a100", {"pool": "h100"})
    assert not pool.matches_all("a100", {"rack": "r1"})  # "a" has no rack
    assert not pool.matches_all("h100", {})  # "c" is tainted
    assert not pool.matches_all("zone", {})  # no node of that flavor
    placements = Placements(pool)
    # The tainted node is the tightest fit; without the toleration the pod goes to "d",
    # then one with it to "c" (the same free cpu as "d" now, then the name).
    placements.take("c", {"cpu": 1_000})
    taken: list[tuple[str, Mapping[str, int]]] = []
    assert ["d"] == placements.place_pods("h100", {"cpu": 1_000}, 1, {"pool": "h100"}, (), taken=taken)
    assert ["c"] == placements.place_pods("h100", {"cpu": 1_000}, 1, {"pool": "h100"}, (TOLERATION,), taken=taken)
    assert [("d", {"cpu": 1_000}), ("c", {"cpu": 1_000})] == taken


def test_the_pods_a_node_holds_are_taken_as_one_change_recorded_once() -> None:
    """By hand: three nodes of 8 GPUs, "b" already short of 6 (stale: 2 GPUs left, its
    place in the index still that of 8). Of ten 2-GPU pods, one goes to "b" (the least free
    GPUs), four to "a", four to "c" (the same GPUs and cpu, then the name); the tenth finds
    no node. Each node's room is one summed change, recorded once and undone by a rollback."""
    nodes = {n: Node(n, {"pool": "a100"}, {GPU: 8, "cpu": 64_000}) for n in ("a", "b", "c")}
    placements = Placements(NodePool(nodes, FLAVORS))
    statement = _statement(placements)
    statement.take_room("b", {GPU: 6})  # stale: 2 GPUs left, the index still says 8
    before = {name: dict(room) for name, room in placements.free.items()}
    checkpoint = statement.checkpoint()
    taken: list[tuple[str, Mapping[str, int]]] = []
    chosen = placements.place_pods("a100", {GPU: 2}, 10, {}, (), taken=taken)
    statement.took_rooms(taken)
    assert ["b", "a", "a", "a", "a", "c", "c", "c", "c"] == chosen  # nine fit: 1 + 4 + 4
    assert [("b", {GPU: 2}), ("a", {GPU: 8}), ("c", {GPU: 8})] == taken
    assert [0, 0, 0] == [placements.free[n][GPU] for n in ("a", "b", "c")]
    assert {"a": (8, 64_000), "b": (8, 64_000), "c": (8, 64_000)} == placements._stale
    statement.rollback(checkpoint)
    assert before == placements.free
    assert {"b": (8, 64_000)} == placements._stale  # back to the take before the checkpoint
