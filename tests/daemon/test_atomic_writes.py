"""`simulate --report DIR` and `cycle --apply OUT` leave whole results, and no debris.

report.json and report.html always come from one run: they are written into a
fresh directory that then replaces DIR. Temporary files or folders left by a
run killed mid-write are removed by the next run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.cli import main
from preemptd.daemon.simulation import html as simhtml
from preemptd.daemon.simulation import report as simreport

NOW = "2026-01-01T00:00:00Z"
REPORT = {"scenario": {"name": "new"}, "runs": []}


def old_report(folder: Path) -> None:
    folder.mkdir()
    (folder / "report.json").write_text("old json", encoding="utf-8")
    (folder / "report.html").write_text("old html", encoding="utf-8")


def contents(folder: Path) -> dict[str, str]:
    return {entry.name: entry.read_text(encoding="utf-8") for entry in sorted(folder.iterdir())}


def test_a_report_replaces_both_files_of_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simhtml, "render", lambda report: f"<p>{report['scenario']['name']}</p>")
    old_report(tmp_path / "out")
    simreport.write_report(tmp_path / "out", REPORT)
    found = contents(tmp_path / "out")
    assert {"report.html": "<p>new</p>"} == {"report.html": found["report.html"]}
    assert REPORT == json.loads(found["report.json"])
    assert ["out"] == sorted(entry.name for entry in tmp_path.iterdir())


def test_a_report_that_fails_midway_leaves_the_previous_pair_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page fails after report.json was written: DIR still holds the old json and html."""

    def broken(report: dict[str, Any]) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(simhtml, "render", broken)
    old_report(tmp_path / "out")
    with pytest.raises(OSError):
        simreport.write_report(tmp_path / "out", REPORT)
    assert {"report.html": "old html", "report.json": "old json"} == contents(tmp_path / "out")
    assert ["out"] == sorted(entry.name for entry in tmp_path.iterdir())


def test_leftovers_of_a_killed_report_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simhtml, "render", lambda report: "<p/>")
    for name in (".out.report-abcd1234.tmp", ".out.report-0a1b2c3d.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text("half", encoding="utf-8")
    (tmp_path / ".other.report-abcd1234.tmp").mkdir()  # another DIR's: not ours to remove
    simreport.write_report(tmp_path / "out", REPORT)
    assert [".other.report-abcd1234.tmp", "out"] == sorted(entry.name for entry in tmp_path.iterdir())


def test_a_report_directory_holding_other_files_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"duration": "1m"}), encoding="utf-8")
    assert 1 == main(["simulate", str(scenario), "--report", str(folder)])
    assert "holds other files than report.json and report.html (notes.txt)" in capsys.readouterr().err
    assert {"notes.txt": "mine"} == contents(folder)


def test_apply_removes_temporary_files_left_by_a_killed_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = tmp_path / "s.yaml"
    snapshot.write_text("kind: ResourceFlavor\napiVersion: preemptd.io/v1alpha1\nmetadata: {name: od}\n", encoding="utf-8")
    for name in (".out.yaml.abcd_123.tmp", ".out.yaml.zz99yy88.tmp"):
        (tmp_path / name).write_text("half written", encoding="utf-8")
    (tmp_path / ".out.yaml.notes.tmp").write_text("not one of ours", encoding="utf-8")
    assert 0 == main(["cycle", str(snapshot), "--now", NOW, "--apply", str(tmp_path / "out.yaml")])
    capsys.readouterr()
    assert [".out.yaml.notes.tmp", "out.yaml", "s.yaml"] == sorted(entry.name for entry in tmp_path.iterdir())
