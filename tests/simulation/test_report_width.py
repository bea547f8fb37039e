"""`preemptd simulate`'s tables in 80-, 100- and 120-column terminals: every line fits, no
figure or name is cut with `…`, names fold whole (issue 20, point 3)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.report import build_report, print_report
from preemptd.daemon.simulation.scenario import load_scenario
from rich.cells import cell_len
from rich.console import Console

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
LONG = "research-and-development-of-the-vision-models-group"


@pytest.fixture(scope="module")
def reports() -> dict[str, dict[str, Any]]:
    """research-reclaim alone, and compared with protect-30m.toml."""
    scenario = load_scenario(str(EXAMPLES / "research-reclaim.yaml"))
    runs = []
    for path in (None, str(EXAMPLES / "protect-30m.toml")):
        chosen = setup(scenario, path)
        outcome = simulate(
            scenario,
            chosen.plugins.registry(),
            actions=tuple(chosen.config.scheduler.actions),
            cycle_interval=chosen.cycle_interval,
        )
        runs.append((chosen.label, chosen.source, chosen.cycle_interval, outcome))
    return {"one": build_report(scenario, runs[:1]), "compare": build_report(scenario, runs)}


def renamed(report: dict[str, Any]) -> dict[str, Any]:
    """The same report with queue research renamed to a 51-character name."""
    runs = [
        {**run, "queues": {(LONG if k == "research" else k): v for k, v in run["queues"].items()}}
        for run in report["runs"]
    ]
    return {**report, "runs": runs}


def render(report: dict[str, Any], width: int) -> str:
    out = io.StringIO()
    print_report(report, Console(file=out, width=width, force_terminal=True, color_system=None))
    return out.getvalue()


def figures(report: dict[str, Any]) -> list[str]:
    """Figures every layout must show whole: hours as `1,234.5`, counts as `1,234`,
    capacities as whole units, utilization as a percentage."""
    found = []
    for run in report["runs"]:
        for q in run["queues"].values():
            found += [f"{q['admissions']:,}", f"{q['usedHours']:,.1f}", f"{q['nominalHours']:,.1f}"]
            found += [f"{q['borrowedHours']:,.1f}", f"{q['lentHours']:,.1f}", f"{q['evicted']}/{q['shrunk']}"]
        for f in run["flavors"].values():
            found += [f"{f['capacity']:,.0f}", f"{round(f['meanUtilization'] * 100)}%"]
        found += [f"{run['sessions']:,}", f"{run['idleCyclesSkipped']:,}"]
    return found


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("which", ["one", "compare"])
@pytest.mark.parametrize("long_names", [False, True], ids=["names", "long-names"])
def test_tables_fit_the_terminal_and_cut_nothing(
    reports: dict[str, dict[str, Any]], width: int, which: str, long_names: bool
) -> None:
    report = renamed(reports[which]) if long_names else reports[which]
    text = render(report, width)
    assert "…" not in text
    too_wide = [line for line in text.splitlines() if cell_len(line.rstrip()) > width]
    assert [] == too_wide
    words = set(text.split())
    missing = [figure for figure in figures(report) if figure not in words]
    assert [] == missing
    # A name folds onto the next lines, whole: the pieces that begin those lines give it back.
    flat = "".join(line.split()[0] for line in text.splitlines() if line.split())
    for name in report["runs"][0]["queues"]:
        assert name in flat
    for run in report["runs"]:
        assert run["label"] in words


def test_a_wide_terminal_keeps_one_queue_table_and_the_sparkline(reports: dict[str, dict[str, Any]]) -> None:
    text = render(reports["one"], 160)
    assert "Queues (GPU-hours)" in text and "Queues: quota" not in text
    assert "over time" in text


def test_an_80_column_terminal_splits_the_queue_table_and_keeps_a_shorter_sparkline(
    reports: dict[str, dict[str, Any]],
) -> None:
    text = render(reports["one"], 80)
    assert "Queues: admissions and waits" in text and "Queues: quota (GPU-hours)" in text
    assert "over time" in text


def test_too_narrow_for_a_split_the_queues_are_transposed(reports: dict[str, dict[str, Any]]) -> None:
    """Compared runs and a long queue name in 80 columns: one block per queue, one column per run."""
    text = render(renamed(reports["compare"]), 80)
    lines = text.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("Queues")))
    assert ["queue", "default", "protect-30m.toml"] == lines[start + 1].split()
    assert any(line.strip().startswith("wait p95") for line in lines)
