"""Hopeless walks told again from what an earlier walk with the same inputs asked
(``preemption/hopeless.py``).

A search the quota bound proves hopeless walks only to tell the plugins what the full
walk would. One with the same inputs as a walk before it in the session (the same
candidates in the same order, leaf, needed flavor-resources, tree epoch) asks
``_preemptible`` about the candidates that walk asked about while the answers are the
same, and walks only from the first other answer. These tests hold it to the walks
themselves (``hopeless.REPLAY`` off): every session of a day of the GPU fleet example,
whose min-runtime windows veto most of what hopeless walks ask about, decides the same,
with the same explanations (kept here, unlike in ``simulate``), the same veto counts and
notes; and walks were told again in it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.simulation import engine
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario
from preemptd.framework.preemption import hopeless

REPO = Path(__file__).resolve().parents[2]
FLEET = REPO / "examples" / "scenarios" / "gpu-fleet.yaml"
_TOLD_AGAIN = hopeless._told_again
_RUN_SESSION = engine.run_session


def _day(monkeypatch: pytest.MonkeyPatch, replay: bool) -> tuple[list[tuple[str, Any]], dict[str, int], int]:
    """Every session's decisions and explanations, the veto counts, and how many attempts
    were told again."""
    monkeypatch.setattr(hopeless, "REPLAY", replay)
    told = 0

    def told_again(search: Any, visits: Any) -> bool:
        nonlocal told
        again = _TOLD_AGAIN(search, visits)
        told += again
        return again

    monkeypatch.setattr(hopeless, "_told_again", told_again)
    decided: list[tuple[str, Any]] = []

    def run_session(*args: Any, **kw: Any) -> Any:
        kw["explain"] = True
        decisions = _RUN_SESSION(*args, **kw)
        decided.append((decisions.to_json(), decisions.explanations))
        return decisions

    monkeypatch.setattr(engine, "run_session", run_session)
    scenario = load_scenario(FLEET)
    entry = setup(scenario, None)
    registry = entry.plugins.registry()
    simulate(scenario, registry, actions=tuple(entry.config.scheduler.actions), cycle_interval=entry.cycle_interval)
    return decided, dict(registry.vetoes), told


def test_a_day_of_the_gpu_fleet_decides_as_the_walks_do(monkeypatch: pytest.MonkeyPatch) -> None:
    walked, walked_vetoes, none_told = _day(monkeypatch, replay=False)
    told, told_vetoes, count = _day(monkeypatch, replay=True)
    assert none_told == 0
    assert count > 1000  # most hopeless walks of the day are told again
    assert walked_vetoes == told_vetoes
    assert walked_vetoes["min-runtime"] > 10_000
    assert len(walked) == len(told)
    for (walked_json, walked_lines), (told_json, told_lines) in zip(walked, told, strict=True):
        assert walked_json == told_json
        assert walked_lines == told_lines
    # Pending messages with min-runtime's notes are among what was compared.
    assert any("min-runtime: the first protected candidate" in json for json, _ in told)
