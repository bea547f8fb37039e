"""How a growth reads: the ``grown`` marker of the decision JSON, the ``cycle`` table and
``preemptd explain`` (docs/elastic.md, "The decision").

Every snapshot has flavor ``default`` and queue ``q`` (no parent, cpu only), and an elastic
workload ``ml/e`` (count 6, minCount 2, cpu 2 per pod) running with a committed count of 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main

NOW = "2026-01-01T01:00:00Z"
FLAVOR = {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}


def _queue(cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ]
        },
    }


def _workload(name: str, count: int, committed: int | None, *, min_count: int | None = None) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": count, "requests": {"cpu": "2"}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    workload: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"queueName": "q", "podSets": [pod_set]},
    }
    if committed is not None:
        workload["status"] = {
            "admission": {"queue": "q", "podSets": [{"name": "main", "count": committed, "flavors": {"cpu": "default"}}]},
            "admittedAt": "2026-01-01T00:10:00Z",
        }
    return workload


def _elastic() -> dict[str, Any]:
    return _workload("e", 6, 2, min_count=2)


def _pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:10:00Z",
            "labels": {"preemptd.io/workload": "e"},
        },
        "spec": {"nodeName": node, "containers": [{"name": "main", "resources": {"requests": {"cpu": "2"}}}]},
        "status": {"phase": "Running"},
    }


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]], *argv: str) -> str:
    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump_all(objects))
    code = main([*argv, str(snapshot), "--now", NOW])
    captured = capsys.readouterr()
    assert (0, "") == (code, captured.err)
    return captured.out


def test_decision_json_marks_a_growth_and_only_a_growth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nominal 14: e (cpu 4) grows by 4 pods (cpu 8) to its count 6, and the pending n
    (1 pod, cpu 2) is admitted: usage 4 + 8 + 2 = 14. e's entry carries ``"grown": true``;
    n's (an admission) has CONTRACT §3's keys only."""
    objects = [FLAVOR, _queue("14"), _elastic(), _workload("n", 1, None)]
    data = json.loads(_run(tmp_path, capsys, objects, "cycle", "-o", "json"))
    entries = {entry["workload"]: entry for entry in data["admitted"]}
    assert ["ml/e", "ml/n"] == sorted(entries)
    assert True is entries["ml/e"]["grown"]
    assert 6 == entries["ml/e"]["podSets"][0]["count"]
    assert ["borrowing", "podSets", "queue", "workload"] == sorted(entries["ml/n"])


def test_cycle_table_lists_a_growth_apart_from_admissions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nominal 14 as above: one admission (n) and one growth (e) are counted apart in the
    summary and listed in two tables."""
    objects = [FLAVOR, _queue("14"), _elastic(), _workload("n", 1, None)]
    out = _run(tmp_path, capsys, objects, "cycle", "-o", "wide")
    assert out.startswith(f"Session at {NOW}: 1 admitted, 1 grown, 0 preempted, 0 pod actions, 0 pending\n")
    admitted, grown = out.index("Admitted"), out.index("Grown (running, new totals)")
    assert admitted < out.index("ml/n") < grown < out.index("ml/e")


def test_cycle_summary_without_growth_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No growth (e is at its count): the summary has no "grown" figure and no Grown table."""
    objects = [FLAVOR, _queue("14"), _workload("e", 2, 2, min_count=2), _workload("n", 1, None)]
    out = _run(tmp_path, capsys, objects, "cycle")
    assert out.startswith(f"Session at {NOW}: 1 admitted, 0 preempted, 0 pod actions, 0 pending\n")
    assert "Grown" not in out


def test_explain_growth_stopped_by_nominal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nominal 8, o (cpu 2) runs beside e (cpu 4): usage 6. One more pod of e (2) keeps the
    queue within nominal (8), two (10) do not → e grows 2 → 3 and says nominal stopped it."""
    objects = [FLAVOR, _queue("8"), _elastic(), _workload("o", 1, 1)]
    out = _run(tmp_path, capsys, objects, "explain", "ml/e")
    assert out.splitlines()[:3] == [
        "ml/e: grew back in queue q (already running; not an admission)",
        "  podSet main: 2 → 3 of 6 pods on cpu=default",
        "  no more: one more pod would exceed queue q's nominal quota of cpu on flavor default "
        "(growth never borrows)",
    ]
    assert "admitted to queue" not in out


def test_explain_growth_stopped_by_node_room(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nominal 100 but flavor default's one node n1 has cpu 8, e's two pods (cpu 4) on it:
    2 pods more fit its free 4 cpu, a third does not → e grows 2 → 4, stopped by node room."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}}
    objects = [FLAVOR, node, _queue("100"), _elastic(), _pod("e-0", "n1"), _pod("e-1", "n1")]
    out = _run(tmp_path, capsys, objects, "explain", "ml/e")
    assert out.splitlines()[1:3] == [
        "  podSet main: 2 → 4 of 6 pods on cpu=default",
        "  no more: one more pod would exceed the free room on flavor default's nodes",
    ]


def test_explain_growth_to_desired_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nominal 12: e grows 2 → 6, its count: that is why it grows no more."""
    objects = [FLAVOR, _queue("12"), _elastic()]
    out = _run(tmp_path, capsys, objects, "explain", "ml/e")
    assert out.splitlines()[1:3] == [
        "  podSet main: 2 → 6 of 6 pods on cpu=default",
        "  no more: its desired count (6) is reached",
    ]


def test_explain_json_growth_entry_is_marked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``explain -o json`` gives the growth's entry with its marker and the same lines."""
    objects = [FLAVOR, _queue("12"), _elastic()]
    data = json.loads(_run(tmp_path, capsys, objects, "explain", "ml/e", "-o", "json"))
    assert True is data["admitted"]["grown"]
    assert "ml/e: grew back in queue q (already running; not an admission)" == data["lines"][0]


def test_name_output_and_decision_log_call_a_growth_a_growth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nominal 14 as above: ``-o name`` lists ``grown/ml/e`` beside ``admitted/ml/n`` (in the JSON's order), and the
    daemon's decision records say ``grow`` for e and ``admit`` for n."""
    from preemptd.daemon.logging import decision_records
    from preemptd.framework.decisions import Admitted, AdmittedPodSet, Decisions

    objects = [FLAVOR, _queue("14"), _elastic(), _workload("n", 1, None)]
    assert "grown/ml/e\nadmitted/ml/n\n" == _run(tmp_path, capsys, objects, "cycle", "-o", "name")
    decisions = Decisions(now=0)
    for key, grown in (("ml/e", True), ("ml/n", False)):
        pod_sets = (AdmittedPodSet("main", 1, {"cpu": "default"}),)
        decisions.admitted.append(Admitted(key, "q", False, pod_sets, grown=grown))
    events = [(record["event"], record["workload"]) for record in decision_records(decisions, lambda key: "q")]
    assert [("grow", "ml/e"), ("admit", "ml/n")] == events
