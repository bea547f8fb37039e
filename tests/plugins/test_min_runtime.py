"""The min-runtime plugin (SEMANTICS §5): resolution through the queue tree, the
``is_preemptible`` veto, the elastic scenario filter, and what it tells the user."""

from __future__ import annotations

import dataclasses

import pytest
from preemptd.daemon.config import parse_config
from preemptd.daemon.plugins import resolve_plugins
from preemptd.framework.model import PreemptionPolicy, QueueSpec, Workload
from preemptd.framework.preemption import candidate_units
from preemptd.framework.quantity import parse_timestamp
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.run import run_session
from preemptd.framework.session import (
    CLASS_HIERARCHICAL,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_QUEUE,
    Candidate,
    Registry,
    Scenario,
    Session,
    hookimpl,
)
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, inventory, queue, workload
from preemptd.plugins import cohort_reclaim, min_runtime, priority
from preemptd.plugins.min_runtime import (
    PREEMPT,
    RECLAIM,
    Config,
    Resolution,
    reclaim_start,
    resolve_preempt,
    resolve_reclaim,
)

SECOND = 1000
MINUTE = 60 * SECOND
T0 = parse_timestamp("2026-01-01T00:00:00Z")
IN_QUEUE_POLICY = PreemptionPolicy(within_queue="LowerPriority")
RECLAIM_POLICY = PreemptionPolicy(reclaim_within_cohort="Any")


def tree(*specs: QueueSpec) -> QuotaTree:
    return QuotaTree({spec.name: spec for spec in specs})


def seed_reclaim_tree() -> QuotaTree:
    """The seed's reclaim example: A → B 600s → {C → {leaf1 0s, leaf2 180s}, D 60s → {leaf3}}."""
    return tree(
        cohort("A"),
        QueueSpec("B", "A", reclaim_min_runtime=600 * SECOND),
        QueueSpec("C", "B"),
        QueueSpec("D", "B", reclaim_min_runtime=60 * SECOND),
        queue("leaf1", "C", cpu=1, reclaim_min_runtime=0),
        queue("leaf2", "C", cpu=1, reclaim_min_runtime=180 * SECOND),
        queue("leaf3", "D", cpu=1),
    )


def seed_preempt_tree() -> QuotaTree:
    """The seed's preempt example: A → B 600s → C → {leaf1 300s, leaf2}."""
    return tree(
        cohort("A"),
        QueueSpec("B", "A", preempt_min_runtime=600 * SECOND),
        QueueSpec("C", "B"),
        queue("leaf1", "C", cpu=1, preempt_min_runtime=300 * SECOND),
        queue("leaf2", "C", cpu=1),
    )


def node(t: QuotaTree, name: str) -> QuotaNode:
    return t.nodes[name]


# -- resolution through the queue tree ----------------------------------------------------


def test_reclaim_from_a_cousin_uses_the_lca_child_on_the_victims_side() -> None:
    """Seed example 1: leaf1 reclaiming from leaf3 resolves at D (LCA B, one step down), 60s."""
    t = seed_reclaim_tree()
    assert Resolution(60 * SECOND, RECLAIM, "D") == resolve_reclaim(node(t, "leaf1"), node(t, "leaf3"), 0)


def test_reclaim_from_a_sibling_uses_the_victims_own_queue() -> None:
    """Seed example 2: leaf1 reclaiming from leaf2 resolves at leaf2 (LCA C, one step down), 180s."""
    t = seed_reclaim_tree()
    assert Resolution(180 * SECOND, RECLAIM, "leaf2") == resolve_reclaim(node(t, "leaf1"), node(t, "leaf2"), 0)


def test_reclaim_walks_up_from_the_lca_child_when_it_sets_nothing() -> None:
    """Seed example 3: leaf3 reclaiming from leaf1 starts at C (unset) and inherits B's 600s, not leaf1's 0s."""
    t = seed_reclaim_tree()
    assert Resolution(600 * SECOND, RECLAIM, "B") == resolve_reclaim(node(t, "leaf3"), node(t, "leaf1"), 0)


