"""The quota bound's sums of runs (framework/preemption/bound.py, ``_run_sums``): a run of
a source that keeps few units for the request and no running totals for it, read for the
first time, is summed unit by unit instead of making the totals of the source's whole list.

The plain path makes the totals for every run (``SUMMED = -1``). These tests hold the
short path to it: every sum the bound asks for in sessions on generated clusters (queues
of a few units and of a few hundred, so that both paths run), any range of a source's
kept units, and the decisions of whole sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption import bound
from preemptd.framework.run import run_session
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated

# Per cluster: the paths its sessions take (short queue lists: a first read summed unit by
# unit, a second making totals; longer ones: totals made).
CLUSTERS: dict[str, tuple[Callable[[], list[dict[str, Any]]], set[str]]] = {
    "saturated-30x3000": (lambda: generate_saturated(1, queues=30, workloads=3000), {"short", "made"}),
    "saturated-10x1200-seed-5": (
        lambda: generate_saturated(5, queues=10, workloads=1200, pending_share=0.8), {"short", "made"}
    ),
    "saturated-4x900-seed-2": (
        lambda: generate_saturated(2, queues=4, workloads=900, pending_share=0.5), {"made"}
    ),
}

_Asked = tuple[Any, Any, Any, Any]  # runs, parts, flavor-resource, session sums


def _asked_in_session(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, paths: dict[str, int] | None = None
) -> list[tuple[_Asked, list[int]]]:
    """Every ``_run_sums`` call of a session, with what it answered; ``paths`` counts the
    runs summed unit by unit (``short``) and those read from totals made for them
    (``made``)."""
    asked: list[tuple[_Asked, list[int]]] = []
    summed = bound._run_sums

    def recorded(runs: Any, parts: Any, fr: Any, sums: Any = None) -> list[int]:
        if paths is not None:
            for _, source, _, _, items in parts:
                if items is None and (runs.needed, runs.with_room, fr) not in source.sums:
                    kept = source.using(runs.needed, runs.with_room)[0]
                    first_read = sums is not None and (source, runs.needed, runs.with_room, -1, -1, fr) not in sums
                    path = "short" if first_read and len(kept) <= bound.SUMMED else "made"
                    paths[path] = paths.get(path, 0) + 1
        found = summed(runs, parts, fr, sums)
        asked.append(((runs, list(parts), fr, sums), found))
        return found

    monkeypatch.setattr(bound, "_run_sums", recorded)
    actions, registry_of = default_session()
    run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
    return asked


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_short_runs_sum_as_the_totals_do(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sum of a session's bound is the one the sources' totals give; the short path
    ran and, in the deep queues, so did the totals."""
    make, taken = CLUSTERS[name]
    paths: dict[str, int] = {}
    asked = _asked_in_session(make(), monkeypatch, paths)
    for (runs, parts, fr, sums), found in asked:
        assert found == _plain(runs, parts, fr, sums)
    assert set(paths) == taken


def _plain(runs: Any, parts: Any, fr: Any, sums: Any) -> list[int]:
    """The sums from each source's running totals (or the run's own candidates)."""
    out = []
    for _, source, first, last, items in parts:
        if items is not None:
            out.append(sum(c.usage.get(fr, 0) for c in items))
        else:
            totals = source.totals(runs.needed, runs.with_room, fr)
            out.append(totals[last] - totals[first])
    return out


@pytest.fixture(scope="module")
def sources() -> list[tuple[Any, Any, bool, Any]]:
    """Sources a session's bound read, with the request they were read for."""
    found: list[tuple[Any, Any, bool, Any]] = []
    with pytest.MonkeyPatch.context() as monkeypatch:
        for (runs, parts, fr, _), _ in _asked_in_session(CLUSTERS["saturated-4x900-seed-2"][0](), monkeypatch):
            for _, source, _, _, items in parts:
                if items is None:
                    found.append((source, runs.needed, runs.with_room, fr))
    return found[:: max(1, len(found) // 40)]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_range_of_a_source_sums_as_its_totals_do(sources: list[tuple[Any, Any, bool, Any]], data: Any) -> None:
    """Summed unit by unit, any range of a source's kept units holds what the difference
    of its running totals says."""
    source, needed, with_room, fr = data.draw(st.sampled_from(sources))
    kept = source.using(needed, with_room)[0]
    first = data.draw(st.integers(0, len(kept)))
    last = data.draw(st.integers(first, len(kept)))
    totals = source.totals(needed, with_room, fr)
    assert sum([c.usage.get(fr, 0) for c in kept[first:last]]) == totals[last] - totals[first]


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_sessions_decide_as_with_totals_for_every_run(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decisions, explanations, flavor scans and counters of a session with short runs
    summed are those of the session making totals for every run."""
    objects = CLUSTERS[name][0]()
    actions, registry_of = default_session()

    def outputs() -> tuple[Any, ...]:
        counters: dict[str, int | str] = {}
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions, counters=counters)
        return decisions.to_json(), decisions.explanations, decisions.flavor_scans, counters

    fast = outputs()
    monkeypatch.setattr(bound, "SUMMED", -1)
    assert outputs() == fast
