"""A search expected to find victims walks before it asks the quota bound
(framework/preemption/search.py ``find_minimal``, ``likely``; victims.py names the
searches that found victims).

A head offered again next round asks the same searches again in a later state, and most
find victims again: the bound, which only proves searches hopeless, is then asked only
when the walk found none. In the benchmark's contended cluster (many heads of one full
GPU flavor, offered again round after round), a search walking first must answer exactly
as the same search asking the bound first: the same victims (the same units, in order),
the same borrowing, level, vetoes, message, lines, silence and lasting, counted as
bounded the same; so every search of that session is asked both ways, whether it is
expected to find victims or not. All three ways a walk-first search can go must occur
often (victims found; none, the bound proving the search hopeless; none, the bound
letting it walk), or the test would prove nothing. The sessions with and without it
(searches that found victims before walk first, until a walk is wasted on a hopeless
search of the same flavor-resources) decide and explain alike, and ask the bound less.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from preemptd.framework.preemption import memo, search, victims
from preemptd.framework.run import run_session
from preemptd.framework.session import SearchResult
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape


def _fields(result: SearchResult) -> tuple[Any, ...]:
    return (
        [id(v) for v in result.victims],
        result.allow_borrowing,
        result.level,
        result.vetoed_by,
        result.message,
        list(result.lines),
        result.silent,
        result.lasting,
        result.replicas,
    )


def searched_both_ways(
    monkeypatch: pytest.MonkeyPatch, cluster: Any, ask: Callable[[Callable[..., SearchResult], tuple[Any, ...], bool], SearchResult]
) -> Counter[str]:
    """Every search of a default session over ``cluster`` asked the plain way, then the
    fast way (``ask(find_minimal, its arguments, fast)``), on the same state (a search
    leaves the state as it was): counted as bounded alike and answering alike. Returns how
    the searches went: victims found; none, the bound proving it hopeless; none, walked in vain."""
    real: Callable[..., SearchResult] = search.find_minimal
    ways: Counter[str] = Counter()

    def both(*args: Any) -> SearchResult:
        session = args[0]
        answers = []
        for fast in (False, True):
            before = session.counters.bounded
            answers.append((ask(real, args, fast), session.counters.bounded - before))
        (plain, plain_bounded), (found, found_bounded) = answers
        assert found_bounded == plain_bounded
        assert _fields(found) == _fields(plain)
        ways["found" if found.victims else "hopeless" if plain_bounded else "walked in vain"] += 1
        return found

    monkeypatch.setattr(victims, "find_minimal", both)
    actions, registry = default_session()
    run_session(cluster, registry(), actions=actions)
    return ways


@pytest.fixture(scope="module")
def contended() -> Any:
    return snapshot(generate_shape("contended", 1), NOW_MS)


def test_a_search_walking_first_answers_as_the_search_asking_the_bound_first(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    monkeypatch.setattr(search, "SUMS_FIRST", False)  # the bound first unless expected to find victims
    ways = searched_both_ways(monkeypatch, contended, lambda real, args, likely: real(*args[:7], likely))
    assert ways["found"] >= 100 and ways["hopeless"] >= 100 and ways["walked in vain"] >= 20, ways


def test_sessions_walking_first_decide_and_explain_as_the_bound_first(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    monkeypatch.setattr(search, "SUMS_FIRST", False)
    actions, registry = default_session()
    outcomes = []
    bounds = []
    for walk_first in (False, True):
        monkeypatch.setattr(search, "WALK_FIRST", walk_first)
        real = search.may_fit
        asked = [0]

        def counted(*args: Any, real: Any = real, asked: list[int] = asked) -> bool:
            asked[0] += 1
            return bool(real(*args))

        monkeypatch.setattr(search, "may_fit", counted)
        counters: dict[str, int | str] = {}
        decisions = run_session(contended, registry(), actions=actions, counters=counters)
        monkeypatch.setattr(search, "may_fit", real)
        outcomes.append((json.loads(decisions.to_json()), decisions.explanations, counters["searches-bounded"]))
        bounds.append(asked[0])
    assert outcomes[0] == outcomes[1]
    assert bounds[1] < bounds[0], bounds  # the bound was left out where a walk found victims


def test_a_memo_key_holds_the_state_only_from_the_index_the_search_strips(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    # victims.py names a search by its memo key less the state (key[:_STATE]); were the
    # state to begin elsewhere, a head asked again would never be named the same, or two
    # different searches would be.
    real = victims.memo_key
    seen: list[bool] = []

    def checked(session: Any, preemptor: Any, leaf: Any, *rest: Any) -> Any:
        key = real(session, preemptor, leaf, *rest)
        if key is not None:
            state = key[memo._STATE :]
            seen.append(
                state[0] == session.statement.epoch(leaf)
                and state[2:] == (len(session.relied), len(session.taken))
                and preemptor.key == key[0]
            )
        return key

    monkeypatch.setattr(victims, "memo_key", checked)
    actions, registry = default_session()
    run_session(contended, registry(), actions=actions)
    assert seen and all(seen)
