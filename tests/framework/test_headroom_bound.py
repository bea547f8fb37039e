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
from preemptd.framework.preemption.bound import _arriving
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.testing import cohort, queue

CPU = ("default", "cpu")


def _tree(rng: random.Random, most: int = 9, nesting: float = 0.4) -> QuotaTree:
    """A random queue tree under ``root``: fewer than ``most`` queues of cpu with random
    nominal, borrowing and lending limits, each a parent of later ones with probability
    ``nesting``."""
    specs = [cohort("root")]
    parents = ["root"]
    for i in range(rng.randrange(2, most)):
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
        if rng.random() < nesting:
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


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_usage_removed_where_it_reaches_the_path_leaves_the_path_as_removing_it_queue_by_queue(
    seed: int,
) -> None:
    """The quota bound removes every candidate's usage at once (bound.may_fit): summed
    bottom up off the preemptor's path and removed only where it reaches the path, the
    path's usage (all the fit test reads) is what removing it from each queue gives."""
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 14)):
        accounting.add(rng.choice(leaves), CPU, rng.randrange(0, 6000, 500))
    leaf = rng.choice(leaves)
    freed = {}
    for queue_ in rng.sample(leaves, rng.randrange(1, len(leaves) + 1)):
        used = accounting.used(queue_, CPU)
        if used:
            freed[queue_] = {CPU: rng.randrange(0, used + 1)}
    one_by_one = accounting.copy()
    for queue_, amounts in freed.items():
        one_by_one.remove_all(queue_, amounts)
    at_path = accounting.copy()
    for node, amounts in _arriving(at_path, leaf, freed):
        at_path.remove_all(node, amounts)
    for node in leaf.path():
        assert at_path.used(node, CPU) == one_by_one.used(node, CPU)
    assert at_path.headroom(leaf, CPU) == one_by_one.headroom(leaf, CPU)
