"""Which flavors share a node is read from the pool's layout (``NodePool.sharing``), and the
search of a whole request leaves a launcher's target out without visiting a node list
(framework/preemption/victims.py, ``search_targets``).

A node serves every flavor whose node labels it carries. Two flavors share a node exactly
when some node carries the labels of both: then each names the other in ``sharing``, and a
flavor with a node names itself. A flavor no node serves has no entry.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NoReturn

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Flavor, Node, PodSet
from preemptd.framework.nodes import NodePool
from preemptd.framework.preemption.victims import search_targets

_LABELS = st.dictionaries(st.sampled_from(["zone", "pool", "gpu"]), st.sampled_from(["a", "b"]), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_LABELS, max_size=8),
    st.lists(_LABELS, min_size=1, max_size=5),
)
def test_flavors_share_a_node_exactly_when_a_node_carries_both_labels(
    node_labels: list[dict[str, str]], flavor_labels: list[dict[str, str]]
) -> None:
    nodes = {f"n{i}": Node(f"n{i}", labels, {"cpu": 1000}) for i, labels in enumerate(node_labels)}
    flavors = {f"f{i}": Flavor(f"f{i}", labels) for i, labels in enumerate(flavor_labels)}
    pool = NodePool(nodes, flavors)
    served = {
        name: {n for n, node in nodes.items() if all(node.labels.get(k) == v for k, v in flavor.node_labels.items())}
        for name, flavor in flavors.items()
    }
    assert set(pool.sharing) == {name for name, members in served.items() if members}
    for name, shared in pool.sharing.items():
        assert shared == {other for other, members in served.items() if members & served[name]}


def test_an_empty_pool_shares_nothing() -> None:
    assert NodePool({}, {"cpu": Flavor("cpu")}).sharing == {}


class _NoNodeLists(dict[str, list[str]]):
    """A flavor's node list that may not be read."""

    def get(self, *_: Any) -> NoReturn:
        raise AssertionError("a flavor's node list was read")

    def __getitem__(self, _: str) -> NoReturn:
        raise AssertionError("a flavor's node list was read")


def _pool() -> NodePool:
    """``cpu`` on c1 and c2, ``gpu`` on n1, ``any`` (no labels) on every node."""
    nodes = {
        "c1": Node("c1", {"pool": "cpu"}, {"cpu": 16_000}),
        "c2": Node("c2", {"pool": "cpu"}, {"cpu": 16_000}),
        "n1": Node("n1", {"pool": "gpu"}, {"cpu": 16_000, "nvidia.com/gpu": 8}),
    }
    flavors = {
        "cpu": Flavor("cpu", {"pool": "cpu"}),
        "gpu": Flavor("gpu", {"pool": "gpu"}),
        "any": Flavor("any"),
    }
    pool = NodePool(nodes, flavors)
    pool.by_flavor = _NoNodeLists(pool.by_flavor)
    return pool


def _targets(launcher_flavor: str) -> list[tuple[PodSet, int, str]]:
    launcher = PodSet("launcher", 1, {"cpu": 2_000})
    main = PodSet("main", 2, {"cpu": 8_000, "nvidia.com/gpu": 4})
    return [(launcher, 1, launcher_flavor), (main, 2, "gpu")]


def test_a_launcher_apart_is_left_out_without_reading_a_node_list() -> None:
    session = SimpleNamespace(placements=SimpleNamespace(pool=_pool()), policy=None, state={})
    preemptor = SimpleNamespace(is_deployment=False)
    asked: list[Any] = []

    def fits_now(targets: list[tuple[PodSet, int, str]]) -> bool:
        asked.append([t[2] for t in targets])
        return True

    targets = _targets("cpu")
    assert search_targets(session, preemptor, targets, fits_now) == [targets[1]]  # type: ignore[arg-type]
    assert asked == [["cpu"]]
    # ``any`` serves n1 too: its launcher could land where the GPU pod goes.
    targets = _targets("any")
    assert search_targets(session, preemptor, targets, fits_now) == targets  # type: ignore[arg-type]
    assert asked == [["cpu"]]
