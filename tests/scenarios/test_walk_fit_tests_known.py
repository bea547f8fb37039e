"""Fit tests a lazy victim walk knows the answer of without running them
(framework/preemption/walk.py).

* **Within nominal.** An attempt that may not borrow fails its quota test while the
  preemptor's leaf, with the request, stays above its nominal on some flavor-resource. The
  leaf's usage is its own: only victims of the preemptor's own queue lower it, each by
  exactly its usage. Until they bring it down, the test is not run.
* **A failed test tightens the running bound.** The bound is the unclipped Available at the
  start plus the usage of the victims taken since; after a failed test it goes on from the
  Available that test read, which is exact then and grows by at most what later victims
  free.

Held to the step-by-step walk (every victim taken at once, the test run at every step, no
bound) on hand-built cases, random queue trees and generated clusters: the same decisions,
explanations and veto counts.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import walk as walk_module
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import (
    cohort,
    inventory,
    queue,
    random_queues,
    random_workloads,
    snapshot,
    workload,
)
from preemptd.plugins import cohort_reclaim, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec

NOW = 100_000
RECLAIM = PreemptionPolicy("LowerPriority", "Any", "Never")


def _decided(parsed: Any, registry: Registry | None = None) -> tuple[str, str, str]:
    """The decisions, explanations and veto counts of a session."""
    registry = registry or Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
    decisions = run_session(snapshot(parsed, NOW), registry, actions=("allocate", "preempt"))
    explained = json.dumps(decisions.explanations, sort_keys=True)
    return decisions.to_json(), explained, repr(sorted(registry.vetoes.items()))


def _step_by_step(patch: pytest.MonkeyPatch) -> None:
    """The walk takes every victim at once and tests at every step (no waiting victims,
    no running bound, no quota bound before it). Heads are then judged by other heads, so
    a pending message may be another head's and a judged head explains no search of its
    own: only the decisions but for pending messages are compared (:func:`_unjudged`)."""
    patch.setattr(walk_module.Walk, "may_skip_walk", lambda self: False)


def _unjudged(decisions: str) -> Any:
    """The decisions but for pending messages (a judged head's names the head it was
    judged with, or tells that head's outcome)."""
    found = json.loads(decisions)
    for entry in found["pending"]:
        entry.pop("message", None)
    return found


def _testing_each_step(patch: pytest.MonkeyPatch) -> None:
    """The lazy walk without the tests it knows: the test within nominal is never known
    to fail, and the running bound is never tightened (each attempt keeps what its bound
    first found short, ``bound.lacking_of``, and goes on subtracting from it)."""
    patch.setattr(walk_module.Walk, "_over_nominal", lambda self: {})
    real_attempt = walk_module.Walk.attempt
    real_lacking = walk_module.lacking_of
    made: list[Any] = []

    def attempt(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(None)
        try:
            return real_attempt(self, *args, **kwargs)
        finally:
            made.pop()

    def lacking_of(request: Any, room: Any) -> Any:
        if made[-1] is None:
            made[-1] = real_lacking(request, room)
        return made[-1]

    patch.setattr(walk_module.Walk, "attempt", attempt)
    patch.setattr(walk_module, "lacking_of", lacking_of)


def _counting_tests(patch: pytest.MonkeyPatch) -> list[bool]:
    """The answers of the quota fit tests the walks run, in order."""
    answers: list[bool] = []
    real = walk_module.fits_quota

    def counting(accounting: Any, leaf: Any, usage: Any, allow_borrowing: bool) -> bool:
        answer = real(accounting, leaf, usage, allow_borrowing)
        answers.append(answer)
        return answer

    patch.setattr(walk_module, "fits_quota", counting)
    return answers


def test_a_walk_within_nominal_runs_no_fit_test_before_the_preemptors_own_victims() -> None:
    """SEMANTICS §4 by hand. Cohort ``root``: ``a`` (nominal 4, running a1: 1 core), ``b``
    and ``c`` (nominal 0, each running three 1-core workloads), ``d`` (nominal 3, idle). The
    cohort's quota is 7, its usage 7: Available 0. ``h`` in ``a`` asks for 4 cores; ``a``
    is below its nominal and may not borrow within the cohort (``Never``), so the first
    attempt must end within nominal: 1 + 4 = 5 > 4, it needs a1 taken. Victims of other
    queues come first (newest first: b1, c1, b2, c2, b3, c3; each lender borrows all it
    runs), then a1. After c2 the running bound reaches 4 cores, but the test within
    nominal still fails: the step-by-step walk tests at c2, b3, c3 and a1 (three failures),
    this walk only at a1. Fill-back: Available 7 with all seven taken, slack 3: c3, b3, c2
    go back, b1, c1, b2 and a1 are preempted."""
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=RECLAIM),
            queue("b", "root", cpu=0),
            queue("c", "root", cpu=0),
            queue("d", "root", cpu=3),
        ],
        [
            workload("a1", "a", 1, created=1, admitted=True, admitted_at=10),
            *(
                workload(f"b{i}", "b", 1, created=1, admitted=True, admitted_at=100 - 20 * i)
                for i in (1, 2, 3)
            ),
            *(
                workload(f"c{i}", "c", 1, created=1, admitted=True, admitted_at=90 - 20 * i)
                for i in (1, 2, 3)
            ),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    result, answers, each_step = _fit_tests_both_ways(parsed)
    assert sorted(p["workload"] for p in result["preempted"]) == ["ns/a1", "ns/b1", "ns/b2", "ns/c1"]
    assert answers == [True]
    assert each_step == [False, False, False, True]


def test_a_failed_fit_test_tightens_the_running_bound_to_the_available_it_read() -> None:
    """SEMANTICS §1 and §4 by hand. Cohort ``root``: ``a`` (nominal 4, idle), ``b`` (nominal
    2, ``lendingLimit: 0``: a reserve of 2) running b1 (3 cores: 2 in its reserve, 1 in the
    cohort), ``c`` (nominal 1) running c1, c2, c3 (1 core each). The cohort's quota is
    4 + 0 + 1 = 5, its usage 1 + 3 = 4: Available 1. ``h`` in ``a`` asks for 4 cores and may
    borrow. The walk takes b1 first (newest): the running bound says 1 + 3 = 4, but only
    1 core of b1 leaves the cohort, Available is 2 and the test fails. The bound goes on
    from 2: with c1 it is 3 (the step-by-step walk tests there and fails, Available 3),
    with c2 it is 4 and the test passes. Fill-back keeps all three (c1 back: Available 3;
    b1 back: 1 core reaches the cohort, 3)."""
    policy = PreemptionPolicy("LowerPriority", "Any", "LowerPriority")
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=policy),
            queue("b", "root", cpu=2, lending_limit=0),
            queue("c", "root", cpu=1),
        ],
        [
            workload("b1", "b", 3, created=1, admitted=True, admitted_at=90),
            *(
                workload(f"c{i}", "c", 1, created=1, admitted=True, admitted_at=90 - 10 * i)
                for i in (1, 2, 3)
            ),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    result, answers, each_step = _fit_tests_both_ways(parsed)
    assert sorted(p["workload"] for p in result["preempted"]) == ["ns/b1", "ns/c1", "ns/c2"]
    assert answers == [False, True]
    assert each_step == [False, False, True]


def _fit_tests_both_ways(parsed: Any) -> tuple[dict[str, Any], list[bool], list[bool]]:
    """The first decision of ``parsed``, checked equal to the step-by-step walk's, with the
    quota fit tests' answers in order: of this walk, and of a walk testing at every step
    its bound allows (whose decisions must be the same too)."""
    with pytest.MonkeyPatch.context() as patch:
        _step_by_step(patch)
        plain = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        answers = _counting_tests(patch)
        assert _decided(parsed) == plain
    with pytest.MonkeyPatch.context() as patch:
        _testing_each_step(patch)
        each_step = _counting_tests(patch)
        assert _decided(parsed) == plain
    return json.loads(plain[0]), answers, each_step


def _world(seed: int) -> Any:
    """Random trees: a root over two cohorts (one over a third), leaves with nominal,
    lending and borrowing limits, each with a random preemption policy (``Never`` within the
    cohort for about half: attempts within nominal first), most workloads admitted, some
    pending at higher priorities."""
    rnd = random.Random(seed)
    specs = [cohort("root"), cohort("c1", "root"), cohort("c2", "root"), cohort("c3", "c1")]
    within = ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
    specs.extend(
        random_queues(rnd, ["c1", "c2", "c3"], 7, cpu=10, lending=[None, None, 0, 1, 4], borrowing=[None, None, 2, 6], within=within)
    )
    names = [spec.name for spec in specs[4:]]
    return inventory(specs, random_workloads(rnd, names, 45, 0.65))


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.booleans())
def test_walks_decide_random_queue_trees_as_walks_testing_each_step(seed: int, veto: bool) -> None:
    """With and without a plugin that may refuse (min-runtime): the same decisions,
    explanations and veto counts as the lazy walk that runs every test its bound allows,
    and the decisions of the step-by-step walk (but for pending messages)."""
    parsed = _world(seed)
    plugins: list[Any] = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
    if veto:
        plugins.append(("min-runtime", min_runtime, None))
    decided = _decided(parsed, Registry(plugins))
    with pytest.MonkeyPatch.context() as patch:
        _testing_each_step(patch)
        assert _decided(parsed, Registry(plugins)) == decided
    with pytest.MonkeyPatch.context() as patch:
        _step_by_step(patch)
        assert _unjudged(_decided(parsed, Registry(plugins))[0]) == _unjudged(decided[0])


@pytest.mark.parametrize("seed", [1, 2])
def test_walks_decide_a_generated_contended_cluster_as_walks_testing_each_step(seed: int) -> None:
    """Nodes, cpu, memory and GPUs, several flavor-resources per request, attempts within
    nominal and with borrowing: the same decisions and explanations."""
    spec = replace(CONTENDED, nodes=40, workloads=200, queues=12, leaves_per_cohort=4)
    objects = generate_spec(spec, f"fit-tests-known/{seed}")
    actions, registry_of = default_session()

    def decided() -> str:
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
        return decisions.to_json() + json.dumps(decisions.explanations, sort_keys=True)

    known = decided()
    with pytest.MonkeyPatch.context() as patch:
        _testing_each_step(patch)
        assert decided() == known
