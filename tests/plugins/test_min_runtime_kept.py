"""min-runtime's answers kept for a session: worked out once per (preemptor leaf, action)
and victim workload, the note naming a protected candidate built once, and every call
still answered, counted and told as the rule says (SEMANTICS §5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import PreemptionPolicy, QueueSpec, Workload
from preemptd.framework.preemption import candidate_units
from preemptd.framework.quantity import format_timestamp, parse_timestamp
from preemptd.framework.run import run_session
from preemptd.framework.session import (
    CLASS_HIERARCHICAL,
    IN_COHORT_RECLAIM,
    Candidate,
    Registry,
    Session,
)
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, inventory, queue, workload
from preemptd.plugins import cohort_reclaim, min_runtime, priority
from preemptd.plugins.min_runtime import Config, Resolution, resolve_preempt, resolve_reclaim

SECOND = 1000
MINUTE = 60 * SECOND
T0 = parse_timestamp("2026-01-01T00:00:00Z")
POLICY = PreemptionPolicy(within_queue="LowerPriority", reclaim_within_cohort="Any")
LEAVES = ("a1", "a2", "b1")


def queues() -> list[QueueSpec]:
    """root → A (reclaim 20m) → {a1 (preempt 10m), a2 (reclaim 0s)}, root → b1 (preempt 0s)."""
    return [
        cohort("root"),
        QueueSpec("A", "root", reclaim_min_runtime=20 * MINUTE),
        queue("a1", "A", cpu=8, preemption=POLICY, preempt_min_runtime=10 * MINUTE),
        queue("a2", "A", cpu=8, preemption=POLICY, reclaim_min_runtime=0),
        queue("b1", "root", cpu=8, preemption=POLICY, preempt_min_runtime=0),
    ]


def open_session(workloads: list[Workload], *, now: int, config: Config | None = None) -> Session:
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, config)]
    )
    session = Session(Snapshot.build(inventory(queues(), workloads), now=now), registry, explain=False)
    session.open()
    return session


def unit(session: Session, victim: Workload) -> Candidate:
    leaf = session.leaf(victim.queue)
    assert leaf is not None
    units = candidate_units(
        session, session.snapshot.workloads[victim.key], leaf, reason=IN_COHORT_RECLAIM, group=CLASS_HIERARCHICAL
    )
    return units[-1]  # the whole workload, or the rest of an elastic one


def expected_note(victim: Workload, resolution: Resolution) -> str:
    assert victim.admitted_at is not None
    until = victim.admitted_at + resolution.ms
    return (
        f"min-runtime: the first protected candidate, {victim.key}, becomes preemptible at "
        f"{format_timestamp(until)} (admitted {format_timestamp(victim.admitted_at)} + {resolution.describe()})"
    )


def test_the_note_naming_a_protected_candidate_is_written_once_for_every_preemptor_of_a_leaf(monkeypatch) -> None:
    """Three preemptors of a1 refused the same fresh victim: three notes, one text built."""
    victim = workload("victim", "a1", 2, admitted=True, admitted_at=T0)
    preemptors = [workload(f"p{i}", "a1", 2, priority=10) for i in range(3)]
    session = open_session([victim, *preemptors], now=T0 + MINUTE)
    candidate = unit(session, victim)
    formatted: list[int] = []

    def counting(ms: int) -> str:
        formatted.append(ms)
        return format_timestamp(ms)

    monkeypatch.setattr(min_runtime, "format_timestamp", counting)
    vetoed = [session.is_preemptible("preempt", p, candidate) for p in preemptors]
    note = expected_note(victim, Resolution(10 * MINUTE, "preemptMinRuntime", "a1"))
    assert ["min-runtime"] * 3 == vetoed
    assert [[note]] * 3 == [session.notes(p.key) for p in preemptors]
    assert [T0 + 10 * MINUTE, T0] == formatted  # until, then admitted: once
    assert 3 == session.registry.vetoes["min-runtime"]


def test_a_victims_answer_is_worked_out_once_per_preemptor_leaf_and_action(monkeypatch) -> None:
    """Four calls about one fresh victim (two preemptors of a2, two actions, asked twice):
    the window is resolved and the workload judged elastic or not once per action."""
    victim = workload("victim", "a1", 2, admitted=True, admitted_at=T0)
    preemptors = [workload(f"p{i}", "a2", 2, priority=10) for i in range(2)]
    session = open_session([victim, *preemptors], now=T0 + MINUTE)
    candidate = unit(session, victim)
    judged: list[str] = []
    plain = Workload.is_elastic

    def counting(self: Workload) -> bool:
        judged.append(self.key)
        return bool(plain.fget(self))  # type: ignore[attr-defined]

    monkeypatch.setattr(Workload, "is_elastic", property(counting))
    found = [
        session.is_preemptible(action, p, candidate)
        for _ in range(2)
        for p in preemptors
        for action in ("preempt", "reclaim")
    ]
    # preempt: a1's own 10m protects it; reclaim from a2: A's child on a1's side is a1,
    # which sets no reclaimMinRuntime, so A's 20m applies.
    assert ["min-runtime"] * 8 == found
    assert ["ns/victim", "ns/victim"] == judged


VICTIMS = [
    # (name, leaf, admitted minutes before now, elastic, evicted)
    ("v0", "a1", 1, False, False),
    ("v1", "a1", 12, False, False),
    ("v2", "a2", 5, False, False),
    ("v3", "a2", 25, False, False),
    ("v4", "b1", 1, False, False),
    ("v5", "a1", 3, True, False),
    ("v6", "a2", 2, False, True),
    ("v7", "a1", 4, False, False),
]


def make_victim(name: str, leaf: str, ago: int, elastic: bool, evicted: bool, now: int) -> Workload:
    if elastic:
        return workload(name, leaf, 1, count=4, min_count=2, admitted=True, admitted_at=now - ago * MINUTE)
    return workload(name, leaf, 1, admitted=True, admitted_at=now - ago * MINUTE, evicted=evicted)


def rule(session: Session, config: Config, action: str, preemptor: Workload, victim: Workload) -> Resolution | None:
    """SEMANTICS §5 worked out afresh: the window that protects ``victim``, or None."""
    if victim.evicted or victim.admitted_at is None or victim.is_elastic:
        return None
    victim_leaf = session.leaf(victim.queue)
    assert victim_leaf is not None
    if action == "preempt":
        resolution = resolve_preempt(victim_leaf, config.default_preempt_min_runtime_ms)
    else:
        resolution = resolve_reclaim(
            session.leaf(preemptor.queue), victim_leaf, config.default_reclaim_min_runtime_ms,
            config.reclaim_resolve_method,
        )
    if resolution.ms == 0 or session.now >= victim.admitted_at + resolution.ms:
        return None
    return resolution


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, len(VICTIMS) - 1), st.sampled_from(["preempt", "reclaim"])),
        max_size=40,
    ),
    method=st.sampled_from(["lca", "queue"]),
    default=st.sampled_from(["0s", "3m", "30m"]),
)
def test_kept_answers_notes_and_vetoes_are_those_of_the_rule_for_every_call(
    calls: list[tuple[int, int, str]], method: str, default: str
) -> None:
    """Calls in any order, preemptors of different leaves interleaved: each answer, each
    preemptor's note (the earliest window end, named by the first victim reaching it) and
    the veto count are what the rule gives when worked out for every call."""
    now = T0 + 60 * MINUTE
    config = Config(default_preempt_min_runtime=default, default_reclaim_min_runtime=default,
                    reclaim_resolve_method=method)
    victims = [make_victim(*spec, now=now) for spec in VICTIMS]
    preemptors = [workload(f"p{i}", LEAVES[i % 3], 1, priority=10) for i in range(4)]
    session = open_session([*victims, *preemptors], now=now, config=config)
    candidates = [unit(session, v) for v in victims]
    earliest: dict[str, tuple[int, str]] = {}
    refused = 0
    for p, v, action in calls:
        preemptor, victim = preemptors[p], victims[v]
        resolution = rule(session, config, action, preemptor, victim)
        got = session.is_preemptible(action, preemptor, candidates[v])
        assert (None if resolution is None else "min-runtime") == got
        if resolution is not None:
            refused += 1
            assert victim.admitted_at is not None
            until = victim.admitted_at + resolution.ms
            if preemptor.key not in earliest or until < earliest[preemptor.key][0]:
                earliest[preemptor.key] = (until, expected_note(victim, resolution))
    assert refused == session.registry.vetoes["min-runtime"]
    for preemptor in preemptors:
        found = earliest.get(preemptor.key)
        assert ([] if found is None else [found[1]]) == session.notes(preemptor.key)


def test_a_session_without_a_victim_search_never_looks_for_a_fresh_elastic_workload(monkeypatch) -> None:
    """Whether the elastic scenario filter is needed is worked out at the session's first
    search: a session where every head fits asks no workload whether it is elastic, and
    one that searches asks it then and still gets the filter."""
    now = T0 + MINUTE
    fresh = workload("elastic", "a1", 1, count=4, min_count=2, admitted=True, admitted_at=T0)
    asked: list[str] = []
    plain = Workload.is_elastic

    def counting(self: Workload) -> bool:
        asked.append(self.key)
        return bool(plain.fget(self))  # type: ignore[attr-defined]

    monkeypatch.setattr(Workload, "is_elastic", property(counting))
    registry = Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None),
                         ("min-runtime", min_runtime, None)])
    fits = Snapshot.build(inventory(queues(), [fresh, workload("fits", "a1", 1)]), now=now)
    admitted = run_session(fits, registry, explain=False).admitted
    assert (["ns/fits"], []) == ([a.workload for a in admitted], asked)
    session = open_session([fresh, workload("fits", "a1", 1)], now=now)
    filters = min_runtime.get_accumulated_scenario_filters(session, "preempt", workload("p", "a1", 8))
    assert (1, ["ns/elastic"]) == (len(filters), asked)


def test_a_session_keeping_no_explanation_keeps_no_per_preemptor_lines_to_count() -> None:
    """With explanations off (the simulator's sessions), a refusal writes the note and
    nothing else: no record of the victims each preemptor was told of is kept for the
    explanation and its "more protected candidate(s)" count, which would be dropped."""
    victims = [workload(f"v{i}", "a1", 1, admitted=True, admitted_at=T0 + i * SECOND) for i in range(3)]
    preemptors = [workload(f"p{i}", "a1", 2, priority=10) for i in range(2)]
    found = {}
    for explain in (False, True):
        registry = Registry([("priority", priority, None), ("min-runtime", min_runtime, None)])
        session = Session(Snapshot.build(inventory(queues(), [*victims, *preemptors]), now=T0 + MINUTE),
                          registry, explain=explain)
        session.open()
        candidates = [unit(session, v) for v in victims]
        for p in preemptors:
            assert ["min-runtime"] * 3 == [session.is_preemptible("preempt", p, c) for c in candidates]
        state = session.state["min-runtime"]
        found[explain] = (sorted(state.explained), [session.notes(p.key) for p in preemptors])
    assert [] == found[False][0]
    assert ["ns/p0", "ns/p1"] == found[True][0]
    assert found[False][1] == found[True][1]
