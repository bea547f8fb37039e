"""A judged head that reserves nothing is processed where it is judged, not in the order.

A head judged by a kept head of its queue ends pending with a message of its own; when
it reserves nothing (``NoFit``, or its queue reclaims ``Any``) and no plugin listens to
admissions and evictions, processing it changes nothing another entry of the round reads,
so the rounds process it at once instead of ordering it among the round's entries
(``actions/allocate.py``, ``AT_ONCE``). Only the round's first entry is told apart (it is
never offered again): a head processed at once may be the round's least entry, and then
the first entry left in the order is offered again like any other. Each case is held to
the same session with the judged heads ordered among the entries: the same decisions,
explanations, counters and veto counts.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from preemptd.framework.actions import allocate
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.testing import inventory, queue, snapshot, workload

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated
from tests.framework.test_judged_pending import _registry

Outcome = tuple[dict[str, Any], dict[str, list[str]], dict[str, int | str], dict[str, int]]


def _cluster() -> Any:
    """Queue j (1 core, reclaim ``Any``) runs ``r`` (priority 9); ``j1`` .. ``j4`` (priority
    5, 1 core) find no candidate: ``j1`` is searched, the others are judged with it, one a
    round, each the least entry of its round (level 0, priority 5). Queue l (1 core) offers
    ``none`` in round 1 (5 cores: never fits) and ``late`` (1 core, fits) from round 2."""
    within = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    return inventory(
        [queue("j", cpu=1, preemption=within), queue("l", cpu=1)],
        [
            workload("r", "j", 1, priority=9, created=1, admitted=True),
            *(workload(f"j{i}", "j", 1, priority=5, created=10 + i) for i in range(1, 5)),
            workload("none", "l", 5, created=10),
            workload("late", "l", 1, created=11),
        ],
    )


def _decide(monkeypatch: pytest.MonkeyPatch, at_once: bool, snap: Any, registry: Registry, **kw: Any) -> Outcome:
    monkeypatch.setattr(allocate, "AT_ONCE", at_once)
    counters: dict[str, int | str] = {}
    decisions = run_session(snap, registry, counters=counters, **kw)
    return json.loads(decisions.to_json()), decisions.explanations, counters, dict(registry.vetoes)


def _never_fits(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """``name`` never passes the re-check of SEMANTICS §2.4 (as when the physical view or
    the view's node room is short), so it is offered again unless it is the first entry."""
    real = allocate.still_fits

    def still_fits(session: Any, books: Any, leaf: Any, assignment: Any) -> bool:
        return assignment.workload.name != name and real(session, books, leaf, assignment)

    monkeypatch.setattr(allocate, "still_fits", still_fits)


def test_the_first_entry_left_in_the_order_is_offered_again_behind_a_judged_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _never_fits(monkeypatch, "late")
    ordered: list[str] = []
    real = allocate._process

    def process(session: Any, rounds: Any, entry: Any, relied_on: Any) -> int:
        ordered.append(entry.workload.name)
        return real(session, rounds, entry, relied_on)

    monkeypatch.setattr(allocate, "_process", process)
    at_once = _decide(monkeypatch, True, snapshot(_cluster(), 100_000), _registry())
    assert at_once[2]["heads-judged"] == 3  # j2, j3, j4
    # None of them ordered; late ordered in rounds 2 to 5: offered again behind j2, j3 and
    # j4 (each the least entry of its round), finished in round 5 as the first entry.
    assert ordered == ["j1", "none", "late", "late", "late", "late"]
    pending = {entry["workload"]: entry for entry in at_once[0]["pending"]}
    assert pending["ns/late"]["message"] == "no longer fits after other workloads of this session"
    ordered.clear()
    in_order = _decide(monkeypatch, False, snapshot(_cluster(), 100_000), _registry())
    assert ordered == ["j1", "none", "late", "late", "late", "late"]  # the judged ones by _judged
    assert at_once == in_order


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param(lambda: generate_saturated(1, queues=20, workloads=1500), id="saturated"),
        pytest.param(lambda: generate_saturated(2, queues=30, workloads=2000, pending_share=0.5), id="half-pending"),
    ],
)
def test_generated_clusters_decide_and_explain_alike_with_judged_heads_at_once_or_in_order(
    monkeypatch: pytest.MonkeyPatch, objects: Any
) -> None:
    snap = snapshot(objects(), NOW_MS)
    actions, registry = default_session()
    at_once = _decide(monkeypatch, True, snap, registry(), actions=actions)
    assert at_once[2]["heads-judged"]
    assert at_once == _decide(monkeypatch, False, snap, registry(), actions=actions)
