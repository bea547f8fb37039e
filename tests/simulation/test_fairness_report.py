"""The report's shares over time and fairness summary (issue 17, points 3 and 5).

Every expected figure below is worked out by hand from SEMANTICS §7.1 (a leaf's share is
its borrowed GPUs × 1000 / its parent's subtree quota, reported rounded up) and from the
definition of "below its fair share" in docs/simulation.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.cli import main
from preemptd.daemon.simulation import metrics
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario, scenario_from_data
from preemptd.plugins.fair_sharing.shares import Shares, reported

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLES = REPO / "examples" / "scenarios"
GPU = "nvidia.com/gpu"
API = "preemptd.io/v1alpha1"
FAIR = str(EXAMPLES / "fair-sharing.toml")


def flavor() -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def queue(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    quota = [{"name": "default", "resources": [{"name": GPU, "nominalQuota": str(gpus)}]}]
    body = {"parent": "lab", "resourceGroups": [{"coveredResources": [GPU], "flavors": quota}], **spec}
    return {"apiVersion": API, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def job(name: str, queue_name: str, gpus: int, *, arrival: str, runtime: str, priority: int = 0) -> dict[str, Any]:
    pod_set = {"name": "main", "count": 1, "requests": {GPU: str(gpus)}}
    spec = {"queueName": queue_name, "priority": priority, "podSets": [pod_set]}
    return {"arrival": arrival, "runtime": runtime, "object": {"metadata": {"name": name, "namespace": "ml"}, "spec": spec}}


def three_teams() -> dict[str, Any]:
    """Cohort lab {a, b, c}, 4 GPUs each (12 in all, lendable to each leaf). a runs 8 GPUs
    for an hour from 0s (borrows 4: share 4000/12 → 334); b asks for 6 at 30m, which does
    not fit (4 free) until a finishes at 1h; then b runs an hour borrowing 2 (2000/12 → 167)."""
    return {
        "duration": "3h",
        "cycleInterval": "10s",
        "objects": [flavor(), queue("a", 4), queue("b", 4), queue("c", 4)],
        "workloads": [
            job("big-a", "a", 8, arrival="0s", runtime="1h"),
            job("late-b", "b", 6, arrival="30m", runtime="1h"),
        ],
    }


def run(data: dict[str, Any], config: str | None = None) -> dict[str, Any]:
    scenario = scenario_from_data(data, source="test")
    entry = setup(scenario, config)
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
    )
    return outcome.figures


@pytest.mark.parametrize("config", [None, FAIR], ids=["classic", "fair-sharing"])
def test_share_means_and_time_below_fair_share_match_the_hand_figures(config: str | None) -> None:
    figures = run(three_teams(), config)
    fairness = figures["fairness"]
    assert fairness["source"] == ("decisions" if config else "computed")
    shares = fairness["shares"]
    # a: 334 for 1h of 3h; b: 167 for 1h of 3h; c never borrows; lab is a root (not listed).
    assert shares["a"]["mean"] == pytest.approx(334 / 3, abs=1e-3)
    assert shares["b"]["mean"] == pytest.approx(167 / 3, abs=1e-3)
    assert shares["c"]["mean"] == 0
    assert "lab" not in shares
    # b waits from 30m to 1h with a pending workload while a's share (334) is above its 0.
    queues = figures["queues"]
    assert queues["b"]["belowFairShareSeconds"] == 1800
    assert queues["a"]["belowFairShareSeconds"] == 0
    assert queues["c"]["belowFairShareSeconds"] == 0
    ratio = fairness["maxMinShareRatio"]
    assert ratio["queues"] == ["b", "a"]  # c never had demand: not compared
    assert (ratio["lowest"], ratio["highest"]) == ("b", "a")
    assert ratio["ratio"] == pytest.approx(2.0, abs=1e-3)


def test_share_curve_follows_the_sessions_bucket_by_bucket() -> None:
    figures = run(three_teams())
    curve = figures["fairness"]["shares"]["a"]["overTime"]
    buckets = figures["bucketSeconds"]
    assert len(curve) == len(figures["bucketStarts"])
    # a holds 334 for its first hour, then 0.
    hour = int(3600 // buckets)
    assert curve[:hour] == [334.0] * hour
    assert curve[hour:] == [0.0] * (len(curve) - hour)


def test_pending_per_queue_and_waits_histogram_follow_the_arrivals() -> None:
    figures = run(three_teams())
    pending = figures["queues"]["b"]["pendingOverTime"]
    buckets = figures["bucketSeconds"]
    half, hour = int(1800 // buckets), int(3600 // buckets)
    assert pending[:half] == [0.0] * half
    assert pending[half:hour] == [1.0] * (hour - half)
    assert pending[hour:] == [0.0] * (len(pending) - hour)
    used = figures["queues"]["a"]["usedOverTime"]
    assert used[:hour] == [8.0] * hour and used[hour:] == [0.0] * (len(used) - hour)
    # a waited 0 s (≤ 60 s), b 1800 s (≤ 1800 s, the fourth bucket).
    assert figures["waitHistogram"] == {
        "boundsSeconds": [60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400],
        "counts": [1, 0, 0, 1, 0, 0, 0, 0, 0, 0],
    }


def test_computed_shares_equal_the_fair_sharing_decisions_at_every_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shares a run without the plugin computes on the simulator's committed usage are
    the ones the plugin reports (§7.6) on the same cluster: checked at every session of the
    example scenario run with the plugin on."""
    seen: list[int] = []
    original = metrics.Recorder.session

    def checked(self: metrics.Recorder, t: int, decisions: Any, queue_of: Any, accounting: Any) -> None:
        assert decisions.shares is not None
        found = Shares(accounting)
        computed = {name: reported(found.share(node)) for name, node in self.tree.nodes.items()}
        assert {s.queue: s.weighted_share for s in decisions.shares} == computed
        seen.append(t)
        original(self, t, decisions, queue_of, accounting)

    monkeypatch.setattr(metrics.Recorder, "session", checked)
    scenario = load_scenario(str(EXAMPLES / "fair-sharing.yaml"))
    entry = setup(scenario, FAIR)
    simulate(scenario, entry.plugins.registry(), actions=tuple(entry.config.scheduler.actions),
             cycle_interval=entry.cycle_interval)
    assert len(seen) > 10


def test_fair_sharing_example_compare_shows_what_fair_sharing_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/scenarios/fair-sharing.yaml with --compare: speech's time below its fair
    share and the max/min ratio of mean shares both fall with the plugin, and the HTML
    report sets the two runs side by side in its fairness section."""
    out = tmp_path / "report"
    code = main(["simulate", str(EXAMPLES / "fair-sharing.yaml"), "--compare", FAIR, "--report", str(out)])
    assert code == 0
    terminal = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    classic, fair = report["runs"]
    assert classic["fairness"]["source"] == "computed" and fair["fairness"]["source"] == "decisions"
    below = [run["queues"]["speech"]["belowFairShareSeconds"] for run in (classic, fair)]
    assert below[1] < below[0] / 2
    ratios = [run["fairness"]["maxMinShareRatio"]["ratio"] for run in (classic, fair)]
    assert ratios[1] < ratios[0]
    ratio_row = next(line for line in terminal.splitlines() if "max/min mean share" in line)
    assert ratio_row.split()[-2:] == [f"{r:.2f}" for r in ratios]
    assert "time below fair share: speech" in terminal
    page = (out / "report.html").read_text()
    section = page[page.index('id="fairness"'):]
    assert "time below fair share" in section
    for run in (classic, fair):
        assert f"{run['fairness']['maxMinShareRatio']['ratio']:.2f}" in section
