"""The fair-sharing plugin and the policy hooks it stands on (SEMANTICS §7, hooks.py).

Scenario cases (tests/scenarios/cases/fair_*.yaml) pin the decisions; these tests
pin what cases cannot reach: exact share comparison, the weight's located errors,
the configuration's strategies, the JSON without the plugin, and how the framework
combines (and survives) a third-party answer to ``round_order``,
``may_search_victims`` and ``victim_strategy``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from preemptd.daemon.config import parse_config
from preemptd.daemon.plugins import resolve_plugins
from preemptd.framework import VictimWalk, hookimpl
from preemptd.framework.objects import parse_objects
from preemptd.framework.testing import decide, open_session
from preemptd.plugins import cohort_reclaim, fair_sharing, priority
from preemptd.plugins.fair_sharing.shares import INFINITE, ZERO, reported

NOW = "2026-01-01T01:00:00Z"
FLAVOR = {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
ANY = {"reclaimWithinCohort": "Any", "withinQueue": "LowerPriority"}


def _queue(name: str, cpu: int, **spec: Any) -> dict[str, Any]:
    body = {
        "parent": "cohort",
        "preemption": ANY,
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}
        ],
        **spec,
    }
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}, "spec": body}


def _workload(name: str, queue: str, cpu: int, minute: int, *, admitted: bool, priority: int = 0) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z"},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": str(cpu)}}]},
    }
    if admitted:
        obj["status"] = {
            "admission": {"queue": queue, "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
            "admittedAt": f"2026-01-01T00:{minute:02d}:00Z",
        }
    return obj


def _reference_2() -> list[dict[str, Any]]:
    """SEMANTICS §7.4 reference 2: a 3, b 5, c 1 (1-cpu each); one more in a."""
    objects = [FLAVOR, _queue("a", 3), _queue("b", 3), _queue("c", 3)]
    minute = 1
    for queue, count in (("a", 3), ("b", 5), ("c", 1)):
        for i in range(count):
            objects.append(_workload(f"{queue}{i + 1}", queue, 1, minute, admitted=True))
            minute += 1
    objects.append(_workload("w", "a", 1, 50, admitted=False))
    return objects


BUILT_IN = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
FAIR = ("fair-sharing", fair_sharing, fair_sharing.Config())


# -- shares ---------------------------------------------------------------------


def test_an_infinite_share_sorts_above_every_finite_one_and_by_ratio_among_infinite() -> None:
    """§7.1: two +inf compare by their ratios; +inf above every finite share; exact values."""
    finite_big = (0, Fraction(10**30))
    inf_small, inf_big = (1, Fraction(1, 3)), (1, Fraction(2, 3))
    assert ZERO < finite_big < inf_small < inf_big
    assert (0, Fraction(1, 3)) < (0, Fraction(333_333_333_333_333_334, 10**18))


def test_reported_share_is_rounded_up_and_infinite_is_max_int64() -> None:
    """§7.1 Reported: ⌈share⌉; +inf → 2^63 − 1."""
    assert reported((0, Fraction(2000, 3))) == 667
    assert reported((0, Fraction(200))) == 200
    assert reported((1, Fraction(1))) == INFINITE == 2**63 - 1


# -- Queue spec.fairSharing.weight ------------------------------------------------


@pytest.mark.parametrize("weight", ["-1", "1e-10", "0.0000000001", "abc", "", True, [1]])
def test_a_bad_weight_is_an_error_naming_the_queue_and_field(weight: object) -> None:
    """CONTRACT §1: a negative weight, one above 0 but not above 1e-9, or no number at all
    is an error on that Queue, located."""
    parsed = parse_objects([("queues.yaml", FLAVOR), ("queues.yaml", _queue("a", 3, fairSharing={"weight": weight}))])
    assert [(p.file, p.object, p.path) for p in parsed.problems] == [("queues.yaml", "Queue/a", "spec.fairSharing.weight")]
    assert "a" not in parsed.queues  # the Queue is not used half-read


@pytest.mark.parametrize(
    ("weight", "expected"),
    [("2", Fraction(2)), ("0.5", Fraction(1, 2)), ("0", Fraction(0)), ("500m", Fraction(1, 2)), (3, Fraction(3)), ("2e-9", Fraction(2, 10**9))],
)
def test_a_weight_is_read_exactly(weight: object, expected: Fraction) -> None:
    parsed = parse_objects([("q.yaml", FLAVOR), ("q.yaml", _queue("a", 3, fairSharing={"weight": weight}))])
    assert not parsed.problems
    assert parsed.queues["a"].fair_weight == expected


def test_the_weight_defaults_to_one() -> None:
    parsed = parse_objects([("q.yaml", FLAVOR), ("q.yaml", _queue("a", 3))])
    assert parsed.queues["a"].fair_weight == 1


# -- configuration ----------------------------------------------------------------


@pytest.mark.parametrize(
    "strategies",
    ['["LessThanInitialShare", "LessThanOrEqualToFinalShare"]', '["Sometimes"]', "[]"],
)
def test_another_strategy_list_is_a_config_error(strategies: str) -> None:
    """CONTRACT §4: only the two names, in that order, alone or together."""
    config, problems = parse_config(
        f"[plugins.fair-sharing]\nenabled = true\npreemption_strategies = {strategies}\n", source="t.toml"
    )
    assert not problems
    _, problems = resolve_plugins(config)
    assert any("preemption_strategies" in str(p) for p in problems), problems


def test_fair_sharing_is_off_unless_enabled() -> None:
    config, _ = parse_config("", source="t.toml")
    plugins, problems = resolve_plugins(config)
    assert not problems
    info = {i.name: i for i in plugins.infos}["fair-sharing"]
    assert info.installed and not info.enabled


def test_the_nominal_floor_is_on_by_default_and_can_be_turned_off() -> None:
    """docs/fair-sharing.md: ``protect_nominal`` defaults to true; false is accepted."""
    assert fair_sharing.Config().protect_nominal is True
    config, problems = parse_config(
        "[plugins.fair-sharing]\nenabled = true\nprotect_nominal = false\n", source="t.toml"
    )
    assert not problems
    _, problems = resolve_plugins(config)
    assert not problems


def test_a_nominal_floor_that_is_not_a_boolean_is_a_config_error() -> None:
    config, problems = parse_config(
        '[plugins.fair-sharing]\nenabled = true\nprotect_nominal = "yes"\n', source="t.toml"
    )
    problems = [*problems, *resolve_plugins(config)[1]]
    assert any("protect_nominal" in str(p) for p in problems), problems


# -- decisions --------------------------------------------------------------------


def test_shares_are_absent_from_the_json_without_the_plugin() -> None:
    """CONTRACT §3: ``shares`` only with fair sharing on (absent, not empty, otherwise)."""
    off = decide(open_session(_reference_2(), BUILT_IN, NOW)).to_dict()
    on = decide(open_session(_reference_2(), [*BUILT_IN, FAIR], NOW)).to_dict()
    assert "shares" not in off
    assert [s["queue"] for s in on["shares"]] == ["a", "b", "c", "cohort"]


def _below_nominal_by_the_second_pass() -> list[dict[str, Any]]:
    """a {cpu 2} runs x (1), c2 (2), c1 (1), in admission order; w (3) pending in b {cpu 2,
    weight 2}: pass 1 takes c1 (a 4 -> 3), pass 2 would take c2 (a 3 -> 1 < 2)."""
    return [
        FLAVOR,
        _queue("a", 2),
        _queue("b", 2, fairSharing={"weight": "2"}),
        _workload("x", "a", 1, 10, admitted=True),
        _workload("c2", "a", 2, 11, admitted=True),
        _workload("c1", "a", 1, 12, admitted=True),
        _workload("w", "b", 3, 20, admitted=False),
    ]


def test_explain_names_the_victim_the_nominal_floor_passed_over() -> None:
    decisions = decide(open_session(_below_nominal_by_the_second_pass(), [*BUILT_IN, FAIR], NOW))
    assert decisions.preempted == []
    lines = decisions.explanations["ml/w"]
    assert "fair sharing: ml/c2 of a passed over: a would go below its nominal quota on default/cpu (1 < 2)" in lines
    assert any(line.startswith("fair sharing: ml/x of a chosen (LessThanInitialShare)") for line in lines)


def test_without_the_nominal_floor_the_second_pass_takes_the_queue_below_nominal() -> None:
    off = ("fair-sharing", fair_sharing, fair_sharing.Config(protect_nominal=False))
    decisions = decide(open_session(_below_nominal_by_the_second_pass(), [*BUILT_IN, off], NOW))
    assert sorted(p.workload for p in decisions.preempted) == ["ml/c1", "ml/c2"]


# -- the policy hooks, answered by a third party ----------------------------------


class _Raises:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def round_order(self, session: Any) -> Any:
        def picker(entries: Any) -> int:
            self.calls += 1
            raise RuntimeError("broken picker")

        return picker

    @hookimpl
    def may_search_victims(self, session: Any) -> Any:
        def allowed(leaf: Any, fr: Any, request: int) -> bool:
            raise RuntimeError("broken permission")

        return allowed

    @hookimpl
    def victim_strategy(self, session: Any) -> Any:
        def strategy(walk: VictimWalk) -> bool:
            raise RuntimeError("broken strategy")

        return strategy


def _two_heads() -> list[dict[str, Any]]:
    return [FLAVOR, _queue("a", 3), _queue("b", 3), _workload("x", "a", 2, 2, admitted=False), _workload("y", "b", 2, 1, admitted=False)]


def test_a_raising_picker_is_counted_and_the_classic_order_decides() -> None:
    broken = _Raises()
    session = open_session(_two_heads(), [*BUILT_IN, ("broken", broken, None)], NOW)
    decisions = decide(session)
    assert broken.calls == 1  # failed once, then the classic order for the rest of the session
    assert session.registry.failures["broken"] >= 1
    assert {a.workload for a in decisions.admitted} == {"ml/x", "ml/y"}


def test_a_raising_strategy_finds_no_victims_and_is_counted() -> None:
    """hooks.py: no preemption on a broken policy; the session goes on."""
    session = open_session(_reference_2(), [*BUILT_IN, ("broken", _Raises(), None)], NOW)
    decisions = decide(session)
    assert decisions.preempted == []
    assert [(p.workload, p.reason) for p in decisions.pending] == [("ml/w", "PreemptionNoCandidates")]
    assert any(e.hook == "victim_strategy" for e in session.registry.errors)


class _TakesFirst:
    """A minimal third-party strategy: the framework's candidates, first that fits."""

    @hookimpl
    def victim_strategy(self, session: Any) -> Any:
        def strategy(walk: VictimWalk) -> bool:
            return any(walk.take(candidate) and walk.fits() for candidate in walk.candidates())

        return strategy


