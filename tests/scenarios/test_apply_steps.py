"""Stepping through sessions with ``preemptd cycle --apply`` (CONTRACT §3), in-process.

Each test feeds the objects written by one session's ``--apply`` to the next
session, the way a user steps through sessions by hand, and checks that the
preemption lifecycle of SEMANTICS §2 and §4 holds across sessions: a victim is
chosen once, re-used while it is on its way out, and its preemptor is admitted
once it is gone; an elastic victim is shrunk once and keeps its run.

Expected values are worked out by hand in the comments, from SEMANTICS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemptd.daemon.cli import main

FLAVOR = {
    "apiVersion": "preemptd.io/v1alpha1",
    "kind": "ResourceFlavor",
    "metadata": {"name": "default"},
}


def _queue(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "preemption": {"withinQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
        },
    }


def _workload(
    name: str,
    priority: int,
    cpu: str,
    *,
    created: str,
    count: int = 1,
    min_count: int | None = None,
    admitted_at: str | None = None,
) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": count, "requests": {"cpu": cpu}}
    if min_count is not None:
        pod_set["minCount"] = min_count
    workload: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": created},
        "spec": {"queueName": "q", "priority": priority, "podSets": [pod_set]},
    }
    if admitted_at is not None:
        workload["status"] = {
            "admission": {
                "queue": "q",
                "podSets": [{"name": "main", "count": count, "flavors": {"cpu": "default"}}],
            },
            "admittedAt": admitted_at,
        }
    return workload


def _cycle(
    snapshot: Path, now: str, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One session over ``snapshot`` with ``--apply out``: its decisions and the applied objects."""
    code = main(["cycle", str(snapshot), "--output", "json", "--now", now, "--apply", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    objects = [
        doc for doc in yaml.safe_load_all(out.read_text(encoding="utf-8")) if doc is not None
    ]
    return json.loads(captured.out), objects


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return path


def _named(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o.get("kind") == "Workload" and o["metadata"]["name"] == name]
    return found


def _evicted(workload: dict[str, Any]) -> bool:
    conditions = workload.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Evicted" and c.get("status") == "True" for c in conditions)


def test_victim_is_reused_until_gone_then_preemptor_is_admitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A victim is preempted once, re-used (not preempted again) while it is on its way out, and its preemptor is admitted once it is gone."""
    # Queue q (no parent) cpu nominal 4, withinQueue LowerPriority; low (priority 0, cpu 4)
    # runs, p (priority 10, cpu 4) is pending.
    objects = [
        FLAVOR,
        _queue("q", "4"),
        _workload(
            "low", 0, "4", created="2026-01-01T00:00:00Z", admitted_at="2026-01-01T00:10:00Z"
        ),
        _workload("p", 10, "4", created="2026-01-01T00:40:00Z"),
    ]

    # Session 1: Available = 4 - 4 = 0 < 4, 4 ≤ nominal → search; low (0 < 10) → evicting
    # it leaves Available 4 ≥ 4 → victims {low}, reason InQueue; p PendingPreemption and
    # not admitted in this session (SEMANTICS §2.4).
    first, applied = _cycle(
        _write(tmp_path / "s1.yaml", objects), "2026-01-01T01:00:00Z", tmp_path / "o1.yaml", capsys
    )
    assert first["admitted"] == []
    assert [
        (v["workload"], v["preemptor"], v["reason"], v["count"]) for v in first["preempted"]
    ] == [("ml/low", "ml/p", "InQueue", None)]
    assert [(w["workload"], w["reason"], w["waitingFor"]) for w in first["pending"]] == [
        ("ml/p", "PendingPreemption", ["ml/low"])
    ]
    # --apply: the whole victim gets Evicted=True and keeps its admission (quota held, §1);
    # the preemptor has no admission.
    low = _named(applied, "low")
    assert _evicted(low)
    assert low["status"]["admission"]["podSets"][0]["count"] == 1
    assert "admission" not in _named(applied, "p").get("status", {})

    # Session 2 on the applied objects: low still holds 4 → Available 0; the evicted low
    # is re-used first (§2, §4) → no new `preempted`, p waits for low.
    second, applied = _cycle(
        tmp_path / "o1.yaml", "2026-01-01T01:00:10Z", tmp_path / "o2.yaml", capsys
    )
    assert second["admitted"] == []
    assert second["preempted"] == []
    assert [(w["workload"], w["reason"], w["waitingFor"]) for w in second["pending"]] == [
        ("ml/p", "PendingPreemption", ["ml/low"])
    ]

    # low is gone: delete its object from the stream. Session 3: usage 0, Available 4 ≥ 4
    # → p admitted, 0 + 4 ≤ 4 → borrowing false; nothing preempted or pending.
    remaining = [
        o for o in applied if not (o.get("kind") == "Workload" and o["metadata"]["name"] == "low")
    ]
    third, applied = _cycle(
        _write(tmp_path / "s3.yaml", remaining),
        "2026-01-01T01:00:20Z",
        tmp_path / "o3.yaml",
        capsys,
    )
    assert [(a["workload"], a["queue"], a["borrowing"]) for a in third["admitted"]] == [
        ("ml/p", "q", False)
    ]
    assert third["preempted"] == []
    assert third["pending"] == []
    p = _named(applied, "p")
    assert p["status"]["admittedAt"] == "2026-01-01T01:00:20Z"
    assert p["status"]["admission"]["podSets"][0]["count"] == 1


def test_shrunk_elastic_victim_keeps_its_run_and_is_not_shrunk_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An elastic victim shrunk by --apply keeps its admittedAt, and the next session admits the preemptor without shrinking it again."""
    # Queue q (no parent) cpu nominal 8, withinQueue LowerPriority; e (priority 0, count 4,
    # minCount 1, cpu 2 per pod, admitted 00:10) uses 8; p (priority 10, cpu 3) is pending.
    objects = [
        FLAVOR,
        _queue("q", "8"),
        _workload(
            "e",
            0,
            "2",
            created="2026-01-01T00:00:00Z",
            count=4,
            min_count=1,
            admitted_at="2026-01-01T00:10:00Z",
        ),
        _workload("p", 10, "3", created="2026-01-01T00:40:00Z"),
    ]

    # Session 1: Available 0 < 3 → search; e gives single pods (3 above minCount): one pod
    # → Available 2 < 3, two pods → 4 ≥ 3 → fits; fill back keeps both → e count 2 taken.
    first, applied = _cycle(
        _write(tmp_path / "s1.yaml", objects), "2026-01-01T01:00:00Z", tmp_path / "o1.yaml", capsys
    )
    assert [
        (v["workload"], v["preemptor"], v["reason"], v["count"]) for v in first["preempted"]
    ] == [("ml/e", "ml/p", "InQueue", 2)]
    assert [(w["workload"], w["reason"]) for w in first["pending"]] == [
        ("ml/p", "PendingPreemption")
    ]
    assert first["admitted"] == []
    # --apply: the committed count drops 4 → 2, the run is not restarted (admittedAt kept),
    # and a shrunk workload is not evicted.
    e = _named(applied, "e")
    assert e["status"]["admission"]["podSets"][0]["count"] == 4 - 2
    assert e["status"]["admittedAt"] == "2026-01-01T00:10:00Z"
    assert not _evicted(e)

    # Session 2: e now uses 2 × 2 = 4 → Available 8 - 4 = 4 ≥ 3 → p fits and is admitted
    # (3 + 4 ≤ 8, borrowing false); e is not shrunk again.
    second, applied = _cycle(
        tmp_path / "o1.yaml", "2026-01-01T01:00:10Z", tmp_path / "o2.yaml", capsys
    )
    assert second["preempted"] == []
    assert [(a["workload"], a["borrowing"]) for a in second["admitted"]] == [("ml/p", False)]
    assert second["pending"] == []
    e = _named(applied, "e")
    assert e["status"]["admission"]["podSets"][0]["count"] == 2
    assert e["status"]["admittedAt"] == "2026-01-01T00:10:00Z"


def test_shrunk_elastic_workload_grows_back_in_place_once_room_is_free(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shrunk elastic workload grows back through --apply: its committed count is raised to
    what fits, its admittedAt is kept (its run goes on), and a repeated session grows no more."""
    # Queue q (no parent) cpu nominal 8, withinQueue LowerPriority. e (priority 0, count 4,
    # minCount 1, cpu 2 per pod, admitted 00:10) was shrunk to 2 pods (cpu 4); p (priority
    # 10, cpu 3) runs → usage 7, Available 1.
    e = _workload(
        "e", 0, "2", created="2026-01-01T00:00:00Z", count=4, min_count=1,
        admitted_at="2026-01-01T00:10:00Z",
    )
    e["status"]["admission"]["podSets"][0]["count"] = 2
    p = _workload("p", 10, "3", created="2026-01-01T00:40:00Z", admitted_at="2026-01-01T01:00:10Z")
    objects = [FLAVOR, _queue("q", "8"), e, p]

    # Session 1: one more pod of e is cpu 2 > Available 1 → no growth, and no decision at all.
    first, applied = _cycle(
        _write(tmp_path / "s1.yaml", objects), "2026-01-01T02:00:00Z", tmp_path / "o1.yaml", capsys
    )
    assert (first["admitted"], first["preempted"], first["pending"]) == ([], [], [])
    assert _named(applied, "e")["status"]["admission"]["podSets"][0]["count"] == 2

    # p finished: its object is gone. Session 2: usage 4, Available 4 → both missing pods
    # (cpu 4) fit within nominal → e grows to 4, borrowing false.
    remaining = [o for o in applied if not (o.get("kind") == "Workload" and o["metadata"]["name"] == "p")]
    second, applied = _cycle(
        _write(tmp_path / "s2.yaml", remaining), "2026-01-01T02:00:10Z", tmp_path / "o2.yaml", capsys
    )
    assert [
        (a["workload"], a["queue"], a["borrowing"], a["podSets"]) for a in second["admitted"]
    ] == [("ml/e", "q", False, [{"name": "main", "count": 4, "flavors": {"cpu": "default"}}])]
    assert (second["preempted"], second["pending"]) == ([], [])
    # --apply raises the committed count in place; the run is not restarted.
    grown = _named(applied, "e")
    assert grown["status"]["admission"] == {
        "queue": "q",
        "podSets": [{"name": "main", "count": 4, "flavors": {"cpu": "default"}}],
    }
    assert grown["status"]["admittedAt"] == "2026-01-01T00:10:00Z"

    # Session 3 on the applied objects: e is at its count → nothing to decide.
    third, _ = _cycle(tmp_path / "o2.yaml", "2026-01-01T02:00:20Z", tmp_path / "o3.yaml", capsys)
    assert (third["admitted"], third["preempted"], third["pending"]) == ([], [], [])


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu}},
    }


def _pod(name: str, workload: str, node: str, cpu: str, created: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "creationTimestamp": created,
            "labels": {"preemptd.io/workload": workload},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


def test_repeating_a_session_never_takes_a_shrinking_elastic_victim_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Surplus pods of a shrunk elastic victim are relied on (waitingFor pod:...), never taken again, and the workload is never evicted by repeated sessions at one --now."""
    # Flavor default (no labels) = node n1, cpu 8. Queue q cpu nominal 8, withinQueue
    # LowerPriority. e (priority 0, count 4, minCount 1, cpu 2 per pod, admitted 00:10)
    # has pods e-0..e-3 (created 00:10:00..00:10:03) on n1: quota 8/8, n1 full.
    # p (priority 10, 1 pod cpu 3) is pending.
    objects = [
        FLAVOR,
        _node("n1", "8"),
        _queue("q", "8"),
        _workload(
            "e", 0, "2", created="2026-01-01T00:00:00Z", count=4, min_count=1,
            admitted_at="2026-01-01T00:10:00Z",
        ),
        _workload("p", 10, "3", created="2026-01-01T00:40:00Z"),
        *[_pod(f"e-{i}", "e", "n1", "2", f"2026-01-01T00:10:0{i}Z") for i in range(4)],
    ]
    now = "2026-01-01T01:00:00Z"

    # Session 1: Available 0 < 3 → search; e gives 4 - 1 = 3 single pods, newest first
    # (e-3, e-2, e-1) then the rest. e-3 → quota 2, room 2 < 3; e-2 → 4 ≥ 3 on both →
    # fits; fill back cannot drop e-3 (2 < 3) → e loses 2 pods, count 2 = pods taken.
    first, _ = _cycle(_write(tmp_path / "s1.yaml", objects), now, tmp_path / "o1.yaml", capsys)
    assert [(v["workload"], v["count"]) for v in first["preempted"]] == [("ml/e", 2)]
    assert [(w["workload"], w["reason"]) for w in first["pending"]] == [
        ("ml/p", "PendingPreemption")
    ]

    # Session 2 on o1: e committed 2, 4 live pods → 2 surplus (SEMANTICS §4/§6: cost 0,
    # newest first → e-3, e-2), on their way out: usage already gone, so quota
    # 8 - 4 = 4 ≥ 3 fits, but n1 is still full (4 pods × 2). The surplus pods are relied
    # on first: e-3 → room 2 < 3, e-2 → 4 ≥ 3 → fits; fill back keeps both. Nothing new
    # is preempted; p waits for the two pods.
    second, applied = _cycle(tmp_path / "o1.yaml", now, tmp_path / "o2.yaml", capsys)
    assert second["preempted"] == []
    assert second["admitted"] == []
    assert [(w["workload"], w["reason"], w["waitingFor"]) for w in second["pending"]] == [
        ("ml/p", "PendingPreemption", ["pod:ml/e-2", "pod:ml/e-3"])
    ]
    assert _named(applied, "e")["status"]["admission"]["podSets"][0]["count"] == 2

    # Session 3 on o2: the same snapshot again → the same answer; e is never evicted.
    third, applied = _cycle(tmp_path / "o2.yaml", now, tmp_path / "o3.yaml", capsys)
    assert third["preempted"] == []
    assert [(w["workload"], w["waitingFor"]) for w in third["pending"]] == [
        ("ml/p", ["pod:ml/e-2", "pod:ml/e-3"])
    ]
    e = _named(applied, "e")
    assert e["status"]["admission"]["podSets"][0]["count"] == 2
    assert not _evicted(e)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    count=st.integers(2, 6),
    data=st.data(),
)
def test_stepping_sessions_never_takes_a_pod_twice_nor_the_whole_after_a_shrink_that_sufficed(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    count: int,
    data: st.DataObject,
) -> None:
    """Random elastic victim (count, minCount, cpu per pod) full on its node and quota, and a preemptor a shrink can satisfy: the first session takes ceil(request / per pod) pods; the next two at the same --now take nothing more, rely on exactly those pods and never evict the workload."""
    min_count = data.draw(st.integers(1, count - 1), label="min_count")
    per_pod = data.draw(st.integers(1, 3), label="per_pod")
    request = data.draw(st.integers(1, (count - min_count) * per_pod), label="request")
    tmp_path = tmp_path_factory.mktemp("steps")
    total = str(count * per_pod)
    objects = [
        FLAVOR,
        _node("n1", total),
        _queue("q", total),
        _workload(
            "e", 0, str(per_pod), created="2026-01-01T00:00:00Z", count=count,
            min_count=min_count, admitted_at="2026-01-01T00:10:00Z",
        ),
        _workload("p", 10, str(request), created="2026-01-01T00:40:00Z"),
        *[
            _pod(f"e-{i}", "e", "n1", str(per_pod), f"2026-01-01T00:10:0{i}Z")
            for i in range(count)
        ],
    ]
    now = "2026-01-01T01:00:00Z"
    # SEMANTICS §4: single pods above minCount, newest first, each freeing per_pod of
    # quota and of room on n1; the first j with j × per_pod ≥ request fits, and fill back
    # cannot drop any of them ((j - 1) × per_pod < request).
    taken = -(-request // per_pod)
    first, _ = _cycle(_write(tmp_path / "s1.yaml", objects), now, tmp_path / "o1.yaml", capsys)
    assert [(v["workload"], v["count"]) for v in first["preempted"]] == [("ml/e", taken)]
    newest = sorted(f"pod:ml/e-{i}" for i in range(count - taken, count))
    source = tmp_path / "o1.yaml"
    for step in (2, 3):
        out = tmp_path / f"o{step}.yaml"
        later, applied = _cycle(source, now, out, capsys)
        assert later["preempted"] == []
        assert [(w["workload"], w["waitingFor"]) for w in later["pending"]] == [("ml/p", newest)]
        e = _named(applied, "e")
        assert e["status"]["admission"]["podSets"][0]["count"] == count - taken
        assert not _evicted(e)
        source = out
