"""A failed search that holds for the rest of the session (``preemption/failures.py``).

The rounds only add to a session's committed state: usage, node room taken, victims
chosen. A queue that may only borrow (``borrowWithinCohort: Never``, not strictly below
its nominal) and has the advantage at no level is offered nothing by ``cohort-reclaim``
(it only counts what it leaves out), and its own candidates only lose the victims chosen:
a search of it that failed fails again in every later state, for every head it dominates.
Such a failure is kept when the state moves; a search that may gain candidates later, a
failure without candidates of a search that counts what it leaves out (a later search may
count some, and be worded otherwise), and a session with a
plugin whose answers are not known to behave so keep their failures to their state.
Decisions are the plain path's; only the dominated heads' messages name their judge.
"""

from __future__ import annotations

import json
from typing import Any

from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.preemption import failures
from preemptd.framework.run import run_session
from preemptd.framework.session import Candidate, Registry, Session, VictimSearch, hookimpl
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, min_runtime, priority

from tests.scenarios.test_search_memo import NO_CANDIDATE, NO_SET, assert_same_decisions

NEVER = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort="Never")
WITHIN = PreemptionPolicy(within_queue="LowerPriority")
JUDGED = " (judged with ns/a1: no lower priority, asking for no more)"


class _Offers:
    """A third-party plugin that offers candidates (none), declared ``MEMO_SAFE``."""

    MEMO_SAFE = True

    @staticmethod
    @hookimpl
    def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[Candidate]:
        return []


def _registry(*more: tuple[str, Any, None]) -> Registry:
    return Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, None),
         *more]
    )


def _decide(parsed: Any, memo: bool, *more: tuple[str, Any, None]) -> tuple[dict[str, Any], dict[str, int | str]]:
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(parsed, 100_000), _registry(*more), counters=counters, memo=memo)
    return json.loads(decisions.to_json()), counters


def _sibling_commit(a1_cpu: int, own_low: bool, policy: PreemptionPolicy = NEVER) -> Any:
    """Cohort root (4 cores, full). Queue a (2 cores, ``policy``) runs ``a-old`` (priority 9)
    and, with ``own_low``, ``a-low`` (1 core, priority 1; ``a-old`` then 1 core). Queue b
    (2 cores, in-queue preemption) runs ``b-x`` (priority 1) and ``b-y`` (priority 2), 1
    core each. Pending: ``a1`` (priority 5) and ``a2`` (priority 4), ``a1_cpu`` cores each, in
    a; ``b3`` (1 core, priority 8) in b, which takes ``b-x`` in round 1: its commit moves the
    tree's state and leaves b above its nominal (``b-x`` is counted until it is gone)."""
    running = [workload("a-old", "a", 1 if own_low else 2, priority=9, created=1, admitted=True)]
    if own_low:
        running.append(workload("a-low", "a", 1, priority=1, created=2, admitted=True))
    return inventory(
        [cohort("root"), queue("a", "root", cpu=2, preemption=policy), queue("b", "root", cpu=2, preemption=WITHIN)],
        [
            *running,
            workload("b-x", "b", 1, priority=1, created=3, admitted=True),
            workload("b-y", "b", 1, priority=2, created=4, admitted=True),
            workload("a1", "a", a1_cpu, priority=5, created=10),
            workload("a2", "a", a1_cpu, priority=4, created=11),
            workload("b3", "b", 1, priority=8, created=5),
        ],
    )


def test_a_failure_of_a_queue_that_may_only_borrow_answers_after_a_sibling_commit() -> None:
    """SEMANTICS §4 by hand. Round 1: ``a1`` (2 cores) may take only ``a-low`` (1 core):
    a stays at its nominal and the cohort full, so no set fits. ``b3`` takes ``b-x``. Round
    2: ``a2`` (2 cores, priority 4) is no stronger and asks no less; a still may only
    borrow, without the advantage, so ``a1``'s failure answers it although the tree's state
    moved. Searched, it would count b's units (b is above its nominal now) besides
    ``a-low``, and fail the same way."""
    parsed = _sibling_commit(2, own_low=True)
    decided, counters = _decide(parsed, memo=True)
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert [p["workload"] for p in decided["preempted"]] == ["ns/b-x"]
    assert pending["ns/a1"]["message"] == NO_SET
    assert pending["ns/a2"]["message"] == NO_SET + JUDGED
    assert counters["victim-searches"] == 2  # a1, b3
    plain, plain_counts = _decide(parsed, memo=False)
    assert plain_counts["victim-searches"] == 3
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain), parsed.workloads) == 1


