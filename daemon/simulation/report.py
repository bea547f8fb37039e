"""The simulation report: ``report.json``, the terminal tables and ``report.html``.

``report.json`` holds only figures of simulated time, so identical scenario,
configuration and seed give a byte-identical file; wall-clock figures go to
stderr. Its shape: ``scenario`` (what was simulated) and ``runs`` (one per
configuration, in the order given; two with ``--compare``), each run holding
the figures of :meth:`~.metrics.Recorder.figures`. The terminal
and the HTML page are renderings of that same dict and never see anything else.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from preemptd.framework.quantity import format_duration, format_timestamp
from rich import box
from rich.console import Console
from rich.table import Table

from . import html as simhtml
from .engine import Outcome, report_resource
from .metrics import resource_unit
from .scenario import Scenario

__all__ = ["build_report", "check_report_dir", "print_report", "sparkline", "write_report"]

_SPARKS = "▁▂▃▄▅▆▇█"
_SPARK_WIDTH = 48
REPORT_WIDTH = 132


def build_report(
    scenario: Scenario,
    runs: Sequence[tuple[str, str | None, int, Outcome]],
    *,
    stopped: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """The report of one scenario run under one or more configurations
    (``(label, config file, cycle interval, outcome)`` each). ``stopped``: the runs (by
    index) a signal stopped, and the simulated time (ms) each reached; such a run has
    ``stoppedAt``, and its figures cover only that much."""
    stopped = stopped or {}
    resource = report_resource(scenario)
    _, unit = resource_unit(resource)
    return {
        "scenario": {
            "source": scenario.source,
            "start": format_timestamp(scenario.start),
            "duration": format_duration(scenario.duration),
            "terminationGrace": format_duration(scenario.termination_grace),
            "seed": scenario.seed,
            "resource": resource,
            "unit": unit,
            "initialWorkloads": len(scenario.inventory.workloads),
            "arrivals": len(scenario.arrivals),
            "invalidObjects": len(scenario.problems),
        },
        "runs": [
            {
                "label": label,
                "config": source,
                "cycleInterval": format_duration(interval),
                **({"stoppedAt": format_duration(stopped[index])} if index in stopped else {}),
                **outcome.figures,
            }
            for index, (label, source, interval, outcome) in enumerate(runs)
        ],
    }


REPORT_FILES = ("report.json", "report.html")
# What a run leaves next to DIR only when it is killed mid-write: ".DIR.report-XXXXXXXX.tmp"
# (being written) or ".old" (the previous report, being replaced).
_LEFTOVER = r"\.{name}\.report-[a-z0-9_]{{8}}\.(?:tmp|old)"


def check_report_dir(directory: str | Path) -> None:
    """Raise the :class:`OSError` :func:`write_report` would meet, before a long run
    rather than after it: ``directory`` must be a directory holding only report files,
    or not exist under a directory (or the nearest existing ancestor) that may be written."""
    folder = Path(directory)
    if folder.is_dir():
        foreign = sorted(entry.name for entry in folder.iterdir() if entry.name not in REPORT_FILES)
        if foreign:
            raise OSError(
                errno.ENOTEMPTY,
                f"holds other files than {' and '.join(REPORT_FILES)} ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); the report replaces its directory whole",
            )
    elif folder.exists() or folder.is_symlink():
        raise OSError(errno.ENOTDIR, "exists and is not a directory")
    ancestor = folder.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OSError(errno.ENOTDIR, f"{ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OSError(errno.EACCES, f"{ancestor} is not writable")


def write_report(directory: str | Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.html`` as ``directory``, both from this run or neither.

    Both files are written into a fresh directory next to ``directory``, which
    then takes its place by rename: a reader (or a run killed at any moment)
    never sees one file from this run and the other from an earlier one. An
    existing ``directory`` may hold only the two report files, since it is
    replaced as a whole. Leftovers of a killed run are removed first.
    """
    folder = Path(directory)
    parent = folder.parent
    check_report_dir(folder)
    parent.mkdir(parents=True, exist_ok=True)
    pattern = re.compile(_LEFTOVER.format(name=re.escape(folder.name)))
    for entry in parent.iterdir():
        if pattern.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
    fresh = Path(tempfile.mkdtemp(dir=parent, prefix=f".{folder.name}.report-", suffix=".tmp"))
    old: Path | None = None
    try:
        (fresh / "report.json").write_text(to_json(report), encoding="utf-8")
        (fresh / "report.html").write_text(simhtml.render(report), encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(fresh, 0o777 & ~umask)  # mkdtemp's 0700, as a plain mkdir would have made it
        if folder.is_dir():
            old = parent / f".{folder.name}.report-{secrets.token_hex(4)}.old"
            os.rename(folder, old)
            os.rename(fresh, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(fresh, folder)
    except BaseException:
        if old is not None and old.exists() and not folder.exists():
            os.rename(old, folder)  # the previous report stays, whole
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return folder / "report.json", folder / "report.html"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False) + "\n"


# --- the terminal ------------------------------------------------------------------------


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", title_style="bold")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index < 1 else "right", no_wrap=True)
    return table


def _seconds(value: float) -> str:
    return format_duration(round(value * 1000) - round(value * 1000) % 1000) if value >= 1 else f"{value:g}s"


def _hours(value: float) -> str:
    return f"{value:,.1f}"


def sparkline(values: Sequence[float], width: int = _SPARK_WIDTH) -> str:
    """Utilization (0..1) as block characters, averaged down to ``width`` columns."""
    if not values:
        return ""
    columns = min(width, len(values))
    out = []
    for i in range(columns):
        part = values[i * len(values) // columns : (i + 1) * len(values) // columns] or [0.0]
        level = sum(part) / len(part)
        out.append(_SPARKS[min(len(_SPARKS) - 1, max(0, int(level * len(_SPARKS))))] if level > 0 else " ")
    return "".join(out)


def print_report(report: dict[str, Any], console: Console) -> None:
    """The report's tables; off a terminal (a file, a pipe) at least 132 columns wide."""
    if not console.is_terminal and console.width < REPORT_WIDTH:
        console = Console(file=console.file, width=REPORT_WIDTH, highlight=False, color_system=None)
    scenario = report["scenario"]
    runs = report["runs"]
    unit = scenario["unit"]
    console.print(
        f"Simulated {scenario['source']}: {scenario['duration']} from {scenario['start']}, "
        f"{scenario['initialWorkloads']} workloads at the start, {scenario['arrivals']} arriving; "
        f"figures in {unit}-hours of {scenario['resource']}",
        soft_wrap=True,
    )
    for line in simhtml.stopped_lines(report):
        console.print(line, soft_wrap=True, style="bold")
    console.print()
    console.print(_summary(runs))
    console.print()
    console.print(_queues(runs, unit))
    console.print()
    console.print(_flavors(runs, unit))
    thrash = [(run["label"], entry) for run in runs for entry in run["thrash"]["top"]]
    if thrash:
        table = _table("Thrash: workloads preempted more than once", "workload", "config", "preemptions", f"work lost ({unit}-h)")
        for label, entry in thrash:
            table.add_row(entry["workload"], label, str(entry["preemptions"]), _hours(entry["workLostHours"]))
        console.print()
        console.print(table)
    for run in runs:
        _print_violations(run, console)


def _summary(runs: list[dict[str, Any]]) -> Table:
    table = _table("Summary", "", *(run["label"] for run in runs))

    def row(name: str, values: list[str], style: str = "") -> None:
        table.add_row(name, *values, style=style)

    row("sessions run", [f"{r['sessions']:,}" for r in runs])
    row("idle cycles skipped", [f"{r['idleCyclesSkipped']:,}" for r in runs])
    row("admissions", [f"{r['admissions']:,}" for r in runs])
    row("preemptions (evictions / shrinks)", [
        f"{r['preemptions']['evictions']:,} / {r['preemptions']['shrinks']:,}" for r in runs
    ])
    for reason in sorted({k for r in runs for k in r["preemptions"]["byReason"]}):
        row(f"  {reason}", [f"{r['preemptions']['byReason'].get(reason, 0):,}" for r in runs])
    for plugin in sorted({k for r in runs for k in r["vetoes"]}):
        row(f"vetoes by {plugin}", [f"{r['vetoes'].get(plugin, 0):,}" for r in runs])
    for plugin in sorted({k for r in runs for k in r["pluginFailures"]}):
        row(f"failures of {plugin}", [f"{r['pluginFailures'].get(plugin, 0):,}" for r in runs], "red")
    row("workloads preempted twice or more", [f"{r['thrash']['workloads']:,}" for r in runs])
    row("work lost to evictions (h)", [_hours(r["thrash"]["workLostHours"]) for r in runs])
    for reason in sorted({k for r in runs for k in r["pendingAtEnd"]}):
        row(f"pending at the end: {reason}", [f"{r['pendingAtEnd'].get(reason, 0):,}" for r in runs])
    names = (
        ("quotaExceeded", "quota exceeded"),
        ("minRuntimeViolations", "min-runtime violations"),
        ("preemptorStalls", "preemptors not admitted after their victims left"),
    )
    for key, name in names:
        counts = [r["invariants"][key]["count"] for r in runs]
        texts = [str(c) for c in counts]
        if key == "minRuntimeViolations":
            texts = [t if r["invariants"][key]["checked"] else "not checked" for t, r in zip(texts, runs, strict=True)]
        row(name, texts, "bold red" if any(counts) else "green")
    return table


def _queues(runs: list[dict[str, Any]], unit: str) -> Table:
    columns = ["queue", *(["config"] if len(runs) > 1 else [])]
    table = _table(
        f"Queues ({unit}-hours)",
        *columns,
        "admitted",
        "wait p50/p95/max",
        "used/nominal",
        "borrowed",
        "lent",
        "evicted/shrunk",
        "lost",
        "pending",
    )
    for name in runs[0]["queues"]:
        for index, run in enumerate(runs):
            q = run["queues"][name]
            wait = q["waitSeconds"]
            label = [run["label"]] if len(runs) > 1 else []
            table.add_row(
                name if index == 0 else "",
                *label,
                f"{q['admissions']:,}",
                "/".join(_seconds(wait[p]) for p in ("p50", "p95", "max")),
                f"{_hours(q['usedHours'])}/{_hours(q['nominalHours'])}",
                _hours(q["borrowedHours"]),
                _hours(q["lentHours"]),
                f"{q['evicted']}/{q['shrunk']}",
                _hours(q["workLostHours"]),
                str(q["pendingAtEnd"]),
            )
    return table


def _flavors(runs: list[dict[str, Any]], unit: str) -> Table:
    columns = ["flavor", *(["config"] if len(runs) > 1 else [])]
    table = _table("Flavors: utilization over time", *columns, f"capacity ({unit})", "mean", "peak", "over time")
    for name in runs[0]["flavors"]:
        for index, run in enumerate(runs):
            f = run["flavors"][name]
            label = [run["label"]] if len(runs) > 1 else []
            table.add_row(
                name if index == 0 else "",
                *label,
                f"{f['capacity']:,.0f}",
                f"{f['meanUtilization']:.0%}",
                f"{f['peakUtilization']:.0%}",
                sparkline(f["utilization"]),
            )
    return table


def _print_violations(run: dict[str, Any], console: Console) -> None:
    invariants = run["invariants"]
    for key, title in (
        ("quotaExceeded", "quota exceeded"),
        ("minRuntimeViolations", "min-runtime violations"),
        ("preemptorStalls", "preemptors not admitted after their victims left"),
    ):
        found = invariants[key]
        if not found["count"]:
            continue
        console.print()
        console.print(f"[bold red]{run['label']}: {found['count']} {title}[/]")
        for entry in found["listed"]:
            console.print("  " + ", ".join(f"{k}={v}" for k, v in entry.items()), soft_wrap=True, highlight=False)
