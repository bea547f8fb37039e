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
from preemptd.framework.preemption import bound, search
from preemptd.framework.preemption.bound import may_fit
from preemptd.framework.run import run_session
from preemptd.framework.session import SearchResult
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape
from tests.framework.test_bound_leaf_nominal_first import _case, _expected
from tests.framework.test_walk_before_bound import searched_both_ways


def test_the_bounds_sums_say_hopeless_only_where_removing_every_candidate_does_not_fit() -> None:
    answers: Counter[str] = Counter()
    for seed in range(1000):
        accounting, leaf, request, candidates = _case(random.Random(seed))
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
    def ask(real: Callable[..., SearchResult], args: tuple[Any, ...], sums_first: bool) -> SearchResult:
        monkeypatch.setattr(search, "SUMS_FIRST", sums_first)  # the whole bound first, then walking first
        return real(*args[:8])

    ways = searched_both_ways(monkeypatch, contended, ask)
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
