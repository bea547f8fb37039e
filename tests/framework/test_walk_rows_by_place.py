"""A lender queue's margin and the running bound kept as rows by place
(framework/preemption/walk.py, ``margins.margin_row``, ``bound.lacking_of``).

A walk keeps, per lender queue that is its own chain, one margin per needed
flavor-resource, and per requested flavor-resource its bound finds short how much more
it needs. Both are rows: each flavor-resource has a place, fixed for the attempt, and the
walk reads and writes the place instead of looking the flavor-resource up.

Held to the plain paths on queues of three resources (cpu, memory, GPUs, requests holding
some and not others, so that a place read for the wrong flavor-resource answers another
question): the lender test through ``margins.py`` (``walk.ALONE`` off) and the walk with
no running bound (every accepted step tested), which decide, explain and return from
every attempt alike.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import (
    Admission,
    FlavorQuotas,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.preemption import bound
from preemptd.framework.preemption import walk as walk_module
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import cohort, inventory, snapshot
from preemptd.plugins import cohort_reclaim, priority

from tests.scenarios.test_walk_fit_tests_known import _counting_tests

NOW = 100_000
RESOURCES = ("cpu", "memory", "gpu")


def _queue(
    name: str, parent: str, nominal: dict[str, int], lending: dict[str, int | None], policy: PreemptionPolicy
) -> QueueSpec:
    quotas = {r: ResourceQuota(nominal[r], None, lending[r]) for r in RESOURCES}
    groups = (ResourceGroup(RESOURCES, (FlavorQuotas("default", quotas),)),)
    return QueueSpec(name, parent, groups, preemption=policy)


def _workload(name: str, queue: str, requests: dict[str, int], admitted: bool, prio: int, at: int | None) -> Workload:
    pod_set = PodSet("main", 1, requests)
    admission = Admission(queue, (PodSetAdmission("main", 1, {r: "default" for r in requests}),)) if admitted else None
    return Workload(
        "ns", name, queue, (pod_set,), priority=prio, created=at or 0, admission=admission,
        admitted_at=at if admitted else None,
    )


def _world(seed: int) -> Any:
    """Cohort ``root`` with cohorts ``c1``, ``c2``; 2 to 7 queues under any of them, each
    with a nominal of 0 to 8 units of each resource and sometimes a lending limit (a local
    reserve); 4 to 40 workloads asking for cpu and, at random, memory and GPUs."""
    rnd = random.Random(seed)
    specs = [cohort("root"), cohort("c1", "root"), cohort("c2", "root")]
    names = []
    for i in range(rnd.randint(2, 7)):
        nominal = {r: rnd.randint(0, 8) * 1000 for r in RESOURCES}
        lending = {r: rnd.choice([None, None, 0, 2000]) for r in RESOURCES}
        policy = PreemptionPolicy(
            within_queue=rnd.choice(["Never", "LowerPriority"]),
            reclaim_within_cohort=rnd.choice(["LowerPriority", "Any"]),
            borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
        )
        specs.append(_queue(f"q{i}", rnd.choice(["root", "c1", "c2"]), nominal, lending, policy))
        names.append(f"q{i}")
    workloads = []
    for i in range(rnd.randint(4, 40)):
        requests = {"cpu": rnd.choice([500, 1000, 2000, 3000])}
        for r in ("memory", "gpu"):
            if rnd.random() < 0.6:
                requests[r] = rnd.choice([1000, 1000, 2000, 3000])
        admitted = rnd.random() < 0.7
        workloads.append(
            _workload(
                f"w{i:02d}", rnd.choice(names), requests, admitted,
                rnd.randint(0, 3) if admitted else rnd.randint(1, 5),
                rnd.randint(0, 90_000) if admitted else rnd.randint(0, 50),
            )
        )
    return inventory(specs, workloads)


def _decided(parsed: Any) -> tuple[str, str, list[Any]]:
    """Decisions, explanations and what every attempt returned (victims' keys, level)."""
    answers: list[Any] = []
    real = walk_module.Walk.attempt

    def attempt(self: Any, *args: Any, **kwargs: Any) -> Any:
        victims, level = real(self, *args, **kwargs)
        answers.append(([f"{v.key}{v.unit[1:]}" for v in victims], level))
        return victims, level

    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module.Walk, "attempt", attempt)
        decisions = run_session(snapshot(parsed, NOW), registry, actions=("allocate", "preempt"))
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True), answers


