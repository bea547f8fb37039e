"""Logs: structlog in front, the standard library's handlers behind.

Production gets one JSON object per line (``log_format = "json"``), a person
at a terminal gets colored, aligned lines (``"console"``); ``"auto"`` picks the
console renderer when the stream is a TTY. Both run the same processors, and
records of plain ``logging`` loggers (the Kubernetes backend's, aiohttp's) go
through them too, so every line of the process has one format.

Each decision is one line whose fields a log pipeline can index: ``event``
(``admit``, ``preempt``, ``force-delete``), ``workload``, ``queue``,
``preemptor``, ``reason``, and ``dry_run`` when nothing was written.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, MutableMapping
from typing import Any, Literal, TextIO

import structlog
from preemptd.framework.decisions import Decisions

__all__ = ["DecisionLog", "configure_logging", "decision_records", "set_level"]

Format = Literal["json", "console", "auto"]
QueueOf = Callable[[str], str | None]
"""A workload key's leaf queue (None when unknown)."""

_HANDLER_NAME = "preemptd"


def configure_logging(*, log_format: Format = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Route structlog and ``logging`` to ``stream`` (stderr) in ``log_format`` at ``level``.

    Called again (a reload, a test), it replaces its own handler instead of
    adding a second one.
    """
    stream = stream if stream is not None else sys.stderr
    console = log_format == "console" or (log_format == "auto" and _is_tty(stream))
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if console:
        renderer = structlog.dev.ConsoleRenderer(colors=_is_tty(stream))
        final = [structlog.stdlib.ProcessorFormatter.remove_processors_meta, _plain_fields, renderer]
    else:
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        final = [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _event_first,
            renderer,
        ]
    formatter = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=shared, processors=final)
    handler = logging.StreamHandler(stream)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    set_level(level)
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,  # a reload may change the level
    )


def _event_first(logger: object, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``event`` opens every line, then its fields: what a person scanning the log reads first."""
    return {"event": event.pop("event", ""), **event}


def _plain_fields(logger: object, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """On a console, a list field reads ``flavors=a100,h100``, not a Python repr."""
    for key, value in event.items():
        if isinstance(value, list | tuple) and key != "exc_info":
            event[key] = _plain(value)
    return event


def set_level(level: str) -> None:
    """The lowest level logged, by name (``debug`` … ``critical``)."""
    logging.getLogger().setLevel(level.upper())
    # aiohttp's access log is one line per scrape of /metrics: only when debugging.
    access = logging.getLogger("aiohttp.access")
    access.setLevel(logging.DEBUG if level.lower() == "debug" else logging.WARNING)


def _is_tty(stream: TextIO) -> bool:
    isatty: Callable[[], bool] | None = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


# --- decisions -------------------------------------------------------------------------------


def decision_records(decisions: Decisions, queue_of: QueueOf) -> list[dict[str, Any]]:
    """One flat record per decision, in the decisions' (sorted) order.

    ``queue_of`` gives a workload key's leaf queue; a victim's record names its
    own queue, a forced pod deletion its preemptor's.
    """
    records: list[dict[str, Any]] = []
    for admitted in decisions.admitted:
        flavors = sorted({flavor for ps in admitted.pod_sets for flavor in ps.flavors.values()})
        records.append({
            "event": "grow" if admitted.grown else "admit", "workload": admitted.workload, "queue": admitted.queue,
            "borrowing": admitted.borrowing, "flavors": flavors,
        })
    for preempted in decisions.preempted:
        records.append({
            "event": "preempt", "workload": preempted.workload, "queue": queue_of(preempted.workload),
            "preemptor": preempted.preemptor, "reason": preempted.reason, "count": preempted.count,
            "pods": list(preempted.pods),
        })
    for action in decisions.pod_actions:
        records.append({
            "event": "force-delete" if action.action == "ForceDelete" else action.action,
            "pod": action.pod, "queue": queue_of(action.preemptor), "preemptor": action.preemptor,
            "reason": action.action,
        })
    return records


class DecisionLog:
    """Logs each cycle's decisions, one line each, on the ``preemptd.decisions`` logger.

    A dry run decides the same thing every cycle (nothing it decides is
    written, so nothing changes); it logs a decision when it first appears and
    again only after it went away, so the log reads as what would have been done.
    """

    def __init__(self, *, dry_run: bool = False) -> None:
        self.dry_run = dry_run
        self.log = structlog.stdlib.get_logger("preemptd.decisions")
        self._previous: set[tuple[Any, ...]] = set()

    def __call__(self, decisions: Decisions, queue_of: QueueOf) -> int:
        """Log the decisions; returns how many lines were written."""
        records = decision_records(decisions, queue_of)
        written = 0
        current: set[tuple[Any, ...]] = set()
        for record in records:
            identity = (record["event"], record.get("workload"), record.get("pod"), record.get("preemptor"))
            current.add(identity)
            if self.dry_run and identity in self._previous:
                continue
            fields = {k: v for k, v in record.items() if k != "event" and v is not None}
            if self.dry_run:
                fields["dry_run"] = True
            if structlog.is_configured():
                self.log.info(record["event"], **fields)
            else:  # a library use (tests, benchmarks): plain logging, its level and handlers
                text = " ".join(f"{key}={_plain(value)}" for key, value in fields.items())
                logging.getLogger("preemptd.decisions").info("%s %s", record["event"], text)
            written += 1
        self._previous = current if self.dry_run else set()
        return written


def _plain(value: object) -> str:
    """A field as a log line's text: lists comma-separated, booleans lower case (no reprs)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value) or "-"
    return str(value)
