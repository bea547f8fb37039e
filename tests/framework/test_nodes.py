"""Best-fit placement: the one loop every caller places pods through."""

from __future__ import annotations

from collections.abc import Mapping

from preemptd.framework.model import Flavor, Node
from preemptd.framework.nodes import NodePool, Placements


def placements(**free_cpu: int) -> Placements:
    """Nodes of one flavor ``f`` with the given free cpu (milli-cores)."""
    nodes = {name: Node(name, {"pool": "f"}, {"cpu": cpu}) for name, cpu in free_cpu.items()}
    return Placements(NodePool(nodes, {"f": Flavor("f", {"pool": "f"})}))


def test_place_pods_fills_the_tightest_node_first_and_takes_room_pod_by_pod() -> None:
    """Three 2-cpu pods on n1 (4 free) and n2 (2 free): n2 is the tighter fit, then n1
    twice; each pod's room is gone before the next is placed."""
    room = placements(n1=4000, n2=2000)
    assert ["n2", "n1", "n1"] == room.place_pods("f", {"cpu": 2000}, 3, {}, ())
    assert {"n1": {"cpu": 0}, "n2": {"cpu": 0}} == room.free


def test_place_pods_stops_at_the_first_pod_that_fits_nowhere() -> None:
    """Four 2-cpu pods where only three fit: three nodes come back, so the caller knows."""
    room = placements(n1=4000, n2=2000)
    assert 3 == len(room.place_pods("f", {"cpu": 2000}, 4, {}, ()))


def test_place_pods_takes_room_through_the_given_callable() -> None:
    """With ``take``, the caller (a statement, a simulated bind) takes each pod's room."""
    room = placements(n1=4000)
    taken: list[tuple[str, Mapping[str, int]]] = []

    def take(node: str, requests: Mapping[str, int]) -> None:
        taken.append((node, requests))
        room.take(node, requests)

    assert ["n1", "n1"] == room.place_pods("f", {"cpu": 1500}, 2, {}, (), take)
    assert [("n1", {"cpu": 1500}), ("n1", {"cpu": 1500})] == taken
    assert {"cpu": 1000} == room.free["n1"]
