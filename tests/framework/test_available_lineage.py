"""Available(q) (SEMANTICS §1) is read down a queue's lineage, root first, instead of by
recursion up its ancestors: over random trees (nominal, lending and borrowing limits, deep
chains of cohorts) and random usage, it equals the definition written recursively here,
``local + min(Available(parent), stored - usedInParent + borrowingLimit)``."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree

from tests.framework.test_headroom_bound import _tree as random_tree

CPU = ("default", "cpu")


def _tree(rng: random.Random) -> QuotaTree:
    return random_tree(rng, most=12, nesting=0.5)  # deeper chains of cohorts


def _defined(accounting: Accounting, node: QuotaNode) -> int:
    used = accounting.used(node, CPU)
    if node.parent is None:
        return node.subtree.get(CPU, 0) - used
    guaranteed = node.guaranteed.get(CPU, 0)
    from_parent = _defined(accounting, node.parent)
    limit = node.borrowing_limit.get(CPU)
    if limit is not None:
        stored = node.subtree.get(CPU, 0) - guaranteed
        from_parent = min(from_parent, stored - max(0, used - guaranteed) + limit)
    return max(0, guaranteed - used) + from_parent


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_available_down_the_lineage_equals_the_recursive_definition(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    accounting = Accounting(tree)
    leaves = list(tree.leaves.values())
    for _ in range(rng.randrange(0, 16)):
        accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 12000, 500)})
    for node in tree.nodes.values():
        assert node.lineage[0] is node.root and node.lineage[-1] is node
        expected = _defined(accounting, node)
        assert accounting.headroom(node, CPU) == expected
        assert accounting.available(node, CPU) == max(0, expected)
