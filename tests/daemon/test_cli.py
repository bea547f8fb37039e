"""The `preemptd` command, run in-process through main(argv) (CONTRACT §2, §3)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main

from preemptd import __version__

NOW = "2026-01-01T01:00:00Z"
TITLES = ("Admitted", "Preempted", "Pod actions", "Pending")


def flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": "preemptd.io/v1alpha1", "kind": "ResourceFlavor", "metadata": {"name": name}}


def queue(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
    }
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"resourceGroups": [group], **spec},
    }


def workload(
    name: str, queue_name: str, cpu: str, *, priority: int = 0, admitted: bool = False, created: str = "00:00"
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T{created}:00Z",
        },
        "spec": {
            "queueName": queue_name,
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}],
        },
    }
    if admitted:
        obj["status"] = {
            "admission": {
                "queue": queue_name,
                "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}],
            },
            "admittedAt": "2026-01-01T00:00:00Z",
        }
    return obj


def preemption_snapshot() -> list[dict[str, Any]]:
    """`team` is full with `ml/low`; `ml/high` outranks it; `ml/small` fits in `other`."""
    return [
        flavor("default"),
        queue("team", "4", preemption={"withinQueue": "LowerPriority"}),
        queue("other", "2"),
        workload("low", "team", "4", admitted=True),
        workload("high", "team", "4", priority=100, created="00:30"),
        workload("small", "other", "1", created="00:40"),
    ]


def write_snapshot(path: Path, objects: list[Any]) -> str:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """`--version` prints the package version and exits 0."""
    assert (0, f"preemptd {__version__}\n", "") == run(capsys, "--version")


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a command the usage goes to stderr and the exit code is 2."""
    code, out, err = run(capsys)
    expected = (2, "", "usage: preemptd")
    assert expected == (code, out, err[: len("usage: preemptd")])


def test_cycle_json_prints_the_decisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`cycle --output json` prints one JSON object: the admission, the preemption and who waits."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW, "--output", "json")
    decisions = json.loads(out)
    expected_decisions = {
        "now": NOW,
        "admitted": [
            {
                "workload": "ml/small",
                "queue": "other",
                "borrowing": False,
                "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}],
            }
        ],
        "preempted": [
            {"workload": "ml/low", "preemptor": "ml/high", "reason": "InQueue", "count": None, "pods": []}
        ],
        "podActions": [],
    }
    expected_pending = [("ml/high", "PendingPreemption", ["ml/low"])]
    assert (0, "", expected_decisions, expected_pending) == (
        code,
        err,
        {key: decisions[key] for key in ("now", "admitted", "preempted", "podActions")},
        [(entry["workload"], entry["reason"], entry["waitingFor"]) for entry in decisions["pending"]],
    )


def test_cycle_table_is_the_default_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Without --output the decisions are printed as tables with a summary line."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, _ = run(capsys, "cycle", snapshot, "--now", NOW)
    lines = out.splitlines()
    summary = f"Session at {NOW}: 1 admitted, 1 preempted, 0 pod actions, 1 pending"
    titles = [line.strip() for line in lines if line.strip() in TITLES]
    victim_row = next(line.split() for line in lines if line.split()[:1] == ["ml/low"])
    expected = (
        0,
        summary,
        ["Admitted", "Preempted", "Pending"],
        ["ml/low", "ml/high", "InQueue", "whole", "workload"],
    )
    assert expected == (code, lines[0], titles, victim_row)


def test_json_is_byte_identical_whatever_the_object_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shuffling the objects (and splitting them over files) does not change one byte of output."""
    objects = preemption_snapshot()
    results = []
    for seed in range(4):
        shuffled = list(objects)
        random.Random(seed).shuffle(shuffled)
        half = len(shuffled) // 2
        first = write_snapshot(tmp_path / f"a{seed}.yaml", shuffled[:half])
        second = write_snapshot(tmp_path / f"b{seed}.yaml", shuffled[half:])
        code, out, _ = run(capsys, "cycle", second, first, "--now", NOW, "--output", "json")
        results.append((code, out))
    expected = [(0, results[0][1])] * len(results)
    assert expected == results


def test_unreadable_snapshot_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing file or one that is not YAML/JSON is exit 2 with one stderr line per file."""
    text = tmp_path / "notes.yaml"
    text.write_text("hello there\n", encoding="utf-8")
    missing = tmp_path / "missing.yaml"
    expected = (
        2,
        "",
        f"{text}: document 1: not YAML or JSON objects, got plain text\n"
        f"{missing}: cannot read: No such file or directory\n",
    )
    assert expected == run(capsys, "cycle", str(text), str(missing), "--now", NOW)


