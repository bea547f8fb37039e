"""The simulated cluster's node room: pods that did not fit, and room given back.

An admitted workload whose pods found no node keeps its quota and is placed again at
later snapshots and commits, as ``Snapshot.build`` places missing pods at every build.
An attempt that bound no pod is not repeated until some room has been given back:
room only shrinks in between, so it would bind none again. These tests pin that the
attempt is skipped, that it is made again as soon as room frees (and then places the
pods where ``Snapshot.build`` would), and that a workload leaving gives back its room
node by node exactly as its pods one at a time would.
"""

from __future__ import annotations

import pytest
from preemptd.daemon.simulation.cluster import ClusterModel
from preemptd.framework.model import Node, Workload
from preemptd.framework.nodes import Placements
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import inventory, queue, workload


def _model(nodes: dict[str, int], *running: Workload) -> ClusterModel:
    inv = inventory([queue("q", cpu=64)], [])
    for name, cpu in nodes.items():
        inv.nodes[name] = Node(name, {}, {"cpu": cpu * 1000})
    model = ClusterModel(inv)
    model.add(list(running), now=0)
    return model


def _bound(model: ClusterModel, key: str) -> list[str | None]:
    return sorted(pod.node_name for pod in model.pods_by_workload.get(key, ()))


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the workloads the model tries to place, in order."""
    made: list[str] = []
    place = ClusterModel._place_missing

    def counted(self: ClusterModel, workload: Workload, placements: Placements, now: int) -> bool:
        made.append(workload.key)
        return place(self, workload, placements, now)

    monkeypatch.setattr(ClusterModel, "_place_missing", counted)
    return made


def test_a_workload_whose_pods_found_no_node_is_not_tried_again_until_room_frees(attempts: list[str]) -> None:
    big = workload("big", "q", 4, count=2, admitted=True, admitted_at=0)
    model = _model({"n1": 4, "n2": 4}, big)
    late = workload("late", "q", 2, admitted=True, admitted_at=1)
    model.add([late], now=1)
    assert model.unplaced == 1 and _bound(model, "ns/late") == []
    attempts.clear()
    for now in (2, 3, 4):
        model.snapshot(now=now)
        model.place_admitted([], now=now)
    assert attempts == []  # nothing freed: no attempt could bind a pod
    assert model.unplaced == 1
    model.remove("ns/big")
    model.snapshot(now=5)
    assert attempts == ["ns/late"]
    assert model.unplaced == 0 and _bound(model, "ns/late") == ["n1"]


def test_an_attempt_that_bound_some_pods_is_made_again(attempts: list[str]) -> None:
    model = _model({"n1": 4, "n2": 4}, workload("big", "q", 4, admitted=True, admitted_at=0))
    model.add([workload("three", "q", 4, count=3, admitted=True, admitted_at=1)], now=1)
    assert _bound(model, "ns/three") == ["n2"]  # one of three pods fitted
    attempts.clear()
    model.snapshot(now=2)  # the next attempt binds none: only now is it remembered
    model.snapshot(now=3)
    model.snapshot(now=4)
    assert attempts == ["ns/three"]


def test_a_changed_workload_is_tried_again_without_room_freeing(attempts: list[str]) -> None:
    model = _model({"n1": 4}, workload("big", "q", 4, admitted=True, admitted_at=0))
    model.add([workload("two", "q", 2, count=2, admitted=True, admitted_at=1)], now=1)
    model.snapshot(now=2)
    attempts.clear()
    # Its count lowered to 0 (a shrink): the new record is placed again, and is complete.
    model.shrink("ns/two", "main", 2, ())
    model.snapshot(now=3)
    assert attempts == ["ns/two"]
    assert model.unplaced == 0


def test_the_room_and_pods_placed_after_room_frees_are_those_snapshot_build_makes() -> None:
    first = workload("first", "q", 3, count=2, admitted=True, admitted_at=0)
    model = _model({"n1": 4, "n2": 4, "n3": 2}, first)
    waiting = [workload(f"w{i}", "q", 2, count=2, admitted=True, admitted_at=1 + i) for i in range(3)]
    model.add(waiting, now=5)
    for now in (6, 7):
        model.snapshot(now=now)
    model.remove("ns/first")
    snap = model.snapshot(now=8)
    # Snapshot.build of the same objects, the simulator's pods included, reserves nothing
    # more and leaves the nodes the same room.
    built = Snapshot.build(model.inventory(), now=8)
    assert built.reserved_pods == ()
    assert snap.placements is not None and built.placements is not None
    assert snap.placements.free == built.placements.free
    assert model.unplaced == 1  # 8 cores freed for 10 cores of missing pods


def test_a_workload_leaving_gives_back_its_room_as_its_pods_one_by_one_would() -> None:
    many = workload("many", "q", 1, count=7, admitted=True, admitted_at=0)
    other = workload("other", "q", 3, count=2, admitted=True, admitted_at=1)
    model = _model({"n1": 4, "n2": 4, "n3": 4}, many, other)
    assert model.placements is not None
    alone = model.placements.copy()
    pods = model.pods_by_workload["ns/many"]
    for pod in pods:
        assert pod.node_name is not None
        alone.give_back(pod.node_name, pod.requests)
    model.remove("ns/many")
    assert model.placements.free == alone.free
    for cpu in (1000, 2000, 3000, 4000, 5000):
        # The index answers as the one given back pod by pod.
        requests = {"cpu": cpu}
        assert model.placements.best_fit("default", requests, {}, ()) == alone.best_fit("default", requests, {}, ())
        assert model.placements.can_place("default", requests, 3, {}, ()) == alone.can_place("default", requests, 3, {}, ())
    assert model.pool.free == {name: dict(room) for name, room in alone.free.items()}
    assert all(pod.key not in model.pods for pod in pods)
