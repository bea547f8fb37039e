"""Fill-back adds the victims it puts back to the quota at the end
(framework/preemption/fillback.py, "Put back at the end").

In an exact fill-back without scenario filters, a victim whose usage reaches the
preemptor's path whole changes nothing a later step reads: such victims are added once
per queue, summed, after the last step. The decisions and explanations must be those of
a fill-back that adds each victim when it puts it back, and of one that tests every victim.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import fillback as fillback_module
from preemptd.framework.testing import cohort, inventory, queue, workload

from tests.scenarios.test_fill_back import _decided, _generated_decides_as, _put_back_in_fill_back
from tests.scenarios.test_fill_back_exact_slack import _lending_cluster, _plain
from tests.scenarios.test_search_memo import _random_cluster


def _each_at_once(patch: pytest.MonkeyPatch) -> None:
    """Every victim put back is added to the quota when it is put back."""
    patch.setattr(fillback_module, "_adds_at_end", lambda walk, exact: False)


def _parsed() -> Any:
    """Cohort ``root``: ``a`` (nominal 4, idle, may reclaim), ``b`` (nominal 0) running b1 and
    b2 (1 core each), ``c`` (nominal 0) running c1 (3 cores), ``d`` (nominal 1, idle). The
    cohort's quota is 5, its usage 5: Available 0. ``h`` in ``a`` asks for 3 cores."""
    policy = PreemptionPolicy("LowerPriority", "Any", "Never")
    return inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=policy),
            queue("b", "root", cpu=0),
            queue("c", "root", cpu=0),
            queue("d", "root", cpu=1),
        ],
        [
            workload("b1", "b", 1, created=1, admitted=True, admitted_at=90),
            workload("b2", "b", 1, created=1, admitted=True, admitted_at=80),
            workload("c1", "c", 3, created=1, admitted=True, admitted_at=70),
            workload("h", "a", 3, priority=5, created=2),
        ],
    )


def test_victims_of_one_queue_put_back_are_added_to_the_quota_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """SEMANTICS §4 by hand. The walk takes b1, b2 (newest first) and c1, which makes the
    request fit: Available 5 for 3 cores, slack 2. No queue keeps a reserve and none has a
    borrowing limit, so the slack is exact; b2 goes back (Available 4, slack 1), then b1
    (Available 3, slack 0): only c1 is preempted. Both went back into ``b``, whose usage
    reaches the cohort whole: ``b`` gets one quota change at the end, 2 cores, instead of
    one per victim."""
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        plain = _decided(_parsed())
    with pytest.MonkeyPatch.context() as patch:
        one_by_one = _put_back_in_fill_back(patch)
        _each_at_once(patch)
        assert _decided(_parsed()) == plain
    assert one_by_one == ["b", "b"]
    put_back = _put_back_in_fill_back(monkeypatch)
    decided = _decided(_parsed())
    assert decided == plain
    assert [p["workload"] for p in json.loads(decided[0])["preempted"]] == ["ns/c1"]
    assert put_back == ["b"]


