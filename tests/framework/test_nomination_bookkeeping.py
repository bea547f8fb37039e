"""What a nomination does around its victim search, done once.

* The flavor scan searches its last flavor as it meets it when nothing was put off before
  it and no flavor seen fits (``flavor-fungibility``, ``LAST_AT_ONCE``): putting that search
  off until the scan is over would search it first and take it, whatever it finds.
* A kept head is kept on the counts of its nomination read again without asking once
  more whether the head may judge (``heads.keep_head``): that is fixed for the workload
  and the session but for the statement's held operations, which are tested.
* A search a failure dominates is kept in the memo with no vetoes, and what the plugins
  said is read only before a search that runs (``victims.find_victims``): ``dominated``
  counts no veto and says nothing. Its search state takes the tree's epoch from the memo
  key (``failures.search_state_at``).

Each is held to the plain path: whole sessions decide, explain, store flavor scans and
count alike with the search put off, and every head kept or refused by the plain rule.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Workload
from preemptd.framework.preemption import failures, heads, memo, victims
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import NOCANDIDATES, NOFIT, PREEMPT, Assignment, Session
from preemptd.plugins import flavor_fungibility as ff

from benchmarks.generate import generate, generate_saturated
from tests.framework.test_kept_heads_by_queue import session_outcome
from tests.plugins.test_flavor_fungibility import (
    assign,
    chosen,
    job,
    positions,
    queue,
    session,
)


def _searched_later(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the searches the scan put off (``search_flavor``)."""
    real = ff.search_flavor
    calls = [0]

    def search_flavor(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(ff, "search_flavor", search_flavor)
    return calls


# --- the last flavor searched at once, by hand (SEMANTICS §3) ----------------------------------


@pytest.mark.parametrize("at_once", [True, False])
def test_a_scan_of_one_flavor_that_needs_victims_searches_it_once_and_takes_it(
    monkeypatch: pytest.MonkeyPatch, at_once: bool
) -> None:
    """Queue q has one flavor a of 4 cores, full with a low-priority job; the pending job
    (priority 10) needs 4. whenCanPreempt TryNextFlavor: a's search finds the low job, no
    other flavor can beat it, so a is taken with that victim and the scan reached the end
    of the list (-1). Searched once either way; put off only without ``LAST_AT_ONCE``."""
    monkeypatch.setattr(ff, "LAST_AT_ONCE", at_once)
    later = _searched_later(monkeypatch)
    pending = job("high", "q", 4, priority=10)
    s = session([queue("q", {"a": 4})], [job("low", "q", 4, on="a"), pending])
    found = assign(s, pending)
    assert (["a"], PREEMPT, ["ml/low"], {"main": {"cpu": -1}}) == (
        chosen(found), found.mode, [v.key for v in found.victims], positions(found)
    )
    assert found.tried[:2] == [
        "podSet main: flavor a: Preempt (1 victim(s))",
        "podSet main: scanned to the end of the flavor list; took flavor a (Preempt), the best by BorrowingOverPreemption",
    ]
    assert (0, 0 if at_once else 1) == (s.counters.left, later[0])


@pytest.mark.parametrize("at_once", [True, False])
def test_the_last_flavor_after_flavors_that_do_not_fit_is_searched_as_it_is_met(
    monkeypatch: pytest.MonkeyPatch, at_once: bool
) -> None:
    """a has 2 cores of quota, less than the 4 asked: NoFit (above its max quota). b is full
    with a job of the same priority: nothing may be preempted, NoCandidates, the only
    option, taken at level 0."""
    monkeypatch.setattr(ff, "LAST_AT_ONCE", at_once)
    later = _searched_later(monkeypatch)
    pending = job("high", "q", 4, priority=0)
    s = session([queue("q", {"a": 2, "b": 4})], [job("low", "q", 4, on="b"), pending])
    found = assign(s, pending)
    assert (["b"], NOCANDIDATES, [], 0) == (chosen(found), found.mode, found.victims, found.level)
    assert found.tried[0].startswith("podSet main: flavor a: NoFit")
    assert found.tried[1].startswith("podSet main: flavor b: NoCandidates")
    assert (0, 0 if at_once else 1) == (s.counters.left, later[0])


@pytest.mark.parametrize("at_once", [True, False])
def test_a_last_flavor_behind_one_put_off_is_still_put_off(monkeypatch: pytest.MonkeyPatch, at_once: bool) -> None:
    """a and b both full with a low-priority job: a's search is put off, so b's is too
    (which one is searched first is decided once both are seen). Both are searched, a tie at
    Preempt level 0 goes to a."""
    monkeypatch.setattr(ff, "LAST_AT_ONCE", at_once)
    later = _searched_later(monkeypatch)
    pending = job("high", "q", 4, priority=10)
    s = session([queue("q", {"a": 4, "b": 4})], [job("low-a", "q", 4, on="a"), job("low-b", "q", 4, on="b"), pending])
    found = assign(s, pending)
    assert (["a"], PREEMPT, ["ml/low-a"]) == (chosen(found), found.mode, [v.key for v in found.victims])
    assert 2 == later[0]


# --- whole sessions against the plain path ------------------------------------------------------


CLUSTERS = [
    pytest.param(lambda: generate_saturated(1, queues=20, workloads=1500), id="saturated"),
    pytest.param(lambda: generate_saturated(2, queues=30, workloads=2000, pending_share=0.5), id="half-pending"),
    pytest.param(lambda: generate("S", 1), id="typical-S-1"),
    pytest.param(lambda: generate("S", 2), id="typical-S-2"),
]


@pytest.mark.parametrize("objects", CLUSTERS)
def test_sessions_decide_alike_with_the_last_flavor_searched_at_once_or_put_off(
    monkeypatch: pytest.MonkeyPatch, objects: Any
) -> None:
    made = objects()
    later = _searched_later(monkeypatch)
    at_once = session_outcome(made)
    put_off_at_once = later[0]
    monkeypatch.setattr(ff, "LAST_AT_ONCE", False)
    put_off = session_outcome(made)
    assert at_once == put_off
    assert later[0] > put_off_at_once  # the searches it put off were searched at once


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    queues=st.sampled_from([10, 20]),
    per_queue=st.integers(5, 40),
    share=st.sampled_from([0.3, 0.6, 0.9]),
)
def test_generated_saturated_sessions_decide_alike_with_the_search_at_once_or_put_off(
    seed: int, queues: int, per_queue: int, share: float
) -> None:
    made = generate_saturated(seed, queues=queues, workloads=queues * per_queue, pending_share=share)
    at_once = session_outcome(made)
    ff.LAST_AT_ONCE = False
    try:
        put_off = session_outcome(made)
    finally:
        ff.LAST_AT_ONCE = True
    assert at_once == put_off


