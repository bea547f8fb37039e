"""The lender test of a lazy walk for a queue that is its own chain (framework/preemption/walk.py).

When a lender queue's parent is on the preemptor's path, the lender test of its candidates
reads the queue's own usage only, and taking a victim lowers that usage by exactly the
victim's usage. Its margin (usage less nominal less the needed usage of its waiting
victims) is then the exact test, not a lower bound: a refusal on it stands without taking
the queue's waiting victims first, and they keep waiting until the fit test. The walk asks
the test there written out (``walk.ALONE``); with it off, through ``margins.gives`` and
``keep``, taking the waiting victims before it trusts a refusal.

Held to the walk with ``ALONE`` off on a case by hand, random queue trees (lenders under
the preemptor's cohort and under cohorts off its path, lending limits, a plugin that may
refuse or none) and a generated contended cluster: the same decisions, explanations and
veto counts, with fewer takes from the quota.
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
RECLAIM = PreemptionPolicy("LowerPriority", "Any", "LowerPriority")


def _registry(veto: bool = False) -> Registry:
    plugins: list[Any] = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
    if veto:
        plugins.append(("min-runtime", min_runtime, None))
    return Registry(plugins)


def _counting_takes(patch: pytest.MonkeyPatch) -> list[int]:
    """How many waiting victims each take from the quota takes for a lender test (not as
    every waiting victim is taken, before a fit test), in order."""
    taken: list[int] = []
    real_take = walk_module.Walk._take
    real_take_all = walk_module.Walk._take_all
    all_at_once: list[bool] = []

    def take(self: Any, waiting: list[Any]) -> None:
        if waiting and not all_at_once:
            taken.append(len(waiting))
        real_take(self, waiting)

    def take_all(self: Any, *args: Any) -> None:
        all_at_once.append(True)
        try:
            real_take_all(self, *args)
        finally:
            all_at_once.pop()

    patch.setattr(walk_module.Walk, "_take", take)
    patch.setattr(walk_module.Walk, "_take_all", take_all)
    return taken


def _both_ways(decide: Any) -> tuple[Any, list[int], list[int]]:
    """``decide()`` with the lender test written out and through ``margins`` (checked equal),
    with the takes from the quota for a lender test of each."""
    with pytest.MonkeyPatch.context() as patch:
        alone = _counting_takes(patch)
        found = decide()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module, "ALONE", False)
        through = _counting_takes(patch)
        assert decide() == found
    return found, alone, through


def _decided(parsed: Any, veto: bool = False) -> tuple[str, str, str]:
    registry = _registry(veto)
    decisions = run_session(snapshot(parsed, NOW), registry, actions=("allocate", "preempt"))
    explained = json.dumps(decisions.explanations, sort_keys=True)
    return decisions.to_json(), explained, repr(sorted(registry.vetoes.items()))


def test_a_refusal_on_a_queues_own_margin_stands_while_its_victims_wait() -> None:
    """SEMANTICS §4 by hand. Cohort ``root``: ``a`` (nominal 4, idle), ``b`` (nominal 2)
    running b1, b2, b3 (1 core each, b1 newest: ``b`` borrows 1), ``c`` (nominal 0) running
    c1, c2 (1 core each, older than b's: ``c`` borrows 2). Quota 6, usage 5: Available 1.
    ``h`` in ``a`` asks for 4 cores. The walk meets b1 (``b`` above its nominal: taken),
    then b2: with b1 gone ``b`` is at its nominal, and the lender test refuses it, and b3.
    c1 and c2 pass (``c`` borrows both); with them Available is 4 and ``h`` fits.
    Fill-back puts nothing back (c1 back: 3; b1 back: 3). So ``h`` preempts b1, c1, c2.
    The refusal of b2 is read on ``b``'s margin with b1 waiting: b1 is taken from the
    quota only with c1 and c2, at the fit test, not on its own before the refusal."""
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=RECLAIM),
            queue("b", "root", cpu=2),
            queue("c", "root", cpu=0),
        ],
        [
            *(workload(f"b{i}", "b", 1, created=1, admitted=True, admitted_at=100 - i) for i in (1, 2, 3)),
            *(workload(f"c{i}", "c", 1, created=1, admitted=True, admitted_at=50 - i) for i in (1, 2)),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    found, alone, through = _both_ways(lambda: _decided(parsed))
    result = json.loads(found[0])
    assert sorted(p["workload"] for p in result["preempted"]) == ["ns/b1", "ns/c1", "ns/c2"]
    assert alone == []  # b1 waits through the refusals of b2 and b3
    assert through == [1]  # b1 taken before the refusal of b2 is trusted


def _world(seed: int) -> Any:
    """Random trees: a root over queues and two cohorts (one over a third), leaves with
    nominal and lending limits; a preemptor's lenders are thus both under its own cohort
    (their own chain) and under cohorts off its path."""
    rnd = random.Random(seed)
    specs = [cohort("root"), cohort("c1", "root"), cohort("c2", "root"), cohort("c3", "c1")]
    specs.extend(random_queues(rnd, ["root", "c1", "c2", "c3"], 8, lending=[None, None, None, 0, 2]))
    names = [spec.name for spec in specs[4:]]
    return inventory(specs, random_workloads(rnd, names, 50, 0.7))


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.booleans())
def test_walks_on_random_queue_trees_decide_as_the_test_through_margins(seed: int, veto: bool) -> None:
    """The same decisions, explanations and veto counts, in no more takes for a lender test
    (only those of chains holding a cohort are left)."""
    parsed = _world(seed)
    _, alone, through = _both_ways(lambda: _decided(parsed, veto))
    assert len(alone) <= len(through)


def test_walks_of_a_generated_contended_cluster_decide_as_the_test_through_margins() -> None:
    """Nodes, cpu, memory and GPUs, several needed flavor-resources, every lender its own
    chain: the same decisions and explanations, and no take for a lender test."""
    spec = replace(CONTENDED, nodes=40, workloads=300, queues=12, leaves_per_cohort=4)
    objects = generate_spec(spec, "walk-lender-alone/1")
    actions, registry_of = default_session()

    def decided() -> str:
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
        return decisions.to_json() + json.dumps(decisions.explanations, sort_keys=True)

    _, alone, through = _both_ways(decided)
    assert alone == []
    assert len(through) > 10
