"""`preemptd simulate` stopped by a signal, its progress off a terminal, and `--report` checked
before the run (issue 20, points 4 and 5)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.cli import main
from preemptd.daemon.simulation import engine

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "scenarios"
RECLAIM = str(EXAMPLES / "research-reclaim.yaml")  # 8h, a few hundred sessions
FLEET = str(EXAMPLES / "gpu-fleet.yaml")  # 24h, a couple of seconds of wall time


def interrupt_at(monkeypatch: pytest.MonkeyPatch, at: int, signum: int = signal.SIGINT, run: int = 1) -> None:
    """Deliver ``signum`` to this process from inside the session at simulated ``at`` ms of
    the ``run``-th run, as Ctrl-C would arrive in the middle of a session."""
    real = engine.run_session

    def session(snapshot: Any, *args: Any, **kwargs: Any) -> Any:
        if runs[0] == run and snapshot.now == start[0] + at:
            signal.raise_signal(signum)
        return real(snapshot, *args, **kwargs)

    start = [0]
    runs = [0]
    real_engine = engine._Engine.__init__

    def remember(self: Any, scenario: Any, *args: Any) -> None:
        start[0] = scenario.start
        runs[0] += 1
        real_engine(self, scenario, *args)

    monkeypatch.setattr(engine, "run_session", session)
    monkeypatch.setattr(engine._Engine, "__init__", remember)


def test_sigint_mid_session_stops_after_it_and_reports_the_time_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGINT inside a session is no plugin failure: the session finishes, the run stops
    there, the report covers 0..2h and says so, and the exit is 130."""
    interrupt_at(monkeypatch, 2 * 3_600_000)
    assert 130 == main(["simulate", RECLAIM, "--report", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == "preemptd: stopped by SIGINT at 2h of 8h simulated; the report covers the first 2h"
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    run = report["runs"][0]
    assert "2h" == run["stoppedAt"]
    assert {} == run["pluginFailures"]
    # Every time series ends at 2h: 8h in 96 buckets of 5m is 24 buckets for 2h.
    assert 24 == len(run["bucketStarts"])
    assert run["bucketStarts"][-1] == "2026-01-01T01:55:00Z"
    assert all(24 == len(flavor["utilization"]) for flavor in run["flavors"].values())
    # Nominal hours are counted over the 2 hours simulated, not the scenario's 8.
    research = run["queues"]["research"]
    assert research["nominalHours"] == pytest.approx(2 * sum_nominal(report, "research"))
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "stopped at 2h of 8h" in html


def sum_nominal(report: dict[str, Any], queue: str) -> float:
    """A queue's nominal quota of the report resource, read from the example scenario by hand:
    queue research has nominalQuota "32" of nvidia.com/gpu in research-reclaim.yaml."""
    assert "nvidia.com/gpu" == report["scenario"]["resource"]
    return {"research": 32.0}[queue]


def test_sigterm_stops_a_simulation_like_sigint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    interrupt_at(monkeypatch, 3_600_000, signal.SIGTERM)
    assert 130 == main(["simulate", RECLAIM])
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1].startswith("preemptd: stopped by SIGTERM at 1h of 8h")
    assert "default: stopped at 1h of 8h; its figures cover the first 1h" in captured.out


def test_a_stopped_first_run_does_not_start_the_compared_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    interrupt_at(monkeypatch, 3_600_000)
    code = main(["simulate", RECLAIM, "--compare", str(EXAMPLES / "protect-30m.toml"), "--report", str(tmp_path)])
    assert 130 == code
    assert "(the protect-30m.toml run did not start)" in capsys.readouterr().err
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert ["default"] == [run["label"] for run in report["runs"]]


def test_a_signal_in_the_compared_run_stops_only_that_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    interrupt_at(monkeypatch, 3_600_000, run=2)
    code = main(["simulate", RECLAIM, "--compare", str(EXAMPLES / "protect-30m.toml"), "--report", str(tmp_path)])
    assert 130 == code
    last = capsys.readouterr().err.splitlines()[-1]
    assert "preemptd: stopped by SIGINT at 1h of 8h simulated; the protect-30m.toml run covers the first 1h" == last
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [None, "1h"] == [run.get("stoppedAt") for run in report["runs"]]


def test_an_unstopped_report_has_no_stopped_at(tmp_path: Path) -> None:
    assert 0 == main(["simulate", RECLAIM, "--report", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert "stoppedAt" not in report["runs"][0]
    assert 96 == len(report["runs"][0]["bucketStarts"])


def test_off_a_terminal_progress_lines_name_time_sessions_admissions_and_rates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert 0 == main(["simulate", RECLAIM, "--progress-interval", "0"])
    lines = [line for line in capsys.readouterr().err.splitlines() if " of 8h simulated (" in line]
    assert lines, "no progress line"
    head, _, rest = lines[-1].partition(" of 8h simulated (")
    assert head.startswith("default: ")
    assert " sessions (" in rest and "/s), " in rest and " admissions (" in rest


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d.write_text("x"), "exists and is not a directory"),
        (lambda d: (d.mkdir(), (d / "notes.txt").write_text("x")), "holds other files than report.json"),
        (lambda d: None, None),
    ],
    ids=["a-file", "a-directory-with-other-files", "absent-under-a-file"],
)
def test_report_dir_is_checked_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, message: str | None
) -> None:
    """An unusable --report DIR is exit 1 before any simulated time, not after the run."""
    target = tmp_path / "out"
    make(target)
    if message is None:  # DIR under a path whose parent is a regular file
        (tmp_path / "file").write_text("x")
        target = tmp_path / "file" / "out"
        message = "is not a directory"
    assert 1 == main(["simulate", RECLAIM, "--report", str(target)])
    captured = capsys.readouterr()
    assert "" == captured.out  # no tables: nothing ran
    assert "simulated" not in captured.err
    assert f"preemptd: error: --report {target}: " in captured.err and message in captured.err


def start(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "preemptd", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_progress(process: subprocess.Popen[str]) -> list[str]:
    """Read stderr until the first progress line: the simulation is under way."""
    assert process.stderr is not None
    seen = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        assert line, f"simulate ended before any progress: {seen}"
        seen.append(line)
        if " simulated (" in line:
            return seen
    raise AssertionError("no progress line within 60 s")


def test_sigint_to_a_simulate_process_exits_130_with_its_report(tmp_path: Path) -> None:
    """The real thing: Ctrl-C to a running `preemptd simulate` process mid-run."""
    process = start("simulate", FLEET, "--progress-interval", "0.1", "--report", str(tmp_path / "out"))
    wait_for_progress(process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert 130 == process.returncode, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "failed in" not in err  # no plugin failure
    last = err.splitlines()[-1]
    assert last.startswith("preemptd: stopped by SIGINT at ") and " of 24h simulated; the report covers" in last
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert "stoppedAt" in report["runs"][0]
    assert "Summary" in out


def test_a_second_signal_stops_at_once_with_one_line_and_no_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = engine.run_session

    def session(snapshot: Any, *args: Any, **kwargs: Any) -> Any:
        decisions = real(snapshot, *args, **kwargs)
        signal.raise_signal(signal.SIGINT)
        # Swallowed under the session, as a `finally` raising in its place would.
        with contextlib.suppress(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
        return decisions

    monkeypatch.setattr(engine, "run_session", session)
    assert 130 == main(["simulate", RECLAIM, "--report", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "preemptd: interrupted (SIGINT)" == err.splitlines()[-1]
    assert not (tmp_path / "out").exists()
