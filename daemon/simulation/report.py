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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from preemptd.framework.quantity import format_duration, format_timestamp
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from .engine import Outcome, report_resource
from .metrics import resource_unit
from .scenario import Scenario
from .texts import ratio_text, stopped_lines

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
        # The page's module is imported only when a page is written.
        from . import html as simhtml

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
#
# Figures are never cut: a table is laid out for the console's width. Names (queues,
# flavors, workloads, the summary's row names) fold onto a second line when they must;
# a table too wide even so is split into two narrower ones, or transposed (one block of
# rows per queue, one column per run); the sparkline takes the room that is left, and is
# dropped when too little is.

_GAP = 3  # between two columns of a SIMPLE_HEAD table without edges: padding, rule, padding
_EDGE = 2  # the padding before the first column and after the last
_NAME_MIN = 8  # a name folds down to this many columns, not fewer
_SPARK_MIN = 12  # a sparkline narrower than this says nothing


def _table(title: str) -> Table:
    return Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, title_justify="left", title_style="bold")


@dataclass(slots=True)
class _Grid:
    """A table of names (left-aligned, the first may fold) and figures (right-aligned,
    never cut), and how to split its figures when one table is too wide."""

    title: str
    names: list[str]
    figures: list[str]
    rows: list[tuple[list[str], list[str], str]] = field(default_factory=list)  # names, figures, style
    parts: list[tuple[str, list[int]]] = field(default_factory=list)  # (title, figure columns) each

    def add(self, names: list[str], figures: list[str], style: str = "") -> None:
        self.rows.append((names, figures, style))


def _widest(header: str, cells: Iterable[str]) -> int:
    return max([cell_len(header), *(cell_len(cell) for cell in cells)])


def _grid_table(grid: _Grid, title: str, columns: Sequence[int], width: int, extra: int = 0) -> Table | None:
    """``grid`` with only the figure ``columns``, the first name folded to fit ``width``
    (less ``extra`` columns kept free); None if even folded it does not fit."""
    figures = [_widest(grid.figures[i], (row[1][i] for row in grid.rows)) for i in columns]
    names = [_widest(header, (row[0][k] for row in grid.rows)) for k, header in enumerate(grid.names)]
    count = len(names) + len(figures)
    room = width - extra - _EDGE - _GAP * (count - 1) - sum(figures) - sum(names[1:])
    if room < min(names[0], _NAME_MIN):
        return None
    table = _table(title)
    for k, header in enumerate(grid.names):
        if k == 0:
            table.add_column(header, width=min(names[0], room), overflow="fold")
        else:
            table.add_column(header, no_wrap=True)
    for i in columns:
        table.add_column(grid.figures[i], justify="right", no_wrap=True)
    for row_names, row_figures, style in grid.rows:
        table.add_row(*row_names, *(row_figures[i] for i in columns), style=style)
    return table


def _transposed(grid: _Grid, width: int) -> Table:
    """One block per first name: a row with the name, then one row per figure; one
    column per second name (the run), or a single column of values."""
    groups: dict[str, list[tuple[list[str], list[str], str]]] = {}
    for row in grid.rows:
        groups.setdefault(row[0][0], []).append(row)
    heads = [row[0][1] if len(row[0]) > 1 else "" for row in next(iter(groups.values()), [])]
    values = [_widest(head, (g[k][1][i] for g in groups.values() for i in range(len(grid.figures)) if k < len(g)))
              for k, head in enumerate(heads)]
    # Wide enough for the figures' names, and for the block names up to a point (they fold).
    label = max([cell_len(f) + 2 for f in grid.figures] + [min(32, cell_len(name)) for name in groups])
    room = width - _EDGE - _GAP * len(heads) - sum(values)
    table = _table(grid.title)
    table.add_column(grid.names[0], width=max(_NAME_MIN, min(label, room)), overflow="fold")
    for head in heads:
        table.add_column(head, justify="right", no_wrap=True)
    for name, rows in groups.items():
        table.add_row(name, *([""] * len(heads)), style="bold")
        for i, figure in enumerate(grid.figures):
            table.add_row(f"  {figure}", *(row[1][i] for row in rows), style=rows[0][2])
    return table


def _fitted(grid: _Grid, width: int) -> list[Table]:
    """One table if it fits, else the split (if the grid has one), else transposed."""
    whole = _grid_table(grid, grid.title, range(len(grid.figures)), width)
    if whole is not None:
        return [whole]
    if grid.parts:
        tables = [_grid_table(grid, title, columns, width) for title, columns in grid.parts]
        if all(table is not None for table in tables):
            return [table for table in tables if table is not None]
    return [_transposed(grid, width)]


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
    """The report's tables, laid out for the console's width; off a terminal (a file, a
    pipe) at least 132 columns wide."""
    if not console.is_terminal and console.width < REPORT_WIDTH:
        console = Console(file=console.file, width=REPORT_WIDTH, highlight=False, color_system=None)
    width = console.width
    scenario = report["scenario"]
    runs = report["runs"]
    unit = scenario["unit"]
    console.print(
        f"Simulated {scenario['source']}: {scenario['duration']} from {scenario['start']}, "
        f"{scenario['initialWorkloads']} workloads at the start, {scenario['arrivals']} arriving; "
        f"figures in {unit}-hours of {scenario['resource']}",
        overflow="fold",
    )
    for line in stopped_lines(report):
        console.print(line, style="bold", overflow="fold")
    tables = [*_fitted(_summary(runs), width), *_fitted(_queues(runs, unit), width), _flavors(runs, unit, width)]
    thrash = [(run["label"], entry) for run in runs for entry in run["thrash"]["top"]]
    if thrash:
        grid = _Grid(
            "Thrash: workloads preempted more than once",
            ["workload", "config"],
            ["preemptions", f"work lost ({unit}-h)"],
        )
        for label, entry in thrash:
            grid.add([entry["workload"], label], [str(entry["preemptions"]), _hours(entry["workLostHours"])])
        tables += _fitted(grid, width)
    for table in tables:
        console.print()
        console.print(table)
    for run in runs:
        _print_violations(run, console)


