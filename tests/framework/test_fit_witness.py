"""A kept "these pods fit" answer holds across commits that leave its nodes their room.

``flavors._pods_fit_now`` keeps, with a one-podSet "fits", the nodes the count relied on
(``nodes/witness.py``). A commit that moves the node epoch but takes no room from those
nodes is answered from them, without walking the flavor's nodes again; one that takes room
from one of them asks again; a "does not fit" is kept per node epoch only. On random rooms,
pod shapes and room changes the kept answer is the plain ``Placements.can_place``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import flavors
from preemptd.framework.flavors import _pods_fit_now
from preemptd.framework.model import PodSet
from preemptd.framework.nodes import Placements, pod_terms
from preemptd.framework.session import Registry, Session
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated

FLAVOR = "a100"  # the generated cluster's flavor with nodes (29 of them)
GPU = "nvidia.com/gpu"
_SNAP: list[Snapshot] = []


def _session() -> Session:
    if not _SNAP:
        _SNAP.append(snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS))
    session = Session(_SNAP[0], Registry([]))
    session.open()
    assert session.memo is not None and session.placements is not None
    assert session.placements.has_nodes(FLAVOR)
    return session


def _set_room(session: Session, node: str, room: dict[str, int]) -> None:
    """Move ``node``'s room to ``room`` through the statement (uncommitted)."""
    assert session.placements is not None
    free = session.placements.free[node]
    change = {r: a - free.get(r, 0) for r, a in room.items()}
    session.statement.give_room(node, change)


def _plain(session: Session, spec: PodSet, count: int) -> bool:
    """``can_place`` of the pods on the flavor's nodes, asked afresh."""
    assert session.placements is not None
    selector, tolerations = pod_terms(session.snapshot.flavors[FLAVOR], spec)
    return session.placements.can_place(FLAVOR, spec.requests, count, selector, tolerations)


def _count_walks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every walk of a flavor's nodes for a fit answer: ``fit_all`` and the witness walk."""
    walks: list[str] = []
    real_fit_all = Placements.fit_all

    def fit_all(self: Placements, *args: Any) -> bool:
        walks.append("fit_all")
        return real_fit_all(self, *args)

    monkeypatch.setattr(Placements, "fit_all", fit_all)
    real_witness = getattr(flavors, "fit_witness", None)
    if real_witness is not None:

        def fit_witness(*args: Any) -> Any:
            walks.append("fit_witness")
            return real_witness(*args)

        monkeypatch.setattr(flavors, "fit_witness", fit_witness)
    return walks


def test_a_fits_answer_is_kept_across_a_commit_that_takes_room_on_other_nodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = _session()
    placements = session.placements
    assert placements is not None
    nodes = sorted(placements.pool.by_flavor[FLAVOR])
    # Every node full but two: one with room for 8 pods, one with room for 2.
    for node in nodes:
        _set_room(session, node, {"cpu": 0, GPU: 0, "memory": 0})
    roomy, small = nodes[3], nodes[7]
    _set_room(session, roomy, {"cpu": 8000, GPU: 0, "memory": 8 << 30})
    _set_room(session, small, {"cpu": 2000, GPU: 0, "memory": 2 << 30})
    session.statement.commit()
    spec = PodSet("main", 4, {"cpu": 1000, "memory": 1 << 30})
    walks = _count_walks(monkeypatch)
    assert _pods_fit_now(session, spec, 4, FLAVOR) is True
    assert len(walks) == 1
    # An admission takes the small node's room (best fit would choose it): the epoch moves,
    # the four pods still fit on the roomy node alone, counted first.
    epoch = session.statement.node_epoch
    session.statement.take_room(small, {"cpu": 2000, "memory": 2 << 30})
    session.statement.commit()
    assert session.statement.node_epoch == epoch + 1
    assert _pods_fit_now(session, spec, 4, FLAVOR) is True
    assert len(walks) == 1
    assert _plain(session, spec, 4) is True
    # Room taken on the roomy node: asked again; five cpus left still hold four pods.
    session.statement.take_room(roomy, {"cpu": 3000})
    session.statement.commit()
    assert _pods_fit_now(session, spec, 4, FLAVOR) is True
    assert len(walks) == 2
    # Now it holds three: no longer fits, and "no" is kept for the epoch only.
    session.statement.take_room(roomy, {"cpu": 2000})
    session.statement.commit()
    assert _pods_fit_now(session, spec, 4, FLAVOR) is False
    assert _pods_fit_now(session, spec, 4, FLAVOR) is False
    assert len(walks) == 3
    session.statement.give_room(nodes[0], {"cpu": 1000, "memory": 1 << 30})
    session.statement.commit()
    assert _pods_fit_now(session, spec, 4, FLAVOR) is True  # 3 + 1 pods
    assert len(walks) == 4


