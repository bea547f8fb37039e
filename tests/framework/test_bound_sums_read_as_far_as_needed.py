"""The quota bound's test of what all the candidates hold of a flavor-resource, read only as
far as it needs (``bound._Freed.reaches``, asked by ``may_fit``).

Without runs, the candidates are read in order a stretch at a time, and the reading stops
once what they hold reaches the need: usage is never negative, so the candidates after
that only add to it. The answer is the sum of every candidate's usage (of those the
attempt may take: one that may borrow takes none usable only within nominal) compared
with the need, worked out here by hand; asked again on the same candidates, the reading
goes on where it stopped and answers alike. A list whose first candidates hold enough is
read no further than its first stretch; one that never holds enough is read whole, once.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption import bound
from preemptd.framework.preemption.bound import may_fit
from preemptd.framework.session import Candidate

from tests.framework.test_bound_leaf_nominal_first import CPU, SPARE, _case, _expected


class _Counted(dict[Any, int]):
    """A usage map that counts how often a flavor-resource is read from it."""

    reads = 0

    def get(self, key: Any, default: Any = None) -> Any:
        _Counted.reads += 1
        return super().get(key, default)


def _candidates(rng: random.Random, count: int) -> list[Candidate]:
    workload: Any = None
    leaf: Any = None
    out = []
    for _ in range(count):
        usage = {fr: rng.randrange(0, 4) * 500 for fr in rng.sample([CPU, SPARE], rng.randrange(0, 3))}
        out.append(Candidate(workload, leaf, usage, "r", 1, only_within_nominal=rng.random() < 0.3))
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_what_the_candidates_hold_reaches_the_need_exactly_when_their_whole_sum_does(seed: int) -> None:
    rng = random.Random(seed)
    candidates = _candidates(rng, rng.randrange(0, 160))
    for allow in (True, False):
        freed = bound._Freed(candidates, allow, None)
        for _ in range(6):  # the same candidates asked again: the reading goes on where it stopped
            fr = rng.choice([CPU, SPARE])
            whole = sum(c.usage.get(fr, 0) for c in candidates if not (allow and c.only_within_nominal))
            need = rng.choice([whole, whole + 1, max(1, whole - 500), rng.randrange(1, whole + 2)])
            assert freed.reaches(fr, need) == (whole >= need), (allow, fr, need, whole)


def test_the_candidates_are_read_only_until_they_hold_enough() -> None:
    """200 candidates holding 1 cpu each: a need of 3 cpu is met within the first stretch,
    which is all that is read; a need of 201 cpu reads all 200 and is not met; asked then for
    10 cpu on the same candidates, the answer is known without reading any again."""
    workload: Any = None
    leaf: Any = None
    candidates = [Candidate(workload, leaf, _Counted({CPU: 1000}), "r", 1) for _ in range(200)]
    _Counted.reads = 0
    assert bound._Freed(candidates, True, None).reaches(CPU, 3000)
    assert _Counted.reads == bound._STRETCH < 200
    _Counted.reads = 0
    freed = bound._Freed(candidates, True, None)
    assert not freed.reaches(CPU, 201_000)
    assert _Counted.reads == 200
    _Counted.reads = 0
    assert freed.reaches(CPU, 10_000)
    assert _Counted.reads == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_the_bound_on_long_lists_answers_as_removing_every_candidate_one_by_one(seed: int) -> None:
    """The random trees and candidates of the bound's other tests, spread over several
    stretches among candidates that hold nothing (they free nothing, so the fit with every
    candidate removed is the same)."""
    rng = random.Random(seed)
    accounting, leaf, request, candidates = _case(rng)
    workload: Any = None
    padded = list(candidates)
    while len(padded) < 100:
        padded.insert(rng.randrange(0, len(padded) + 1), Candidate(workload, rng.choice(list(accounting.tree.leaves.values())), {}, "r", 1))
    for allow in (True, False):
        whole = _expected(accounting, leaf, request, candidates, allow)
        assert may_fit(accounting, leaf, request, padded, allow) == whole
        assert may_fit(accounting, leaf, request, padded, allow, exact=False) or not whole
