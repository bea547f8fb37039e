"""The quota bound reads a list of candidates once a session (framework/preemption/bound.py,
``may_fit(..., kept)``, ``FreedKept``; ``search._hopeless`` hands it the session's).

Without runs, the bound reads each candidate's usage of every short flavor-resource, and
sums it per queue. What it reads depends only on the candidates (their usage, queue and
class never change), and searches of a session are often handed the same list again: the
last list of each kind of attempt, length and first candidate is kept with its reading,
which answers a list equal to it (``Candidate`` compares by identity). The state of the
quota is read afresh every time.

Held to the bound without ``kept`` on random trees, with usage added and taken away again
between calls, and
lists drawn again from one pool: the same list again, its candidates in another order, one
left out, one swapped for another; every answer is the plain answer. By hand: a list with
one candidate swapped for one holding more is not answered from the first list's reading.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption.bound import FreedKept, may_fit
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Candidate
from preemptd.framework.testing import cohort, queue

from tests.framework.test_headroom_bound import _tree  # random queue trees with limits

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")


def _pool(rng: random.Random, leaves: list[QuotaNode]) -> list[Candidate]:
    workload: Any = None
    pool = []
    for _ in range(rng.randrange(1, 14)):
        usage = {CPU: rng.randrange(0, 4000, 500)}
        if rng.random() < 0.4:
            usage[GPU] = rng.randrange(0, 3000, 1000)
        pool.append(Candidate(workload, rng.choice(leaves), usage, "r", 1, only_within_nominal=rng.random() < 0.3))
    return pool


def _drawn(rng: random.Random, pool: list[Candidate], last: list[Candidate]) -> list[Candidate]:
    """A list from ``pool``, often the last one again or changed in one place."""
    pick = rng.random()
    if last and pick < 0.3:
        return list(last)
    if last and pick < 0.45:
        return last[:-1]
    if last and pick < 0.6:
        changed = list(last)
        changed[rng.randrange(len(changed))] = rng.choice(pool)
        return changed
    if last and pick < 0.7:
        return sorted(last, key=lambda c: rng.random())
    found = list(pool)
    rng.shuffle(found)
    found.sort(key=lambda c: c.leaf.index)  # candidates come grouped by queue
    return found[: rng.randrange(0, len(found) + 1)]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_kept_reading_answers_as_reading_the_candidates_again(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    pool = _pool(rng, leaves)
    for candidate in pool:  # the candidates' usage is in the accounting
        accounting.add_all(candidate.leaf, candidate.usage)
    kept: FreedKept = {}
    last: list[Candidate] = []
    added: list[tuple[QuotaNode, dict[Any, int]]] = []  # other usage, taken away again later
    for _ in range(12):
        for _ in range(rng.randrange(0, 4)):
            if added and rng.random() < 0.4:
                accounting.remove_all(*added.pop(rng.randrange(len(added))))
            else:
                added.append((rng.choice(leaves), {CPU: rng.randrange(0, 3000, 500), GPU: rng.randrange(0, 2000, 1000)}))
                accounting.add_all(*added[-1])
        last = _drawn(rng, pool, last)
        leaf = rng.choice(leaves)
        request = {CPU: rng.randrange(500, 9000, 500)}
        if rng.random() < 0.4:
            request[GPU] = rng.randrange(1000, 4000, 1000)
        for allow_borrowing in (True, False):
            before = [dict(u) for u in accounting.usage]
            plain = may_fit(accounting, leaf, request, last, allow_borrowing)
            assert may_fit(accounting, leaf, request, last, allow_borrowing, kept=kept) == plain
            assert accounting.usage == before


def test_a_list_with_one_candidate_swapped_is_read_afresh() -> None:
    """SEMANTICS §1 by hand. Cohort ``root`` (quota 4 cores, the sum of its queues'):
    ``a`` (nominal 4 cores, idle) and ``b`` (nominal 0, running 6 cores, all stored in the
    root, which is over-committed): a's Available is 4 - 6 = -2, clipped 0. ``a`` asks
    for 2 cores. The candidates [b1 (2 cores), b2 (1 core)] free 3 at most: Available
    reaches 1 at most, hopeless. [b1, b3 (4 cores)] free all 6: Available 4, it fits. The
    second list has the first's length and first candidate; its answer is its own, and
    the first list asked again is answered as before."""
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("a", "root", cpu=4), queue("b", "root", cpu=0)]})
    a, b = tree.nodes["a"], tree.nodes["b"]
    accounting = Accounting(tree)
    accounting.add_all(b, {CPU: 6000})
    workload: Any = None
    b1 = Candidate(workload, b, {CPU: 2000}, "r", 1)
    b2 = Candidate(workload, b, {CPU: 1000}, "r", 1)
    b3 = Candidate(workload, b, {CPU: 4000}, "r", 1)
    kept: FreedKept = {}
    assert not may_fit(accounting, a, {CPU: 2000}, [b1, b2], True, kept=kept)
    assert may_fit(accounting, a, {CPU: 2000}, [b1, b3], True, kept=kept)
    assert not may_fit(accounting, a, {CPU: 2000}, [b1, b2], True, kept=kept)
    assert len(kept) == 1  # one kept list per kind of attempt, length and first candidate
