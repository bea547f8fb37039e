"""Lines both the terminal tables and ``report.html`` print: kept apart so that printing the
tables does not import the page's module."""

from __future__ import annotations

from typing import Any

__all__ = ["ratio_text", "stopped_lines"]


def stopped_lines(report: dict[str, Any]) -> list[str]:
    """What a stopped run's figures cover (a signal stopped it), one line per such run."""
    total = report["scenario"]["duration"]
    return [
        f"{run['label']}: stopped at {run['stoppedAt']} of {total}; its figures cover the first {run['stoppedAt']}"
        for run in report["runs"]
        if "stoppedAt" in run
    ]


def ratio_text(summary: dict[str, Any]) -> str:
    """The max/min ratio of mean shares: "∞" when the lowest is 0 beside a higher one."""
    if "lowest" not in summary:
        return "–"
    ratio = summary["ratio"]
    return "∞" if ratio is None else f"{ratio:.2f}"
