"""``Session.pods_fit`` answers a repeated question on committed room without placing again.

The flavor scan and ``finish_assignment`` both ask whether a head's pods fit the nodes,
on the same committed room: the second answer is the kept one. Room is named by the
statement's node epoch, so a commit that changes room makes the next question placed
afresh, and a question asked while the statement holds uncommitted changes is never
answered from the kept entry.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from preemptd.framework import flavors
from preemptd.framework.flavors import _pods_fit_now
from preemptd.framework.model import PodSet
from preemptd.framework.nodes import Placements
from preemptd.framework.session import Registry, Session
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated


def _one_shape_in_two_queues(snap: Snapshot) -> tuple[str, PodSet, PodSet]:
    """The first pending head's flavor and pod set, and an equal pod set of a head of another
    queue as another object (the reader keeps equal pod sets as one record; one read apart,
    as the walker reads them, is not the same record)."""
    heads = [w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment]
    first = heads[0]
    flavor = snap.tree.leaves[first.queue].spec.resource_groups[0].flavors[0].flavor
    spec = first.pod_sets[0]
    other = next(w.pod_sets[0] for w in heads if w.queue != first.queue and w.pod_sets[0] == spec)
    return flavor, spec, dataclasses.replace(other)


def test_a_repeated_pods_fit_on_committed_room_is_answered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]))
    session.open()
    assert session.placements is not None
    head = next(w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment)
    leaf = snap.tree.leaves[head.queue]
    flavor = leaf.spec.resource_groups[0].flavors[0].flavor
    spec = head.pod_sets[0]
    targets = [(spec, spec.count, flavor)]
    placed: list[str] = []
    real = Placements.can_place

    def counting(self: Placements, *args: Any, **kwargs: Any) -> bool:
        placed.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Placements, "can_place", counting)
    first = session.pods_fit(targets)
    assert session.pods_fit(targets) == first
    assert len(placed) == 1
    # Uncommitted room: placed again, and nothing kept from it.
    node = next(iter(session.placements.free))
    session.statement.give_room(node, {"cpu": 1000})
    session.pods_fit(targets)
    assert len(placed) == 2
    # Committed: the node epoch moves, the next question is placed afresh.
    session.statement.commit()
    session.pods_fit(targets)
    session.pods_fit(targets)
    assert len(placed) == 3


def test_the_flavor_check_keeps_a_pods_fit_answer_per_pod_shape_across_queues_while_room_stands(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``flavors._pods_fit_now``: heads of two queues asking for pods of one shape (same
    count, requests, selector and tolerations) on one flavor are answered by one placement;
    another count is placed on its own; a commit that changes node room places afresh,
    and the answer follows the room (room given on every node: the pods fit)."""
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]))
    session.open()
    placements = session.placements
    assert placements is not None
    flavor, spec, other = _one_shape_in_two_queues(snap)
    placed: list[str] = []
    real = Placements.can_place

    def counting(self: Placements, *args: Any, **kwargs: Any) -> bool:
        placed.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Placements, "can_place", counting)
    real_witness = flavors.fit_witness  # one pod set's count, with the nodes it relied on

    def witness(*args: Any) -> Any:
        placed.append(args[1])
        return real_witness(*args)

    monkeypatch.setattr(flavors, "fit_witness", witness)
    full = _pods_fit_now(session, spec, 1, flavor)
    assert full is False  # a saturated cluster: every node is full
    assert _pods_fit_now(session, other, 1, flavor) is False  # another head's pod set, same shape
    assert len(placed) == 1
    assert _pods_fit_now(session, spec, 2, flavor) is False
    assert len(placed) == 2
    # Room for the pods on every node: committed, the node epoch moves.
    for node in list(placements.free):
        session.statement.give_room(node, dict(spec.requests))
    session.statement.commit()
    assert _pods_fit_now(session, other, 1, flavor) is True
    assert len(placed) == 3
    assert _pods_fit_now(session, spec, 1, flavor) is True
    assert len(placed) == 3