def test_reclaim_start_is_the_child_of_the_lowest_common_ancestor() -> None:
    """The walk starts one step below the LCA, on the victim's side, for each seed pair."""
    t = seed_reclaim_tree()
    starts = [
        reclaim_start(node(t, "leaf1"), node(t, "leaf3")),
        reclaim_start(node(t, "leaf1"), node(t, "leaf2")),
        reclaim_start(node(t, "leaf3"), node(t, "leaf1")),
    ]
    assert [node(t, "D"), node(t, "leaf2"), node(t, "C")] == starts


def test_preempt_uses_the_victims_queue_when_it_sets_a_value() -> None:
    """Seed preempt example 1: leaf1's own 300s wins over B's 600s."""
    t = seed_preempt_tree()
    assert Resolution(300 * SECOND, PREEMPT, "leaf1") == resolve_preempt(node(t, "leaf1"), 0)


def test_preempt_inherits_from_the_nearest_ancestor_that_sets_a_value() -> None:
    """Seed preempt example 2: leaf2 sets nothing, C neither, so B's 600s applies."""
    t = seed_preempt_tree()
    assert Resolution(600 * SECOND, PREEMPT, "B") == resolve_preempt(node(t, "leaf2"), 0)


def test_reclaim_without_common_ancestor_uses_the_victims_top_level_queue() -> None:
    """Leaves of two separate trees: the victim's top-level queue's reclaimMinRuntime applies."""
    t = tree(
        QueueSpec("X", reclaim_min_runtime=5 * MINUTE),
        queue("x1", "X", cpu=1, reclaim_min_runtime=1 * MINUTE),
        cohort("Y"),
        queue("y1", "Y", cpu=1),
    )
    assert Resolution(5 * MINUTE, RECLAIM, "X") == resolve_reclaim(node(t, "y1"), node(t, "x1"), 7 * MINUTE)


def test_reclaim_without_common_ancestor_falls_back_to_the_default() -> None:
    """Separate trees whose victim-side top-level queue sets nothing: the default, not the leaf's value."""
    t = tree(
        cohort("X"),
        queue("x1", "X", cpu=1, reclaim_min_runtime=1 * MINUTE),
        cohort("Y"),
        queue("y1", "Y", cpu=1),
    )
    assert Resolution(7 * MINUTE, RECLAIM, None) == resolve_reclaim(node(t, "y1"), node(t, "x1"), 7 * MINUTE)


def test_queue_method_walks_up_from_the_victims_own_queue() -> None:
    """Method `queue`: leaf3 reclaiming from leaf1 gets leaf1's 0s; leaf1 from leaf3 inherits D's 60s."""
    t = seed_reclaim_tree()
    resolved = [
        resolve_reclaim(node(t, "leaf3"), node(t, "leaf1"), 0, "queue"),
        resolve_reclaim(node(t, "leaf1"), node(t, "leaf3"), 0, "queue"),
    ]
    assert [Resolution(0, RECLAIM, "leaf1"), Resolution(60 * SECOND, RECLAIM, "D")] == resolved


def test_defaults_apply_where_no_queue_sets_a_value() -> None:
    """With nothing set in the tree, both kinds resolve to the plugin's defaults."""
    t = tree(cohort("c"), queue("a", "c", cpu=1), queue("b", "c", cpu=1))
    resolved = [resolve_preempt(node(t, "a"), 2 * MINUTE), resolve_reclaim(node(t, "a"), node(t, "b"), 3 * MINUTE)]
    assert [Resolution(2 * MINUTE, PREEMPT, None), Resolution(3 * MINUTE, RECLAIM, None)] == resolved


def test_resolution_describes_its_value_and_source() -> None:
    """The description names the setting, the duration and the queue (or the default)."""
    described = [
        Resolution(90 * SECOND, PREEMPT, "team-a").describe(),
        Resolution(0, RECLAIM, None).describe(),
    ]
    assert ["preemptMinRuntime 1m30s from queue team-a", "reclaimMinRuntime 0s from the default"] == described


# -- configuration ----------------------------------------------------------------------


