"""The walk's quota bound (framework/preemption/bound.py, ``may_fit``) groups the
candidates' usage per queue and removes it where it reaches the preemptor's path, one
removal per path node: over random trees (nominal, lending and borrowing limits) and
random candidates of several flavor-resources, it answers as removing every candidate
the attempt may take, one by one, and then testing the fit; and it leaves the usage as
it found it. Each path node gets one removal, whatever the number of queues whose
usage reaches it.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption.bound import _arriving, fits_quota, may_fit
from preemptd.framework.quota import Accounting, QuotaNode
from preemptd.framework.session import Candidate

from tests.framework.test_headroom_bound import _tree  # random queue trees with limits

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans())
def test_the_bound_answers_as_removing_every_usable_candidate_one_by_one(seed: int, allow_borrowing: bool) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    # Usage of a second flavor-resource no queue has quota for rides along (0 of it fits).
    for _ in range(rng.randrange(0, 14)):
        accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 6000, 500), GPU: 0})
    leaf = rng.choice(leaves)
    workload: Any = None
    candidates = []
    left = {q: accounting.used(q, CPU) for q in leaves}
    for _ in range(rng.randrange(0, 12)):
        lender = rng.choice(leaves)
        if not left[lender]:
            continue
        amount = rng.randrange(0, left[lender] + 1)
        left[lender] -= amount
        usage = {CPU: amount} if rng.random() < 0.7 else {CPU: amount, GPU: 0}
        candidates.append(Candidate(workload, lender, usage, "r", 1, only_within_nominal=rng.random() < 0.3))
    request = {CPU: rng.randrange(500, 9000, 500)}  # a request of 0 is never searched for
    before = [dict(u) for u in accounting.usage]
    one_by_one = accounting.copy()
    for candidate in candidates:
        if not (allow_borrowing and candidate.only_within_nominal):
            one_by_one.remove_all(candidate.leaf, candidate.usage)
    expected = fits_quota(one_by_one, leaf, request, allow_borrowing)
    assert may_fit(accounting, leaf, request, candidates, allow_borrowing) == expected
    assert accounting.usage == before
    freed: dict[QuotaNode, dict[Any, int]] = {}
    for candidate in candidates:
        into = freed.setdefault(candidate.leaf, {})
        into[CPU] = into.get(CPU, 0) + candidate.usage[CPU]
    reached = [node for node, _ in _arriving(accounting, leaf, freed)]
    assert len(reached) == len(set(reached))
