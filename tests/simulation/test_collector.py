"""The cyclic collector during a simulation (``daemon/simulation/engine.py``, ``_Collector``).

A run keeps the automatic collector off and collects between sessions once the objects
it follows grew enough: the long-lived model is not walked at every threshold, and
garbage cycles (none are made by the model or the built-in plugins; a third-party plugin
might make them) are still freed while the run goes on, so memory does not keep growing.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import pytest
from preemptd.daemon.simulation import engine
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "elastic-grow-back.yaml"


def _run(progress: Callable[[int, int, int], bool | None]) -> engine.Outcome:
    scenario = load_scenario(str(EXAMPLE))
    entry = setup(scenario, None)
    gc.collect()  # what loading and setting up left behind
    return simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
        progress=progress,
    )


def test_a_run_keeps_the_automatic_collector_off_and_turns_it_back_on() -> None:
    seen: list[bool] = []
    assert gc.isenabled()
    outcome = _run(lambda *_: seen.append(gc.isenabled()) and None)
    assert outcome.sessions == len(seen) > 1
    assert not any(seen)
    assert gc.isenabled()


def test_a_run_with_the_collector_off_from_the_start_leaves_it_off() -> None:
    gc.disable()
    try:
        _run(lambda *_: None)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_garbage_cycles_made_between_sessions_are_freed_as_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each session leaves 2,000 lists in reference cycles behind (62,000 in the run):
    the objects the collector follows never grow past its threshold by more than a
    session's garbage, and what the run leaves alive does not include the cycles. (The
    test's own objects are frozen, as ``preemptd simulate`` freezes the scenario's, so
    that the threshold is the run's.)"""
    monkeypatch.setattr(engine._Collector, "FIRST", 5_000)
    grown: list[int] = []

    def leave_cycles(*_: int) -> None:
        grown.append(gc.get_count()[0])
        for _ in range(2_000):
            cycle: list[object] = []
            cycle.append(cycle)

    gc.collect()
    gc.freeze()
    try:
        outcome = _run(leave_cycles)
        left = len(gc.get_objects())
    finally:
        gc.unfreeze()
    assert outcome.sessions >= 30
    assert outcome.timings["gc"] > 0
    assert max(grown) < 5_000 + 2 * 2_000 + 1_000  # beside a session's own objects
    assert left < 5_000 + 2_000 + 1_000


def test_a_simulation_of_the_built_in_plugins_makes_no_garbage_cycles() -> None:
    """What lets the run keep the collector off: after every session, a full collection
    finds nothing unreachable."""
    found: list[int] = []
    _run(lambda *_: found.append(gc.collect()) and None)
    assert len(found) > 1
    assert found == [0] * len(found)