def test_bad_config_exits_78_naming_file_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A configuration error is exit 78, reported as file:line: key: message."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[scheduler]\nactions = ["allocate"]\ncycle = "1s"\n', encoding="utf-8")
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    expected = (78, "", f"{config}:3: scheduler.cycle: unknown key (known: actions, cycle_interval)\n")
    assert expected == run(capsys, "cycle", snapshot, "--config", str(config), "--now", NOW)


def test_bad_now_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--now must be RFC 3339."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", "yesterday")
    message = "preemptd: error: --now: malformed timestamp 'yesterday'"
    expected = (2, "", message)
    assert expected == (code, out, err[: len(message)])


def broken_snapshot() -> list[dict[str, Any]]:
    broken = workload("broken", "other", "1")
    broken["spec"]["podSets"][0]["count"] = "many"
    return [*preemption_snapshot(), broken]


def test_invalid_object_is_reported_and_isolated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid workload is one stderr line and pending Inadmissible; the rest is scheduled (exit 0)."""
    snapshot = write_snapshot(tmp_path / "s.yaml", broken_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW, "--output", "json")
    decisions = json.loads(out)
    expected = (
        0,
        [f"{snapshot}: Workload/ml/broken: spec.podSets[0].count"],
        ["ml/small"],
        [("ml/broken", "Inadmissible"), ("ml/high", "PendingPreemption")],
    )
    assert expected == (
        code,
        [line.rpartition(": ")[0] for line in err.splitlines()],
        [entry["workload"] for entry in decisions["admitted"]],
        [(entry["workload"], entry["reason"]) for entry in decisions["pending"]],
    )


def test_strict_turns_an_invalid_object_into_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With --strict an invalid object stops the cycle before any decision is printed."""
    snapshot = write_snapshot(tmp_path / "s.yaml", broken_snapshot())
    code, out, err = run(capsys, "cycle", snapshot, "--now", NOW, "--strict", "--output", "json")
    expected = (2, "", 1)
    assert expected == (code, out, len(err.splitlines()))


def test_timings_lists_every_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--timings prints `timing <phase> <seconds>` for load, snapshot, each action and session
    (then the session's counters, `count <name> <value>`)."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, _, err = run(capsys, "cycle", snapshot, "--now", NOW, "--timings", "--output", "json")
    rows = [line.split() for line in err.splitlines() if not line.startswith("count ")]
    expected = (0, ["load", "snapshot", "allocate", "preempt", "session"], {"timing"})
    assert expected == (code, [row[1] for row in rows], {row[0] for row in rows})
    assert all(float(row[2]) >= 0 for row in rows)


def read_stream(path: Path) -> list[Any]:
    return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))


