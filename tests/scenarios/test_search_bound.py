"""A search the quota bound proves hopeless decides as the full walk does
(framework/preemption/walk.py, ``Walk.may_fit`` and ``Walk.attempt(hopeless=True)``).

Each case is decided on the fast path (memo and bound on) and on the plain path
(``memo=False``: every search walks its candidates with fit tests), and the decisions,
the plugins' vetoes and the pending messages must be the same; the counters show that
the bound did answer.
"""

from __future__ import annotations

from typing import Any

from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, hookimpl
from preemptd.framework.testing import (
    cohort,
    decide,
    inventory,
    open_session,
    queue,
    snapshot,
    workload,
)
from preemptd.plugins import cohort_reclaim, gpu_victims, min_runtime, priority
from test_search_memo import assert_same_decisions

from benchmarks.generate import NOW_MS, generate_saturated

NOW = 1_000_000


def _registry() -> Registry:
    return Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, None)]
    )


def _both(parsed: Any, now: int) -> list[tuple[str, dict[str, int], dict[str, int | str]]]:
    out = []
    for memo in (True, False):
        registry = _registry()
        counters: dict[str, int | str] = {}
        decisions = run_session(snapshot(parsed, now), registry, actions=("allocate", "preempt"), counters=counters, memo=memo)
        out.append((decisions.to_json(), dict(registry.vetoes), counters))
    return out


def test_a_hopeless_search_reports_the_vetoes_and_notes_of_the_full_walk() -> None:
    """Queue a (4 cores) runs ``young`` (1 core, admitted 10 s ago, protected by a 60 s
    preempt min-runtime), ``old`` (1 core, long admitted) and ``top`` (2 cores, above the
    preemptor). ``high`` asks for 4 cores: even with ``young`` and ``old`` gone only 2 are
    free, so the search fails; the pending reason and message must still name the
    min-runtime veto of ``young`` (SEMANTICS §5), as the full walk does."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy, preempt_min_runtime=60_000)],
        [
            workload("young", "a", 1, priority=1, created=1, admitted=True, admitted_at=NOW - 10_000),
            workload("old", "a", 1, priority=2, created=2, admitted=True, admitted_at=0),
            workload("top", "a", 2, priority=9, created=3, admitted=True, admitted_at=0),
            workload("high", "a", 4, priority=5, created=4),
        ],
    )
    (fast, fast_vetoes, fast_counts), (plain, plain_vetoes, plain_counts) = _both(parsed, NOW)
    assert fast == plain
    assert fast_vetoes == plain_vetoes == {"min-runtime": 1}
    assert '"reason": "MinRuntime"' in fast and "vetoed by min-runtime" in fast
    assert fast_counts["searches-bounded"] == 1
    assert plain_counts["searches-bounded"] == 0


def test_a_search_that_can_succeed_is_not_bounded() -> None:
    """With 3 cores asked, taking ``young`` and ``old`` frees enough: the bound lets the
    walk run, and it finds the victims."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy)],
        [
            workload("young", "a", 1, priority=1, created=1, admitted=True, admitted_at=0),
            workload("old", "a", 1, priority=2, created=2, admitted=True, admitted_at=0),
            workload("top", "a", 2, priority=9, created=3, admitted=True, admitted_at=0),
            workload("high", "a", 2, priority=5, created=4),
        ],
    )
    (fast, _, fast_counts), (plain, _, _) = _both(parsed, NOW)
    assert fast == plain
    assert fast.count('"preemptor": "ns/high"') == 2
    assert fast_counts["searches-bounded"] == 0


def test_saturated_searches_are_bounded_and_decide_as_the_full_walk() -> None:
    """Saturated queues (each at exactly its nominal, nothing to borrow): most heads find
    no victims, and the bound answers nearly all of those searches."""
    objects = generate_saturated(1, queues=10, workloads=300)
    (fast, fast_vetoes, fast_counts), (plain, plain_vetoes, _) = _both(objects, NOW_MS)
    # Most of them are not even searched: a failed search of their queue dominates them
    # (their messages name it), and the bound answered the searches that did run.
    assert assert_same_decisions(fast, plain, snapshot(objects, NOW_MS).workloads) > 0
    assert fast_vetoes == plain_vetoes
    bounded = fast_counts["searches-bounded"]
    assert isinstance(bounded, int) and bounded > 0


def test_candidates_usable_only_within_nominal_are_counted_when_left_out() -> None:
    """``a`` is at its nominal and may not borrow within the cohort (``borrowWithinCohort:
    Never``), so every attempt of its search borrows and the units of ``c`` (borrowing
    from ``b``) are usable only within nominal: the search leaves them out. The pending
    message must still be the one of a search that had candidates, and the explanation
    must still count them, as on the plain path."""
    policy = PreemptionPolicy(
        within_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort="Never"
    )
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=policy),
            queue("b", "root", cpu=4),
            queue("c", "root", cpu=4),
        ],
        [
            workload("a-top", "a", 4, priority=9, created=1, admitted=True, admitted_at=0),
            workload("b-run", "b", 2, priority=0, created=2, admitted=True, admitted_at=0),
            workload("c-1", "c", 3, priority=0, created=3, admitted=True, admitted_at=0),
            workload("c-2", "c", 3, priority=0, created=4, admitted=True, admitted_at=0),
            workload("a-new", "a", 2, priority=5, created=5),
        ],
    )
    explained = []
    for memo in (True, False):
        counters: dict[str, int | str] = {}
        decisions = run_session(
            snapshot(parsed, NOW), _registry(), actions=("allocate", "preempt"), counters=counters, memo=memo
        )
        explained.append((decisions.to_json(), decisions.explanations.get("ns/a-new"), counters["candidates-examined"]))
    (fast, fast_lines, fast_seen), (plain, plain_lines, plain_seen) = explained
    assert fast == plain
    assert "no set of preemptible victims frees enough room" in fast
    assert fast_lines == plain_lines
    assert fast_lines is not None and "2 candidate(s) use the needed cpu in flavor default" in fast_lines
    # Counted for the wording, but never handed to the search.
    assert fast_seen == plain_seen == 0


