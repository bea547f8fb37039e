"""The quota bound's sums of runs whose source keeps no units yet, kept per session
(framework/preemption/bound.py ``RunSums``).

A run of such a source is handed to the bound with its candidates; its usage of each
flavor-resource is summed once per session and read again by every later search of the
same run. In the benchmark's deep cluster of 5,000 workloads in 100 queues (searches
take victims, so the queues' lists are rebuilt and the same sources come back with
other ranges), every sum the bound reads must be the sum of the run's own candidates'
usage, counted one by one; the session must read kept sums again, and keep sums of one
source for different ranges or flavor-resources, or the test would prove nothing.
"""

from __future__ import annotations

import pytest
from preemptd.framework.model import FR
from preemptd.framework.preemption import bound
from preemptd.framework.run import run_session
from preemptd.framework.session import Runs
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape


def test_kept_run_sums_are_the_usage_of_each_runs_own_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {"summed": 0, "read again": 0}
    real = bound._run_sums
    places: dict[object, set[tuple[int, int, FR]]] = {}

    def checked(runs: Runs, parts: list[bound._Run], fr: FR, sums: bound.RunSums | None = None) -> list[int]:
        assert sums is not None  # the search hands the bound its session's sums
        before = _run_places(sums)
        found = real(runs, parts, fr, sums)
        for (_, source, first, last, items), value in zip(parts, found, strict=True):
            if items is not None:
                assert value == sum(unit.usage.get(fr, 0) for unit in items)
                seen["summed"] += 1
                places.setdefault(source, set()).add((first, last, fr))
        seen["read again"] += sum(items is not None for *_, items in parts) - (_run_places(sums) - before)
        return found

    monkeypatch.setattr(bound, "_run_sums", checked)
    actions, registry = default_session()
    run_session(snapshot(generate_shape("grow-deep-5000", 1), NOW_MS), registry(), actions=actions)
    assert seen["summed"] >= 10 and seen["read again"] >= 1, seen
    assert any(len(kept) > 1 for kept in places.values())


def _run_places(sums: bound.RunSums) -> int:
    """How many runs ``sums`` keeps a sum of (not the marks of lists read once, whose
    range is (-1, -1))."""
    return sum(1 for key in sums if key[3] >= 0)
