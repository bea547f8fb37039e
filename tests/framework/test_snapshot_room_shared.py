"""The snapshot's node pool and its placements hold one room map per node
(``Placements.shared_free``): the placements copy a map before they change it, so the
pool's room stays what the snapshot found."""

from __future__ import annotations

from preemptd.framework.snapshot import Snapshot

from tests.framework.test_snapshot_build import inventory
from tests.framework.test_snapshot_build import pod as bound_pod


def test_the_snapshots_pool_and_placements_hold_one_room_map_per_node() -> None:
    """Workload ns/w has three pods admitted on n1 (cpu 10), one of them bound: one pod's
    room taken and two reserved leave cpu 7. The pool keeps the placements' map; a change
    to the snapshot's placements, or to a copy of them, leaves the pool's room as it was."""
    snapshot = Snapshot.build(inventory([bound_pod("w-0")], count=3), now=10)
    placements = snapshot.placements
    assert placements is not None
    assert snapshot.node_pool.free["n1"] is placements.free["n1"]
    assert snapshot.node_pool.free == {"n1": {"cpu": 7}}
    copy = placements.copy()
    copy.take("n1", {"cpu": 2})
    placements.take("n1", {"cpu": 3})
    assert snapshot.node_pool.free == {"n1": {"cpu": 7}}
    assert (copy.free["n1"], placements.free["n1"]) == ({"cpu": 5}, {"cpu": 4})
    second = Snapshot.build(inventory([bound_pod("w-0")], count=3), now=10)
    assert second.placements is not None
    second.placements.take("n1", {"cpu": 1})  # the snapshot's own placements, never copied
    assert (second.placements.free["n1"], second.node_pool.free["n1"]) == ({"cpu": 6}, {"cpu": 7})
