"""The quota bound's test of the leaf's own nominal (``bound.may_fit``).

An attempt that must end within nominal fits only if the leaf's usage, less what its own
candidates free, plus the request stays within the leaf's nominal: only the leaf's own
candidates lower its usage (no queue is below a leaf), by exactly their usage. The bound
tests that first, per flavor-resource that does not fit now, and answers "no" without
working out what the other queues' candidates free where it reaches the preemptor's path.
Over random trees of two flavor-resources (nominal, lending and borrowing limits) and
random candidates (the leaf's own among them, queues coming back in several stretches,
some usable only within nominal), each attempt answers as removing every candidate it may
take one by one and testing the fit, and leaves the usage as it was.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FlavorQuotas, QueueSpec, ResourceGroup, ResourceQuota
from preemptd.framework.preemption import bound
from preemptd.framework.preemption.bound import fits_quota, may_fit
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Candidate
from preemptd.framework.testing import cohort

CPU = ("default", "cpu")
SPARE = ("spare", "cpu")


def _limit(rng: random.Random, choices: list[int | None]) -> int | None:
    found = rng.choice(choices)
    return None if found is None else found * 1000


def _tree(rng: random.Random) -> QuotaTree:
    """Queues of cpu in two flavors under ``root``, some nested, with random nominal,
    borrowing and lending limits."""
    specs = [cohort("root")]
    parents = ["root"]
    for i in range(rng.randrange(2, 9)):
        flavors = tuple(
            FlavorQuotas(
                flavor,
                {"cpu": ResourceQuota(rng.randrange(0, 9) * 1000, _limit(rng, [None, 0, 2, 5]), _limit(rng, [None, 0, 1, 3]))},
            )
            for flavor in ("default", "spare")
        )
        name = f"q{i}"
        specs.append(QueueSpec(name, rng.choice(parents), (ResourceGroup(("cpu",), flavors),)))
        if rng.random() < 0.4:
            parents.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


def _expected(accounting: Accounting, leaf: QuotaNode, request: dict[Any, int], candidates: list[Candidate], allow: bool) -> bool:
    """The fit with every candidate the attempt may take removed, one by one."""
    one_by_one = accounting.copy()
    for candidate in candidates:
        if not (allow and candidate.only_within_nominal):
            one_by_one.remove_all(candidate.leaf, dict(candidate.usage))
    return fits_quota(one_by_one, leaf, request, allow)


def _case(rng: random.Random) -> tuple[Accounting, QuotaNode, dict[Any, int], list[Candidate]]:
    """A random tree's usage, a leaf, its request and candidates: stretches of one queue's
    candidates (the leaf's own among them, a queue coming back in a later stretch), each
    queue's holding no more than it uses, some usable only within nominal."""
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 16)):
        accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 6000, 500), SPARE: rng.randrange(0, 6000, 500)})
    leaf = rng.choice(leaves)
    left = {q: {CPU: accounting.used(q, CPU), SPARE: accounting.used(q, SPARE)} for q in leaves}
    workload: Any = None
    candidates: list[Candidate] = []
    for _ in range(rng.randrange(0, 7)):
        lender = leaf if rng.random() < 0.3 else rng.choice(leaves)
        for _ in range(rng.randrange(1, 4)):
            usage: dict[Any, int] = {}
            for fr in rng.sample([CPU, SPARE], rng.randrange(0, 3)):
                amount = rng.randrange(0, left[lender][fr] + 1)
                left[lender][fr] -= amount
                usage[fr] = amount
            candidates.append(Candidate(workload, lender, usage, "r", 1, only_within_nominal=rng.random() < 0.3))
    request = {fr: rng.randrange(500, 9000, 500) for fr in rng.sample([CPU, SPARE], rng.randrange(1, 3))}
    return accounting, leaf, request, candidates


@settings(max_examples=400, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_each_attempt_answers_as_removing_every_candidate_it_may_take_one_by_one(seed: int) -> None:
    accounting, leaf, request, candidates = _case(random.Random(seed))
    before = [dict(u) for u in accounting.usage]
    for allow in (True, False):
        assert may_fit(accounting, leaf, request, candidates, allow) == _expected(
            accounting, leaf, request, candidates, allow
        ), allow
        assert accounting.usage == before


def test_an_attempt_within_nominal_fails_on_the_leafs_own_nominal_without_reading_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """q0 and q1 (nominal 4 each, cohort 8) use 4 each; q0 asks 2 more. Only q0's own
    candidates can bring it back within nominal: freeing 1 of its own (4 - 1 + 2 > 4) the
    attempt that must end within nominal fails, whatever q1's candidate frees, and the
    bound says so without reading where q1's usage reaches; freeing 2 of its own and q1's
    4, q0 ends at 4 and the cohort has 6 free, so it fits."""
    flavors = (FlavorQuotas("default", {"cpu": ResourceQuota(4000, None, None)}),)
    specs = [
        cohort("root"),
        QueueSpec("q0", "root", (ResourceGroup(("cpu",), flavors),)),
        QueueSpec("q1", "root", (ResourceGroup(("cpu",), flavors),)),
    ]
    tree = QuotaTree({spec.name: spec for spec in specs})
    accounting = Accounting(tree)
    q0, q1 = tree.leaves["q0"], tree.leaves["q1"]
    accounting.add_all(q0, {CPU: 4000})
    accounting.add_all(q1, {CPU: 4000})
    workload: Any = None
    other = Candidate(workload, q1, {CPU: 4000}, "r", 1)
    small = Candidate(workload, q0, {CPU: 1000}, "r", 2)
    large = Candidate(workload, q0, {CPU: 2000}, "r", 2)
    request = {CPU: 2000}
    reached: list[object] = []
    real = bound._reaching

    def reaching(*args: Any) -> Any:
        reached.append(args[1])
        return real(*args)

    monkeypatch.setattr(bound, "_reaching", reaching)
    assert not may_fit(accounting, q0, request, [small, other], False)
    assert reached == []  # answered on q0's own nominal
    assert may_fit(accounting, q0, request, [large, other], False)
    assert len(reached) == 1
    assert not _expected(accounting, q0, request, [small, other], False)
    assert _expected(accounting, q0, request, [large, other], False)
