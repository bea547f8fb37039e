"""``cohort-reclaim`` keeps a sibling queue's count of left-out units while nothing is
taken from it.

A search that may only borrow (``borrowWithinCohort: Never`` and its queue not strictly
below its nominal) and has the advantage at no level is offered nothing by
``cohort-reclaim``: of each sibling queue above its nominal it only counts the units it
leaves out (SEMANTICS §4), for the wording "N candidate(s) use ...". A queue's units change
only when the session takes from one of its workloads, so the count is kept per queue,
priority bound and request with the queue's takes so far (``KEEP_OFFERS``). Sessions over
generated saturated clusters, where every queue is at its nominal, reclaims ``Any`` and
borrows nothing, and preemptions in sibling queues land between the searches, decide and
explain exactly as counting at every search does; a count kept across a take would not.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import queue_takes
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import cohort, inventory, open_session, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated
from tests.scenarios.test_search_memo import _random_cluster

Decided = tuple[dict[str, Any], dict[str, list[str]], dict[str, int | str]]


def _decide(monkeypatch: pytest.MonkeyPatch, keep: bool, objects: list[dict[str, Any]]) -> Decided:
    monkeypatch.setattr(cohort_reclaim, "KEEP_OFFERS", keep)
    actions, registry = default_session()
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(objects, NOW_MS), registry(), actions=actions, counters=counters)
    return json.loads(decisions.to_json()), decisions.explanations, counters


def _counted_lines(explanations: dict[str, list[str]]) -> list[str]:
    return [line for lines in explanations.values() for line in lines if " candidate(s) use the needed " in line]


@pytest.mark.parametrize(
    ("seed", "queues", "workloads", "share"),
    [(1, 20, 1500, 0.77), (2, 30, 1200, 0.5), (3, 10, 600, 0.9)],
)
def test_kept_counts_decide_and_explain_as_counting_at_every_search(
    monkeypatch: pytest.MonkeyPatch, seed: int, queues: int, workloads: int, share: float
) -> None:
    objects = generate_saturated(seed, queues=queues, workloads=workloads, pending_share=share)
    kept = _decide(monkeypatch, True, objects)
    every = _decide(monkeypatch, False, objects)
    assert kept[0]["preempted"]  # takes land between the searches
    assert _counted_lines(kept[1])  # and the searches count what they leave out
    assert kept == every


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_kept_counts_decide_and_explain_random_clusters_as_counting_at_every_search(seed: int) -> None:
    """Random cohorts of queues of every policy (priority bounds of ``LowerPriority``
    reclaim, borrowing limits, lenders): the same decisions and explanations."""
    parsed = _random_cluster(seed)
    decided = {}
    for keep in (True, False):
        cohort_reclaim.KEEP_OFFERS = keep
        try:
            decisions = run_session(snapshot(parsed, 100_000), _registry())
        finally:
            cohort_reclaim.KEEP_OFFERS = True
        decided[keep] = (decisions.to_json(), decisions.explanations)
    assert decided[True] == decided[False]


def test_a_count_is_kept_per_priority_bound() -> None:
    """SEMANTICS §4 by hand. Cohort root (5 cores, full): queue a (2 cores, reclaims
    ``LowerPriority``, ``borrowWithinCohort: Never``) runs ``a-old`` (2 cores, priority 9);
    queue b (1 core) runs ``b1`` (priority 1) and ``b5`` (priority 5, 2 cores): above its
    nominal. ``a2`` (2 cores, priority 6) may only borrow and has no advantage: of b it
    counts the units below 6, both. ``a1`` (1 core, priority 3, asking for less: not
    dominated) counts those below 3: ``b1`` alone."""
    policy = PreemptionPolicy(
        within_queue="LowerPriority", reclaim_within_cohort="LowerPriority", borrow_within_cohort="Never"
    )
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=2, preemption=policy), queue("b", "root", cpu=1),
         queue("c", "root", cpu=2)],
        [
            workload("a-old", "a", 2, priority=9, created=1, admitted=True),
            workload("b1", "b", 1, priority=1, created=2, admitted=True),
            workload("b5", "b", 2, priority=5, created=3, admitted=True),
            workload("a2", "a", 2, priority=6, created=10),
            workload("a1", "a", 1, priority=3, created=11),
        ],
    )
    decisions = run_session(snapshot(parsed, 100_000), _registry())
    assert not decisions.preempted and not decisions.admitted
    assert "2 candidate(s) use the needed cpu in flavor default" in decisions.explanations["ns/a2"]
    assert "1 candidate(s) use the needed cpu in flavor default" in decisions.explanations["ns/a1"]


def test_the_takes_of_a_queue_count_its_units_and_its_workloads_taken() -> None:
    """A unit taken counts for its queue and, when its workload names another queue (a
    unit of a queue's pods of a workload queued elsewhere), for that one too: the candidate
    index drops the lists of both (``queue_takes``)."""
    session = open_session(
        inventory(
            [cohort("root"), queue("a", "root", cpu=4), queue("b", "root", cpu=4)],
            [workload("w", "a", 1, admitted=True), workload("v", "b", 1, admitted=True)],
        ),
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)],
        100_000,
    )
    leaves = session.snapshot.tree.leaves
    w, v = session.snapshot.workloads["ns/w"], session.snapshot.workloads["ns/v"]

    def takes() -> dict[str, int]:
        return {name: queue_takes(session, leaf) for name, leaf in leaves.items()}

    assert takes() == {"a": 0, "b": 0}
    session.relied[("w",)] = SimpleNamespace(leaf=leaves["a"], workload=w)
    assert takes() == {"a": 1, "b": 0}
    session.relied[("v", 1)] = SimpleNamespace(leaf=leaves["a"], workload=v)
    session.relied[("v", 2)] = SimpleNamespace(leaf=leaves["b"], workload=v)
    assert takes() == {"a": 2, "b": 2}


def _registry() -> Registry:
    return Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
