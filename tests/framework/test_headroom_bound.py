"""The bound the victim walk leans on (framework/quota.py, preemption/walk.py).

Adding ``y`` of usage at any queue lowers every leaf's unclipped Available
(``Accounting.headroom``) by at most ``y``, and never raises it; removing it is the
exact mirror. The walk's quota bound (may_fit, the running bound) and its fill-back
slack rest on this, over trees with nominal quotas, lending and borrowing limits.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.testing import cohort, queue

CPU = ("default", "cpu")


def _tree(rng: random.Random) -> QuotaTree:
    specs = [cohort("root")]
    parents = ["root"]
    for i in range(rng.randrange(2, 9)):
        parent = rng.choice(parents)
        name = f"q{i}"
        specs.append(
            queue(
                name,
                parent,
                cpu=rng.randrange(0, 9),
                borrowing_limit=rng.choice([None, 0, 2, 5]),
                lending_limit=rng.choice([None, 0, 1, 3]),
            )
        )
        if rng.random() < 0.4:
            parents.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_usage_put_anywhere_lowers_a_leafs_headroom_by_at_most_itself(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 12)):
        accounting.add(rng.choice(leaves), CPU, rng.randrange(0, 6000, 500))
    for _ in range(20):
        leaf, where = rng.choice(leaves), rng.choice(leaves)
        amount = rng.randrange(0, 6000, 500)
        before = accounting.headroom(leaf, CPU)
        accounting.add_all(where, {CPU: amount})
        after = accounting.headroom(leaf, CPU)
        assert before - amount <= after <= before
        accounting.remove_all(where, {CPU: amount})
        assert accounting.headroom(leaf, CPU) == before
