"""The configuration of a run without ``--config`` is the scenario's own table, read once.

``setup`` checks the scenario's ``config`` table on its own (problems located at the
scenario) and then merges a ``--config`` file over it. Without a file there is nothing
to merge: the run's configuration is the table as read, and its plugins are resolved
once (resolving them walks the installed entry points).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.config import parse_config
from preemptd.daemon.simulation import command
from preemptd.daemon.simulation.scenario import load_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "gpu-fleet.yaml"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    resolve = command.resolve_plugins

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return resolve(*args, **kwargs)

    monkeypatch.setattr(command, "resolve_plugins", counted)
    return calls


def test_without_a_config_file_the_scenarios_table_is_the_configuration_resolved_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = load_scenario(EXAMPLE)
    calls = _counting(monkeypatch)
    entry = command.setup(scenario, None)
    assert len(calls) == 1
    where = f"{scenario.source}: config"
    expected, problems = parse_config(command.to_toml(scenario.config), source=where)
    assert problems == []
    assert entry.config == expected
    # gpu-fleet.yaml sets min-runtime's default reclaim window to 5m.
    assert entry.config.plugins["min-runtime"]["default_reclaim_min_runtime"] == "5m"
    assert entry.label == "default" and entry.source is None


def test_a_config_file_is_merged_over_the_scenarios_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = load_scenario(EXAMPLE)
    path = tmp_path / "wider.toml"
    path.write_text('[plugins.min-runtime]\ndefault_reclaim_min_runtime = "20m"\n', encoding="utf-8")
    calls = _counting(monkeypatch)
    entry = command.setup(scenario, str(path))
    assert len(calls) == 3  # the table, the file, and the merge
    assert entry.config.plugins["min-runtime"]["default_reclaim_min_runtime"] == "20m"
    assert entry.label == "wider.toml"
