"""report.html read structurally (issue 20, point 8): integer ticks on count axes, category
labels never cut, charts that scale with the page, titled time axes with dates, and the
charts a policy owner asks for, each drawn from the report's own figures."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from preemptd.daemon.simulation import html
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.report import build_report
from preemptd.daemon.simulation.scenario import load_scenario
from preemptd.framework.quantity import format_duration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
LONG = "research-and-development-of-the-vision-models-group"
UNBROKEN = "researchanddevelopmentofthevisionmodelsgroupqueue"  # no separator to wrap at


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """research-reclaim compared with protect-30m.toml (min-runtime vetoes, preemptions)."""
    scenario = load_scenario(str(EXAMPLES / "research-reclaim.yaml"))
    runs = []
    for path in (None, str(EXAMPLES / "protect-30m.toml")):
        chosen = setup(scenario, path)
        outcome = simulate(
            scenario,
            chosen.plugins.registry(),
            actions=tuple(chosen.config.scheduler.actions),
            cycle_interval=chosen.cycle_interval,
        )
        runs.append((chosen.label, chosen.source, chosen.cycle_interval, outcome))
    return build_report(scenario, runs)


def renamed(report: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    runs = []
    for run in report["runs"]:
        queues = {(new if k == old else k): v for k, v in run["queues"].items()}
        shares = {(new if k == old else k): v for k, v in run["fairness"]["shares"].items()}
        runs.append({**run, "queues": queues, "fairness": {**run["fairness"], "shares": shares}})
    return {**report, "runs": runs}


def svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, re.S)


def chart(page: str, title: str) -> str:
    found = [svg for svg in svgs(page) if f'aria-label="{title}"' in svg]
    assert len(found) == 1, f"no single chart titled {title!r}"
    return found[0]


def per_bucket(report: dict[str, Any]) -> str:
    return f"preemptions per {format_duration(round(report['runs'][0]['bucketSeconds'] * 1000))}"


def tick_labels(svg: str) -> list[str]:
    return re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', svg)


def category_labels(svg: str) -> list[tuple[str, str]]:
    """(tooltip, text shown) of each category label; wrapped lines joined."""
    found = []
    for inner in re.findall(r'<text class="category"[^>]*>(.*?)</text>', svg, re.S):
        title = re.search(r"<title>(.*?)</title>", inner)
        assert title is not None
        shown = re.sub(r"<title>.*?</title>", "", inner)
        shown = "".join(re.findall(r"<tspan[^>]*>(.*?)</tspan>", shown)) or shown
        found.append((unescape(title.group(1)), unescape(shown)))
    return found


def values_of(svg: str, name: str) -> list[float]:
    """The values a polyline titled ``name`` draws, read back through the y axis."""
    ticks = [float(t.replace(",", "")) for t in tick_labels(svg)]
    points = re.search(rf'points="([^"]*)"><title>{re.escape(name)}</title></polyline>', svg)
    assert points is not None, f"no curve {name}"
    bottom = html.HEIGHT - html.BOTTOM
    plot_h = bottom - html.TOP
    return [(bottom - float(p.split(",")[1])) / plot_h * ticks[-1] for p in points.group(1).split()]


@pytest.mark.parametrize(
    ("top", "expected"),
    [(0.0, [0, 1]), (1.5, [0, 1, 2]), (3.2, [0, 1, 2, 3, 4]), (7, [0, 2, 4, 6, 8]), (11, [0, 5, 10, 15]),
     (96, [0, 20, 40, 60, 80, 100]), (1234, [0, 250, 500, 750, 1000, 1250])],
)
def test_count_axes_tick_only_whole_numbers(top: float, expected: list[int]) -> None:
    assert html.ticks(top, count=True) == expected


@pytest.mark.parametrize(
    ("top", "expected"),
    [(0.3, ["0.0", "0.1", "0.2", "0.3"]), (2.2, ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5"]),
     (123.4, ["0", "25", "50", "75", "100", "125"]), (1234, ["0", "250", "500", "750", "1,000", "1,250"])],
)
def test_other_axes_tick_round_steps_with_the_decimals_they_need(top: float, expected: list[str]) -> None:
    values = html.ticks(top, count=False)
    assert [html._tick_text(v, values[1] - values[0]) for v in values] == expected


def test_every_count_chart_of_the_page_has_integer_ticks(report: dict[str, Any]) -> None:
    page = html.render(report)
    counted = [
        "pending workloads per queue (default)", "pending workloads per queue (protect-30m.toml)",
        per_bucket(report), "preemptions by reason", "admission waits: workloads admitted after waiting",
    ]
    for title in counted:
        labels = tick_labels(chart(page, title))
        assert len(labels) >= 2
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", label) for label in labels), (title, labels)


@pytest.mark.parametrize("name", [LONG, UNBROKEN])
def test_category_labels_are_never_cut_and_carry_their_full_name(report: dict[str, Any], name: str) -> None:
    page = html.render(renamed(report, "research", name))
    assert "…" not in page
    for title in ("GPU-hours used (bars) against nominal (ticks)", "admission wait p95 (minutes)"):
        labels = category_labels(chart(page, title))
        assert (name, name) in labels
        assert all(tooltip == shown for tooltip, shown in labels)


def test_labels_too_long_to_wrap_stand_vertically_in_a_taller_chart() -> None:
    names = [f"queue{i:02d}{UNBROKEN[:30]}" for i in range(12)]  # 37 characters, 12 slots
    svg = html._bar_chart("waits", names, [("default", [float(i) for i in range(12)])], ytitle="minutes")
    labels = re.findall(r'<text class="category"[^>]*>', svg)
    assert len(labels) == 12 and all('transform="rotate(-90' in label for label in labels)
    assert category_labels(svg) == [(name, name) for name in names]
    height = float(re.search(r'viewBox="0 0 \d+ ([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    assert height >= html.HEIGHT - html.BOTTOM + len(names[0]) * html.CHAR


def test_labels_wrap_at_their_separators_when_their_slot_is_wide_enough() -> None:
    names = [LONG, "b", "c", "d"]  # four slots of 26 characters
    svg = html._bar_chart("waits", names, [("default", [1.0, 2.0, 3.0, 4.0])], ytitle="minutes")
    labels = re.findall(r'<text class="category"[^>]*>', svg)
    assert not any("rotate" in label for label in labels)
    assert category_labels(svg) == [(name, name) for name in names]
    first = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg.split('class="category"')[1])
    assert first == ["research-and-development-", "of-the-vision-models-group"]  # 25 and 26


def test_charts_scale_with_the_page_and_tables_scroll_in_their_own_box(report: dict[str, Any]) -> None:
    page = html.render(report)
    for svg in svgs(page):
        opening = svg[: svg.index(">")]
        assert re.search(r'viewBox="0 0 760 [\d.]+"', opening)
        assert 'width="100%"' in opening and "height=" not in opening
    assert page.count("<table>") == page.count('<div class="wide"><table>') > 0
    assert ".wide { overflow-x: auto" in page
    assert 'name="viewport"' in page
    # Nothing is fetched: no script, no external stylesheet, image or font.
    assert "<script" not in page and "<link" not in page and "url(" not in page
    assert not re.search(r'(src|href)="https?:', page)


def test_time_axes_have_a_title_with_the_zone_and_date_labels(report: dict[str, Any]) -> None:
    page = html.render(report)
    start = report["runs"][0]["bucketStarts"][0]
    for title in (per_bucket(report), "GPU used per queue (default)"):
        svg = chart(page, title)
        assert f"time (UTC, from {start[:10]})" in svg
        labels = re.findall(r'<text class="time"[^>]*>([^<]*)</text>', svg)
        assert labels[0] == f"{start[:10]} {start[11:16]}"
        assert all(re.fullmatch(r"(\d{4}-\d\d-\d\d )?\d\d:\d\d", label) for label in labels)


def test_each_new_chart_draws_its_run_figures(report: dict[str, Any]) -> None:
    page = html.render(report)
    buckets = len(report["runs"][0]["bucketStarts"])
    for run in report["runs"]:
        label = run["label"]
        for name, q in run["queues"].items():
            for title, key in ((f"pending workloads per queue ({label})", "pendingOverTime"),
                               (f"GPU used per queue ({label})", "usedOverTime")):
                drawn = values_of(chart(page, title), name)
                assert len(drawn) == buckets
                assert drawn == pytest.approx(q[key], abs=0.05 * max(1.0, max(q[key])))
        for name, share in run["fairness"]["shares"].items():
            drawn = values_of(chart(page, f"weighted share per queue ({label})"), name)
            assert drawn == pytest.approx(share["overTime"], abs=0.05 * max(1.0, max(share["overTime"])))
        drawn = values_of(chart(page, per_bucket(report)), label)
        assert drawn == pytest.approx(run["preemptionsOverTime"], abs=0.05)
        assert sum(run["preemptionsOverTime"]) == run["preemptions"]["total"] > 0
        waits = chart(page, "admission waits: workloads admitted after waiting")
        counts = run["waitHistogram"]["counts"]
        assert sum(counts) == run["admissions"]
        for category, n in zip(html._wait_labels(run["waitHistogram"]["boundsSeconds"]), counts, strict=True):
            assert f"<title>{label} {category}: {n:,}</title>" in unescape(waits)


def test_the_page_says_what_the_min_runtime_veto_count_means(report: dict[str, Any]) -> None:
    assert any(run["vetoes"].get("min-runtime") for run in report["runs"])
    page = html.render(report)
    note = re.search(r'<p class="note" id="min-runtime-vetoes">(.*?)</p>', page, re.S)
    assert note is not None
    assert "not how many workloads it protected" in note.group(1)
