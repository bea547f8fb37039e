"""``preemptd pending [QUEUE] SNAPSHOT…``, and the daemon's ``/pending`` view: where each
waiting workload stands.

The positions are the session's own (``positionInQueue``, ``positionInLocalQueue`` of
the decision JSON, see :func:`preemptd.framework.decisions.number_pending`): the order
in which the next session takes a queue's workloads, 1-based, among the workloads still
waiting after this one. A workload pending ``Inadmissible`` waits in no queue and has no
position; it is counted apart. :func:`pending_view` is the one shape of the answer, for
``-o json`` and for the daemon's ``/pending`` and ``/pending/<queue>``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preemptd.framework.decisions import Decisions, Pending, QueuePosition
from preemptd.framework.objects import escape
from preemptd.framework.quantity import format_timestamp

from .output import Answer, add_output_option, write_output

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["HELP", "add_arguments", "pending_view", "render_table", "run"]

HELP = "list the workloads waiting in each queue, in the order the next session takes them"
EXAMPLES = (
    "preemptd pending cluster.yaml",
    "preemptd pending team-a cluster.yaml -o json",
    "preemptd pending cluster.yaml -o name",
)

_COLUMNS = ("QUEUE", "POSITION", "LOCALQUEUE", "LOCAL POSITION", "WORKLOAD", "PRIORITY", "REASON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "arguments",
        nargs="+",
        metavar="[QUEUE] SNAPSHOT",
        help="a leaf queue to list alone (optional), then YAML/JSON files, directories or -",
    )
    parser.add_argument("--now", metavar="T", help="session clock, RFC 3339 (default: the current time)")
    add_output_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Decide once over the snapshot (``args.decide``: the CLI's one session over files)."""
    queue, args.snapshots = _split(args.arguments)
    decided = args.decide(args, {})
    if queue is not None and queue not in decided.inventory.queues:
        print(f"preemptd: error: no queue {queue!r} in the snapshot", file=sys.stderr)
        return 2
    view = pending_view(decided.decisions, queue)
    write_output(
        Answer(
            data=lambda: view,
            names=lambda: (f"workload/{item['workload']}" for item in view["items"]),
            table=lambda out, wide: _write(out, render_table(view["items"])),
        ),
        args.output,
    )
    count = view["inadmissible"]
    if count:
        plural = count != 1
        print(
            f"note: {count} Inadmissible workload{'s' if plural else ''} wait{'' if plural else 's'} "
            "in no queue (`preemptd cycle` says why)",
            file=sys.stderr,
        )
    return 0


def _write(out: Console, text: str) -> None:
    """The plain table, as it is: kubectl's layout is not rich's (no folding, no styles)."""
    out.file.write(text)


def _split(arguments: Sequence[str]) -> tuple[str | None, list[str]]:
    """``[QUEUE] SNAPSHOT…``: the first of two or more is a queue unless it is a path."""
    first, *rest = arguments
    if rest and first != "-" and not Path(first).exists() and not first.endswith(_FILE_ENDINGS):
        return first, list(rest)
    return None, list(arguments)


_FILE_ENDINGS = (".yaml", ".yml", ".json")


def pending_view(decisions: Decisions, queue: str | None = None) -> dict[str, Any]:
    """The waiting workloads (of one queue, or of all), by queue and then position."""
    positions = decisions.positions
    waiting = [
        (place, entry)
        for entry in decisions.pending
        if (place := positions.get(entry.workload)) is not None and (queue is None or place.queue == queue)
    ]
    waiting.sort(key=lambda found: (found[0].queue, found[0].position))
    unqueued = sum(1 for entry in decisions.pending if entry.workload not in positions)
    return {
        "now": format_timestamp(decisions.now),
        "queue": queue,
        "items": [_item(place, entry) for place, entry in waiting],
        "inadmissible": unqueued if queue is None else 0,
    }


def _item(place: QueuePosition, entry: Pending) -> dict[str, Any]:
    return {
        "workload": entry.workload,
        "queue": place.queue,
        "positionInQueue": place.position,
        "localQueue": place.local_queue,
        "positionInLocalQueue": place.local_position,
        "priority": place.priority,
        "reason": entry.reason,
        "message": entry.message,
    }


def render_table(items: Sequence[dict[str, Any]]) -> str:
    """kubectl's plain table: a header, one line per workload, columns padded to fit."""
    if not items:
        return "No pending workloads.\n"
    rows = [list(_COLUMNS)] + [[_cell(item.get(key)) for key in _KEYS] for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    return "\n".join(lines) + "\n"


_KEYS = ("queue", "positionInQueue", "localQueue", "positionInLocalQueue", "workload", "priority", "reason")


def _cell(value: object) -> str:
    return "-" if value is None else escape(str(value))