def test_config_defaults_protect_nothing_and_resolve_by_lca() -> None:
    """Without a table: 0s for both defaults and the `lca` method."""
    config = Config()
    assert (0, 0, "lca") == (
        config.default_preempt_min_runtime_ms,
        config.default_reclaim_min_runtime_ms,
        config.reclaim_resolve_method,
    )


@pytest.mark.parametrize(
    ("text", "ms"),
    [("90s", 90_000), ("1h30m", 5_400_000), ("2d4h", 187_200_000), ("1w", 604_800_000)],
)
def test_config_accepts_durations_with_units(text: str, ms: int) -> None:
    """Go durations, with `d` and `w`, become milliseconds for both defaults."""
    config = Config(default_preempt_min_runtime=text, default_reclaim_min_runtime=text)
    assert (ms, ms) == (config.default_preempt_min_runtime_ms, config.default_reclaim_min_runtime_ms)


@pytest.mark.parametrize("key", ["default_preempt_min_runtime", "default_reclaim_min_runtime"])
@pytest.mark.parametrize("text", ["600", "-5m", "abc"])
def test_config_rejects_bare_malformed_and_negative_durations(key: str, text: str) -> None:
    """A bare number, a malformed or a negative duration is an error naming the key, never zero."""
    with pytest.raises(ValueError) as caught:
        Config(**{key: text})
    assert str(caught.value).startswith(f"{key}: ")


def test_config_rejects_an_unknown_resolve_method() -> None:
    """`reclaim_resolve_method` is `lca` or `queue`; anything else is a configuration error."""
    with pytest.raises(ValueError) as caught:
        Config(reclaim_resolve_method="leaf")
    assert "reclaim_resolve_method: unknown method 'leaf' (expected one of 'lca', 'queue')" == str(caught.value)


def test_config_reports_every_problem_at_once() -> None:
    """Two bad keys give one error naming both, so the table is fixed in one pass."""
    with pytest.raises(ValueError) as caught:
        Config(default_preempt_min_runtime="-5m", reclaim_resolve_method="leaf")
    assert (
        "default_preempt_min_runtime: negative duration '-5m'; "
        "reclaim_resolve_method: unknown method 'leaf' (expected one of 'lca', 'queue')"
    ) == str(caught.value)


def test_daemon_reports_a_bad_default_with_the_plugin_and_the_key() -> None:
    """A bare number in the TOML table is reported by the daemon's loader, naming plugin and key."""
    text = '[plugins.min-runtime]\ndefault_reclaim_min_runtime = "600"\n'
    config, problems = parse_config(text, source="preemptd.toml")
    _, found = resolve_plugins(config)
    assert [] == problems
    assert ["plugins.min-runtime"] == [p.key for p in found]
    assert found[0].message.startswith("plugin 'min-runtime': default_reclaim_min_runtime: malformed duration '600'")


# -- is_preemptible, through a real session ----------------------------------------------


def open_session(
    queues: list[QueueSpec], workloads: list[Workload], *, now: int, config: Config | None = None
) -> Session:
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("min-runtime", min_runtime, config)]
    )
    session = Session(Snapshot.build(inventory(queues, workloads), now=now), registry)
    session.open()
    return session


def units(session: Session, victim: Workload, *, group: int = CLASS_SAME_QUEUE) -> list[Candidate]:
    leaf = session.leaf(victim.queue)
    assert leaf is not None
    reason = IN_QUEUE if group == CLASS_SAME_QUEUE else IN_COHORT_RECLAIM
    return candidate_units(session, session.snapshot.workloads[victim.key], leaf, reason=reason, group=group)


def verdicts(session: Session, action: str, preemptor: Workload, candidates: list[Candidate]) -> list[bool]:
    return [min_runtime.is_preemptible(session, action, preemptor, c) for c in candidates]


def team_a(*, preempt_min_runtime: int | None = None) -> QueueSpec:
    return queue("team-a", cpu=4, preemption=IN_QUEUE_POLICY, preempt_min_runtime=preempt_min_runtime)


HIGH = workload("high", "team-a", 4, priority=10, created=T0)


