"""Growths in place in the simulator's figures (docs/elastic.md): counted per queue beside
the shrinks, with the pods they added, never as admissions; the terminal and HTML reports
show them.

The scenario: queue ``solo`` (8 GPUs, withinQueue LowerPriority) and an idle queue
``idle`` (4 GPUs), no nodes. ``e`` (priority 0, 8 one-GPU pods, minCount 2) arrives at 0s
and runs forever; ``u`` (priority 100, 4 one-GPU pods) arrives at 10m and runs 10m. At
10m solo is full, so u shrinks e by 4 (one shrink, InQueue; a shrink frees its pods at
once) and is admitted at the next session; when u ends, the 4 GPUs are free within solo's
nominal and e grows back 4 → 8: one growth of 4 pods. Admissions: e and u, 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main

GPU = "nvidia.com/gpu"
API = "preemptd.io/v1alpha1"


def _queue(name: str, gpus: int) -> dict[str, Any]:
    quota = [{"name": "default", "resources": [{"name": GPU, "nominalQuota": str(gpus)}]}]
    spec = {"preemption": {"withinQueue": "LowerPriority"}, "resourceGroups": [{"coveredResources": [GPU], "flavors": quota}]}
    return {"apiVersion": API, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def _job(name: str, priority: int, count: int, *, arrival: str, runtime: str, **pod_set: Any) -> dict[str, Any]:
    spec = {
        "queueName": "solo", "priority": priority,
        "podSets": [{"name": "main", "count": count, "requests": {GPU: "1"}, **pod_set}],
    }
    return {"arrival": arrival, "runtime": runtime, "object": {"metadata": {"name": name, "namespace": "ml"}, "spec": spec}}


def _scenario(tmp_path: Path) -> Path:
    data = {
        "duration": "1h",
        "cycleInterval": "10s",
        "objects": [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
                    _queue("solo", 8), _queue("idle", 4)],
        "workloads": [
            _job("e", 0, 8, arrival="0s", runtime="forever", minCount=2),
            _job("u", 100, 4, arrival="10m", runtime="10m"),
        ],
    }
    path = tmp_path / "grow.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, dict[str, Any], str]:
    report = tmp_path / "report"
    code = main(["simulate", str(_scenario(tmp_path)), "--report", str(report)])
    out = capsys.readouterr().out
    assert 0 == code
    return out, json.loads((report / "report.json").read_text()), (report / "report.html").read_text()


def test_growths_are_counted_per_queue_with_their_pods_not_as_admissions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, _ = _simulate(tmp_path, capsys)
    run = found["runs"][0]
    assert 2 == run["admissions"]
    assert {"total": 1, "pods": 4} == run["growths"]
    assert (1, 0) == (run["preemptions"]["shrinks"], run["preemptions"]["evictions"])
    solo, idle = run["queues"]["solo"], run["queues"]["idle"]
    assert (2, 1, 1, 4) == (solo["admissions"], solo["shrunk"], solo["grown"], solo["podsGrown"])
    assert (0, 0, 0) == (idle["shrunk"], idle["grown"], idle["podsGrown"])


def test_terminal_and_html_reports_show_the_growths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _, html = _simulate(tmp_path, capsys)
    assert "growths in place (pods added)" in out and "1 (4)" in out
    assert "evicted/shrunk/grown" in out
    solo_row = next(line for line in out.splitlines() if line.strip().startswith("solo"))
    assert "0/1/1" in solo_row
    assert "growths in place" in html and "pods added by growths" in html
    assert "<th>grown</th>" in html
