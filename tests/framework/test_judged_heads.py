"""Heads judged without a flavor scan (framework/preemption/heads.py) decide exactly as the
judgement written out in full: the kept head's assignment copied with
``dataclasses.replace`` and its message asked of ``failures.dominated``.

The judged path keeps, per kept head, what does not change from one head it judges to
the next (the explanation line, the failed searches that may answer its request), and the
rounds take the kept head's assignment as it is with the judged message (``heads.judge``):
these tests hold both to the full judgement on generated clusters (``_written_out``, through
``nominate``), and pin by hand that the answer is the first failure of the state the judged
head is no stronger than, whichever head that failure belongs to, and that failures kept
after the first judgement count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from preemptd.framework.actions import allocate
from preemptd.framework.actions import nominate as nominating
from preemptd.framework.model import PreemptionPolicy, Workload
from preemptd.framework.preemption import heads
from preemptd.framework.preemption.failures import (
    Answers,
    answers_now,
    dominated,
    remember_failure,
    search_state,
)
from preemptd.framework.preemption.memo import snapshot_counts, tally
from preemptd.framework.quota import QuotaNode
from preemptd.framework.run import run_session
from preemptd.framework.session import NOCANDIDATES, Assignment, Registry, SearchResult, Session
from preemptd.framework.testing import cohort, inventory, open_session, queue, snapshot, workload
from preemptd.plugins import cohort_reclaim, flavor_fungibility, min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated

NO_SET = "no set of preemptible victims frees enough room"


def _written_out(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment | None:
    """The judgement in full: every kept head tried in order, its assignment copied whole,
    the message of a head without candidates asked of ``failures.dominated``."""
    kept_heads = session.state.get(heads._HEADS)
    kept = kept_heads.get(leaf.index) if kept_heads is not None else None
    if kept is None or kept[0] != search_state(session, leaf) or not heads._judgeable(session, workload):
        return None
    for judge in kept[1]:
        head, assignment = judge.head, judge.assignment
        if head.pod_sets != workload.pod_sets:
            continue
        if not (
            workload.priority < head.priority
            or (workload.priority == head.priority and workload.created >= head.created)
        ):
            continue
        message, search = assignment.message, None
        if assignment.mode == NOCANDIDATES:
            targets = [(workload.pod_sets[0], 0, "")] if assignment.node_short else []
            search = dominated(session, workload, leaf, assignment.usage, assignment.needed, targets)
            if search is None:
                return None
            message = search.message
        session.counters.judged += 1
        return replace(
            assignment,
            workload=workload,
            pod_sets=list(assignment.pod_sets),
            usage=dict(assignment.usage),
            victims=[],
            message=message,
            search=search,
            flavor_scan={name: dict(positions) for name, positions in assignment.flavor_scan.items()},
            tried=[f"flavors as for {head.key}: the same pod sets, no lower priority, the same state"],
        )
    return None


def _outputs(
    make: Callable[[], Any], registry_of: Callable[[], Registry], actions: tuple[str, ...]
) -> tuple[str, dict[str, list[str]], dict[str, Any], dict[str, int], dict[str, int | str]]:
    registry = registry_of()
    counters: dict[str, int | str] = {}
    decisions = run_session(make(), registry, actions=actions, counters=counters)
    return decisions.to_json(), decisions.explanations, decisions.flavor_scans, dict(registry.vetoes), counters


CLUSTERS = {
    "saturated-10x300": lambda: generate_saturated(1, queues=10, workloads=300),
    "saturated-20x900-seed-2": lambda: generate_saturated(2, queues=20, workloads=900),
    "saturated-5x400-seed-3": lambda: generate_saturated(3, queues=5, workloads=400, pending_share=0.9),
    "saturated-40x1200-seed-4": lambda: generate_saturated(4, queues=40, workloads=1200, pending_share=0.6),
}


def _through_nominate(
    monkeypatch: pytest.MonkeyPatch, judged: Callable[[Session, QuotaNode, Workload], Assignment | None]
) -> None:
    """The rounds judge every head through ``nominate`` with ``judged`` (an assignment of
    its own for each judged head) instead of taking the kept head's as it is."""
    monkeypatch.setattr(allocate, "KEPT_BY_QUEUE", False)  # the rounds ask heads.judge, made to judge none
    monkeypatch.setattr(allocate, "judge", lambda session, leaf, workload, states=None: None)
    monkeypatch.setattr(
        allocate, "nominate", lambda session, leaf, workload, judged=True: nominating.nominate(session, leaf, workload)
    )
    monkeypatch.setattr(nominating, "judged_head", judged)


