"""``evaluate_flavor`` answers on the state as it stands; whether pods fit the nodes is
kept per pod shape while node room stands.

Each question measures the usage and the quota checks afresh (a head asking the same of
a tree that did not move is judged by a kept head of its queue without a scan:
``preemption/heads.py``). Whether the pods of a shape fit the nodes is asked once per
committed node room, across heads and queues; a commit to node room makes it asked
again, a commit to the tree does not. A question asked while the statement holds
uncommitted changes is never answered from what was kept, and the plain path
(``memo=False``) keeps nothing. Every answer equals the one the same question gets on
the plain path in the same state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from preemptd.framework import evaluate_flavor, flavors
from preemptd.framework.model import Workload
from preemptd.framework.nodes import Placements
from preemptd.framework.session import FlavorOption, Registry, Session
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated


def _same_shape_heads(snap: Snapshot) -> tuple[Workload, Workload]:
    """Two pending workloads of one queue whose single podSet has the same count and requests;
    the second holds a record of its own (the reader keeps equal pod sets once, and a pod
    set's record is what the session's own node-fit answer is kept by)."""
    for items in sorted(snap.pending_by_queue.values(), key=lambda ws: ws[0].queue):
        seen: dict[tuple[object, ...], Workload] = {}
        for w in items:
            (spec,) = w.pod_sets
            shape = (spec.count, tuple(sorted(spec.requests.items())))
            if shape in seen:
                return seen[shape], dataclasses.replace(w, pod_sets=(dataclasses.replace(spec),))
            seen[shape] = w
    raise AssertionError("no two workloads of one queue share a shape")


def _evaluate(session: Session, workload: Workload) -> FlavorOption:
    leaf = session.snapshot.tree.leaves[workload.queue]
    group = leaf.spec.resource_groups[0]
    spec = workload.pod_sets[0]
    return evaluate_flavor(session, workload, leaf, spec, spec.count, group, group.flavors[0].flavor, {})


def _answer(option: FlavorOption) -> tuple[object, ...]:
    return (
        option.flavor,
        option.mode,
        option.level,
        option.usage,
        option.needed,
        option.node_short,
        option.message,
        [v.name for v in option.victims],
    )


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    placed: list[str] = []
    real: Callable[..., bool] = Placements.can_place

    def counting(self: Placements, *args: Any, **kwargs: Any) -> bool:
        placed.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Placements, "can_place", counting)
    real_witness: Callable[..., Any] = flavors.fit_witness  # a count keeping its nodes

    def witness(*args: Any) -> Any:
        placed.append(args[1])
        return real_witness(*args)

    monkeypatch.setattr(flavors, "fit_witness", witness)
    return placed


def _sessions() -> tuple[Session, Session, Workload, Workload]:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    fast = Session(snap, Registry([]))
    plain = Session(snap, Registry([]), memo=False)
    fast.open()
    plain.open()
    first, second = _same_shape_heads(snap)
    return fast, plain, first, second


def test_heads_of_one_shape_ask_the_nodes_once_while_node_room_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, first, second = _sessions()
    expected = [_answer(_evaluate(plain, w)) for w in (first, second, first)]
    placed = _counting(monkeypatch)
    got = [_answer(_evaluate(fast, w)) for w in (first, second, first)]
    assert got == expected
    assert len(placed) == 1
    assert fast.counters.flavors == 3  # every question is counted


def test_a_commit_to_the_tree_is_seen_by_the_next_head_and_one_to_the_nodes_asks_them_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast, plain, first, second = _sessions()
    leaf = fast.snapshot.tree.leaves[first.queue]
    usage = _evaluate(plain, first).usage
    placed = _counting(monkeypatch)
    before = _answer(_evaluate(fast, first))
    assert len(placed) == 1
    # Quota given back to the tree and committed: the second head sees it (the queue is
    # no longer at its nominal, so the level measured on current usage drops).
    for session in (fast, plain):
        session.statement.remove_usage(leaf, {fr: 2 * amount for fr, amount in usage.items()})
        session.statement.commit()
    after = _answer(_evaluate(fast, second))
    assert after == _answer(_evaluate(plain, second))
    assert after != before
    # Only the plain session places the pods: node room did not move, and whether pods of
    # this shape fit it is kept apart from the tree's checks (flavors._pods_fit_now).
    assert len(placed) == 2
    # Node room committed: checked afresh again, the pods placed again.
    assert fast.placements is not None and plain.placements is not None
    node = next(iter(fast.placements.free))
    for session in (fast, plain):
        session.statement.give_room(node, {"cpu": 1000})
        session.statement.commit()
    assert _answer(_evaluate(fast, first)) == _answer(_evaluate(plain, first))
    assert len(placed) == 4  # the fast session's question and the plain one's


def test_nothing_is_kept_from_uncommitted_changes_or_on_the_plain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, plain, first, second = _sessions()
    placed = _counting(monkeypatch)
    for w in (first, second, first):
        _evaluate(plain, w)
    assert len(placed) == 3
    node = next(iter(fast.placements.free)) if fast.placements is not None else ""
    fast.statement.give_room(node, {"cpu": 1000})
    for w in (first, second):
        _evaluate(fast, w)
    assert len(placed) == 5
    fast.statement.rollback()
    _evaluate(fast, first)
    _evaluate(fast, second)
    assert len(placed) == 6
