"""``finish_assignment`` asks whether several pod sets fit together once per shape and room.

A head with several podSets on nodes is placed whole before its victims are searched
(``flavors._targets_fit_now``): the answer reads the committed room and the shapes of its
pod sets in order (flavor, count, requests, node selector, tolerations), not the queue, so
heads of every queue asking for the same shapes are answered by one placement while the
node epoch stands. Another count or another order is placed on its own, a commit that
changes room places afresh, uncommitted room is never kept, and one target is the question
the flavor scan asked of its podSet (``flavors._pods_fit_now``).
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework import finish_assignment, flavors
from preemptd.framework.flavors import _pods_fit_now, _targets_fit_now
from preemptd.framework.model import Workload
from preemptd.framework.nodes import Placements
from preemptd.framework.session import FIT, Assignment, PodSetAssignment, Registry, Session
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated
from tests.framework.test_pods_fit_kept import _one_shape_in_two_queues


def _session() -> Session:
    session = Session(snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS), Registry([]))
    session.open()
    return session


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    placed: list[int] = []
    real = Placements.fit_all

    def counting(self: Placements, *args: Any, **kwargs: Any) -> bool:
        placed.append(len(args[1]))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Placements, "fit_all", counting)
    real_witness = flavors.fit_witness  # one target's count, keeping its nodes

    def witness(*args: Any) -> Any:
        placed.append(1)
        return real_witness(*args)

    monkeypatch.setattr(flavors, "fit_witness", witness)
    return placed


def test_several_pod_sets_of_one_shape_are_placed_once_per_node_epoch_across_queues(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = _session()
    snap = session.snapshot
    placements = session.placements
    assert placements is not None
    flavor, spec, other = _one_shape_in_two_queues(snap)
    placed = _counting(monkeypatch)
    # A saturated cluster: every node is full, neither pod set fits.
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 2, flavor)]) is False
    assert _targets_fit_now(session, [(other, 1, flavor), (other, 2, flavor)]) is False
    assert placed == [2]
    # Another count, another order: placed on their own.
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 3, flavor)]) is False
    assert _targets_fit_now(session, [(spec, 2, flavor), (spec, 1, flavor)]) is False
    assert placed == [2, 2, 2]
    # Room for three pods on every node, not yet committed: placed, and not kept.
    for node in list(placements.free):
        session.statement.give_room(node, {r: 3 * a for r, a in spec.requests.items()})
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 2, flavor)]) is True
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 2, flavor)]) is True
    assert placed == [2, 2, 2, 2, 2]
    # Committed: the node epoch moves, the question is placed afresh once, and the answer
    # follows the room.
    session.statement.commit()
    assert _targets_fit_now(session, [(other, 1, flavor), (other, 2, flavor)]) is True
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 2, flavor)]) is True
    assert placed == [2, 2, 2, 2, 2, 2]


def test_one_target_is_the_flavor_scans_question_of_its_pod_set(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session()
    snap = session.snapshot
    head = next(w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment)
    flavor = snap.tree.leaves[head.queue].spec.resource_groups[0].flavors[0].flavor
    spec = head.pod_sets[0]
    placed = _counting(monkeypatch)
    assert _pods_fit_now(session, spec, 1, flavor) is False
    assert _targets_fit_now(session, [(spec, 1, flavor)]) is False
    assert placed == [1]
    # Two targets of that one shape are another question.
    assert _targets_fit_now(session, [(spec, 1, flavor), (spec, 1, flavor)]) is False
    assert placed == [1, 2]


def test_without_the_memo_every_question_is_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]), memo=False)
    session.open()
    head = next(w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment)
    flavor = snap.tree.leaves[head.queue].spec.resource_groups[0].flavors[0].flavor
    spec = head.pod_sets[0]
    placed = _counting(monkeypatch)
    targets = [(spec, 1, flavor), (spec, 2, flavor)]
    assert _targets_fit_now(session, targets) is False
    assert _targets_fit_now(session, list(targets)) is False
    assert len(placed) == 1  # Session.pods_fit's own last answer: the same pod sets
    other = next(w.pod_sets[0] for items in snap.pending_by_queue.values() for w in items if w.pod_sets[0] is not spec)
    assert _targets_fit_now(session, [(other, 1, flavor), (other, 2, flavor)]) is False
    assert _targets_fit_now(session, targets) is False
    assert len(placed) == 3


def _whole(session: Session, workload: Workload) -> tuple[object, ...]:
    """``workload``'s first podSet asked twice over (two podSets of its shape) on its queue's
    first flavor, as the flavor scan hands a two-podSet assignment to ``finish_assignment``."""
    leaf = session.snapshot.tree.leaves[workload.queue]
    flavor = leaf.spec.resource_groups[0].flavors[0].flavor
    spec = workload.pod_sets[0]
    assignment = Assignment(workload, leaf)
    for name in ("a", "b"):
        flavors = {resource: flavor for resource in spec.requests}
        usage = {(flavor, resource): amount * spec.count for resource, amount in spec.requests.items()}
        assignment.pod_sets.append(PodSetAssignment(name, spec.count, flavors, usage, spec))
    assignment.mode = FIT  # until measured
    done = finish_assignment(session, assignment)
    return (done.mode, done.level, done.node_short, done.message, [v.name for v in done.victims], done.tried)


def test_finish_assignment_places_the_pod_sets_of_one_shape_once_for_heads_of_two_queues(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two heads of two queues with pod sets of one shape: their whole requests are placed
    once, and each assignment is the plain path's (which places both)."""
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    heads = [w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment]
    first = heads[0]
    second = next(
        w
        for w in heads
        if w.queue != first.queue
        and w.pod_sets[0] == first.pod_sets[0]
        and snap.tree.leaves[w.queue].spec.resource_groups[0].flavors[0].flavor
        == snap.tree.leaves[first.queue].spec.resource_groups[0].flavors[0].flavor
    )
    plain = Session(snap, Registry([]), memo=False)
    plain.open()
    expected = [_whole(plain, first), _whole(plain, second)]
    fast = _session()
    placed = _counting(monkeypatch)
    assert [_whole(fast, first), _whole(fast, second)] == expected
    assert expected[0][2] is True  # the nodes are short: the case under test
    assert placed == [2]