def low(admitted_at: int | None = T0, *, evicted: bool = False) -> Workload:
    running = workload("low", "team-a", 4, admitted=True, admitted_at=admitted_at, evicted=evicted)
    # The builder reads admitted_at=None as "admitted at 0"; this victim has no admittedAt at all.
    return running if admitted_at is not None else dataclasses.replace(running, admitted_at=None)


def test_victim_exactly_at_the_boundary_is_preemptible() -> None:
    """now = admittedAt + 10m exactly: the window is over (the boundary is preemptible)."""
    victim = low()
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + 10 * MINUTE)
    assert [True] == verdicts(session, "preempt", HIGH, units(session, victim))


def test_victim_one_millisecond_before_the_boundary_is_protected() -> None:
    """now = admittedAt + 10m − 1ms: still inside the window, vetoed."""
    victim = low()
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + 10 * MINUTE - 1)
    assert [False] == verdicts(session, "preempt", HIGH, units(session, victim))


def test_victim_without_admitted_at_is_preemptible() -> None:
    """An admitted workload with no admittedAt has no known start, so nothing protects it."""
    victim = low(admitted_at=None)
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0)
    assert [True] == verdicts(session, "preempt", HIGH, units(session, victim))


def test_victim_on_its_way_out_is_not_rechecked() -> None:
    """A victim whose eviction is already issued stays usable, however fresh it is."""
    victim = low(evicted=True)
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + MINUTE)
    assert [True] == verdicts(session, "preempt", HIGH, units(session, victim))


def test_zero_window_protects_even_a_workload_admitted_after_now() -> None:
    """A resolved 0s means always preemptible, even when admittedAt is ahead of the session clock."""
    victim = low(admitted_at=T0 + MINUTE)
    queues = [team_a(preempt_min_runtime=0), queue("other", cpu=1, preempt_min_runtime=10 * MINUTE)]
    session = open_session(queues, [victim, HIGH], now=T0)
    assert [True] == verdicts(session, "preempt", HIGH, units(session, victim))


def test_default_window_applies_when_no_queue_sets_one() -> None:
    """default_preempt_min_runtime 5m protects a workload admitted 4m ago and not one admitted 5m ago."""
    config = Config(default_preempt_min_runtime="5m")
    fresh = dataclasses.replace(low(admitted_at=T0 + MINUTE), name="fresh")
    old = low()
    session = open_session([team_a()], [fresh, old, HIGH], now=T0 + 5 * MINUTE, config=config)
    candidates = units(session, fresh) + units(session, old)
    assert [False, True] == verdicts(session, "preempt", HIGH, candidates)


def test_reclaim_resolves_through_the_lowest_common_ancestor_in_a_session() -> None:
    """leaf1 reclaiming from leaf3 uses D's 60s: vetoed at +59s, preemptible at +60s."""
    queues = [
        cohort("A"),
        QueueSpec("B", "A", reclaim_min_runtime=600 * SECOND),
        QueueSpec("C", "B"),
        QueueSpec("D", "B", reclaim_min_runtime=60 * SECOND),
        queue("leaf1", "C", cpu=1, preemption=RECLAIM_POLICY, reclaim_min_runtime=0),
        queue("leaf3", "D", cpu=1),
    ]
    victim = workload("victim", "leaf3", 2, admitted=True, admitted_at=T0)
    preemptor = workload("preemptor", "leaf1", 1, priority=10)
    found = []
    for now in (T0 + 59 * SECOND, T0 + 60 * SECOND):
        session = open_session(queues, [victim, preemptor], now=now)
        found += verdicts(session, "reclaim", preemptor, units(session, victim, group=CLASS_HIERARCHICAL))
    assert [False, True] == found


def test_elastic_victim_is_left_to_the_scenario_filter() -> None:
    """Every unit of a protected elastic workload passes is_preemptible; the filter judges them."""
    victim = workload("elastic", "team-a", 1, count=4, min_count=2, admitted=True, admitted_at=T0)
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + MINUTE)
    assert [True, True, True] == verdicts(session, "preempt", HIGH, units(session, victim))


