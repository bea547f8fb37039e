"""A search that tells nobody walks first unless the bound's tests per flavor-resource
prove it hopeless (framework/preemption/search.py ``find_minimal``, ``SUMS_FIRST``;
bound.py ``may_fit(..., exact=False)``).

The quota bound first tests each flavor-resource alone (what the candidates of the
preemptor's queue free of it, what all of them free), then removes the candidates' usage
where it reaches the preemptor's path and asks the fit. Without ``exact`` it stops before
the removals: it says "hopeless" only where one of the tests per flavor-resource does, so
only where the whole bound does. A search it does not prove hopeless walks at once, and
asks the whole bound only when the walk found nothing (to say, silently, what the bound
would have said before any walk).

Held to the whole bound, that is to removing every candidate an attempt may take one by
one and testing the fit, on random queue trees: the bound without ``exact`` says
"hopeless" only where that fails, and each of its three answers occurs often. In the
benchmark's contended cluster each search is asked with the bound first and then walking
first on the same state, and answers alike: the same victims (the same units, in order),
borrowing, level, vetoes, message, lines, silence and lasting, counted as bounded the
same. The sessions with and without it decide and explain alike, and remove the
candidates' usage for the bound less often.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from preemptd.framework.preemption import bound, search, victims
from preemptd.framework.preemption.bound import may_fit
from preemptd.framework.quota import Accounting, QuotaNode
from preemptd.framework.run import run_session
from preemptd.framework.session import Candidate, SearchResult
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape
from tests.framework.test_bound_leaf_nominal_first import CPU, SPARE, _expected, _tree
from tests.framework.test_walk_before_bound import _fields


def test_the_bounds_sums_say_hopeless_only_where_removing_every_candidate_does_not_fit() -> None:
    answers: Counter[str] = Counter()
    for seed in range(1000):
        rng = random.Random(seed)
        tree = _tree(rng)
        leaves: list[QuotaNode] = list(tree.leaves.values())
        accounting = Accounting(tree)
        for _ in range(rng.randrange(0, 16)):
            accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 6000, 500), SPARE: rng.randrange(0, 6000, 500)})
        leaf = rng.choice(leaves)
        left = {q: {CPU: accounting.used(q, CPU), SPARE: accounting.used(q, SPARE)} for q in leaves}
        workload: Any = None
        candidates: list[Candidate] = []
        for _ in range(rng.randrange(0, 10)):  # each queue's candidates hold no more than it uses
            lender = leaf if rng.random() < 0.3 else rng.choice(leaves)
            usage: dict[Any, int] = {}
            for fr in rng.sample([CPU, SPARE], rng.randrange(0, 3)):
                usage[fr] = rng.randrange(0, left[lender][fr] + 1)
                left[lender][fr] -= usage[fr]
            candidates.append(Candidate(workload, lender, usage, "r", 1, only_within_nominal=rng.random() < 0.3))
        request = {fr: rng.randrange(500, 9000, 500) for fr in rng.sample([CPU, SPARE], rng.randrange(1, 3))}
        for allow in (True, False):
            whole = _expected(accounting, leaf, request, candidates, allow)
            assert may_fit(accounting, leaf, request, candidates, allow) == whole
            by_sums = may_fit(accounting, leaf, request, candidates, allow, exact=False)
            assert by_sums or not whole, (seed, allow)
            answers["fits" if whole else "hopeless by the removals" if by_sums else "hopeless by the sums"] += 1
    assert min(answers.values()) >= 20 and len(answers) == 3, answers


@pytest.fixture(scope="module")
def contended() -> Any:
    return snapshot(generate_shape("contended", 1), NOW_MS)


def test_a_search_walking_unless_the_sums_prove_it_hopeless_answers_as_the_bound_first(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    real: Callable[..., SearchResult] = search.find_minimal
    ways: Counter[str] = Counter()

    def both(*args: Any) -> SearchResult:
        # Asked with the whole bound first, then walking first, on the same state (a
        # search leaves the state as it was).
        session, asked = args[0], args[:8]
        answers = []
        for sums_first in (False, True):
            monkeypatch.setattr(search, "SUMS_FIRST", sums_first)
            before = session.counters.bounded
            answers.append((real(*asked), session.counters.bounded - before))
        (plain, plain_bounded), (fast, fast_bounded) = answers
        assert fast_bounded == plain_bounded
        assert _fields(fast) == _fields(plain)
        ways["found" if fast.victims else "hopeless" if plain_bounded else "walked in vain"] += 1
        return fast

    monkeypatch.setattr(victims, "find_minimal", both)
    actions, registry = default_session()
    run_session(contended, registry(), actions=actions)
    assert ways["found"] >= 300 and ways["hopeless"] >= 300 and ways["walked in vain"] >= 20, ways


def test_sessions_walking_unless_the_sums_prove_it_hopeless_decide_and_explain_as_the_bound_first(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    actions, registry = default_session()
    outcomes = []
    removals = []
    real = bound.fits_quota
    for sums_first in (False, True):
        monkeypatch.setattr(search, "SUMS_FIRST", sums_first)
        asked = [0]

        def counted(*args: Any, asked: list[int] = asked) -> bool:
            asked[0] += 1  # the bound's fit test after its removals
            return real(*args)

        monkeypatch.setattr(bound, "fits_quota", counted)
        counters: dict[str, int | str] = {}
        decisions = run_session(contended, registry(), actions=actions, counters=counters)
        outcomes.append((json.loads(decisions.to_json()), decisions.explanations, counters["searches-bounded"]))
        removals.append(asked[0])
    assert outcomes[0] == outcomes[1]
    assert removals[1] * 4 < removals[0], removals