def _summary(runs: list[dict[str, Any]]) -> _Grid:
    grid = _Grid("Summary", [""], [run["label"] for run in runs])

    def row(name: str, values: list[str], style: str = "") -> None:
        grid.add([name], values, style)

    row("sessions run", [f"{r['sessions']:,}" for r in runs])
    row("idle cycles skipped", [f"{r['idleCyclesSkipped']:,}" for r in runs])
    row("admissions", [f"{r['admissions']:,}" for r in runs])
    row("preemptions (evictions / shrinks)", [
        f"{r['preemptions']['evictions']:,} / {r['preemptions']['shrinks']:,}" for r in runs
    ])
    for reason in sorted({k for r in runs for k in r["preemptions"]["byReason"]}):
        row(f"  {reason}", [f"{r['preemptions']['byReason'].get(reason, 0):,}" for r in runs])
    if any(r["growths"]["total"] for r in runs):
        # Running workloads grown in place: not admissions (docs/elastic.md).
        row("growths in place (pods added)", [
            f"{r['growths']['total']:,} ({r['growths']['pods']:,})" for r in runs
        ])
    for plugin in sorted({k for r in runs for k in r["vetoes"]}):
        row(f"vetoes by {plugin}", [f"{r['vetoes'].get(plugin, 0):,}" for r in runs])
    for plugin in sorted({k for r in runs for k in r["pluginFailures"]}):
        row(f"failures of {plugin}", [f"{r['pluginFailures'].get(plugin, 0):,}" for r in runs], "red")
    row("workloads preempted twice or more", [f"{r['thrash']['workloads']:,}" for r in runs])
    row("work lost to evictions (h)", [_hours(r["thrash"]["workLostHours"]) for r in runs])
    for reason in sorted({k for r in runs for k in r["pendingAtEnd"]}):
        row(f"pending at the end: {reason}", [f"{r['pendingAtEnd'].get(reason, 0):,}" for r in runs])
    if any(r["fairness"]["source"] for r in runs):
        row("max/min mean share", [ratio_text(r["fairness"]["maxMinShareRatio"]) for r in runs])
        for queue in runs[0]["queues"]:
            below = [r["queues"][queue]["belowFairShareSeconds"] for r in runs]
            if any(below):
                row(f"time below fair share: {queue}", [_seconds(b) if b else "0s" for b in below])
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
    return grid


def _queues(runs: list[dict[str, Any]], unit: str) -> _Grid:
    # Growths in place share the shrinks' column, only when a run has any.
    growing = any(r["growths"]["total"] for r in runs)
    grid = _Grid(
        f"Queues ({unit}-hours)",
        ["queue", *(["config"] if len(runs) > 1 else [])],
        ["admitted", "wait p50", "wait p95", "wait max", "pending",
         "used", "nominal", "borrowed", "lent", "evicted/shrunk/grown" if growing else "evicted/shrunk", "lost"],
        parts=[("Queues: admissions and waits", [0, 1, 2, 3, 4]),
               (f"Queues: quota ({unit}-hours)", [5, 6, 7, 8, 9, 10])],
    )
    for name in runs[0]["queues"]:
        for run in runs:
            q = run["queues"][name]
            wait = q["waitSeconds"]
            grid.add(
                [name, *([run["label"]] if len(runs) > 1 else [])],
                [
                    f"{q['admissions']:,}",
                    *(_seconds(wait[p]) for p in ("p50", "p95", "max")),
                    str(q["pendingAtEnd"]),
                    _hours(q["usedHours"]),
                    _hours(q["nominalHours"]),
                    _hours(q["borrowedHours"]),
                    _hours(q["lentHours"]),
                    f"{q['evicted']}/{q['shrunk']}" + (f"/{q['grown']}" if growing else ""),
                    _hours(q["workLostHours"]),
                ],
            )
    return grid


def _flavors(runs: list[dict[str, Any]], unit: str, width: int) -> Table:
    """Flavors and their utilization; the sparkline gets the width that is left."""
    grid = _Grid(
        "Flavors: utilization over time",
        ["flavor", *(["config"] if len(runs) > 1 else [])],
        [f"capacity ({unit})", "mean", "peak"],
    )
    curves = []
    for name in runs[0]["flavors"]:
        for run in runs:
            f = run["flavors"][name]
            grid.add(
                [name, *([run["label"]] if len(runs) > 1 else [])],
                [f"{f['capacity']:,.0f}", f"{f['meanUtilization']:.0%}", f"{f['peakUtilization']:.0%}"],
            )
            curves.append(f["utilization"])
    names = [_widest(header, (row[0][k] for row in grid.rows)) for k, header in enumerate(grid.names)]
    figures = [_widest(header, (row[1][i] for row in grid.rows)) for i, header in enumerate(grid.figures)]
    # With its names whole, whatever the table leaves of the width goes to the sparkline.
    left = width - _EDGE - _GAP * (len(names) + len(figures)) - sum(names) - sum(figures)
    if left >= _SPARK_MIN:
        spark = min(_SPARK_WIDTH, left)
        grid.figures.append("over time")
        for row, curve in zip(grid.rows, curves, strict=True):
            row[1].append(sparkline(curve, spark).ljust(spark))
    return _fitted(grid, width)[0]


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