def test_a_waiting_victim_is_taken_before_the_lender_test_of_its_queue() -> None:
    """``b`` (nominal 2) runs four 1-core workloads, borrowing 2 of ``a``'s; ``high`` in
    ``a`` asks for 3 cores, more than ``a``'s nominal. Reclaiming from ``b`` may not push
    it below its nominal (SEMANTICS §4), so only two of its workloads may go, which frees
    2 cores: no victims. The walk lets accepted victims wait, but the lender test of each
    next candidate of ``b`` must see ``b`` without the victims already accepted from it,
    or a third one would pass and the search would wrongly succeed."""
    policy = PreemptionPolicy(reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority")
    parsed = inventory(
        [cohort("all"), queue("a", "all", cpu=2, preemption=policy), queue("b", "all", cpu=2)],
        [workload(f"b{i}", "b", 1, priority=0, created=i, admitted=True, admitted_at=0) for i in range(4)]
        + [workload("high", "a", 3, priority=5, created=9)],
    )
    (fast, fast_vetoes, fast_counts), (plain, plain_vetoes, _) = _both(parsed, NOW)
    assert fast_vetoes == plain_vetoes
    assert fast == plain
    assert '"preempted": []' in fast
    assert "no set of preemptible victims frees enough room" in fast
    assert fast_counts["searches-bounded"] == 0  # the bound alone cannot tell: the walk ran


def _hopeless_cluster(window: int | None) -> Any:
    """Queue a (4 cores, LowerPriority) is full: ``low`` (1 core) and ``top`` (3 cores,
    above the preemptor). ``high`` asks for 3 cores and may take only ``low``: hopeless.
    ``window``: a preempt min-runtime on the queue (``low`` was admitted 10 s ago)."""
    policy = PreemptionPolicy(within_queue="LowerPriority")
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy, preempt_min_runtime=window)],
        [
            workload("low", "a", 1, priority=1, created=1, admitted=True, admitted_at=NOW - 10_000),
            workload("top", "a", 3, priority=9, created=2, admitted=True, admitted_at=0),
            workload("high", "a", 3, priority=5, created=4),
        ],
    )


def test_min_runtime_without_any_window_is_not_asked() -> None:
    """No window anywhere (the defaults are 0 s and no queue sets one): min-runtime allows
    every candidate (SEMANTICS §5), says so at open, and the session asks nobody; with a
    window on the queue it is asked, and ``low`` is protected."""
    plugins = [("priority", priority, None), ("min-runtime", min_runtime, None), ("gpu-victims", gpu_victims, None)]
    quiet = open_session(_hopeless_cluster(None), plugins, NOW)
    assert quiet.may_veto is False
    guarded = open_session(_hopeless_cluster(60_000), plugins, NOW)
    assert guarded.may_veto is True
    assert [p.reason for p in decide(guarded).pending] == ["MinRuntime"]


def test_a_hopeless_search_nobody_may_veto_is_not_walked() -> None:
    """A plugin that says at open that it allows every candidate is never asked; with no
    plugin left that may refuse a candidate, a search the bound proves hopeless is not
    walked at all, and decides as the plain path's full walk (which asks the plugin)."""
    asked: list[str] = []

    class Allowing:
        MEMO_SAFE = True

        def __init__(self, says_so: bool) -> None:
            self.says_so = says_so

        @hookimpl
        def session_open(self, session: Any) -> None:
            if self.says_so:
                session.never_vetoes("allowing")

        @hookimpl
        def is_preemptible(self, session: Any, action: str, preemptor: Any, preemptee: Any) -> bool:
            asked.append(preemptee.key)
            return True

    out = {}
    for says_so, memo in ((True, True), (False, True), (False, False)):
        asked.clear()
        registry = Registry([("priority", priority, None), ("allowing", Allowing(says_so), None)])
        counters: dict[str, int | str] = {}
        decisions = run_session(snapshot(_hopeless_cluster(None), NOW), registry, counters=counters, memo=memo)
        out[(says_so, memo)] = (decisions.to_json(), list(asked), counters["searches-bounded"])
    assert out[(True, True)][0] == out[(False, True)][0] == out[(False, False)][0]
    assert "no set of preemptible victims frees enough room" in out[(True, True)][0]
    assert out[(True, True)][1:] == ([], 1)
    # Not said: the hopeless walk asks it about ``low``, as the plain path's full walk does.
    assert out[(False, True)][1:] == (["ns/low"], 1)
    assert out[(False, False)][1] == ["ns/low"]