def _plain(parsed: Any) -> tuple[str, str, list[Any]]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module, "ALONE", False)
        patch.setattr(walk_module, "lacking_of", lambda request, room: ([], ()))
        return _decided(parsed)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_walks_over_three_resources_decide_and_return_as_the_plain_paths(seed: int) -> None:
    parsed = _world(seed)
    assert _decided(parsed) == _plain(parsed)


def test_the_random_trees_reach_rows_with_several_places() -> None:
    """The worlds above do exercise rows of more than one place: over a few seeds, some
    attempt keeps a lender margin of two or more needed flavor-resources and a bound short
    on two or more, and some walk preempts."""
    rows: list[int] = []
    shorts: list[int] = []
    real_row = walk_module.margin_row
    real_lacking = bound.lacking_of

    def margin_row(used: Any, subtree: Any, places: Any) -> Any:
        rows.append(len(places))
        return real_row(used, subtree, places)

    def lacking_of(request: Any, room: Any) -> Any:
        found = real_lacking(request, room)
        shorts.append(len(found[1]))
        return found

    preempted = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module, "margin_row", margin_row)
        patch.setattr(walk_module, "lacking_of", lacking_of)
        for seed in range(40):
            preempted += len(json.loads(_decided(_world(seed))[0])["preempted"])
    assert max(rows) >= 2 and max(shorts) >= 2 and preempted > 0


def test_a_row_holds_each_flavor_resource_at_its_place() -> None:
    """By hand: a lender at usage 5 cores, 1 GPU, nominal 2 cores, 3 GPUs, asked about
    (gpu, cpu) in that order, has the row [-2, 3]; a request of 4 cores and 2 GPUs with
    room for 1 core and 3 GPUs lacks 3 cores only, at place 0."""
    cpu, gpu = ("default", "cpu"), ("default", "gpu")
    places = ((0, gpu), (1, cpu))
    assert walk_module.margin_row({cpu: 5000, gpu: 1000}, {cpu: 2000, gpu: 3000}, places) == [-2000, 3000]
    lacking, short = bound.lacking_of(((cpu, 4000), (gpu, 2000)), {cpu: 1000, gpu: 3000})
    assert lacking == [3000] and short == ((0, cpu),)


def test_the_bound_waits_for_every_short_flavor_resource_at_its_place() -> None:
    """SEMANTICS §4 by hand. Cohort ``root``: ``a`` (nominal 5 cores, 2 GPUs, idle) and
    ``b`` (nominal 0) running b2 (1 core, 2 GPUs) and, newer, b1 (4 cores). Usage is the
    cohort's whole quota: Available 0 of both. ``h`` in ``a`` asks for 4 cores and 2 GPUs,
    short on both. After b1 the bound covers the cores (4) but not the GPUs (0 of 2): no
    test. After b2 it covers both: the test runs and passes. Fill-back keeps b1 (back, the
    cores' slack of 1 would not hold its 4). So ``h`` preempts b1 and b2 after one fit
    test; a bound that read the cores' place for the GPUs would test after b1 too."""
    policy = PreemptionPolicy("LowerPriority", "Any", "LowerPriority")
    none: dict[str, int | None] = {r: None for r in RESOURCES}
    parsed = inventory(
        [
            cohort("root"),
            _queue("a", "root", {"cpu": 5000, "memory": 0, "gpu": 2000}, none, policy),
            _queue("b", "root", {"cpu": 0, "memory": 0, "gpu": 0}, none, policy),
        ],
        [
            _workload("b1", "b", {"cpu": 4000}, True, 0, 90),
            _workload("b2", "b", {"cpu": 1000, "gpu": 2000}, True, 0, 80),
            _workload("h", "a", {"cpu": 4000, "gpu": 2000}, False, 5, 2),
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        tests = _counting_tests(patch)
        found = _decided(parsed)
    preempted = json.loads(found[0])["preempted"]
    assert sorted(p["workload"] for p in preempted) == ["ns/b1", "ns/b2"]
    assert tests == [True]
    assert found == _plain(parsed)
