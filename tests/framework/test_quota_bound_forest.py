"""The quota bound (framework/preemption/bound.py, ``may_fit``) follows each
flavor-resource's freed usage up from the queues that free it to the preemptor's path on
its own (``_reaching``): over random forests of two queue trees, each with nested
cohorts and queues with cpu and memory quotas (nominal, lending and borrowing limits),
and candidates from queues of either tree (a queue may come back after another; some
candidates only usable within nominal), it answers as removing every candidate the
attempt may take, one by one, and then testing the fit; it leaves the usage as it found
it; and the usage it removes reaches only nodes of the preemptor's path, each once, as
much as removing the candidates one by one takes from that node.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.preemption.bound import _arriving, fits_quota, may_fit
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Candidate
from preemptd.framework.testing import cohort

CPU = ("default", "cpu")
MEM = ("default", "memory")


def _quotas(rng: random.Random) -> tuple[ResourceGroup, ...]:
    def limit(choices: list[int | None]) -> int | None:
        found = rng.choice(choices)
        return None if found is None else found * 1000

    quotas = {
        resource: ResourceQuota(rng.randrange(0, 9) * 1000, limit([None, 0, 2, 5]), limit([None, 0, 1, 3]))
        for resource in ("cpu", "memory")
    }
    return (ResourceGroup(("cpu", "memory"), (FlavorQuotas("default", quotas),)),)


def _forest(rng: random.Random) -> QuotaTree:
    """Two roots; under them cohorts (nested with probability 0.5) and fewer than 10
    queues, each under a random cohort or, with probability 0.2, under an earlier queue."""
    specs = [cohort("root-a"), cohort("root-b")]
    cohorts = ["root-a", "root-b"]
    for i in range(rng.randrange(0, 4)):
        name = f"c{i}"
        specs.append(cohort(name, rng.choice(cohorts)))
        if rng.random() < 0.5:
            cohorts.append(name)
    queues: list[str] = []
    for i in range(rng.randrange(2, 10)):
        name = f"q{i}"
        parent = rng.choice(queues) if queues and rng.random() < 0.2 else rng.choice(cohorts)
        specs.append(QueueSpec(name, parent, _quotas(rng)))
        queues.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


def _case(seed: int) -> tuple[Accounting, QuotaNode, dict[Any, int], list[Candidate]]:
    rng = random.Random(seed)
    tree = _forest(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 20)):
        usage = {CPU: rng.randrange(0, 6000, 500), MEM: rng.randrange(0, 6000, 500)}
        accounting.add_all(rng.choice(leaves), usage)
    left = {q: {fr: accounting.used(q, fr) for fr in (CPU, MEM)} for q in leaves}
    workload: Any = None
    candidates = []
    for _ in range(rng.randrange(0, 9)):
        lender = rng.choice(leaves)  # the same queue may come back, after another
        within = rng.random() < 0.3
        for _ in range(rng.randrange(1, 4)):
            usage = {}
            for fr in rng.sample([CPU, MEM], rng.randrange(1, 3)):
                amount = rng.randrange(0, left[lender][fr] + 1)
                left[lender][fr] -= amount
                usage[fr] = amount
            candidates.append(Candidate(workload, lender, usage, "r", 1, only_within_nominal=within))
    request = {fr: rng.randrange(500, 9000, 500) for fr in rng.sample([CPU, MEM], rng.randrange(1, 3))}
    return accounting, rng.choice(leaves), request, candidates


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans())
def test_the_bound_over_a_forest_answers_as_removing_every_usable_candidate_one_by_one(
    seed: int, allow_borrowing: bool
) -> None:
    accounting, leaf, request, candidates = _case(seed)
    taken = [c for c in candidates if not (allow_borrowing and c.only_within_nominal)]
    one_by_one = accounting.copy()
    for candidate in taken:
        one_by_one.remove_all(candidate.leaf, candidate.usage)
    before = [dict(u) for u in accounting.usage]
    assert may_fit(accounting, leaf, request, candidates, allow_borrowing) == fits_quota(
        one_by_one, leaf, request, allow_borrowing
    )
    assert accounting.usage == before
    # What reaches the path: only path nodes, each once, and the path's usage after
    # removing it there is the usage after removing the candidates one by one.
    freed: dict[QuotaNode, dict[Any, int]] = {}
    for candidate in taken:
        into = freed.setdefault(candidate.leaf, {})
        for fr, amount in candidate.usage.items():
            into[fr] = into.get(fr, 0) + amount
    reached = _arriving(accounting, leaf, freed)
    nodes = [node for node, _ in reached]
    assert len(nodes) == len(set(nodes)) and set(nodes) <= set(leaf.lineage)
    at_path = accounting.copy()
    for node, amounts in reached:
        at_path.remove_all(node, amounts)
    for node in leaf.lineage:
        for fr in (CPU, MEM):
            assert at_path.used(node, fr) == one_by_one.used(node, fr)
