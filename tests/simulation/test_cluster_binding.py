"""The simulated cluster's pod binding, in fewer index moves, and the room given back.

The model binds an admitted workload's missing pods best fit, and a node that takes several
of them in a row has their room taken in one step; a workload whose pods already cover its
admission is not placed at all. That is exact only if the room, the node index, the pods
and their names are those of binding pod by pod, which these tests compare against a
reference done that way; room given back must leave the index (read by the next placement
and by the sessions' copies) as giving it back pod by pod does.
"""

from __future__ import annotations

from preemptd.daemon.simulation.cluster import ClusterModel
from preemptd.framework.model import Admission, Node, PodSet, PodSetAdmission, Workload
from preemptd.framework.nodes import NodePool, Placements
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import inventory, queue, workload


def _model(nodes: dict[str, int], *running: Workload) -> ClusterModel:
    inv = inventory([queue("q", cpu=256)], [])
    for name, cpu in nodes.items():
        inv.nodes[name] = Node(name, {}, {"cpu": cpu * 1000})
    model = ClusterModel(inv)
    model.add(list(running), now=0)
    return model


def _index(placements: Placements) -> dict[str, tuple[list[int], dict[int, list[tuple[int, str]]]]]:
    """Each flavor's node index as it stands: GPU keys and (cpu, node) buckets."""
    return {flavor: (list(index.keys), {k: list(v) for k, v in index.buckets.items()})
            for flavor, index in placements._index.items()}


def _fresh(model: ClusterModel) -> Placements:
    """Placements built from scratch on the model's nodes and current room."""
    pool = NodePool(model.base.nodes, model.base.flavors)
    assert model.placements is not None
    pool.free = {name: dict(room) for name, room in model.placements.free.items()}
    return Placements(pool)


def test_pods_a_node_takes_in_a_row_are_bound_as_one_at_a_time_would_bind_them() -> None:
    model = _model({"n1": 8, "n2": 5, "n3": 16})
    assert model.placements is not None
    reference = model.placements.copy()
    # Six pods of 2 cores: best fit puts two on n2 (5 cores), then four on n1 (8 cores).
    six = workload("six", "q", 2, count=6, admitted=True, admitted_at=0)
    expected = reference.place_pods("default", {"cpu": 2000}, 6, {}, ())  # pod by pod
    assert expected == ["n2", "n2", "n1", "n1", "n1", "n1"]
    model.add([six], now=0)
    pods = model.pods_by_workload["ns/six"]
    assert [pod.node_name for pod in pods] == expected
    assert [pod.name for pod in pods] == [f"six-main-{i}" for i in range(6)]
    assert model.placements.free == reference.free
    assert model.pool.free == reference.free
    assert _index(model.placements) == _index(reference) == _index(_fresh(model))
    # The next placement reads that index: one pod of 4 cores goes to n3, 16 cores.
    model.add([workload("four", "q", 4, admitted=True, admitted_at=1)], now=1)
    assert [pod.node_name for pod in model.pods_by_workload["ns/four"]] == ["n3"]


def test_room_given_back_puts_each_node_in_its_place_before_the_next_placement() -> None:
    first = workload("first", "q", 3, count=3, admitted=True, admitted_at=0)
    second = workload("second", "q", 1, count=4, admitted=True, admitted_at=1)
    model = _model({"n1": 4, "n2": 4, "n3": 6}, first, second)
    assert model.placements is not None
    reference = model.placements.copy()
    for key in ("ns/first", "ns/second"):
        for pod in model.pods_by_workload[key][:2]:
            assert pod.node_name is not None
            reference.give_back(pod.node_name, pod.requests)  # moved in the index at once
    model.shrink("ns/first", "main", 2, [p.key for p in model.pods_by_workload["ns/first"][:2]])
    model.shrink("ns/second", "main", 2, [p.key for p in model.pods_by_workload["ns/second"][:2]])
    # No snapshot in between (a commit): the pods of a workload admitted next go where
    # best fit on the index with that room given back puts them.
    expected = reference.place_pods("default", {"cpu": 2000}, 3, {}, ())
    late = workload("late", "q", 2, count=3, admitted=True, admitted_at=2)
    model.add([late], now=2)
    assert [pod.node_name for pod in model.pods_by_workload["ns/late"]] == expected
    assert model.placements.free == reference.free
    assert _index(model.placements) == _index(reference)


def test_a_snapshot_is_handed_an_index_with_every_node_in_its_place() -> None:
    many = workload("many", "q", 1, count=7, admitted=True, admitted_at=0)
    other = workload("other", "q", 3, count=1, admitted=True, admitted_at=1)
    model = _model({"n1": 4, "n2": 4, "n3": 4}, many, other)
    assert model.unplaced == 0  # so the snapshot places nothing
    model.remove("ns/many")
    snap = model.snapshot(now=2)
    assert snap.placements is not None
    assert not snap.placements._stale and not snap.placements._moved
    assert _index(snap.placements) == _index(_fresh(model))
    built = Snapshot.build(model.inventory(), now=2)
    assert built.placements is not None
    assert _index(snap.placements) == _index(built.placements)
    assert snap.placements.free == built.placements.free


def test_a_workload_whose_pods_cover_one_pod_set_gets_the_other_pod_sets_pods() -> None:
    specs = (PodSet("a", 2, {"cpu": 1000}), PodSet("b", 3, {"cpu": 2000}))
    admission = Admission("q", (PodSetAdmission("a", 2, {"cpu": "default"}), PodSetAdmission("b", 3, {"cpu": "default"})))
    two = Workload("ns", "two", "q", specs, admission=admission, admitted_at=0)
    model = _model({"n1": 4, "n2": 8})
    model.add([two], now=0)
    pods = model.pods_by_workload["ns/two"]
    assert [(p.name, p.node_name) for p in pods] == [
        ("two-a-0", "n1"), ("two-a-1", "n1"), ("two-b-2", "n1"), ("two-b-3", "n2"), ("two-b-4", "n2"),
    ]
    # Two of its five pods gone: the model binds two again at the next snapshot, as
    # Snapshot.build reserves room for the two missing ones.
    for pod in pods[:2]:
        model.remove_pod(pod.key)
    snap = model.snapshot(now=1)
    assert len(model.pods_by_workload["ns/two"]) == 5
    assert model.unplaced == 0
    rebuilt = Snapshot.build(model.inventory(), now=1)
    assert rebuilt.reserved_pods == ()
    assert snap.placements is not None and rebuilt.placements is not None
    assert snap.placements.free == rebuilt.placements.free


def test_a_workload_whose_pods_cover_its_admission_keeps_its_pod_list() -> None:
    model = _model({"n1": 8}, workload("full", "q", 2, count=3, admitted=True, admitted_at=0))
    pods = model.pods_by_workload["ns/full"]
    room = dict(model.pool.free["n1"])
    model.remove_pod(pods[0].key)  # room freed: the model tries its unplaced workloads again
    model.snapshot(now=1)
    again = model.pods_by_workload["ns/full"]
    assert len(again) == 3 and model.pool.free["n1"] == room
    held = model.pods_by_workload["ns/full"]
    model.place_admitted(["ns/full"], now=2)
    assert model.pods_by_workload["ns/full"] is held  # covered: the same tuple, nothing bound
