"""Queue positions numbered in the order the rounds already sorted each queue in.

``number_pending`` used to sort every queue's pending workloads by the session's key again
after the rounds had sorted them the same way; the rounds now hand their order over
(``allocate.QUEUE_ORDER``) and the positions are read off it. These tests hold the handed
order to the sorted one, and the positions numbered from it to the positions numbered by
sorting, on generated clusters and on one with LocalQueues, a StrictFIFO queue and an
elastic workload growing back (which is in its queue's rounds but never pending).
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.actions.allocate import QUEUE_ORDER, run_rounds
from preemptd.framework.decisions import Decisions, QueuePosition, number_pending
from preemptd.framework.objects import parse_objects
from preemptd.framework.session import Session
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated, generate_shape

GROUP = "preemptd.io/v1alpha1"


def _queue(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    groups = [
        {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}
    ]
    return {"apiVersion": GROUP, "kind": "Queue", "metadata": {"name": name}, "spec": {"resourceGroups": groups, **spec}}


def _workload(
    namespace: str, name: str, queue: str, cpu: str, minute: int, priority: int = 0, **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": GROUP,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z"},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}]},
        **({"status": status} if status else {}),
    }


def _local_queues() -> list[dict[str, Any]]:
    """Queue ``a`` (3 cores) behind LocalQueues ``ml/train`` and ``web/train``; StrictFIFO
    queue ``s`` (1 core) whose head does not fit; queue ``e`` with an elastic workload
    admitted at 1 of 3 pods (it grows back in the rounds) and two pending ones."""
    elastic = _workload("ml", "grow", "e", "1", 1)
    elastic["spec"]["podSets"] = [{"name": "main", "count": 3, "minCount": 1, "requests": {"cpu": "1"}}]
    elastic["status"] = {
        "admission": {"queue": "e", "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
        "admittedAt": "2026-01-01T00:00:00Z",
    }
    local = [
        {"apiVersion": GROUP, "kind": "LocalQueue", "metadata": {"name": "train", "namespace": ns}, "spec": {"queue": "a"}}
        for ns in ("ml", "web")
    ]
    return [
        {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        _queue("a", "3"),
        _queue("s", "1", queueingStrategy="StrictFIFO"),
        _queue("e", "4"),
        *local,
        *(_workload("ml" if i % 2 else "web", f"w{i}", "train", "1", 10 + i, priority=i % 3) for i in range(8)),
        _workload("ns", "big", "s", "2", 5),
        _workload("ns", "small", "s", "1", 6),
        elastic,
        _workload("ns", "e1", "e", "2", 7),
        _workload("ns", "e2", "e", "1", 8, priority=5),
    ]


CLUSTERS = {
    "saturated-10x300": lambda: snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS),
    "saturated-20x900-seed-2": lambda: snapshot(generate_saturated(2, queues=20, workloads=900), NOW_MS),
    "typical-S": lambda: Snapshot.build(
        parse_objects(("g.json", o) for o in generate_shape("typical-S", 1)), now=NOW_MS
    ),
    "local-queues": lambda: snapshot(_local_queues(), "2026-01-01T01:00:00Z"),
}


def _rounds(built: Snapshot) -> tuple[Session, Decisions]:
    actions, registry_of = default_session()
    session = Session(built, registry_of(), actions=actions)
    session.open()
    run_rounds(session)
    return session, session.close()


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_each_queue_is_handed_over_in_the_order_sorting_by_the_session_key_gives(name: str) -> None:
    built = CLUSTERS[name]()
    session, _ = _rounds(built)
    handed = session.state[QUEUE_ORDER]
    assert set(handed) == set(built.pending_by_queue)
    for queue, workloads in built.pending_by_queue.items():
        assert [w.key for w in handed[queue]] == [w.key for w in sorted(workloads, key=session.workload_key)]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_positions_numbered_from_the_handed_order_are_the_sorted_ones(name: str) -> None:
    built = CLUSTERS[name]()
    session, decisions = _rounds(built)
    from_rounds = Decisions(now=decisions.now, pending=list(decisions.pending))
    sorted_again = Decisions(now=decisions.now, pending=list(decisions.pending))
    number_pending(from_rounds, built.pending_by_queue, session.workload_key, session.state[QUEUE_ORDER])
    number_pending(sorted_again, built.pending_by_queue, session.workload_key)
    assert from_rounds.positions
    assert list(from_rounds.positions.items()) == list(sorted_again.positions.items())


def test_positions_by_hand_with_local_queues_a_blocked_queue_and_a_growing_workload() -> None:
    """Queue ``a`` (3 cores) admits three of its eight and leaves five waiting: their
    positions follow the rule itself (higher priority first, then older), each also
    numbered among its own LocalQueue's (``ml/train`` or ``web/train``)."""
    built = CLUSTERS["local-queues"]()
    session, decisions = _rounds(built)
    number_pending(decisions, built.pending_by_queue, session.workload_key, session.state[QUEUE_ORDER])
    pending = {p.workload for p in decisions.pending}
    in_a = sorted(
        (w for w in built.pending_by_queue["a"] if w.key in pending), key=lambda w: (-w.priority, w.created)
    )
    assert [decisions.positions[w.key].position for w in in_a] == list(range(1, len(in_a) + 1))
    for w in in_a:
        same_local = [v for v in in_a if v.namespace == w.namespace]
        assert decisions.positions[w.key] == QueuePosition(
            "a", in_a.index(w) + 1, "train", same_local.index(w) + 1, w.priority
        )
        # Made without QueuePosition's own __new__: still one, its fields by name.
        assert type(decisions.positions[w.key]) is QueuePosition
        assert decisions.positions[w.key].local_queue == "train"
        assert decisions.positions[w.key].priority == w.priority
    # StrictFIFO ``s``: ``big`` does not fit and blocks ``small``; both wait, in that order.
    assert [decisions.positions[k].position for k in ("ns/big", "ns/small")] == [1, 2]
    # The growing workload is in ``e``'s rounds but never pending, so it has no position.
    assert "ml/grow" not in decisions.positions
    assert "ml/grow" not in pending
