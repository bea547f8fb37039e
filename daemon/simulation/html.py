"""``report.html``: the simulation report as one self-contained page.

Plots are inline SVG drawn here (no plotting library, no script, no stylesheet or
font from the network): flavor utilization, pending workloads, quota used and
weighted shares per queue over time, preemptions over time, the distribution of
admission waits, used against nominal and wait p95 per queue, and preemptions by
reason; each run of a ``--compare`` is one series (or one chart, where a chart's
series are the queues). The page is a pure function of the report dict, so it is
as reproducible as ``report.json``.

Layout rules, so the page reads at any width down to a phone's:
- every SVG has a ``viewBox`` and ``width="100%"``: it scales with the page and
  never makes it scroll sideways; a table wider than the page scrolls in its own box;
- an axis of counts (workloads, preemptions) has integer ticks only;
- a category label is never cut: it wraps at its separators when its slot is wide
  enough, else every label of the chart is set vertically and the chart grows
  taller to hold the longest; each carries its full name as a tooltip (``<title>``);
- a time axis has a title naming the time zone and the first date, and labels
  ``HH:MM`` with the date added where it changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from itertools import pairwise
from typing import Any

from preemptd.framework.quantity import format_duration

from .texts import ratio_text, stopped_lines

__all__ = ["ratio_text", "render", "stopped_lines"]

COLORS = ("#2563eb", "#dc2626", "#059669", "#9333ea")
"""One per run of a comparison."""
QUEUE_COLORS = (
    "#2563eb", "#dc2626", "#059669", "#d97706", "#9333ea",
    "#0891b2", "#be185d", "#4d7c0f", "#78350f", "#475569",
)
"""One per queue where a chart's series are queues; past ten, the dash pattern changes."""
WIDTH = 760
HEIGHT = 260
LEFT = 64
RIGHT = 16
TOP = 28
BOTTOM = 56  # time labels and the axis title
CHAR = 6.4  # the width of one character of the 11 px labels, a little generous
LINE = 13  # the height of one line of labels
LABEL_LINES = 3  # a category label wraps onto at most this many lines

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 980px; padding: 0 1em; color: #111;
  overflow-wrap: anywhere; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