# -- the elastic scenario filter ---------------------------------------------------------


def accepts(session: Session, preemptor: Workload, victims: list[Candidate]) -> list[bool]:
    filters = min_runtime.get_accumulated_scenario_filters(session, "preempt", preemptor)
    return [accept(Scenario(session, preemptor, victims, "preempt")) for accept in filters]


def elastic_victim() -> Workload:
    return workload("elastic", "team-a", 1, count=4, min_count=2, admitted=True, admitted_at=T0)


def test_filter_lets_a_protected_elastic_workload_shrink_to_min_count() -> None:
    """Taking both pods above minCount 2 of a protected 4-pod workload is a valid scenario."""
    victim = elastic_victim()
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + MINUTE)
    singles = [u for u in units(session, victim) if u.single_pod]
    assert [True] == accepts(session, HIGH, singles)


def test_filter_rejects_taking_a_protected_elastic_workload_below_min_count() -> None:
    """A scenario that also takes the rest (below minCount) of a protected workload is invalid."""
    victim = elastic_victim()
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH], now=T0 + MINUTE)
    assert [False] == accepts(session, HIGH, units(session, victim))


def test_filter_accepts_the_rest_once_the_window_is_over() -> None:
    """At admittedAt + 10m the whole elastic workload may go (a 1h window elsewhere keeps the filter on)."""
    victim = elastic_victim()
    queues = [team_a(preempt_min_runtime=10 * MINUTE), queue("other", cpu=1, preempt_min_runtime=60 * MINUTE)]
    session = open_session(queues, [victim, HIGH], now=T0 + 10 * MINUTE)
    assert [True] == accepts(session, HIGH, units(session, victim))


def test_filter_resolves_by_the_pair_of_leaves_not_the_hooks_action() -> None:
    """The hook is asked with "preempt"; a victim in another leaf is judged by reclaimMinRuntime."""
    queues = [
        cohort("c"),
        queue("team-a", "c", cpu=4, preemption=RECLAIM_POLICY, preempt_min_runtime=10 * MINUTE),
        queue("team-b", "c", cpu=0, reclaim_min_runtime=2 * MINUTE),
    ]
    victim = workload("elastic", "team-b", 1, count=4, min_count=2, admitted=True, admitted_at=T0)
    found = []
    for now in (T0 + MINUTE, T0 + 2 * MINUTE):
        session = open_session(queues, [victim, HIGH], now=now)
        found += accepts(session, HIGH, units(session, victim, group=CLASS_HIERARCHICAL))
    assert [False, True] == found


def test_filter_judges_every_victim_whatever_the_shape_of_the_scenarios() -> None:
    """Grown, shrunk and reshuffled scenarios of one search: exactly those holding the protected rest are refused."""
    victim = elastic_victim()
    old = dataclasses.replace(low(admitted_at=T0 - 60 * MINUTE), priority=-1)
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [victim, old, HIGH], now=T0 + MINUTE)
    single1, single2, rest = units(session, victim)
    (whole,) = units(session, old)
    (accept,) = min_runtime.get_accumulated_scenario_filters(session, "preempt", HIGH)
    shapes = [
        [single1],
        [single1, rest],
        [single1, single2],
        [single1, single2, whole],
        [single2, whole],
        [rest, whole],
        [single1, single2, whole, rest],
    ]
    found = [accept(Scenario(session, HIGH, list(shape), "preempt")) for shape in shapes]
    assert [True, False, True, True, True, False, False] == found


def test_no_filter_when_no_elastic_workload_can_be_protected() -> None:
    """Without a fresh elastic workload the plugin adds no filter, so searches build no scenarios."""
    session = open_session([team_a(preempt_min_runtime=10 * MINUTE)], [low(), HIGH], now=T0 + MINUTE)
    assert [] == min_runtime.get_accumulated_scenario_filters(session, "preempt", HIGH)


# -- what the user is told ----------------------------------------------------------------


