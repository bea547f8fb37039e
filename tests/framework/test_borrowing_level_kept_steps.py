"""The borrowing level of a request (framework/quota.py, ``Accounting.borrowing_level``)
read from the figures kept per node and flavor-resource (``QuotaNode.levels``: from the
node up, each level's subtree quota, local reserve and the level it answers) answers as
SEMANTICS §2.3 walks the tree node by node: 0 when the node's usage plus the request is
within its subtree quota; else, with the request less the reserve the node has left, the
height of the lowest ancestor whose usage plus that is within its subtree quota, each level
passed taking off the reserve it has left; the root's height when none is. Over random
trees with reserves, borrowing limits and nesting, random usage (negative included) and
requests of every size, on every node (the root and cohorts too); also ``level_of`` and
``fit_level``, which ask it."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.testing import cohort, queue

from tests.framework.test_headroom_bound import _tree as random_tree

CPU: FR = ("default", "cpu")
OTHER: FR = ("other", "cpu")


def _plain_level(accounting: Accounting, node: QuotaNode, fr: FR, request: int) -> int:
    """SEMANTICS §2.3 node by node, reading each node's own maps."""
    used = accounting.usage[node.index].get(fr, 0)
    if used + request <= node.subtree.get(fr, 0):
        return 0
    amount = request - max(0, node.guaranteed.get(fr, 0) - used)
    at = node.parent
    while at is not None:
        used = accounting.usage[at.index].get(fr, 0)
        if used + amount <= at.subtree.get(fr, 0):
            return at.height
        amount -= max(0, at.guaranteed.get(fr, 0) - used)
        if at.parent is None:
            return at.height
        at = at.parent
    return node.height


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_borrowing_level_from_kept_steps_answers_as_the_node_by_node_walk(seed: int) -> None:
    rng = random.Random(seed)
    tree = random_tree(rng, most=12, nesting=0.5)
    accounting = Accounting(tree)
    nodes = sorted(tree.nodes.values(), key=lambda n: n.name)
    for _ in range(rng.randrange(1, 8)):
        for node in nodes:
            if rng.random() < 0.4:
                fr = rng.choice([CPU, OTHER])
                accounting.usage[node.index][fr] = rng.randrange(-2000, 12000, 250)
        for node in nodes:
            usage = {}
            for fr in (CPU, OTHER):
                request = rng.randrange(-1000, 14000, 250)
                usage[fr] = request
                expected = _plain_level(accounting, node, fr, request)
                assert accounting.borrowing_level(node, fr, request) == expected
                fit = accounting.fit_level(node, fr, request)
                assert fit in (expected, -1)
                assert (fit == -1) == (request > accounting.available(node, fr))
            assert accounting.level_of(node, usage) == max(
                0, *(_plain_level(accounting, node, fr, amount) for fr, amount in usage.items())
            )


def test_borrowing_level_by_hand_on_a_three_level_tree() -> None:
    # root (no quota) > top (cpu 8) > mid (cpu 4, lends 1) > leaf (cpu 2): mid's subtree
    # is 6 with a reserve of 5 (6 less what it lends), top's subtree 8 + 1 = 9.
    specs = [
        cohort("root"),
        queue("top", "root", cpu=8),
        queue("mid", "top", cpu=4, lending_limit=1),
        queue("leaf", "mid", cpu=2),
    ]
    tree = QuotaTree({spec.name: spec for spec in specs})
    accounting = Accounting(tree)
    leaf, mid, top = (tree.nodes[name] for name in ("leaf", "mid", "top"))
    assert (leaf.height, mid.height, top.height, tree.nodes["root"].height) == (0, 1, 2, 3)
    assert accounting.borrowing_level(leaf, CPU, 2000) == 0  # within the leaf's own 2
    assert accounting.borrowing_level(leaf, CPU, 6000) == 1  # mid's subtree holds 6
    assert accounting.borrowing_level(leaf, CPU, 7000) == 2  # past mid: 7 less its reserve 5
    assert accounting.borrowing_level(leaf, CPU, 14000) == 2  # 14 - 5 = 9 within top's 9
    assert accounting.borrowing_level(leaf, CPU, 15000) == 3  # nothing holds it: the root's
    accounting.add_all(mid, {CPU: 3000})  # within mid's reserve: nothing goes up
    assert accounting.usage[top.index].get(CPU, 0) == 0
    assert accounting.borrowing_level(leaf, CPU, 3000) == 1  # 3 + 3 <= 6
    assert accounting.borrowing_level(leaf, CPU, 4000) == 2  # 4 less the 2 mid has left
    assert accounting.borrowing_level(leaf, CPU, 13000) == 3  # 11 > 9