def _both(compared: list[int]) -> Callable[[Session, QuotaNode, Workload], Assignment | None]:
    """The judged path, each of its answers checked against the written-out one on the same
    state (what the latter counts is taken back: the session counts one judgement)."""

    def judged(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment | None:
        fast = heads.judged_head(session, leaf, workload)
        counters, counts = session.counters, tally(session)
        before = counters.judged, counters.dominated, counts.answered
        full = _written_out(session, leaf, workload)
        counters.judged, counters.dominated, counts.answered = before
        assert fast == full  # every field of the assignment, its search's included
        compared[0] += fast is not None
        return fast

    return judged


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_each_judged_assignment_equals_the_written_out_one_field_by_field(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = CLUSTERS[name]()
    actions, registry_of = default_session()
    compared = [0]
    _through_nominate(monkeypatch, _both(compared))
    _outputs(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert compared[0] > 0


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_judged_heads_decide_explain_and_count_as_the_judgement_written_out(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = CLUSTERS[name]()
    actions, registry_of = default_session()
    fast = _outputs(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    _through_nominate(monkeypatch, _written_out)
    full = _outputs(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert fast[0] == full[0]  # decisions, pending messages included
    assert fast[1] == full[1]  # explanations
    assert fast[2] == full[2]  # flavor scans stored
    assert fast[3] == full[3]  # vetoes
    assert fast[4] == full[4]  # counters: heads judged, searches dominated, ...
    judged = fast[4]["heads-judged"]
    assert isinstance(judged, int) and judged > 0


def _first_failure_cluster() -> Any:
    """Queue a (4 cores, LowerPriority; reclaim ``Any``) is full: ``low`` (1 core, priority
    1) and ``top`` (3 cores, priority 9). Pending, all priority 5, in creation order:
    ``x`` (3 pods of 1 core), ``h`` (1 pod of 3 cores), ``w`` (1 pod of 3 cores, as
    ``h``), ``v`` (3 pods of 1 core, as ``x``). Each may take only ``low``: no set frees
    3 cores. ``x`` is searched and fails; ``h`` (other pod sets: scanned) asks the same
    3 cores, no stronger, so its search is answered by ``x``'s failure; ``w`` is judged
    with ``h``'s nomination and gets the answer its own search would get: ``x``'s."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy)],
        [
            workload("low", "a", 1, priority=1, created=1, admitted=True, admitted_at=0),
            workload("top", "a", 3, priority=9, created=2, admitted=True, admitted_at=0),
            workload("x", "a", 1, count=3, priority=5, created=10),
            workload("h", "a", 3, priority=5, created=20),
            workload("w", "a", 3, priority=5, created=30),
            workload("v", "a", 1, count=3, priority=5, created=40),
        ],
    )


def _decide(parsed: Any) -> tuple[dict[str, Any], dict[str, list[str]], dict[str, int | str]]:
    registry = Registry(
        [
            ("priority", priority, None),
            ("cohort-reclaim", cohort_reclaim, None),
            ("min-runtime", min_runtime, None),
            ("flavor-fungibility", flavor_fungibility, None),
        ]
    )
    counters: dict[str, int | str] = {}
    decisions = run_session(snapshot(parsed, 100_000), registry, counters=counters)
    return json.loads(decisions.to_json()), decisions.explanations, counters


def test_a_judged_head_is_answered_by_the_first_failure_it_is_no_stronger_than_not_its_judge() -> None:
    decided, explanations, counters = _decide(_first_failure_cluster())
    pending = {entry["workload"]: entry for entry in decided["pending"]}
    by_x = NO_SET + " (judged with ns/x: no lower priority, asking for no more)"
    assert pending["ns/x"]["message"] == NO_SET
    assert pending["ns/h"]["message"] == by_x
    assert pending["ns/w"]["message"] == by_x  # judged with h's nomination, answered by x's search
    assert pending["ns/v"]["message"] == by_x  # judged with x's nomination
    assert {entry["reason"] for entry in pending.values()} == {"PreemptionNoCandidates"}
    assert counters["heads-judged"] == 2  # w and v
    assert counters["victim-searches"] == 1  # x only
    assert explanations["ns/w"] == [
        "flavors as for ns/h: the same pod sets, no lower priority, the same state",
    ]
    assert explanations["ns/v"] == [
        "flavors as for ns/x: the same pod sets, no lower priority, the same state",
    ]


def _later_failure_cluster() -> Any:
    """Queue a as above. Pending: ``h`` (priority 5, 3 cores), ``y`` (priority 4, 3 pods of
    1 core), ``w`` (priority 3, 3 cores, as ``h``), ``u`` (priority 4, 3 cores, created
    after ``h``, as ``h``). By queue order: ``h`` (searched, fails, kept), ``y`` (other pod
    sets: scanned; answered by ``h``'s failure), ``u`` (judged with ``h``: answered by
    ``h``'s failure, the first it is no stronger than), ``w`` (judged with ``h``)."""
    policy = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
    return inventory(
        [cohort("root"), queue("a", "root", cpu=4, preemption=policy)],
        [
            workload("low", "a", 1, priority=1, created=1, admitted=True, admitted_at=0),
            workload("top", "a", 3, priority=9, created=2, admitted=True, admitted_at=0),
            workload("h", "a", 3, priority=5, created=10),
            workload("y", "a", 1, count=3, priority=4, created=10),
            workload("u", "a", 3, priority=4, created=20),
            workload("w", "a", 3, priority=3, created=10),
        ],
    )


def test_judged_heads_of_one_judge_are_answered_alike_before_and_after_more_failures_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failures that answer a judge's request are read once and then only the ones
    kept since: every head judged with ``h`` gets the answer ``failures.dominated`` gives."""
    decided, explanations, counters = _decide(_later_failure_cluster())
    by_h = NO_SET + " (judged with ns/h: no lower priority, asking for no more)"
    pending = {entry["workload"]: entry["message"] for entry in decided["pending"]}
    assert pending == {"ns/h": NO_SET, "ns/y": by_h, "ns/u": by_h, "ns/w": by_h}
    assert counters["heads-judged"] == 2  # u and w
    _through_nominate(monkeypatch, _written_out)
    assert _decide(_later_failure_cluster()) == (decided, explanations, counters)


def test_the_failures_read_for_a_request_answer_each_preemptor_as_dominated_does() -> None:
    """By hand, in one state of queue a: failures kept for 3 cores by ``f3`` (priority 3),
    ``f7`` (priority 7), for 4 cores by ``f9`` (priority 9, asks more: answers no 3-core
    request) and, after a first reading, ``f6`` (priority 6). For a 3-core preemptor the
    answer is the first failure it is no stronger than: ``f3`` for priority 2 and 3,
    ``f7`` for 4 to 7 (``f6`` comes later in the list), none above 7; exactly what
    ``failures.dominated`` answers. A commit of the tree moves the state: nothing answers, until
    a failure is kept in the new state (``f4``): then only it does."""
    parsed = _first_failure_cluster()
    session = open_session(parsed, [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)], 100_000)
    leaf = session.snapshot.tree.leaves["a"]
    cpu = ("default", "cpu")
    needed = frozenset({cpu})

    def fail(name: str, prio: int, cores: int) -> None:
        preemptor = workload(name, "a", cores, priority=prio, created=5)
        before = snapshot_counts(session, preemptor)
        result = SearchResult(message=f"{NO_SET} for {name}", silent=True)
        remember_failure(session, preemptor, leaf, {cpu: cores * 1000}, needed, [], result, before)

    def answered(answers: Answers, prio: int) -> tuple[str | None, str | None]:
        preemptor = workload("p", "a", 3, priority=prio, created=10)
        state = search_state(session, leaf)
        found = answers_now(session, leaf, answers, state)
        first = next((text for p, c, text, _ in found or () if (prio, -10) <= (p, -c)), None)
        full = dominated(session, preemptor, leaf, {cpu: 3000}, needed, [])
        return first, None if full is None else full.message

    def named(name: str) -> str:
        return f"{NO_SET} for {name} (judged with ns/{name}: no lower priority, asking for no more)"

    fail("f3", 3, 3)
    fail("f7", 7, 3)
    fail("f9", 9, 4)
    answers = Answers({cpu: 3000}, needed, False)
    expected = {2: "f3", 3: "f3", 4: "f7", 5: "f7", 7: "f7", 8: None, 10: None}
    for prio, name in expected.items():
        assert answered(answers, prio) == ((named(name), named(name)) if name else (None, None))
    fail("f6", 6, 3)
    fail("f8", 8, 3)
    expected.update({8: "f8", 10: None})
    for prio, name in expected.items():
        assert answered(answers, prio) == ((named(name), named(name)) if name else (None, None))
    session.statement.add_usage(leaf, {cpu: 1000})
    session.statement.commit()
    assert answers_now(session, leaf, answers, search_state(session, leaf)) is None
    fail("f4", 4, 3)  # the first failure of the new state: only it answers now
    assert answered(answers, 3) == (named("f4"), named("f4"))
    assert answered(answers, 5) == (None, None)