def test_apply_writes_admission_and_eviction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--apply writes every object in input order, the admitted one with its admission, the victim evicted."""
    objects = preemption_snapshot()
    snapshot = write_snapshot(tmp_path / "s.yaml", objects)
    out = tmp_path / "out.yaml"
    code, _, _ = run(capsys, "cycle", snapshot, "--now", NOW, "--apply", str(out))
    small = workload("small", "other", "1", created="00:40")
    small["status"] = {
        "admission": {"queue": "other", "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
        "admittedAt": NOW,
    }
    low = workload("low", "team", "4", admitted=True)
    low["status"]["conditions"] = [
        {
            "type": "Evicted",
            "status": "True",
            "reason": "Preempted",
            "message": "Preempted to accommodate ml/high (InQueue)",
        }
    ]
    expected = (0, [*objects[:3], low, objects[4], small])
    assert expected == (code, read_stream(out))


def test_applied_output_steps_to_the_next_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Feeding --apply's output to the next cycle preempts nothing new: the preemptor waits for its victim."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    out = tmp_path / "out.yaml"
    run(capsys, "cycle", snapshot, "--now", NOW, "--apply", str(out))
    code, printed, _ = run(capsys, "cycle", str(out), "--now", NOW, "--output", "json")
    decisions = json.loads(printed)
    expected = (0, [], [], [("ml/high", ["ml/low"])])
    assert expected == (
        code,
        decisions["admitted"],
        decisions["preempted"],
        [(entry["workload"], entry["waitingFor"]) for entry in decisions["pending"]],
    )


def test_validate_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """validate reports config and object problems in one run; a bad config decides the exit code."""
    config = tmp_path / "preemptd.toml"
    config.write_text('[daemon]\nlog_level = "loud"\n[plugins.nosuch]\n', encoding="utf-8")
    snapshot = write_snapshot(tmp_path / "s.yaml", broken_snapshot())
    missing = tmp_path / "missing.yaml"
    code, out, err = run(capsys, "validate", "--config", str(config), snapshot, str(missing))
    expected = (
        78,
        "",
        [
            f"{config}:2: daemon.log_level",
            f"{config}:3: plugins.nosuch",
            f"{missing}: cannot read",
            f"{snapshot}: Workload/ml/broken: spec.podSets[0].count",
        ],
    )
    assert expected == (code, out, [line.rpartition(": ")[0] for line in err.splitlines()])


def test_validate_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """validate exits 0 for valid input and 2 for an invalid object."""
    good = write_snapshot(tmp_path / "good.yaml", preemption_snapshot())
    bad = write_snapshot(tmp_path / "bad.yaml", broken_snapshot())
    expected = [(0, "valid: configuration and 1 snapshot file (2 Queue, 1 ResourceFlavor, 3 Workload)\n", ""), 2]
    assert expected == [run(capsys, "validate", good), run(capsys, "validate", bad)[0]]


def test_plugins_lists_name_source_and_enabled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`plugins` shows each built-in with its source and whether the configuration enables it."""
    config = tmp_path / "preemptd.toml"
    config.write_text("[plugins.priority]\nenabled = false\n", encoding="utf-8")
    code, out, _ = run(capsys, "plugins", "--config", str(config))
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    expected = (0, ["built-in", "no"], ["built-in", "yes"])
    assert expected == (code, rows["priority"], rows["cohort-reclaim"])


def test_explain_tells_why_a_workload_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """explain prints the pending reason, what it waits for and the victims it chose."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, _ = run(capsys, "explain", "ml/high", snapshot, "--now", NOW)
    lines = [line for line in out.splitlines() if not line.startswith("  message:")]
    expected = (
        0,
        [
            "ml/high: pending (PendingPreemption)",
            "  waiting for: ml/low",
            "  victim: ml/low (InQueue, whole workload)",
        ],
    )
    assert expected == (code, lines[:3])


def test_explain_tells_who_took_a_victim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """explain on a victim names its preemptor and the reason; a bare name finds it too."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    code, out, _ = run(capsys, "explain", "low", snapshot, "--now", NOW)
    expected = (0, "ml/low: preempted by ml/high (InQueue): whole workload")
    assert expected == (code, out.splitlines()[0])


def test_explain_unknown_workload_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A workload that is not in the snapshot is reported on stderr with exit 2."""
    snapshot = write_snapshot(tmp_path / "s.yaml", preemption_snapshot())
    expected = (2, "", "preemptd: workload ml/ghost not found in the snapshot\n")
    assert expected == run(capsys, "explain", "ml/ghost", snapshot, "--now", NOW)


def test_table_cells_show_input_text_as_it_is_and_on_its_own_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name holding a newline is written with an escape, on the row of its workload, and a
    message naming the field ``requests[cpu]`` keeps its brackets (the table interprets no
    markup); so does a name with brackets."""
    bad = workload("bad\nname", "team", "1e4300")
    objects = [flavor("default"), queue("team", "4"), bad, workload("w[cpu]", "team", "8")]
    snapshot = write_snapshot(tmp_path / "s.yaml", objects)
    code, out, _ = run(capsys, "cycle", snapshot, "--now", NOW)
    rows = [line.split() for line in out.splitlines()]
    first_cells = [row[0] for row in rows if row]
    assert 0 == code
    assert "ml/bad\\nname" in first_cells
    assert "name" not in first_cells  # the part after the newline did not start a row
    assert "ml/w[cpu]" in first_cells
    bad_row = out.split("ml/bad\\nname", 1)[1]
    assert "spec.podSets[0].requests[cpu]:" in bad_row.split()
