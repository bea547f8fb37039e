"""The running bound on the flavor-resources it finds short, and a lender queue's margin
kept for a whole attempt (framework/preemption/walk.py).

* **Short flavor-resources.** A lazy walk runs its quota test only once the running
  bound (Available at the start plus the usage of the victims so far) reaches the request
  on every requested flavor-resource. A flavor-resource the bound covers stays covered
  (victims only add to it), so the walk follows only those it found short, and how much
  more each needs.
* **A lender queue's margin.** For a lender queue that is its own chain (its parent on the
  preemptor's path), the margin (usage less nominal less the needed usage of its waiting
  victims) is the exact lender test, and taking its waiting victims leaves it as it is:
  it is read once per attempt, and a candidate it refuses is refused by the test itself,
  not by a list of refused kinds.

Held to the plain paths: the walk testing the quota at every step the plugins accept
(no running bound), the step-by-step walk (every victim taken at once), and the lender
test through ``margins.py`` (``walk.ALONE`` off): the same victims before fill-back, the
same decisions and explanations.
"""

from __future__ import annotations

import json
import random
from collections import Counter
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
from preemptd.plugins import cohort_reclaim, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec
from tests.scenarios.test_walk_fit_tests_known import _counting_tests

NOW = 100_000


def _decided(parsed: Any) -> tuple[str, str]:
    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
    decisions = run_session(snapshot(parsed, NOW), registry, actions=("allocate", "preempt"))
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True)


def _no_bound(patch: pytest.MonkeyPatch) -> None:
    """The plain path of the bound: nothing is ever short, the quota is tested at every
    step the plugins accept (the test is exact)."""
    patch.setattr(walk_module, "lacking_of", lambda request, room: ({}, ()))


def _before_fill_back(patch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The victims each successful attempt hands to fill-back, in order."""
    seen: list[tuple[str, ...]] = []
    real = walk_module.Walk._fill_back

    def fill_back(self: Any, victims: list[Any], *args: Any) -> None:
        seen.append(tuple(f"{v.key}{v.unit[1:]}" for v in victims))
        real(self, victims, *args)

    patch.setattr(walk_module.Walk, "_fill_back", fill_back)
    return seen


def _with_and_without_bound(decide: Any) -> tuple[Any, list[bool], list[bool]]:
    """``decide()`` with the running bound and without it: the same answer and the same
    victims before every fill-back; the fit tests each ran."""
    with pytest.MonkeyPatch.context() as patch:
        handed = _before_fill_back(patch)
        bounded = _counting_tests(patch)
        found = decide()
    with pytest.MonkeyPatch.context() as patch:
        _no_bound(patch)
        plain_handed = _before_fill_back(patch)
        plain = _counting_tests(patch)
        assert decide() == found
    assert handed == plain_handed
    return found, bounded, plain


def test_the_bound_reaching_the_request_exactly_runs_the_test() -> None:
    """SEMANTICS §4 by hand. Cohort ``root``: ``a`` (nominal 4, idle), ``b`` (nominal 1)
    running b1, b2 (2 cores each) and b3 (1 core), b1 the newest, b3 the oldest. Quota 5,
    usage 5: Available 0. ``h`` in ``a`` asks for 4 cores. The walk takes b1 (bound 2,
    short), then b2: the bound is 4, exactly the request, the test runs and passes
    (Available 4). Fill-back keeps b1 (back: Available 2). So ``h`` preempts b1 and b2;
    had the walk gone on, ``b`` at its nominal of 1 would refuse b3 and nothing would fit."""
    policy = PreemptionPolicy("LowerPriority", "Any", "LowerPriority")
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy), queue("b", "root", cpu=1)],
        [
            workload("b1", "b", 2, created=1, admitted=True, admitted_at=90),
            workload("b2", "b", 2, created=1, admitted=True, admitted_at=80),
            workload("b3", "b", 1, created=1, admitted=True, admitted_at=70),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    found, bounded, plain = _with_and_without_bound(lambda: _decided(parsed))
    preempted = json.loads(found[0])["preempted"]
    assert sorted(p["workload"] for p in preempted) == ["ns/b1", "ns/b2"]
    assert bounded == [True]  # no test after b1: the bound is 2
    assert plain == [False, True]


def _world(seed: int) -> Any:
    rnd = random.Random(seed)
    specs = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    specs.extend(random_queues(rnd, ["root", "c1", "c2"], 7, lending=[None, None, 0, 2]))
    names = [spec.name for spec in specs[3:]]
    return inventory(specs, random_workloads(rnd, names, 45, 0.7))


@settings(max_examples=120, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_walks_on_random_queue_trees_hand_fill_back_what_walks_testing_each_step_do(seed: int) -> None:
    parsed = _world(seed)
    _, bounded, plain = _with_and_without_bound(lambda: _decided(parsed))
    assert len(bounded) <= len(plain)


def _contended(seed: int) -> Any:
    spec = replace(CONTENDED, nodes=40, workloads=300, queues=12, leaves_per_cohort=4)
    objects = generate_spec(spec, f"walk-bound-short/{seed}")
    actions, registry_of = default_session()

    def decided() -> str:
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
        return decisions.to_json() + json.dumps(decisions.explanations, sort_keys=True)

    return decided


@pytest.mark.parametrize("seed", [1, 2])
def test_walks_of_a_generated_contended_cluster_hand_fill_back_what_walks_testing_each_step_do(seed: int) -> None:
    """cpu, memory and GPUs: requests of several flavor-resources, some short at the start
    and some not; fewer fit tests with the bound."""
    _, bounded, plain = _with_and_without_bound(_contended(seed))
    assert bounded and len(bounded) < len(plain)


def _margin_reads(patch: pytest.MonkeyPatch) -> list[Counter[int]]:
    """Per attempt, how often the walk read each lender queue's margin (by its nominal's map)."""
    reads: list[Counter[int]] = []
    real_attempt = walk_module.Walk.attempt
    real_margin = walk_module.margin_row

    def attempt(self: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(Counter())
        return real_attempt(self, *args, **kwargs)

    def margin_row(used: Any, subtree: Any, places: Any) -> Any:
        reads[-1][id(subtree)] += 1
        return real_margin(used, subtree, places)

    patch.setattr(walk_module.Walk, "attempt", attempt)
    patch.setattr(walk_module, "margin_row", margin_row)
    return reads


def test_a_lender_queues_margin_is_read_once_per_attempt_and_decides_as_through_margins() -> None:
    """Every lender of the generated cluster is its own chain; its margin is read once per
    attempt, across the takes before fit tests, and the sessions decide and explain as with
    the test through ``margins.py``."""
    decided = _contended(3)
    with pytest.MonkeyPatch.context() as patch:
        reads = _margin_reads(patch)
        found = decided()
    assert sum(map(len, reads)) > 10
    assert all(count == 1 for attempt in reads for count in attempt.values())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module, "ALONE", False)
        assert decided() == found
