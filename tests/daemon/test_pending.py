"""``preemptd pending`` over files, and ``/pending`` on a running daemon's HTTP address."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kube.cluster import flavor, job, priority_class, queue, until
from preemptd.daemon.cli import main
from running import config, start

NOW = "2026-01-01T12:00:00Z"
GROUP = "preemptd.io/v1alpha1"


def _workload(namespace: str, name: str, queue_name: str, priority: int, created: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": GROUP, "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"queueName": queue_name, "priority": priority,
                 "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}]},
    }


SNAPSHOT: list[dict[str, Any]] = [
    {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
    {"apiVersion": GROUP, "kind": "Queue", "metadata": {"name": "gpu"}, "spec": {
        "namespaceSelector": {"matchLabels": {"team": "ml"}},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "ml"}}},
    {"apiVersion": GROUP, "kind": "LocalQueue", "metadata": {"name": "train", "namespace": "ml"}, "spec": {"queue": "gpu"}},
    # big (2 cpu of 1) and a wait; b (priority 5) first, then big (older), then a.
    _workload("ml", "big", "train", 0, "2026-01-01T00:00:00Z", cpu="2"),
    _workload("ml", "a", "train", 0, "2026-01-01T00:01:00Z", cpu="2"),
    _workload("ml", "b", "gpu", 5, "2026-01-01T00:02:00Z", cpu="2"),
    _workload("web", "c", "gpu", 9, "2026-01-01T00:00:00Z"),  # web is not selected: Inadmissible
]

TABLE = (
    "QUEUE   POSITION   LOCALQUEUE   LOCAL POSITION   WORKLOAD   PRIORITY   REASON\n"
    "gpu     1          -            -                ml/b       5          NoFit\n"
    "gpu     2          train        1                ml/big     0          NoFit\n"
    "gpu     3          train        2                ml/a       0          NoFit\n"
)


@pytest.fixture
def snapshot(tmp_path: Path) -> str:
    path = tmp_path / "snap.yaml"
    path.write_text(yaml.safe_dump_all(SNAPSHOT))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_pending_prints_each_queues_waiting_workloads_in_order(snapshot: str, capsys: pytest.CaptureFixture[str]) -> None:
    """By hand: priority first (b), then age (big before a); the two that came through
    ``ml/train`` are numbered in it too. The refused namespace is counted apart."""
    code, out, err = run(capsys, "pending", snapshot, "--now", NOW)
    assert (0, TABLE) == (code, out)
    assert "note: 1 Inadmissible workload waits in no queue (`preemptd cycle` says why)\n" == err



def test_pending_speaks_kubectls_other_output_formats(snapshot: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``-o name`` lists the waiting workloads in queue order; ``-o yaml`` holds the JSON's data."""
    code, out, _ = run(capsys, "pending", "gpu", snapshot, "--now", NOW, "-o", "name")
    assert (0, "workload/ml/b\nworkload/ml/big\nworkload/ml/a\n") == (code, out)
    _, as_json, _ = run(capsys, "pending", snapshot, "--now", NOW, "-o", "json")
    _, as_yaml, _ = run(capsys, "pending", snapshot, "--now", NOW, "-o", "yaml")
    assert json.loads(as_json) == yaml.safe_load(as_yaml)

def test_pending_json_lists_one_queue_with_both_positions(snapshot: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "pending", "gpu", snapshot, "--now", NOW, "-o", "json")
    assert 0 == code
    view = json.loads(out)
    assert ("2026-01-01T12:00:00Z", "gpu", 0) == (view["now"], view["queue"], view["inadmissible"])
    assert [
        ("ml/b", "gpu", 1, None, None, 5),
        ("ml/big", "gpu", 2, "train", 1, 0),
        ("ml/a", "gpu", 3, "train", 2, 0),
    ] == [
        (i["workload"], i["queue"], i["positionInQueue"], i["localQueue"], i["positionInLocalQueue"], i["priority"])
        for i in view["items"]
    ]


def test_pending_of_an_unknown_queue_is_an_error(snapshot: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "pending", "gpo", snapshot, "--now", NOW)
    assert (2, "") == (code, out)
    assert "preemptd: error: no queue 'gpo' in the snapshot\n" == err


def test_pending_of_a_queue_with_nothing_waiting_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "idle.yaml"
    path.write_text(yaml.safe_dump_all(SNAPSHOT[:2]))
    warning = "warning: no Workload in the snapshot: there is nothing to schedule\n"
    assert (0, "No pending workloads.\n", warning) == run(capsys, "pending", "gpu", str(path), "--now", NOW)


def test_several_snapshot_files_are_not_taken_for_a_queue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``pending A B`` with A a file reads both files (no queue)."""
    first, second = tmp_path / "queues.yaml", tmp_path / "workloads.yaml"
    first.write_text(yaml.safe_dump_all(SNAPSHOT[:4]))
    second.write_text(yaml.safe_dump_all(SNAPSHOT[4:]))
    code, out, _ = run(capsys, "pending", str(first), str(second), "--now", NOW)
    assert (0, TABLE) == (code, out)


# --- /pending on a running daemon ----------------------------------------------------------


async def fetch(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


@pytest.mark.asyncio
@pytest.mark.usefixtures("no_leaked_tasks")
async def test_the_daemon_serves_pending_and_pending_of_a_queue(server) -> None:
    """Three Jobs of 1 cpu for a 1-cpu queue, through the LocalQueue ``default/jobs``: the
    highest priority is admitted, the other two wait in order of priority, at /pending and
    /pending/team-a; an unknown queue is 404."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "1"}))
    server.put("preemptd.io", "localqueues", {
        "apiVersion": GROUP, "kind": "LocalQueue", "metadata": {"name": "jobs", "namespace": "default"},
        "spec": {"queue": "team-a"}})
    for name, value in (("high", 100), ("mid", 50), ("low", 10)):
        server.put("scheduling.k8s.io", "priorityclasses", priority_class(name, value))
        server.put("batch", "jobs", job(name, "jobs", {"cpu": "1"}, priority_class_name=name))
    running = start(server, "a", config())
    try:
        await until(lambda: running.daemon.http.port != 0 and running.daemon._last_cycle is not None
                    and len(running.daemon._last_cycle.decisions.pending) == 2, timeout=10, what="a cycle")
        base = running.daemon.http.url
        status, text = await fetch(f"{base}/pending")
        assert 200 == status
        view = json.loads(text)
        assert [("default/job-mid", 1, "jobs", 1), ("default/job-low", 2, "jobs", 2)] == [
            (i["workload"], i["positionInQueue"], i["localQueue"], i["positionInLocalQueue"]) for i in view["items"]
        ]
        status, text = await fetch(f"{base}/pending/team-a")
        assert (200, view["items"]) == (status, json.loads(text)["items"])
        assert (404, "no queue 'nope'\n") == await fetch(f"{base}/pending/nope")
    finally:
        assert 0 == await running.stop()