.wide { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: 3px 10px; text-align: right; }
th { border-bottom: 1px solid #999; } td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f6f6f6; } .bad { color: #b91c1c; font-weight: bold; } .ok { color: #047857; }
svg { display: block; margin: .5em 0 1em; width: 100%; max-width: 760px; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.legend span { display: inline-block; margin-right: 1.5em; } .swatch { display: inline-block; width: 12px;
height: 12px; margin-right: .4em; vertical-align: -1px; } .note { color: #444; max-width: 46em; }
"""

MIN_RUNTIME_NOTE = (
    "Vetoes by min-runtime count the times the min-runtime plugin answered no when a victim "
    "search asked whether a running workload could be preempted, because it had not yet run "
    "for its minimum runtime. Every search that considers a protected workload counts again, so "
    "one workload kept safe for many sessions counts many times: the figure says how often the "
    "protection decided something, not how many workloads it protected."
)


def render(report: dict[str, Any]) -> str:
    scenario = report["scenario"]
    runs = report["runs"]
    unit = scenario["unit"]
    labels = [run["label"] for run in runs]
    starts = runs[0]["bucketStarts"]
    bucket = format_duration(round(runs[0]["bucketSeconds"] * 1000))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>preemptd simulation: {escape(scenario['source'])}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Simulation of {escape(scenario['source'])}</h1>",
        f"<p>{escape(scenario['duration'])} from {escape(scenario['start'])}; "
        f"{scenario['initialWorkloads']} workloads at the start, {scenario['arrivals']} arriving; "
        f"termination grace {escape(scenario['terminationGrace'])}; seed {scenario['seed']}. "
        f"Figures are {escape(unit)}-hours of <code>{escape(scenario['resource'])}</code>; "
        f"curves over time are means over {escape(bucket)} buckets.</p>",
        *(f'<p class="bad">{escape(line)}.</p>' for line in stopped_lines(report)),
        _legend(labels),
        "<h2>Summary</h2>",
        _summary(runs),
    ]
    if any("min-runtime" in run["vetoes"] for run in runs):
        parts.append(f'<p class="note" id="min-runtime-vetoes">{escape(MIN_RUNTIME_NOTE)}</p>')
    parts.append("<h2>Flavor utilization over time</h2>")
    for flavor in runs[0]["flavors"]:
        series = [(run["label"], [v * 100 for v in run["flavors"][flavor]["utilization"]]) for run in runs]
        capacity = runs[0]["flavors"][flavor]["capacity"]
        parts.append(
            _time_chart(f"{flavor} ({capacity:,.0f} {unit})", starts, _run_series(series), ytitle="% of capacity",
                        floor=100.0)
        )
    queues = list(runs[0]["queues"])
    parts.append("<h2>Queues over time</h2>")
    for run in runs:
        suffix = f" ({run['label']})" if len(runs) > 1 else ""
        parts.append(_time_chart(
            f"pending workloads per queue{suffix}", starts,
            _queue_series([(q, run["queues"][q]["pendingOverTime"]) for q in queues]),
            ytitle="workloads", count=True,
        ))
        parts.append(_queue_legend(queues))
    for run in runs:
        suffix = f" ({run['label']})" if len(runs) > 1 else ""
        parts.append(_time_chart(
            f"{unit} used per queue{suffix}", starts,
            _queue_series([(q, run["queues"][q]["usedOverTime"]) for q in queues]),
            ytitle=unit, marks=[(q, run["queues"][q]["nominal"]) for q in queues],
        ))
        parts.append(_queue_legend(queues, "; a dashed line of the queue's colour is its nominal quota"))
    parts += [
        "<h2>Queues</h2>",
        _bar_chart(
            f"{unit}-hours used (bars) against nominal (ticks)",
            queues,
            [(run["label"], [run["queues"][q]["usedHours"] for q in queues]) for run in runs],
            marks=[runs[0]["queues"][q]["nominalHours"] for q in queues],
            ytitle=f"{unit}-hours",
        ),
        _bar_chart(
            "admission wait p95 (minutes)",
            queues,
            [(run["label"], [run["queues"][q]["waitSeconds"]["p95"] / 60 for q in queues]) for run in runs],
            ytitle="minutes",
        ),
        _waits(runs),
        _queue_table(runs, unit),
    ]
    parts += _fairness(runs, starts)
    parts.append("<h2>Preemptions</h2>")
    parts.append(_time_chart(
        f"preemptions per {bucket}", starts,
        _run_series([(run["label"], run["preemptionsOverTime"]) for run in runs]),
        ytitle="preemptions", count=True,
    ))
    reasons = sorted({k for run in runs for k in run["preemptions"]["byReason"]})
    if reasons:
        parts.append(
            _bar_chart(
                "preemptions by reason",
                reasons,
                [(run["label"], [run["preemptions"]["byReason"].get(r, 0) for r in reasons]) for run in runs],
                count=True, ytitle="preemptions",
            )
        )
    parts.append(_thrash(runs, unit))
    parts.append("<h2>Invariants</h2>")
    parts.append(_invariants(runs))
    parts.append("</body></html>\n")
    return "\n".join(parts)


Series = tuple[str, Sequence[float], str, str]
"""A curve: its name, values, colour and dash pattern ("" for solid)."""


def _run_series(series: Sequence[tuple[str, Sequence[float]]]) -> list[Series]:
    return [(name, values, COLORS[i % len(COLORS)], "5 3" if i else "") for i, (name, values) in enumerate(series)]


def _queue_series(series: Sequence[tuple[str, Sequence[float]]]) -> list[Series]:
    dashes = ("", "6 3", "2 2")
    return [
        (name, values, QUEUE_COLORS[i % len(QUEUE_COLORS)], dashes[(i // len(QUEUE_COLORS)) % len(dashes)])
        for i, (name, values) in enumerate(series)
    ]


def _legend(labels: Sequence[str]) -> str:
    items = "".join(
        f'<span><span class="swatch" style="background:{COLORS[i % len(COLORS)]}"></span>{escape(label)}</span>'
        for i, label in enumerate(labels)
    )
    return f'<p class="legend">{items}</p>'


def _queue_legend(queues: Sequence[str], note: str = "") -> str:
    items = "".join(
        f'<span><span class="swatch" style="background:{color}"></span>{escape(name)}</span>'
        for name, _, color, _ in _queue_series([(q, ()) for q in queues])
    )
    return f'<p class="legend">{items}{escape(note)}</p>'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _summary(runs: list[dict[str, Any]]) -> str:
    rows: list[list[str]] = []

    def row(name: str, values: Sequence[object]) -> None:
        rows.append([escape(name), *(escape(f"{v:,}" if isinstance(v, int) else str(v)) for v in values)])

    row("sessions run", [r["sessions"] for r in runs])
    row("idle cycles skipped", [r["idleCyclesSkipped"] for r in runs])
    row("admissions", [r["admissions"] for r in runs])
    row("evictions", [r["preemptions"]["evictions"] for r in runs])
    row("shrinks", [r["preemptions"]["shrinks"] for r in runs])
    row("growths in place", [r["growths"]["total"] for r in runs])
    row("pods added by growths", [r["growths"]["pods"] for r in runs])
    for plugin in sorted({k for r in runs for k in r["vetoes"]}):
        row(f"vetoes by {plugin}", [r["vetoes"].get(plugin, 0) for r in runs])
    row("workloads preempted twice or more", [r["thrash"]["workloads"] for r in runs])
    row("work lost to evictions (h)", [f"{r['thrash']['workLostHours']:,.1f}" for r in runs])
    for reason in sorted({k for r in runs for k in r["pendingAtEnd"]}):
        row(f"pending at the end: {reason}", [r["pendingAtEnd"].get(reason, 0) for r in runs])
    if any(r["fairness"]["source"] for r in runs):
        row("max/min mean share", [ratio_text(r["fairness"]["maxMinShareRatio"]) for r in runs])
    return _table(["", *(r["label"] for r in runs)], rows)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:,.1f}"


def _queue_table(runs: list[dict[str, Any]], unit: str) -> str:
    header = ["queue", "config", "admitted", "wait p50 (min)", "p95", "max", f"used {unit}-h", "nominal",
              "borrowed", "lent", "evicted", "shrunk", "grown", "work lost", "pending"]
    rows = []
    for name in runs[0]["queues"]:
        for index, run in enumerate(runs):
            q = run["queues"][name]
            wait = q["waitSeconds"]
            rows.append([
                escape(name) if index == 0 else "", escape(run["label"]), f"{q['admissions']:,}",
                _minutes(wait["p50"]), _minutes(wait["p95"]), _minutes(wait["max"]),
                f"{q['usedHours']:,.1f}", f"{q['nominalHours']:,.1f}", f"{q['borrowedHours']:,.1f}",
                f"{q['lentHours']:,.1f}", str(q["evicted"]), str(q["shrunk"]), str(q["grown"]),
                f"{q['workLostHours']:,.1f}",
                str(q["pendingAtEnd"]),
            ])
    return _table(header, rows)


def _wait_labels(bounds: Sequence[int]) -> list[str]:
    names = [format_duration(b * 1000) for b in bounds]
    return [f"≤ {names[0]}", *(f"{a}–{b}" for a, b in pairwise(names)), f"> {names[-1]}"]


def _waits(runs: list[dict[str, Any]]) -> str:
    histogram = runs[0]["waitHistogram"]
    return _bar_chart(
        "admission waits: workloads admitted after waiting",
        _wait_labels(histogram["boundsSeconds"]),
        [(run["label"], run["waitHistogram"]["counts"]) for run in runs],
        count=True, ytitle="workloads",
    )


def _fairness(runs: list[dict[str, Any]], starts: Sequence[str]) -> list[str]:
    parts = ['<h2 id="fairness">Fairness</h2>']
    if not any(run["fairness"]["source"] for run in runs):
        parts.append("<p>No queue has a parent: there is nothing to share, every share is 0.</p>")
        return parts
    sources = {
        "decisions": "the fair-sharing plugin's shares",
        "computed": "computed as the fair-sharing plugin would (the plugin is off)",
    }
    parts.append(
        '<p class="note">A queue\'s weighted share is its dominant resource share over what its parent '
        "can lend, divided by its weight (SEMANTICS §7.1), after each session. A queue is "
        "<b>below its fair share</b> while it has a pending workload and the queue, or one of its "
        "parents under the root, has a sibling with a higher share. The max/min ratio compares the "
        "mean shares of the queues that had a pending workload or borrowed at some time "
        f"(∞: one of them never borrowed). Shares: {'; '.join(escape(run['label']) + ': ' + sources.get(run['fairness']['source'], 'none') for run in runs)}.</p>"
    )
    header = ["queue", "config", "mean share", "time below fair share"]
    rows = []
    nodes = list(runs[0]["fairness"]["shares"])
    leaves = set(runs[0]["queues"])
    for name in nodes:
        for index, run in enumerate(runs):
            share = run["fairness"]["shares"].get(name, {"mean": 0.0})
            below = format_duration(round(run["queues"][name]["belowFairShareSeconds"] * 1000)) if name in leaves else "–"
            rows.append([escape(name) if index == 0 else "", escape(run["label"]), f"{share['mean']:,.1f}", below])
    parts.append(_table(header, rows))
    ratios = [
        [escape(run["label"]), escape(ratio_text(summary)), escape(f"{summary['highest']} / {summary['lowest']}")]
        for run in runs
        if "lowest" in (summary := run["fairness"]["maxMinShareRatio"])
    ]
    if ratios:
        parts.append(_table(["config", "max/min mean share", "highest / lowest"], ratios))
    for run in runs:
        suffix = f" ({run['label']})" if len(runs) > 1 else ""
        shares = run["fairness"]["shares"]
        parts.append(_time_chart(
            f"weighted share per queue{suffix}", starts,
            _queue_series([(q, shares[q]["overTime"]) for q in nodes if q in shares]),
            ytitle="weighted share",
        ))
        parts.append(_queue_legend([q for q in nodes if q in shares]))
    return parts


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


def _svg(title: str, height: float, body: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {WIDTH} {height:.0f}" '
        f'preserveAspectRatio="xMinYMin meet" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
        f'<text x="{LEFT}" y="16" style="font-weight:bold">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def ticks(top: float, *, count: bool) -> list[float]:
    """Axis ticks from 0 to at least ``top``, at most six of them, on a round step;
    integers only on a count axis (never a tick between two whole workloads)."""
    if count:
        top = max(1.0, math.ceil(top))
    elif top <= 0:
        top = 1.0
    scale = 10.0 ** math.floor(math.log10(top / 4)) if top / 4 > 0 else 1.0
    steps = [m * scale for m in (1, 2, 2.5, 5, 10)]
    if count:
        steps = [s for s in steps if s >= 1 and s == int(s)] or [1.0]
    step = next((s for s in steps if s * 5 >= top), steps[-1] * 2)
    n = math.ceil(top / step - 1e-9)
    return [step * i for i in range(n + 1)]


def _tick_text(value: float, step: float) -> str:
    """A tick with as many decimals as its step needs (0.25 two, 0.5 one, 5 none)."""
    decimals = 0
    while decimals < 6 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-9:
        decimals += 1
    return f"{value:,.{decimals}f}"


def _axes(values: list[float], plot_h: float, ytitle: str) -> list[str]:
    body = []
    top = values[-1]
    step = values[1] - values[0] if len(values) > 1 else 1.0
    for value in values:
        y = TOP + plot_h - plot_h * value / top
        body.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#e5e5e5"/>')
        body.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick_text(value, step)}</text>'
        )
    body.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" y2="{TOP + plot_h}" stroke="#999"/>')
    middle = TOP + plot_h / 2
    body.append(
        f'<text class="axis-title" x="14" y="{middle:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle:.1f})">{escape(ytitle)}</text>'
    )
    return body


def _time_label(start: str, previous: str | None) -> str:
    """``HH:MM``, with the date before it at the first label and where the date changes."""
    if len(start) < 16:
        return start
    day, clock = start[:10], start[11:16]
    return clock if previous is not None and previous[:10] == day else f"{day} {clock}"


def _time_chart(
    title: str,
    starts: Sequence[str],
    series: Sequence[Series],
    *,
    ytitle: str,
    count: bool = False,
    floor: float = 0.0,
    marks: Sequence[tuple[str, float]] = (),
) -> str:
    """One polyline per series over the buckets of the time axis; ``marks`` draws a
    dashed level per series (a queue's nominal quota)."""
    highest = max([floor, *(v for _, values, _, _ in series for v in values), *(m for _, m in marks)])
    values = ticks(highest, count=count)
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    top = values[-1]
    body = _axes(values, plot_h, ytitle)
    n = max(1, len(starts))
    step = max(1, -(-n // 8))
    previous: str | None = None
    for i in range(0, n, step):
        x = LEFT + plot_w * i / n
        label = _time_label(starts[i], previous)
        previous = starts[i]
        body.append(
            f'<text class="time" x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="start">{escape(label)}</text>'
        )
        body.append(f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" y2="{TOP + plot_h + 4}" stroke="#999"/>')
    zone = "UTC" if starts and starts[0].endswith("Z") else "scenario time"
    first = f", from {starts[0][:10]}" if starts and len(starts[0]) >= 10 else ""
    body.append(
        f'<text class="axis-title" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 8}" text-anchor="middle">'
        f"time ({zone}{escape(first)})</text>"
    )
    colors = {name: (color, dash) for name, _, color, dash in series}
    for name, level in marks:
        color, _ = colors.get(name, ("#111", ""))
        y = TOP + plot_h - plot_h * level / top
        body.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="{color}" '
            f'stroke-width="1" stroke-dasharray="2 4"><title>{escape(name)} nominal {level:,.1f}</title></line>'
        )
    for name, values_, color, dash in series:
        points = " ".join(
            f"{LEFT + plot_w * (i + 0.5) / n:.1f},{TOP + plot_h - plot_h * v / top:.1f}" for i, v in enumerate(values_)
        )
        pattern = f' stroke-dasharray="{dash}"' if dash else ""
        body.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="2"{pattern} '
            f'points="{points}"><title>{escape(name)}</title></polyline>'
        )
    return _svg(title, HEIGHT, body)


_BREAKS = "-_./: "


def _wrap(label: str, room: int) -> list[str] | None:
    """``label`` in lines of at most ``room`` characters, broken after a separator;
    None when it does not fit in :data:`LABEL_LINES` lines that way."""
    if len(label) <= room:
        return [label]
    pieces: list[str] = []
    piece = ""
    for char in label:
        piece += char
        if char in _BREAKS:
            pieces.append(piece)
            piece = ""
    if piece:
        pieces.append(piece)
    lines: list[str] = []
    for piece in pieces:
        if len(piece) > room:
            return None
        if lines and len(lines[-1]) + len(piece) <= room:
            lines[-1] += piece
        else:
            lines.append(piece)
    return lines if len(lines) <= LABEL_LINES else None


def _bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    marks: Sequence[float] | None = None,
    count: bool = False,
    ytitle: str = "",
) -> str:
    """Grouped bars, one group per category and one bar per run; ``marks`` draws a tick
    per category (the nominal quota). Category labels wrap, or stand vertically."""
    values = ticks(max([v for _, vs in series for v in vs] + list(marks or ()), default=0.0), count=count)
    top = values[-1]
    plot_w = WIDTH - LEFT - RIGHT
    group = plot_w / max(1, len(categories))
    room = max(1, int(group / CHAR))
    wrapped = [_wrap(c, room) for c in categories]
    vertical = any(w is None for w in wrapped)
    if vertical:
        label_h = max((len(c) for c in categories), default=0) * CHAR + 12
    else:
        label_h = max((len(w or ()) for w in wrapped), default=1) * LINE + 10
    height = TOP + (HEIGHT - TOP - BOTTOM) + label_h + 8
    plot_h = HEIGHT - TOP - BOTTOM
    body = _axes(values, plot_h, ytitle)
    bar = group * 0.8 / max(1, len(series))
    for c, category in enumerate(categories):
        x0 = LEFT + group * c + group * 0.1
        for s, (name, vs) in enumerate(series):
            h = plot_h * vs[c] / top
            shown = f"{vs[c]:,.0f}" if count else f"{vs[c]:,.1f}"
            body.append(
                f'<rect x="{x0 + bar * s:.1f}" y="{TOP + plot_h - h:.1f}" width="{bar:.1f}" '
                f'height="{h:.1f}" fill="{COLORS[s % len(COLORS)]}"><title>{escape(name)} '
                f"{escape(category)}: {shown}</title></rect>"
            )
        if marks is not None:
            y = TOP + plot_h - plot_h * marks[c] / top
            body.append(
                f'<line x1="{x0 - 2:.1f}" y1="{y:.1f}" x2="{x0 + group * 0.8 + 2:.1f}" y2="{y:.1f}" '
                f'stroke="#111" stroke-width="2"><title>nominal {marks[c]:,.1f}</title></line>'
            )
        cx = x0 + group * 0.4
        base = TOP + plot_h + 12
        tip = f"<title>{escape(category)}</title>"
        lines = wrapped[c]
        if vertical or lines is None:
            body.append(
                f'<text class="category" x="{cx + 4:.1f}" y="{base - 6}" text-anchor="end" '
                f'transform="rotate(-90 {cx + 4:.1f} {base - 6})">{tip}{escape(category)}</text>'
            )
        else:
            spans = "".join(
                f'<tspan x="{cx:.1f}" dy="{0 if i == 0 else LINE}">{escape(line)}</tspan>' for i, line in enumerate(lines)
            )
            body.append(f'<text class="category" x="{cx:.1f}" y="{base}" text-anchor="middle">{tip}{spans}</text>')
    return _svg(title, height, body)