def _plain_keep(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Check every ``keep_head`` against the plain rule: kept exactly when the head's counts
    read afresh (``head_counts``) equal those before its nomination, it has no victims and
    no plugin vetoed; the counts of heads kept and refused."""
    real = heads.keep_head
    seen = [0, 0]

    def keep_head(session: Session, leaf: QuotaNode, workload: Workload, assignment: Assignment, before: Any) -> None:
        plain = (
            before is not None
            and assignment.mode in (NOFIT, NOCANDIDATES)
            and not assignment.victims
            and not assignment.vetoed_by
            and heads.head_counts(session, workload, leaf) == before
        )
        kept = heads.kept_heads(session, leaf, before[-1]) if before is not None else None
        had = len(kept) if kept is not None else 0
        real(session, leaf, workload, assignment, before)
        kept = heads.kept_heads(session, leaf, before[-1]) if before is not None else None
        now = len(kept) if kept is not None else 0
        assert plain == (now == had + 1)
        assert kept is None or kept[-1].head is workload or not plain
        seen[0 if plain else 1] += 1

    from preemptd.framework.actions import nominate

    monkeypatch.setattr(nominate, "keep_head", keep_head)
    return seen


@pytest.mark.parametrize("objects", CLUSTERS)
def test_every_head_is_kept_exactly_when_the_plain_rule_keeps_it(monkeypatch: pytest.MonkeyPatch, objects: Any) -> None:
    seen = _plain_keep(monkeypatch)
    session_outcome(objects())
    assert seen[0] > 0


def test_a_head_whose_nomination_made_a_plugin_say_something_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explanation line added to the head while it is nominated (what a plugin's note
    does) is a plugin speaking: the head judges nobody, as the plain rule says."""
    seen = _plain_keep(monkeypatch)
    real = ff.finish_assignment

    def finish_assignment(session: Session, assignment: Assignment, *args: Any, **kw: Any) -> Assignment:
        session.explain(assignment.workload.key, "a plugin's note")
        return real(session, assignment, *args, **kw)

    monkeypatch.setattr(ff, "finish_assignment", finish_assignment)
    session_outcome(generate_saturated(1, queues=10, workloads=400))
    assert seen[0] == 0 and seen[1] > 0


@pytest.mark.parametrize("objects", CLUSTERS)
def test_a_dominated_search_says_nothing_and_is_kept_as_remember_keeps_it(
    monkeypatch: pytest.MonkeyPatch, objects: Any
) -> None:
    """``dominated`` is asked in the search state read afresh, leaves every count
    ``snapshot_counts`` reads as it was, and each answer it gives is in the memo as
    ``memo.remember`` keeps it (no vetoes)."""
    real = victims.dominated
    answered = [0]

    def dominated(session: Session, preemptor: Workload, leaf: QuotaNode, *args: Any) -> Any:
        before = memo.snapshot_counts(session, preemptor)
        assert args[-1] == failures.search_state(session, leaf)  # the state as read with the key
        found = real(session, preemptor, leaf, *args)
        assert memo.snapshot_counts(session, preemptor) == before
        if found is not None:
            answered[0] += 1
            plain: dict[Any, Any] = {}
            session_memo = session.memo
            assert session_memo is not None
            key = memo.memo_key(session, preemptor, leaf, *args[:3])
            # What ``remember`` keeps of it, in a memo of its own.
            alone: Any = SimpleNamespace(memo=plain, registry=session.registry)
            assert memo.remember(alone, key, found, before, before[1])

            def check() -> None:
                assert session_memo[key] == plain[key]
                assert session_memo[key][0] is found

            checks.append(check)
        return found

    checks: list[Any] = []
    real_find = victims.find_victims

    def find_victims(*args: Any, **kw: Any) -> Any:
        found = real_find(*args, **kw)
        while checks:
            checks.pop()()
        return found

    monkeypatch.setattr(victims, "dominated", dominated)
    from preemptd.framework import flavors

    monkeypatch.setattr(flavors, "find_victims", find_victims)
    session_outcome(objects())
    assert answered[0] > 0
