"""``report.html``: the simulation report as one self-contained page.

Plots are inline SVG drawn here (no plotting library, no script, no network):
flavor utilization over time, quota used against nominal per queue, admission
waits per queue, and preemptions by reason; each run of a ``--compare`` is one
series. The page is a pure function of the report dict, so it is as
reproducible as ``report.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

__all__ = ["render", "stopped_lines"]

COLORS = ("#2563eb", "#dc2626", "#059669", "#9333ea")
WIDTH = 760
HEIGHT = 260
LEFT = 56
RIGHT = 16
TOP = 28
BOTTOM = 64

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 980px; color: #111; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: 3px 10px; text-align: right; }
th { border-bottom: 1px solid #999; } td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f6f6f6; } .bad { color: #b91c1c; font-weight: bold; } .ok { color: #047857; }
svg { display: block; margin: .5em 0 1em; } svg text { font: 11px system-ui, sans-serif; fill: #333; }
.legend span { display: inline-block; margin-right: 1.5em; } .swatch { display: inline-block; width: 12px;
height: 12px; margin-right: .4em; vertical-align: -1px; }
"""


def stopped_lines(report: dict[str, Any]) -> list[str]:
    """What a stopped run's figures cover (a signal stopped it), one line per such run."""
    total = report["scenario"]["duration"]
    return [
        f"{run['label']}: stopped at {run['stoppedAt']} of {total}; its figures cover the first {run['stoppedAt']}"
        for run in report["runs"]
        if "stoppedAt" in run
    ]


