"""``Session.pods_fit`` answers a repeated question on committed room without placing again.

The flavor scan and ``finish_assignment`` both ask whether a head's pods fit the nodes,
on the same committed room: the second answer is the kept one. Room is named by the
statement's node epoch, so a commit that changes room makes the next question placed
afresh, and a question asked while the statement holds uncommitted changes is never
answered from the kept entry.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.nodes import Placements
from preemptd.framework.session import Registry, Session
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated


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