def test_a_failure_without_candidates_of_a_queue_that_may_only_borrow_keeps_to_its_state() -> None:
    """``a1`` (1 core) has no candidate at all: nothing below it in a, and b at its nominal
    in round 1, so nothing even counted ("no running workload ..."). After ``b3``'s take b
    is above its nominal: searched, ``a2`` counts its two units and is worded as a search
    with candidates. So this failure is not kept across the commit: ``a2`` is searched."""
    parsed = _sibling_commit(1, own_low=False)
    decided, counters = _decide(parsed, memo=True)
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert pending["ns/a1"]["message"] == NO_CANDIDATE
    assert pending["ns/a2"]["message"] == NO_SET
    assert counters["victim-searches"] == 3
    plain, _ = _decide(parsed, memo=False)
    assert decided == plain


def test_a_failure_without_candidates_of_a_queue_that_never_reclaims_answers_after_a_sibling_commit() -> None:
    """The same cluster with queue a reclaiming ``Never``: ``cohort-reclaim`` offers it
    nothing and counts nothing, now or later, so ``a1``'s failure without candidates lasts
    and answers ``a2`` (no stronger, asking no less) after ``b3``'s commit; searched, ``a2``
    would find no candidate either."""
    never = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Never", borrow_within_cohort="Never")
    parsed = _sibling_commit(1, own_low=False, policy=never)
    decided, counters = _decide(parsed, memo=True)
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert [p["workload"] for p in decided["preempted"]] == ["ns/b-x"]
    assert pending["ns/a1"]["message"] == NO_CANDIDATE
    assert pending["ns/a2"]["message"] == NO_CANDIDATE + JUDGED
    assert counters["victim-searches"] == 2  # a1, b3
    plain, _ = _decide(parsed, memo=False)
    assert assert_same_decisions(json.dumps(decided), json.dumps(plain), parsed.workloads) == 1


def test_a_third_party_plugin_offering_candidates_keeps_failures_to_their_state() -> None:
    """The same session as the first test with a plugin of another author that offers
    candidates (``MEMO_SAFE``, but promising nothing of later states): ``a2`` is searched."""
    parsed = _sibling_commit(2, own_low=True)
    decided, counters = _decide(parsed, True, ("offers", _Offers, None))
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    assert pending["ns/a2"]["message"] == NO_SET
    assert counters["victim-searches"] == 3
    plain, _ = _decide(parsed, False, ("offers", _Offers, None))
    assert decided == plain


def _failure(key: str, lasting: bool) -> Any:
    return (key, 5, 10, {("default", "cpu"): 1000}, frozenset({("default", "cpu")}), False, NO_SET, lasting)


def test_a_state_that_moves_keeps_the_lasting_failures_in_a_new_list() -> None:
    leaf = snapshot(_sibling_commit(2, own_low=True), 100_000).tree.leaves["a"]
    kept, gone, also = _failure("ns/k", True), _failure("ns/g", False), _failure("ns/l", True)
    before = [kept, gone, also]
    by_leaf: Any = {leaf.index: ((1, 1, 0), before)}
    assert failures._kept_now(by_leaf, leaf, (1, 1, 0)) is before
    now = failures._kept_now(by_leaf, leaf, (2, 3, 1))
    assert now == [kept, also] and now is not before
    assert by_leaf[leaf.index] == ((2, 3, 1), [kept, also])
    by_leaf[leaf.index] = ((2, 3, 1), [gone])
    assert failures._kept_now(by_leaf, leaf, (3, 3, 1)) is None
    assert leaf.index not in by_leaf