def render(report: dict[str, Any]) -> str:
    scenario = report["scenario"]
    runs = report["runs"]
    unit = scenario["unit"]
    labels = [run["label"] for run in runs]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>preemptd simulation: {escape(scenario['source'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Simulation of {escape(scenario['source'])}</h1>",
        f"<p>{escape(scenario['duration'])} from {escape(scenario['start'])}; "
        f"{scenario['initialWorkloads']} workloads at the start, {scenario['arrivals']} arriving; "
        f"termination grace {escape(scenario['terminationGrace'])}; seed {scenario['seed']}. "
        f"Figures are {escape(unit)}-hours of <code>{escape(scenario['resource'])}</code>.</p>",
        *(f'<p class="bad">{escape(line)}.</p>' for line in stopped_lines(report)),
        _legend(labels),
        "<h2>Summary</h2>",
        _summary(runs),
        "<h2>Flavor utilization over time</h2>",
    ]
    starts = runs[0]["bucketStarts"]
    for flavor in runs[0]["flavors"]:
        series = [(run["label"], run["flavors"][flavor]["utilization"]) for run in runs]
        capacity = runs[0]["flavors"][flavor]["capacity"]
        parts.append(_line_chart(f"{flavor} ({capacity:,.0f} {unit})", starts, series))
    queues = list(runs[0]["queues"])
    parts += [
        "<h2>Queues</h2>",
        _bar_chart(
            f"{unit}-hours used (bars) against nominal (ticks)",
            queues,
            [(run["label"], [run["queues"][q]["usedHours"] for q in queues]) for run in runs],
            marks=[runs[0]["queues"][q]["nominalHours"] for q in queues],
        ),
        _bar_chart(
            "admission wait p95 (minutes)",
            queues,
            [(run["label"], [run["queues"][q]["waitSeconds"]["p95"] / 60 for q in queues]) for run in runs],
        ),
        _queue_table(runs, unit),
        "<h2>Preemptions</h2>",
    ]
    reasons = sorted({k for run in runs for k in run["preemptions"]["byReason"]})
    if reasons:
        parts.append(
            _bar_chart(
                "preemptions by reason",
                reasons,
                [(run["label"], [run["preemptions"]["byReason"].get(r, 0) for r in reasons]) for run in runs],
            )
        )
    parts.append(_thrash(runs, unit))
    parts.append("<h2>Invariants</h2>")
    parts.append(_invariants(runs))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _legend(labels: Sequence[str]) -> str:
    items = "".join(
        f'<span><span class="swatch" style="background:{COLORS[i % len(COLORS)]}"></span>{escape(label)}</span>'
        for i, label in enumerate(labels)
    )
    return f'<p class="legend">{items}</p>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary(runs: list[dict[str, Any]]) -> str:
    rows: list[list[str]] = []

    def row(name: str, values: Sequence[object]) -> None:
        rows.append([escape(name), *(escape(f"{v:,}" if isinstance(v, int) else str(v)) for v in values)])

    row("sessions run", [r["sessions"] for r in runs])
    row("idle cycles skipped", [r["idleCyclesSkipped"] for r in runs])
    row("admissions", [r["admissions"] for r in runs])
    row("evictions", [r["preemptions"]["evictions"] for r in runs])
    row("shrinks", [r["preemptions"]["shrinks"] for r in runs])
    for plugin in sorted({k for r in runs for k in r["vetoes"]}):
        row(f"vetoes by {plugin}", [r["vetoes"].get(plugin, 0) for r in runs])
    row("workloads preempted twice or more", [r["thrash"]["workloads"] for r in runs])
    row("work lost to evictions (h)", [f"{r['thrash']['workLostHours']:,.1f}" for r in runs])
    for reason in sorted({k for r in runs for k in r["pendingAtEnd"]}):
        row(f"pending at the end: {reason}", [r["pendingAtEnd"].get(reason, 0) for r in runs])
    return _table(["", *(r["label"] for r in runs)], rows)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f}"


def _queue_table(runs: list[dict[str, Any]], unit: str) -> str:
    header = ["queue", "config", "admitted", "wait p50 (min)", "p95", "max", f"used {unit}-h", "nominal",
              "borrowed", "lent", "evicted", "shrunk", "work lost", "pending"]
    rows = []
    for name in runs[0]["queues"]:
        for index, run in enumerate(runs):
            q = run["queues"][name]
            wait = q["waitSeconds"]
            rows.append([
                escape(name) if index == 0 else "", escape(run["label"]), f"{q['admissions']:,}",
                _minutes(wait["p50"]), _minutes(wait["p95"]), _minutes(wait["max"]),
                f"{q['usedHours']:,.1f}", f"{q['nominalHours']:,.1f}", f"{q['borrowedHours']:,.1f}",
                f"{q['lentHours']:,.1f}", str(q["evicted"]), str(q["shrunk"]), f"{q['workLostHours']:,.1f}",
                str(q["pendingAtEnd"]),
            ])
    return _table(header, rows)


def _thrash(runs: list[dict[str, Any]], unit: str) -> str:
    rows = [
        [escape(entry["workload"]), escape(run["label"]), str(entry["preemptions"]), f"{entry['workLostHours']:,.1f}"]
        for run in runs
        for entry in run["thrash"]["top"]
    ]
    if not rows:
        return "<p>No workload was preempted more than once.</p>"
    return "<p>Workloads preempted more than once:</p>" + _table(
        ["workload", "config", "preemptions", f"work lost ({unit}-h)"], rows
    )


def _invariants(runs: list[dict[str, Any]]) -> str:
    rows = []
    notes = []
    for key, name in (
        ("quotaExceeded", "quota exceeded"),
        ("minRuntimeViolations", "min-runtime violations"),
        ("preemptorStalls", "preemptors not admitted after their victims left"),
    ):
        cells = []
        for run in runs:
            found = run["invariants"][key]
            if key == "minRuntimeViolations" and not found["checked"]:
                cells.append("not checked")
                continue
            css = "bad" if found["count"] else "ok"
            cells.append(f'<span class="{css}">{found["count"]}</span>')
            for entry in found["listed"]:
                notes.append(escape(f"{run['label']}: {name}: " + ", ".join(f"{k}={v}" for k, v in entry.items())))
        rows.append([escape(name), *cells])
    listing = "".join(f"<li>{note}</li>" for note in notes)
    return _table(["", *(r["label"] for r in runs)], rows) + (f"<ul>{listing}</ul>" if listing else "")


# --- SVG -----------------------------------------------------------------------------------


def _svg(title: str, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}">'
        f'<text x="{LEFT}" y="16" style="font-weight:bold">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def _axes(ymax: float, fmt: str) -> list[str]:
    body = []
    plot_h = HEIGHT - TOP - BOTTOM
    for i in range(5):
        value = ymax * i / 4
        y = TOP + plot_h - plot_h * i / 4
        body.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        body.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt.format(value)}</text>')
    body.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" stroke="#999"/>')
    return body