def test_zero_pods_fit_without_walking_and_zero_requests_fit_any_matching_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = _session()
    walks = _count_walks(monkeypatch)
    spec = PodSet("main", 3, {"cpu": 0})
    assert _pods_fit_now(session, spec, 0, FLAVOR) is True
    assert _pods_fit_now(session, spec, 3, FLAVOR) is _plain(session, spec, 3) is True
    session.statement.take_room(sorted(session.placements.free)[0], {"cpu": 64000})  # type: ignore[union-attr]
    session.statement.commit()
    assert _pods_fit_now(session, spec, 3, FLAVOR) is True
    assert walks.count("fit_all") == 0


_RESOURCES = ("cpu", "memory", GPU)
_AMOUNTS = {"cpu": 1000, "memory": 1 << 30, GPU: 1, "amd.com/gpu": 1}

_shapes = st.lists(
    st.tuples(
        st.fixed_dictionaries({r: st.integers(0, 2) for r in _RESOURCES}),
        st.integers(0, 8),
        st.sampled_from([None, "node-a100-00003", "node-a100-00011"]),
    ),
    min_size=1,
    max_size=4,
)
_room = st.fixed_dictionaries({r: st.integers(-1, 5) for r in _RESOURCES})
_changes = st.lists(
    st.tuples(st.integers(0, 5), st.sampled_from((*_RESOURCES, "amd.com/gpu")), st.integers(-3, 2), st.booleans()),
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_room, min_size=5, max_size=5), _shapes, _changes)
def test_kept_fit_answers_equal_the_plain_count_on_random_rooms_and_changes(
    rooms: list[dict[str, int]],
    shapes: list[tuple[dict[str, int], int, str | None]],
    changes: list[tuple[int, str, int, bool]],
) -> None:
    """Random rooms (negative ones too) on five of the flavor's nodes, the others full,
    random pod shapes (zero requests, zero pods, pinned to one node by its hostname) and
    room changes on those five and one full node (taken or given, of another GPU kind too,
    some left uncommitted and rolled back): after every change each shape's kept answer is
    the plain count's."""
    session = _session()
    placements = session.placements
    assert placements is not None
    nodes = sorted(placements.pool.by_flavor[FLAVOR])
    assert len(nodes) == 29
    for node in nodes:
        _set_room(session, node, {r: 0 for r in _RESOURCES})
    changed = [nodes[3], nodes[11], nodes[0], nodes[20], nodes[28], nodes[5]]
    for node, room in zip(changed, rooms, strict=False):
        _set_room(session, node, {r: a * _AMOUNTS[r] for r, a in room.items()})
    session.statement.commit()
    specs = [
        (
            PodSet(
                "main",
                max(count, 1),
                {r: a * _AMOUNTS[r] for r, a in requests.items()},
                node_selector={"kubernetes.io/hostname": host} if host else {},
            ),
            count,
        )
        for requests, count, host in shapes
    ]

    def check() -> None:
        for spec, count in specs:
            assert _pods_fit_now(session, spec, count, FLAVOR) is _plain(session, spec, count)

    check()
    for index, resource, amount, keep in changes:
        session.statement.give_room(changed[index], {resource: amount * _AMOUNTS[resource]})
        if keep:
            session.statement.commit()
        else:
            check()  # uncommitted room: asked afresh
            session.statement.rollback()
        check()
