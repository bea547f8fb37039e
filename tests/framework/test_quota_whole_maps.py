"""Whole usage maps added and removed along a node's indices (framework/quota.py,
``Accounting.add_all``/``remove_all``: a flavor-resource no node below the root keeps a
reserve of goes up ``QuotaNode.up`` without reading the nodes) leave every node's usage as
``add``/``remove`` walking node by node leave it, one flavor-resource at a time: over random
trees (lending limits give some nodes a reserve of cpu, none of the other resource) and
random sequences from any usage, negative usage and removals of more than was added
included, amounts of zero and below too. ``available`` (its walk inlined) answers as the
root-down definition clipped at 0, ``headroom`` as the unclipped one, and ``fit_level``
(available and the borrowing level in one walk) as ``borrowing_level`` of a request within
that available, -1 of one above it."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.testing import queue

from tests.framework.test_headroom_bound import _tree as random_tree
from tests.framework.test_quota_static_levels import _plain_available

CPU = ("default", "cpu")
OTHER = ("other", "cpu")


def _usage(rng: random.Random) -> dict[tuple[str, str], int]:
    usage: dict[tuple[str, str], int] = {}
    for fr in rng.sample([CPU, OTHER], rng.randrange(1, 3)):
        usage[fr] = rng.randrange(-2000, 9000, 250)
    return usage


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_whole_maps_change_usage_as_the_node_by_node_walks(seed: int) -> None:
    rng = random.Random(seed)
    tree = random_tree(rng, most=12, nesting=0.5)
    fast, plain = Accounting(tree), Accounting(tree)
    nodes = sorted(tree.nodes.values(), key=lambda n: n.name)
    for node in nodes:
        if rng.random() < 0.5:
            start = _usage(rng)
            fast.usage[node.index] = dict(start)
            plain.usage[node.index] = dict(start)
    for _ in range(rng.randrange(1, 30)):
        node = rng.choice(nodes)
        usage = _usage(rng)
        if rng.random() < 0.5:
            fast.remove_all(node, usage)
            for fr, amount in usage.items():
                plain.remove(node, fr, amount)
        else:
            fast.add_all(node, usage)
            for fr, amount in usage.items():
                plain.add(node, fr, amount)
        assert [list(u.items()) for u in fast.usage] == [list(u.items()) for u in plain.usage]
        for at in nodes:
            for fr in (CPU, OTHER):
                unclipped = _plain_available(fast, at, fr)
                assert fast.headroom(at, fr) == unclipped
                assert fast.available(at, fr) == max(0, unclipped)
                request = rng.randrange(-1000, 12000, 250)
                expected = fast.borrowing_level(at, fr, request) if request <= max(0, unclipped) else -1
                assert fast.fit_level(at, fr, request) == expected


def test_a_nodes_reserved_resources_are_those_of_its_lineage_below_the_root() -> None:
    specs = [
        queue("root", cpu=8, lending_limit=1),
        queue("mid", "root", cpu=4, lending_limit=1),
        queue("under", "mid", cpu=2),
        queue("lent", "root", cpu=4),
    ]
    tree = QuotaTree({spec.name: spec for spec in specs})
    root, mid, under, lent = (tree.nodes[name] for name in ("root", "mid", "under", "lent"))
    assert root.guaranteed[CPU] > 0 and root.reserved == frozenset()  # nothing above the root
    assert mid.reserved == under.reserved == {CPU}
    assert lent.reserved == frozenset()
    assert under.up == (under.index, mid.index, root.index) and root.up == (root.index,)
