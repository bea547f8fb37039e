"""Victim walks decide as the plain walk (framework/preemption/room.py, walk.py).

On the memo path a walk keeps its victims' node room beside the placements and follows
how many of the preemptor's pods it holds; on the plain path (``memo=False``) every
victim's room is given to the placements and every fit test scans them. Small generated
clusters whose pending heads want GPUs of a full flavor (one pod set, or a launcher and
its workers) must get the same decisions and the same vetoes either way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.preemption import fillback as fillback_module
from preemptd.framework.preemption import margins as margins_module
from preemptd.framework.preemption import room as room_module
from preemptd.framework.preemption import walk as walk_module
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec
from tests.scenarios.test_search_memo import _both, _random_cluster, assert_same_decisions


@settings(max_examples=12, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=8, max_value=40),
    st.sampled_from((1, 2, 5)),
)
# A head judged with one whose launcher asks for memory in another flavor: the judge's
# failed search, for its GPU pod set, asked for no more than the judged head.
@example(3435, 30, 1)
def test_walks_on_nodes_decide_as_the_plain_path(seed: int, nodes: int, leaves: int) -> None:
    spec = replace(CONTENDED, nodes=nodes, workloads=nodes * 5, queues=10, leaves_per_cohort=leaves)
    objects = generate_spec(spec, f"walk-room/{seed}")
    actions, registry_of = default_session()
    (fast, fast_vetoes, _), (plain, plain_vetoes, _) = _both(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert_same_decisions(fast, plain, snapshot(objects, NOW_MS).workloads)
    assert fast_vetoes == plain_vetoes


def test_the_generated_walks_test_one_pod_set_and_a_launcher_with_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clusters above reach both kinds of test: the count alone (one pod set) and the
    launcher placed before the workers are counted."""
    seen: dict[str, int] = {"exact": 0, "launcher": 0}
    fit_all = room_module.FreedRoom._fit_all

    def counting_fits(self: Any) -> bool:
        if self.may_fit():
            seen["exact" if self.exact else "launcher"] += 1
        return self.may_fit() and (self.exact or fit_all(self))

    monkeypatch.setattr(room_module.FreedRoom, "fits", counting_fits)
    # A launcher on another flavor than its workers, fitting now, is searched without its
    # target (victims.search_targets): this cluster's launchers reach the placed test.
    objects = generate_spec(replace(CONTENDED, nodes=30, workloads=150, queues=10, leaves_per_cohort=5), "walk-room/2")
    actions, registry_of = default_session()
    _both(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert seen["exact"] and seen["launcher"]


def _never_sure(self: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """No slack known either way: fill-back tests the quota for every victim it puts back."""
    return (-1,) * len(self.usage), (1 << 62,) * len(self.usage)


def _decided(parsed: Any) -> tuple[str, str]:
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, None)]
    )
    decisions = run_session(snapshot(parsed, 100_000), registry, actions=("allocate", "preempt"))
    return decisions.to_json(), json.dumps(decisions.explanations, sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
@example(512)  # a victim of the preemptor's own queue that the test within nominal needs
def test_fill_back_keeps_the_victims_that_testing_each_one_keeps(seed: int) -> None:
    """Fill-back skips the quota test of a victim whose usage the slack covers, and of a
    victim of the preemptor's own queue the test within nominal needs: random queue trees
    (nominal, lending and borrowing limits, both attempts) decide and explain exactly as
    when every victim put back is tested."""
    parsed = _random_cluster(seed)
    with_slack = _decided(parsed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(walk_module.Walk, "_slack", _never_sure)
        patch.setattr(fillback_module, "_exact_slack", lambda leaf, request: False)  # it reads the slack
        assert _decided(parsed) == with_slack


def test_a_queue_the_lender_test_refused_is_not_asked_again_in_the_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """SEMANTICS §4 by hand. Cohort of ``a`` (nominal 5) and ``c`` (nominal 2, using 4 in
    four 1-core workloads ``c1``..``c4``, newest first). ``h`` in ``a`` (priority 5, may
    reclaim while borrowing from lower priorities) asks for 6 cores: Available is
    7 - 4 = 3. Each attempt (with borrowing, then within nominal) takes ``c1`` and ``c2`` (``c`` is still above its
    nominal before each), then ``c`` is at its nominal: ``c3`` is refused, and so is
    ``c4`` without asking. 5 cores are not 6: ``h`` stays pending, nothing is preempted.
    Through ``margins.py`` (``walk.ALONE`` off), the lender test reads ``c``'s usage for
    ``c1`` and ``c3`` only (``c2`` passes on the lower bound of the waiting victims; for
    ``c3`` it does not, ``c1`` and ``c2`` are taken and the usage read again: the exact
    test). The walk's own test for a queue that is its own chain reads it once, for
    ``c1``: its margin is exact (``test_walk_lender_alone.py``); both decide alike."""
    asked: list[str] = []
    real = margins_module.margin_row

    def counting(used: Any, subtree: Any, places: Any) -> Any:
        asked.append("c" if subtree == {("default", "cpu"): 2000} else "?")
        return real(used, subtree, places)

    policy = PreemptionPolicy(
        within_queue="LowerPriority", reclaim_within_cohort="Any", borrow_within_cohort="LowerPriority"
    )
    parsed = inventory(
        [cohort("root"), queue("a", "root", cpu=5, preemption=policy), queue("c", "root", cpu=2)],
        [
            *(workload(f"c{i}", "c", 1, created=1, admitted=True, admitted_at=50 - 10 * i) for i in range(1, 5)),
            workload("h", "a", 6, priority=5, created=2),
        ],
    )
    plain = _decided(parsed)
    monkeypatch.setattr(margins_module, "margin_row", counting)
    monkeypatch.setattr(walk_module, "ALONE", False)
    decided = _decided(parsed)
    assert decided == plain
    result = json.loads(decided[0])
    assert result["preempted"] == []
    assert [(p["workload"], p["reason"]) for p in result["pending"]] == [("ns/h", "PreemptionNoCandidates")]
    assert asked == ["c", "c"] * 2
