"""The quota bound (framework/preemption/bound.py, ``may_fit``) over requests of several
flavor-resources: it reads each flavor-resource's usage once per candidate (or run) for
both its tests, and sums a queue's usage as a difference of running totals over each
stretch of that queue's candidates, adding the stretches of a queue that comes back
later. Over random trees with cpu and memory quotas (nominal, lending and borrowing
limits) and random stretches of candidates (a queue may come back; some candidates only
usable within nominal), handed as a plain list and as runs of their own candidates, it
answers as removing every candidate the attempt may take, one by one, and then testing
the fit; and it leaves the usage as it found it. Over random forests of two queue trees
with nested cohorts, it also follows each flavor-resource's freed usage to the preemptor's
path on its own (``_reaching``): what it removes reaches only nodes of the path, each once,
as much as removing the candidates one by one takes from that node.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.preemption.bound import _arriving, fits_quota, may_fit
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Candidate, Runs
from preemptd.framework.testing import cohort

CPU = ("default", "cpu")
MEM = ("default", "memory")


def _limit(rng: random.Random, choices: list[int | None]) -> int | None:
    found = rng.choice(choices)
    return None if found is None else found * 1000


def _groups(rng: random.Random) -> tuple[ResourceGroup, ...]:
    """One flavor with random cpu and memory quotas: nominal, lending and borrowing limits."""
    quotas = {
        resource: ResourceQuota(
            rng.randrange(0, 9) * 1000,
            _limit(rng, [None, 0, 2, 5]),
            _limit(rng, [None, 0, 1, 3]),
        )
        for resource in ("cpu", "memory")
    }
    return (ResourceGroup(("cpu", "memory"), (FlavorQuotas("default", quotas),)),)


def _tree(rng: random.Random) -> QuotaTree:
    """Fewer than 8 queues under ``root``, each with random cpu and memory quotas; a
    queue is the parent of later ones with probability 0.4."""
    specs = [cohort("root")]
    parents = ["root"]
    for i in range(rng.randrange(2, 8)):
        parent = rng.choice(parents)
        name = f"q{i}"
        specs.append(QueueSpec(name, parent, _groups(rng)))
        if rng.random() < 0.4:
            parents.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


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
        specs.append(QueueSpec(name, parent, _groups(rng)))
        queues.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


def _case(
    seed: int, make_tree: Callable[[random.Random], QuotaTree] = _tree
) -> tuple[Accounting, QuotaNode, dict[Any, int], list[list[Candidate]]]:
    """A random state, preemptor's queue, request, and stretches of one queue's
    candidates each (a queue's usage is never given out twice)."""
    rng = random.Random(seed)
    tree = make_tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 14)):
        usage = {CPU: rng.randrange(0, 6000, 500), MEM: rng.randrange(0, 6000, 500)}
        accounting.add_all(rng.choice(leaves), usage)
    left = {q: {fr: accounting.used(q, fr) for fr in (CPU, MEM)} for q in leaves}
    workload: Any = None
    stretches = []
    for _ in range(rng.randrange(0, 7)):
        lender = rng.choice(leaves)  # the same queue may come back, after another
        within = rng.random() < 0.3  # a stretch shares its class, as a run does
        stretch = []
        for _ in range(rng.randrange(1, 4)):
            usage = {}
            for fr in rng.sample([CPU, MEM], rng.randrange(1, 3)):
                amount = rng.randrange(0, left[lender][fr] + 1)
                left[lender][fr] -= amount
                usage[fr] = amount
            stretch.append(Candidate(workload, lender, usage, "r", 1, only_within_nominal=within))
        stretches.append(stretch)
    # A request never holds a flavor-resource at 0 (flavors.py leaves it out).
    request = {
        fr: rng.randrange(500, 9000, 500) for fr in rng.sample([CPU, MEM], rng.randrange(1, 3))
    }
    return accounting, rng.choice(leaves), request, stretches


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans())
def test_the_bound_of_two_resources_answers_as_removing_every_usable_candidate_one_by_one(
    seed: int, allow_borrowing: bool
) -> None:
    accounting, leaf, request, stretches = _case(seed)
    candidates = [c for stretch in stretches for c in stretch]
    one_by_one = accounting.copy()
    for candidate in candidates:
        if not (allow_borrowing and candidate.only_within_nominal):
            one_by_one.remove_all(candidate.leaf, candidate.usage)
    expected = fits_quota(one_by_one, leaf, request, allow_borrowing)
    before = [dict(u) for u in accounting.usage]
    assert may_fit(accounting, leaf, request, candidates, allow_borrowing) == expected
    assert accounting.usage == before
    # The same candidates as runs whose source keeps none (each run its own list).
    runs = Runs(frozenset(request), False, [(None, 0, 0, stretch) for stretch in stretches])  # type: ignore[misc]
    assert may_fit(accounting, leaf, request, [], allow_borrowing, runs) == expected
    assert accounting.usage == before


def test_a_queue_that_comes_back_adds_its_later_stretch_to_its_first() -> None:
    """Worked by hand: q0 and q1 share ``root`` (nominal 4 cpu, 4 Gi of memory each, no
    limits), q0 uses 4 of each and q1 4 of each, so root is full. q1 asks for 3 cpu and
    3 of memory within nominal: q1's own usage is at its nominal, so it needs 3 of each
    freed in q1 (usage from q0 frees room in root, not q1's nominal). q1's candidates
    come as q1 (1 cpu, 2 mem), q0 (4, 4), q1 (2 cpu, 1 mem): only both q1 stretches
    together free 3 of each."""
    ones = {res: ResourceQuota(4000, None, None) for res in ("cpu", "memory")}
    groups = (ResourceGroup(("cpu", "memory"), (FlavorQuotas("default", ones),)),)
    specs = [cohort("root"), QueueSpec("q0", "root", groups), QueueSpec("q1", "root", groups)]
    tree = QuotaTree({spec.name: spec for spec in specs})
    q0, q1 = tree.leaves["q0"], tree.leaves["q1"]
    accounting = Accounting(tree)
    accounting.add_all(q0, {CPU: 4000, MEM: 4000})
    accounting.add_all(q1, {CPU: 4000, MEM: 4000})
    workload: Any = None
    first = Candidate(workload, q1, {CPU: 1000, MEM: 2000}, "r", 1)
    other = Candidate(workload, q0, {CPU: 4000, MEM: 4000}, "r", 1)
    later = Candidate(workload, q1, {CPU: 2000, MEM: 1000}, "r", 1)
    request = {CPU: 3000, MEM: 3000}
    assert may_fit(accounting, q1, request, [first, other, later], False)
    assert not may_fit(accounting, q1, request, [first, other], False)
    assert not may_fit(accounting, q1, request, [other, later], False)


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans())
def test_the_bound_over_a_forest_answers_as_removing_every_usable_candidate_one_by_one(
    seed: int, allow_borrowing: bool
) -> None:
    accounting, leaf, request, stretches = _case(seed, _forest)
    candidates = [c for stretch in stretches for c in stretch]
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
