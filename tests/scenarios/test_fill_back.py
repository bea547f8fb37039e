"""Fill-back knows the victims the quota still needs without testing each one
(framework/preemption/fillback.py).

A failed putting back is remembered per flavor-resource and per *entry* (where a victim's
usage reaches the preemptor's path): a later victim whose usage enters at the same node,
with no local reserve on the way, and uses no less of that flavor-resource fails too. The
decisions and explanations must be those of a fill-back that tests every victim.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import fillback as fillback_module
from preemptd.framework.preemption import walk as walk_module
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.session.statement import Statement
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec
from tests.scenarios.test_search_memo import _random_cluster

NOW = 100_000


def _registry() -> Registry:
    return Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, None)]
    )


def _decided(parsed: Any, now: int = NOW, registry: Registry | None = None) -> tuple[str, str]:
    decisions = run_session(snapshot(parsed, now), registry or _registry(), actions=("allocate", "preempt"))
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True)


def _remember_nothing(least: list[int], shape: tuple[int, ...], short: int) -> None:
    """Fill-back knows no failure: every victim it reaches is tested."""


def _put_back_in_fill_back(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The queues fill-back puts a victim back in (one per quota change it makes)."""
    put_back: list[str] = []
    in_fill_back = [False]
    real_add = Statement.add_usage
    real_fill_back = walk_module.Walk._fill_back

    def add_usage(self: Statement, leaf: Any, usage: Any) -> None:
        if in_fill_back[0]:
            put_back.append(leaf.name)
        real_add(self, leaf, usage)

    def fill_back(self: Any, victims: Any, allow_borrowing: bool, freed: Any = None) -> None:
        in_fill_back[0] = True
        try:
            real_fill_back(self, victims, allow_borrowing, freed)
        finally:
            in_fill_back[0] = False

    monkeypatch.setattr(Statement, "add_usage", add_usage)
    monkeypatch.setattr(walk_module.Walk, "_fill_back", fill_back)
    return put_back


def test_a_failure_in_one_lender_answers_a_victim_of_another_lender_of_the_same_cohort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SEMANTICS §4 by hand. Cohort ``root``: ``a`` (nominal 4, idle), ``b`` and ``c``
    (nominal 1 each, each running four 500m workloads: 2 cores, borrowing 1). ``h`` in
    ``a`` asks for 4 cores; Available is 6 - 4 = 2. The walk takes b1, c1, b2, c2 (newest
    first; each lender stays above its nominal before each take) and then fits exactly:
    every victim is needed, and all four are preempted. Fill-back puts back b2 first:
    3.5 cores are not 4, so it fails. c1 and b1 use as much and their usage reaches the
    cohort whole (no lending limit on the way): they fail without a test. Before, the
    failure was kept per queue, and c1 was tested too. (The slack is exact in this tree
    and would answer b2 too: turned off here, see test_fill_back_exact_slack.py.)"""
    policy = PreemptionPolicy(reclaim_within_cohort="LowerPriority")
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy), queue("b", "root", cpu=1), queue("c", "root", cpu=1)],
        [
            *(workload(f"b{i}", "b", 0.5, created=1, admitted=True, admitted_at=100 - 10 * i) for i in range(1, 5)),
            *(workload(f"c{i}", "c", 0.5, created=1, admitted=True, admitted_at=95 - 10 * i) for i in range(1, 5)),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    put_back = _put_back_in_fill_back(monkeypatch)
    monkeypatch.setattr(fillback_module, "_exact_slack", lambda leaf, request: False)
    decided = json.loads(_decided(parsed)[0])
    assert sorted(p["workload"] for p in decided["preempted"]) == ["ns/b1", "ns/b2", "ns/c1", "ns/c2"]
    assert put_back == ["b"]


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_fill_back_decides_random_queue_trees_as_testing_every_victim(seed: int) -> None:
    """Random queue trees (nominal, lending and borrowing limits, both attempts): the same
    decisions and explanations with and without the failures fill-back remembers."""
    parsed = _random_cluster(seed)
    known = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fillback_module, "_remember", _remember_nothing)
        assert _decided(parsed) == known


@settings(max_examples=8, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from((1, 5)))
def test_fill_back_decides_generated_clusters_as_testing_every_victim(seed: int, leaves: int) -> None:
    """Generated clusters with cpu, memory and GPUs (several flavor-resources per request,
    lending limits on some queues): the same decisions and explanations either way."""
    _generated_decides_as(f"fill-back/{seed}", leaves, lambda p: p.setattr(fillback_module, "_remember", _remember_nothing))


def _generated_decides_as(name: str, leaves: int, plain: Callable[[pytest.MonkeyPatch], None]) -> None:
    """A generated contended cluster (30 nodes, 150 workloads, 10 queues) decides and
    explains the same with the fill-back made ``plain`` by its patches."""
    spec = replace(CONTENDED, nodes=30, workloads=150, queues=10, leaves_per_cohort=leaves)
    objects = generate_spec(spec, name)
    actions, registry_of = default_session()

    def decided() -> tuple[str, str]:
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
        return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True)

    known = decided()
    with pytest.MonkeyPatch.context() as patch:
        plain(patch)
        assert decided() == known
