"""The borrowing level of a whole request (framework/quota.py, ``Accounting.level_of``),
written out: the highest of its flavor-resources' :meth:`~Accounting.borrowing_level`
(SEMANTICS §2.3), read from each node's kept figures without a call per
flavor-resource.

Held to the highest ``borrowing_level`` on random trees (nominal, lending and borrowing
limits; a second flavor-resource no queue has quota for) at random usage, and by hand on a
cohort: a request within the leaf's nominal is level 0, one that its parent's subtree
supplies is the parent's height.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.testing import cohort, queue

from tests.framework.test_headroom_bound import _tree  # random queue trees with limits

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_the_level_of_a_request_is_its_highest_flavor_resources(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 14)):
        accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 6000, 500), GPU: rng.randrange(0, 2)})
    for _ in range(8):
        leaf = rng.choice(leaves)
        request = {CPU: rng.randrange(0, 9000, 500)}
        if rng.random() < 0.5:
            request[GPU] = rng.randrange(0, 3)
        plain = max((accounting.borrowing_level(leaf, fr, amount) for fr, amount in request.items()), default=0)
        assert accounting.level_of(leaf, request) == plain


def test_a_request_is_at_the_level_that_supplies_it() -> None:
    """Cohort ``root`` (height 1) over ``a`` (nominal 4 cores, using 3) and ``b`` (nominal
    4). 1 core fits a's nominal: level 0. 2 cores do not (3 + 2 > 4) but the cohort's 8 do
    (3 + 2 <= 8): level 1, the root's height. 2 cores and 1 GPU (no quota anywhere, the
    root's height): level 1."""
    specs = [cohort("root"), queue("a", "root", cpu=4), queue("b", "root", cpu=4)]
    tree = QuotaTree({spec.name: spec for spec in specs})
    a = tree.nodes["a"]
    accounting = Accounting(tree)
    accounting.add_all(a, {CPU: 3000})
    assert accounting.level_of(a, {CPU: 1000}) == 0
    assert accounting.level_of(a, {CPU: 2000}) == 1
    assert accounting.level_of(a, {CPU: 2000, GPU: 1}) == 1
    assert accounting.level_of(a, {}) == 0
