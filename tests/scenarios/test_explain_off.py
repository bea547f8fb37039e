"""A session that keeps no explanation lines (``run_session(..., explain=False)``) decides
exactly as one that does: the simulator, which reads no explanation, runs its sessions so.

Only ``Decisions.explanations`` may differ (empty); admissions, victims, pending reasons
and messages (min-runtime's note among them), stored flavor scans and plugin vetoes are
the same.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.simulation import engine
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario
from preemptd.framework.decisions import Decisions
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.quantity import parse_timestamp
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import inventory, queue, workload
from preemptd.framework.testing import snapshot as build_snapshot
from preemptd.plugins import min_runtime, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_saturated, generate_spec

MINUTE = 60_000
T0 = parse_timestamp("2026-01-01T00:00:00Z")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"


def _decided(snap: Snapshot, registry: Registry, explain: bool) -> tuple[Decisions, dict[str, int]]:
    decisions = run_session(snap, registry, actions=("allocate", "preempt"), explain=explain)
    return decisions, dict(registry.vetoes)


def test_protected_victims_give_the_same_pending_note_and_no_explanation_lines() -> None:
    """Twelve victims min-runtime protects (SEMANTICS §5): the preemptor is pending
    ``MinRuntime`` with the note naming the earliest expiry either way; with explanations
    off none of the twelve lines (nor any other) is kept."""
    victims = [workload(f"v{i:02d}", "team-a", 1, admitted=True, admitted_at=T0 + i * 1000) for i in range(12)]
    preemptor = workload("high", "team-a", 12, priority=10)
    policy = PreemptionPolicy(within_queue="LowerPriority")
    queues = [queue("team-a", cpu=12, preemption=policy, preempt_min_runtime=10 * MINUTE)]
    snap = Snapshot.build(inventory(queues, [*victims, preemptor]), now=T0 + MINUTE)

    def registry() -> Registry:
        return Registry([("priority", priority, None), ("min-runtime", min_runtime, None)])

    kept, kept_vetoes = _decided(snap, registry(), True)
    quiet, quiet_vetoes = _decided(snap, registry(), False)
    assert quiet.to_json() == kept.to_json()
    assert quiet_vetoes == kept_vetoes and kept_vetoes
    (pending,) = quiet.pending
    assert ("ns/high", "MinRuntime") == (pending.workload, pending.reason)
    assert "the first protected candidate, ns/v00, becomes preemptible at 2026-01-01T00:10:00Z" in pending.message
    assert len([line for line in kept.explain("ns/high") if line.startswith("min-runtime")]) == 11
    assert {} == quiet.explanations


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param(lambda: generate_saturated(1, queues=10, workloads=300), id="saturated-tiny"),
        pytest.param(
            lambda: generate_spec(
                replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "explain-off"
            ),
            id="contended-tiny",
        ),
    ],
)
def test_generated_clusters_decide_the_same_with_explanations_off(objects: Any) -> None:
    parsed = objects()
    actions, registry_of = default_session()
    out = []
    for explain in (True, False):
        registry = registry_of()
        decisions = run_session(build_snapshot(parsed, NOW_MS), registry, actions=actions, explain=explain)
        out.append((decisions, dict(registry.vetoes)))
    (kept, kept_vetoes), (quiet, quiet_vetoes) = out
    assert quiet.to_json() == kept.to_json()
    assert quiet.flavor_scans == kept.flavor_scans
    assert quiet_vetoes == kept_vetoes
    assert kept.explanations and not quiet.explanations


def _simulated(monkeypatch: pytest.MonkeyPatch, *, explain: bool | None) -> tuple[Any, list[Decisions]]:
    """Simulate an example; ``explain`` forces the sessions' setting (``None``: the engine's)."""
    seen: list[Decisions] = []

    def recording(*args: Any, **kwargs: Any) -> Decisions:
        if explain is not None:
            kwargs["explain"] = explain
        decisions = run_session(*args, **kwargs)
        seen.append(decisions)
        return decisions

    monkeypatch.setattr(engine, "run_session", recording)
    scenario = load_scenario(str(EXAMPLES / "elastic-grow-back.yaml"))
    entry = setup(scenario, None)
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
    )
    return outcome, seen


def test_the_simulator_keeps_no_explanations_and_reports_as_if_it_did(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, sessions = _simulated(monkeypatch, explain=None)
    explained, explained_sessions = _simulated(monkeypatch, explain=True)
    assert sessions and all(not decisions.explanations for decisions in sessions)
    assert any(decisions.explanations for decisions in explained_sessions)
    assert outcome.figures == explained.figures
    assert [d.to_json() for d in sessions] == [d.to_json() for d in explained_sessions]
