"""Kueue's objects in a simulation scenario (examples/kueue/scenario.yaml): the same run
as the scenario of their preemptd.io equivalent (``preemptd convert --workloads``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.report import build_report
from preemptd.daemon.simulation.scenario import Scenario, load_scenario, scenario_from_data

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kueue"


def runs(scenario: Scenario) -> list[dict[str, Any]]:
    chosen = setup(scenario, None)
    outcome = simulate(
        scenario,
        chosen.plugins.registry(),
        actions=tuple(chosen.config.scheduler.actions),
        cycle_interval=chosen.cycle_interval,
    )
    report = build_report(scenario, [(chosen.label, chosen.source, chosen.cycle_interval, outcome)])
    found: list[dict[str, Any]] = report["runs"]
    return found


def test_a_scenario_of_kueue_objects_runs_like_its_preemptd_equivalent(capsys: pytest.CaptureFixture[str]) -> None:
    kueue = load_scenario(str(EXAMPLE / "scenario.yaml"))
    assert (kueue.problems, kueue.warnings) == ((), ())
    assert main(["convert", str(EXAMPLE / "cluster.yaml"), "--workloads"]) == 0
    converted = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d is not None]
    data = yaml.safe_load((EXAMPLE / "scenario.yaml").read_text())
    del data["objectFiles"]
    data["objects"] = converted
    # The arrivals in preemptd's shape: on their cluster Queue, priority resolved.
    for arrival, (queue, priority) in zip(data["workloads"], [("team-b", 0), ("team-a", 1000)], strict=True):
        obj = arrival["object"]
        arrival["object"] = {
            "metadata": obj["metadata"],
            "spec": {
                "queueName": queue,
                "priority": priority,
                "podSets": [{"name": "main", "count": obj["spec"]["podSets"][0]["count"], "requests": {"cpu": "2"}}],
            },
        }
    ours = scenario_from_data(data, source="converted")
    assert (ours.problems, set(ours.runtimes)) == ((), set(kueue.runtimes))
    result = runs(kueue)
    assert result == runs(ours)
    # Not a run where nothing happens: team-a reclaims from team-b.
    assert result[0]["queues"]["team-a"]["admissions"] > 0
    assert result[0]["queues"]["team-b"]["evicted"] > 0