def test_a_third_party_strategy_takes_the_victims_the_framework_then_commits() -> None:
    """A strategy answering victim_strategy replaces §4's attempt plan: here the first
    candidate of the framework's order is taken though §4 keeps it for an attempt
    within nominal (borrowWithinCohort Never), and the session preempts it."""
    session = open_session(_reference_2(), [*BUILT_IN, ("mine", _TakesFirst(), None)], NOW)
    decisions = decide(session)
    # Cohort candidates come in victim order: b's (b borrows 2), most recently admitted first.
    assert [(p.workload, p.preemptor, p.reason) for p in decisions.preempted] == [
        ("ml/b5", "ml/w", "InCohortReclamation")
    ]


def test_the_picker_sees_the_accounting_left_by_earlier_picks() -> None:
    """round_order is called before every pick, with the entries left."""
    seen: list[tuple[list[str], int]] = []

    class Recorder:
        @hookimpl
        def round_order(self, session: Any) -> Any:
            def picker(entries: Any) -> int:
                used = sum(session.accounting.usage[session.snapshot.tree.nodes["cohort"].index].values())
                seen.append(([e.workload.name for e in entries], used))
                return len(entries) - 1  # the last of the classic order first

            return picker

    decisions = decide(open_session(_two_heads(), [*BUILT_IN, ("rec", Recorder(), None)], NOW))
    assert seen == [(["y", "x"], 0)]  # one call: a single entry left is processed without asking
    assert sorted(a.workload for a in decisions.admitted) == ["ml/x", "ml/y"]
