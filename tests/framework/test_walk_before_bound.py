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


@pytest.fixture(scope="module")
def contended() -> Any:
    return snapshot(generate_shape("contended", 1), NOW_MS)


def test_a_search_walking_first_answers_as_the_search_asking_the_bound_first(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    monkeypatch.setattr(search, "SUMS_FIRST", False)  # the bound first unless expected to find victims
    real: Callable[..., SearchResult] = search.find_minimal
    ways: Counter[str] = Counter()

    def both(*args: Any) -> SearchResult:
        # Asked with the bound first, then walking first, on the same state (a search
        # leaves the state as it was).
        session, asked = args[0], args[:7]
        before = session.counters.bounded
        plain = real(*asked, False)
        plain_bounded = session.counters.bounded - before
        before = session.counters.bounded
        fast = real(*asked, True)
        assert session.counters.bounded - before == plain_bounded
        assert _fields(fast) == _fields(plain)
        if fast.victims:
            ways["found"] += 1
        elif plain_bounded:
            ways["hopeless"] += 1
        else:
            ways["walked in vain"] += 1
        return fast

    monkeypatch.setattr(victims, "find_minimal", both)
    actions, registry = default_session()
    run_session(contended, registry(), actions=actions)
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
