"""The line of a search that found victims names them ``namespace/name (reason)``,
comma-separated, in the order taken (``preemptd explain``); each unit's words are made
once per session (framework/preemption/search.py ``_named``).

In the benchmark's deep cluster of 5,000 workloads in 100 queues, every search that
finds victims must end with that line, word for word, for its own victims. The session
must name units again (the words are read back), and name one workload's units with
two reasons (its queue's own preemptors take it ``InQueue``, the cohort's reclaim it):
words kept per workload rather than per unit would show there.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.preemption import search, victims
from preemptd.framework.run import run_session
from preemptd.framework.session import SearchResult
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape


def test_every_victims_line_names_its_own_victims_with_their_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    named: dict[str, set[str]] = {}
    seen = {"found": 0, "units": 0}
    units: set[int] = set()
    real = search.find_minimal

    def checked(*args: Any, **kwargs: Any) -> SearchResult:
        result = real(*args, **kwargs)
        if result.victims and result.lines[-1].startswith("minimal set of victims: "):
            words = [f"{v.workload.key} ({v.reason})" for v in result.victims]
            assert result.lines[-1] == "minimal set of victims: " + ", ".join(words)
            seen["found"] += 1
            seen["units"] += len(result.victims)
            units.update(map(id, result.victims))
            for victim in result.victims:
                named.setdefault(victim.workload.key, set()).add(victim.reason)
        return result

    monkeypatch.setattr(victims, "find_minimal", checked)
    actions, registry = default_session()
    run_session(snapshot(generate_shape("grow-deep-5000", 1), NOW_MS), registry(), actions=actions)
    assert seen["found"] >= 10
    assert seen["units"] > len(units)  # units named again
    assert any(len(reasons) > 1 for reasons in named.values())
