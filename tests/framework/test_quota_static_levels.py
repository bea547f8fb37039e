"""Available read from the static figures kept per node and flavor-resource
(framework/quota.py, ``QuotaNode.levels``) answers as the root-down definition read field by
field from each node: over random trees (lending and borrowing limits, deep chains of
cohorts) and random sequences of usage added and removed, of a flavor-resource in the
quotas and of one in none (whose figures are kept too, all zero). The sequences are applied
with ``add_all``/``remove_all`` and with ``add``/``remove`` one flavor-resource at a time,
which must leave every node's usage the same (values, keys and their order)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaNode

from tests.framework.test_headroom_bound import _tree as random_tree

CPU = ("default", "cpu")
OTHER = ("other", "cpu")


def _plain_available(accounting: Accounting, node: QuotaNode, fr: tuple[str, str]) -> int:
    """Available unclipped, down the lineage, each figure read from the node itself."""
    lineage = node.lineage
    available = lineage[0].subtree.get(fr, 0) - accounting.used(lineage[0], fr)
    for at in lineage[1:]:
        used = accounting.used(at, fr)
        guaranteed = at.guaranteed.get(fr, 0)
        limit = at.borrowing_limit.get(fr)
        if limit is not None:
            stored = at.subtree.get(fr, 0) - guaranteed
            available = min(available, stored - max(0, used - guaranteed) + limit)
        available += max(0, guaranteed - used)
    return available


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_kept_figures_answer_as_the_plain_walks(seed: int) -> None:
    rng = random.Random(seed)
    tree = random_tree(rng, most=12, nesting=0.5)
    fast, plain = Accounting(tree), Accounting(tree)
    nodes = sorted(tree.nodes.values(), key=lambda n: n.name)
    added: list[tuple[QuotaNode, dict[tuple[str, str], int]]] = []
    for _ in range(rng.randrange(1, 30)):
        if added and rng.random() < 0.4:
            node, usage = added.pop(rng.randrange(len(added)))
            fast.remove_all(node, usage)
            for fr, amount in usage.items():
                plain.remove(node, fr, amount)
        else:
            node = rng.choice(nodes)
            usage = {CPU: rng.randrange(0, 9000, 500)}
            if rng.random() < 0.3:
                usage = {OTHER: rng.randrange(0, 3000), **usage}
            fast.add_all(node, usage)
            for fr, amount in usage.items():
                plain.add(node, fr, amount)
            added.append((node, usage))
        assert [list(u.items()) for u in fast.usage] == [list(u.items()) for u in plain.usage]
        for at in nodes:
            for fr in (CPU, OTHER):
                assert fast.headroom(at, fr) == _plain_available(fast, at, fr)