def test_pending_reason_and_note_name_the_earliest_expiry() -> None:
    """Two protected victims: MinRuntime, and the note gives the earlier of their expiries."""
    early = workload("early", "team-a", 2, admitted=True, admitted_at=T0)
    late = workload("late", "team-a", 2, admitted=True, admitted_at=T0 + 3 * MINUTE)
    queues = [team_a(preempt_min_runtime=10 * MINUTE)]
    snapshot = Snapshot.build(inventory(queues, [early, late, HIGH]), now=T0 + 5 * MINUTE)
    registry = Registry([("priority", priority, None), ("min-runtime", min_runtime, None)])
    decisions = run_session(snapshot, registry)
    (pending,) = decisions.pending
    assert ("ns/high", "MinRuntime") == (pending.workload, pending.reason)
    assert pending.message.endswith(
        "min-runtime: the first protected candidate, ns/early, becomes preemptible at 2026-01-01T00:10:00Z "
        "(admitted 2026-01-01T00:00:00Z + preemptMinRuntime 10m from queue team-a)"
    )


def test_explanation_has_one_line_per_protected_victim() -> None:
    """However many searches refuse a victim, `explain` lists it once, with its expiry and source."""
    victim = low()
    snapshot = Snapshot.build(
        inventory([team_a(preempt_min_runtime=10 * MINUTE)], [victim, HIGH]), now=T0 + MINUTE
    )
    registry = Registry([("priority", priority, None), ("min-runtime", min_runtime, None)])
    decisions = run_session(snapshot, registry)
    lines = [line for line in decisions.explain("ns/high") if line.startswith("min-runtime")]
    assert [
        "min-runtime: ns/low is protected until 2026-01-01T00:10:00Z "
        "(admitted 2026-01-01T00:00:00Z + preemptMinRuntime 10m from queue team-a)"
    ] == lines


def test_explanation_is_bounded() -> None:
    """Twelve protected victims: ten lines, then one line counting the other two."""
    victims = [
        workload(f"v{i:02d}", "team-a", 1, admitted=True, admitted_at=T0 + i * SECOND) for i in range(12)
    ]
    preemptor = workload("high", "team-a", 12, priority=10)
    queues = [queue("team-a", cpu=12, preemption=IN_QUEUE_POLICY, preempt_min_runtime=10 * MINUTE)]
    snapshot = Snapshot.build(inventory(queues, [*victims, preemptor]), now=T0 + MINUTE)
    registry = Registry([("priority", priority, None), ("min-runtime", min_runtime, None)])
    lines = [line for line in run_session(snapshot, registry).explain("ns/high") if line.startswith("min-runtime")]
    assert (11, "min-runtime: 2 more protected candidate(s) not listed") == (len(lines), lines[-1])


# -- failure isolation (framework behaviour) --------------------------------------------


class Broken:
    """A plugin whose is_preemptible always raises."""

    @hookimpl
    def is_preemptible(self, session: Session, action: str, preemptor: Workload, preemptee: Candidate) -> bool:
        raise RuntimeError("boom")


def test_a_raising_is_preemptible_vetoes_instead_of_stopping_the_session() -> None:
    """A plugin that raises counts as a veto (fail safe) and is recorded as failed."""
    victim = low()
    snapshot = Snapshot.build(inventory([team_a()], [victim, HIGH]), now=T0 + MINUTE)
    registry = Registry([("priority", priority, None), ("broken", Broken(), None), ("min-runtime", min_runtime, None)])
    session = Session(snapshot, registry)
    session.open()
    (candidate,) = units(session, victim)
    assert "broken" == session.is_preemptible("preempt", HIGH, candidate)
    assert 1 == registry.failures["broken"]


def test_a_raising_plugin_leaves_the_preemptor_pending_without_victims() -> None:
    """The session still ends: no victim is taken and the preemptor is PreemptionNoCandidates."""
    snapshot = Snapshot.build(inventory([team_a()], [low(), HIGH]), now=T0 + MINUTE)
    registry = Registry([("priority", priority, None), ("broken", Broken(), None), ("min-runtime", min_runtime, None)])
    decisions = run_session(snapshot, registry)
    assert ([], ["PreemptionNoCandidates"]) == (decisions.preempted, [p.reason for p in decisions.pending])