def test_a_victim_put_back_through_a_reserve_is_added_at_once_for_the_next_one_to_read() -> None:
    """SEMANTICS §1 and §4 by hand. Cohort ``root``: ``a`` (nominal 4, idle, may reclaim),
    ``b`` (nominal 1, ``lendingLimit: 0``: a reserve of 1) running x1 (1 core, newest) and
    x2 (2 cores): 3 cores, 2 of them in the cohort; ``c`` (nominal 0) running c1 (3
    cores); ``d`` (nominal 1, idle). The cohort's quota is 5, its usage 5: Available 0.
    ``h`` in ``a`` asks for 4 cores. The walk takes x1 (1 core leaves the cohort), x2 (only
    1 of its 2: ``b`` is then empty) and c1: Available 5, slack 1. Fill-back puts x2 back:
    ``b``'s reserve takes 1 core, 1 reaches the cohort (slack 0). x1 would add 1 core to
    ``b``, now at 2, past its reserve: it reaches the cohort and fails. Read from ``b``'s
    usage with x2 back; had x2 waited for the end, ``b`` would read 0 and x1 would seem to
    stay in the reserve. x1 and c1 are preempted."""
    policy = PreemptionPolicy("LowerPriority", "Any", "Never")
    parsed = inventory(
        [
            cohort("root"),
            queue("a", "root", cpu=4, preemption=policy),
            queue("b", "root", cpu=1, lending_limit=0),
            queue("c", "root", cpu=0),
            queue("d", "root", cpu=1),
        ],
        [
            workload("x1", "b", 1, created=1, admitted=True, admitted_at=90),
            workload("x2", "b", 2, created=1, admitted=True, admitted_at=80),
            workload("c1", "c", 3, created=1, admitted=True, admitted_at=70),
            workload("h", "a", 4, priority=5, created=2),
        ],
    )
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        plain = _decided(parsed)
    decided = _decided(parsed)
    assert decided == plain
    assert sorted(p["workload"] for p in json.loads(decided[0])["preempted"]) == ["ns/c1", "ns/x1"]


def _lenders(seed: int) -> Any:
    """Random trees where fill-back puts many victims back: no borrowing limits, reserves
    (lending limits) on some queues, lenders running many small workloads above their
    nominal and a few large ones, heads asking for 1 to 6 cores at higher priorities."""
    rnd = random.Random(seed)
    queues = [cohort("root"), cohort("c1", "root"), cohort("c2", "c1")]
    names = []
    for i in range(rnd.randint(3, 6)):
        names.append(f"q{i}")
        queues.append(
            queue(
                f"q{i}",
                rnd.choice(["c1", "c2", "root"]),
                cpu=rnd.randint(0, 4),
                lending_limit=rnd.choice([None, None, None, 0, 1]),
                preemption=PreemptionPolicy(
                    within_queue=rnd.choice(["Never", "LowerPriority"]),
                    reclaim_within_cohort=rnd.choice(["LowerPriority", "Any"]),
                    borrow_within_cohort=rnd.choice(["Never", "LowerPriority"]),
                ),
            )
        )
    workloads = [
        workload(
            f"w{i:02d}", rnd.choice(names), rnd.choice([0.5, 0.5, 1, 1, 3, 4]), priority=rnd.randint(0, 2),
            created=rnd.randint(0, 50), admitted=True, admitted_at=rnd.randint(0, 100_000),
        )
        for i in range(rnd.randint(5, 30))
    ]
    workloads += [
        workload(
            f"h{i}", rnd.choice(names), rnd.randint(1, 6), priority=rnd.randint(3, 5), created=rnd.randint(0, 50)
        )
        for i in range(rnd.randint(1, 4))
    ]
    return inventory(queues, workloads)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=0, max_value=100_000), st.sampled_from(("lenders", "lenders", "lending", "random"))
)
def test_fill_back_decides_random_queue_trees_as_adding_each_victim_at_once(seed: int, kind: str) -> None:
    """Random trees (many lenders; reserves and no borrowing limits, where the slack is
    mostly exact; borrowing limits), both attempts: the same decisions and explanations as
    a fill-back that adds each victim when it puts it back, and as one that tests every
    victim."""
    parsed = {"lenders": _lenders, "lending": _lending_cluster, "random": _random_cluster}[kind](seed)
    known = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        _each_at_once(patch)
        assert _decided(parsed) == known
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        assert _decided(parsed) == known


@settings(max_examples=6, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from((1, 5)))
def test_fill_back_decides_generated_clusters_as_adding_each_victim_at_once(seed: int, leaves: int) -> None:
    """Generated clusters with nodes, cpu, memory and GPUs (several flavor-resources per
    request, lending limits on some queues): the same decisions and explanations."""
    _generated_decides_as(f"at-end/{seed}", leaves, _each_at_once)