def _nice(value: float) -> float:
    """The smallest "round" number at or above ``value`` whose quarters are round too."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(step * scale for step in (1, 1.2, 1.6, 2, 2.4, 3, 4, 5, 6, 8, 10) if step * scale >= value)


def _line_chart(title: str, starts: Sequence[str], series: Sequence[tuple[str, Sequence[float]]]) -> str:
    """Utilization (0..1, shown in percent) per time bucket, one polyline per run."""
    ymax = max(1.0, max((v for _, values in series for v in values), default=0.0))
    body = _axes(ymax * 100, "{:.0f}%")
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    count = max(1, len(starts))
    step = max(1, count // 8)
    for i in range(0, count, step):
        x = LEFT + plot_w * i / count
        label = starts[i][11:16] if len(starts[i]) >= 16 else starts[i]
        body.append(f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{escape(label)}</text>')
    for index, (name, values) in enumerate(series):
        points = []
        for i, value in enumerate(values):
            points.append(f"{LEFT + plot_w * (i + 0.5) / count:.1f},{TOP + plot_h - plot_h * value / ymax:.1f}")
        dash = ' stroke-dasharray="5 3"' if index else ""
        body.append(
            f'<polyline fill="none" stroke="{COLORS[index % len(COLORS)]}" stroke-width="2"{dash} '
            f'points="{" ".join(points)}"><title>{escape(name)}</title></polyline>'
        )
    return _svg(title, body)


def _bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    marks: Sequence[float] | None = None,
) -> str:
    """Grouped bars, one group per category and one bar per run; ``marks`` draws a tick
    per category (the nominal quota)."""
    values = [v for _, vs in series for v in vs] + list(marks or ())
    ymax = _nice(max(values, default=0.0))
    body = _axes(ymax, "{:,.0f}" if ymax >= 10 else "{:,.1f}")
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    group = plot_w / max(1, len(categories))
    bar = group * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        x0 = LEFT + group * c + group * 0.1
        for s, (name, vs) in enumerate(series):
            height = plot_h * vs[c] / ymax
            body.append(
                f'<rect x="{x0 + bar * s:.1f}" y="{TOP + plot_h - height:.1f}" width="{bar:.1f}" '
                f'height="{height:.1f}" fill="{COLORS[s % len(COLORS)]}"><title>{escape(name)} '
                f"{escape(category)}: {vs[c]:,.1f}</title></rect>"
            )
        if marks is not None:
            y = TOP + plot_h - plot_h * marks[c] / ymax
            body.append(
                f'<line x1="{x0 - 2:.1f}" y1="{y:.1f}" x2="{x0 + group * 0.8 + 2:.1f}" y2="{y:.1f}" '
                f'stroke="#111" stroke-width="2"><title>nominal {marks[c]:,.1f}</title></line>'
            )
        label = category if len(category) <= 14 else category[:13] + "…"
        cx = x0 + group * 0.4
        body.append(
            f'<text x="{cx:.1f}" y="{TOP + plot_h + 12}" text-anchor="end" '
            f'transform="rotate(-35 {cx:.1f} {TOP + plot_h + 12})">{escape(label)}</text>'
        )
    return _svg(title, body)
