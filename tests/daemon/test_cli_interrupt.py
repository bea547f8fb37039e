"""Ctrl-C and SIGTERM during the commands that run once: exit 130 with one line, no traceback,
and an interrupt swallowed under a session still ends the command (issue 20, point 5)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon import cli
from preemptd.daemon.cli import main

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "examples" / "quickstart.yaml")
NOW = "2026-01-01T12:00:00Z"


def test_sigint_during_the_session_of_cycle_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = cli.run_session

    def session(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "run_session", session)
    assert 130 == main(["cycle", QUICKSTART, "--now", NOW])
    captured = capsys.readouterr()
    assert "" == captured.out
    assert ["preemptd: interrupted (SIGINT)"] == captured.err.splitlines()


def test_an_interrupt_swallowed_in_the_session_is_no_plugin_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A KeyboardInterrupt that something under the session turned into another exception
    (a `finally` raising in its place, caught as a plugin's failure) still ends the command
    once the session returns: no decisions, no plugin warning, exit 130."""
    real = cli.run_session

    def session(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                signal.raise_signal(signal.SIGINT)
            finally:
                raise KeyError("rolled back twice")
        except KeyError:
            pass  # what the registry's containment does with a plugin's exception
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "run_session", session)
    assert 130 == main(["cycle", QUICKSTART, "--now", NOW])
    captured = capsys.readouterr()
    assert "" == captured.out
    assert ["preemptd: interrupted (SIGINT)"] == captured.err.splitlines()


def test_sigterm_during_validate_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = cli.load_files

    def load(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(cli, "load_files", load)
    assert 130 == main(["validate", QUICKSTART])
    assert ["preemptd: interrupted (SIGTERM)"] == capsys.readouterr().err.splitlines()


def test_the_signal_handlers_are_restored_after_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert 0 == main(["cycle", QUICKSTART, "--now", NOW])
    assert before == (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
