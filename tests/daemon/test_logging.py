"""Logs: JSON lines in production, one per decision with its fields; a console on a TTY."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from preemptd.daemon.logging import DecisionLog, configure_logging, set_level
from preemptd.framework.decisions import Admitted, AdmittedPodSet, Decisions, PodAction, Preempted

QUEUES = {"ml/train-2": "team-a", "ml/old-job": "team-b", "ml/train-1": "team-a"}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


def decisions() -> Decisions:
    return Decisions(
        now=0,
        admitted=[Admitted("ml/train-1", "team-a", False, (AdmittedPodSet("main", 4, {"nvidia.com/gpu": "a100"}),))],
        preempted=[Preempted("ml/old-job", "ml/train-2", "InCohortReclamation")],
        pod_actions=[PodAction("serve/llm-7f9-abc", "ForceDelete", "ml/train-2")],
    )


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_each_decision_is_one_json_line_with_its_fields() -> None:
    """JSON format: admit, preempt and force-delete lines name workload, queue, preemptor and reason."""
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)
    DecisionLog()(decisions(), QUEUES.get)
    found = [{k: v for k, v in line.items() if k != "timestamp"} for line in lines(stream)]
    expected = [
        {"event": "admit", "workload": "ml/train-1", "queue": "team-a", "borrowing": False, "flavors": ["a100"],
         "level": "info", "logger": "preemptd.decisions"},
        {"event": "preempt", "workload": "ml/old-job", "queue": "team-b", "preemptor": "ml/train-2",
         "reason": "InCohortReclamation", "pods": [], "level": "info", "logger": "preemptd.decisions"},
        {"event": "force-delete", "pod": "serve/llm-7f9-abc", "queue": "team-a", "preemptor": "ml/train-2",
         "reason": "ForceDelete", "level": "info", "logger": "preemptd.decisions"},
    ]
    assert expected == found


def test_standard_library_records_are_json_lines_too() -> None:
    """A plain `logging` call (the backend's) comes out in the same JSON form, message formatted."""
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)
    logging.getLogger("preemptd.kubernetes").warning("conflict on %s", "Workload ml/a")
    (line,) = lines(stream)
    assert ("conflict on Workload ml/a", "warning", "preemptd.kubernetes") == (
        line["event"], line["level"], line["logger"])
    assert str(line["timestamp"]).endswith("Z")


def test_auto_is_json_off_a_terminal_and_a_colored_console_on_one() -> None:
    """log_format = auto: a pipe gets JSON, a TTY gets colored key=value lines."""
    pipe, terminal = io.StringIO(), Terminal()
    configure_logging(log_format="auto", stream=pipe)
    DecisionLog()(decisions(), QUEUES.get)
    assert "admit" == lines(pipe)[0]["event"]
    configure_logging(log_format="auto", stream=terminal)
    DecisionLog()(decisions(), QUEUES.get)
    text = terminal.getvalue()
    assert "\x1b[" in text and "workload" in text and not text.lstrip().startswith("{")


def test_console_format_without_a_terminal_has_no_colors() -> None:
    """log_format = console on a file: readable lines, no escape codes."""
    stream = io.StringIO()
    configure_logging(log_format="console", stream=stream)
    DecisionLog()(decisions(), QUEUES.get)
    text = stream.getvalue()
    assert "\x1b[" not in text and "preemptor=ml/train-2" in text


def test_reconfiguring_replaces_the_handler() -> None:
    """A second configure_logging (a reload) does not log every line twice."""
    first, second = io.StringIO(), io.StringIO()
    configure_logging(log_format="json", stream=first)
    configure_logging(log_format="json", stream=second)
    logging.getLogger("preemptd").info("once")
    assert ("", 1) == (first.getvalue(), len(lines(second)))


def test_level_filters_both_kinds_of_logger() -> None:
    """--log-level warning hides info lines from structlog and logging alike."""
    stream = io.StringIO()
    configure_logging(log_format="json", level="warning", stream=stream)
    DecisionLog()(decisions(), QUEUES.get)
    logging.getLogger("preemptd").info("hidden")
    logging.getLogger("preemptd").error("shown")
    assert ["shown"] == [line["event"] for line in lines(stream)]
    set_level("info")
    logging.getLogger("preemptd").info("now shown")
    assert "now shown" == lines(stream)[-1]["event"]


def test_a_dry_run_logs_a_decision_when_it_first_appears() -> None:
    """A dry run decides the same every cycle: each decision is logged once, marked dry_run,
    and again only after it went away and came back."""
    stream = io.StringIO()
    configure_logging(log_format="json", stream=stream)
    log = DecisionLog(dry_run=True)
    assert 3 == log(decisions(), QUEUES.get)
    assert 0 == log(decisions(), QUEUES.get)
    assert 0 == log(Decisions(now=0), QUEUES.get)
    assert 3 == log(decisions(), QUEUES.get)
    assert all(line["dry_run"] is True for line in lines(stream))


def test_without_structlog_a_decision_line_has_no_python_reprs(caplog: pytest.LogCaptureFixture) -> None:
    """Used as a library (structlog not configured), a decision is still one line of plain
    key=value fields: lists comma-separated, booleans lower case."""
    structlog.reset_defaults()
    with caplog.at_level(logging.INFO, logger="preemptd.decisions"):
        DecisionLog(dry_run=True)(decisions(), QUEUES.get)
    texts = [record.getMessage() for record in caplog.records]
    assert "admit workload=ml/train-1 queue=team-a borrowing=false flavors=a100 dry_run=true" == texts[0]
    assert "pods=-" in texts[1]
    assert all("[" not in text and "'" not in text for text in texts)


def test_on_a_console_list_fields_are_comma_separated() -> None:
    stream = io.StringIO()
    configure_logging(log_format="console", stream=stream)
    DecisionLog()(decisions(), QUEUES.get)
    text = stream.getvalue()
    assert "flavors=a100" in text and "pods=-" in text
    assert "['" not in text and "[]" not in text
