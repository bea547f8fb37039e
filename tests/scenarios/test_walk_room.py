"""Victim walks on nodes decide as the plain path (framework/preemption/room.py, walk.py).

On the memo path a walk keeps its victims' node room beside the placements and follows
how many of the preemptor's pods it holds; on the plain path (``memo=False``) every
victim's room is given to the placements and every fit test scans them. Small generated
clusters whose pending heads want GPUs of a full flavor (one pod set, or a launcher and
its workers) must get the same decisions and the same vetoes either way.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption import room as room_module
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_spec
from tests.scenarios.test_search_memo import _both, assert_same_decisions


@settings(max_examples=12, deadline=None)
@given(
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=8, max_value=40),
    st.sampled_from((1, 2, 5)),
)
def test_walks_on_nodes_decide_as_the_plain_path(seed: int, nodes: int, leaves: int) -> None:
    spec = replace(CONTENDED, nodes=nodes, workloads=nodes * 5, queues=10, leaves_per_cohort=leaves)
    objects = generate_spec(spec, f"walk-room/{seed}")
    actions, registry_of = default_session()
    (fast, fast_vetoes, _), (plain, plain_vetoes, _) = _both(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert_same_decisions(fast, plain, snapshot(objects, NOW_MS).workloads)
    assert fast_vetoes == plain_vetoes


def test_the_generated_walks_test_one_pod_set_and_a_launcher_with_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clusters above reach both kinds of test: the count alone (one pod set) and the
    launcher placed before the workers are counted."""
    seen: dict[str, int] = {"exact": 0, "launcher": 0}
    fit_all = room_module.FreedRoom._fit_all

    def counting_fits(self: Any) -> bool:
        if self.may_fit():
            seen["exact" if self.exact else "launcher"] += 1
        return self.may_fit() and (self.exact or fit_all(self))

    monkeypatch.setattr(room_module.FreedRoom, "fits", counting_fits)
    objects = generate_spec(replace(CONTENDED, nodes=30, workloads=150, queues=10, leaves_per_cohort=5), "walk-room/1")
    actions, registry_of = default_session()
    _both(lambda: snapshot(objects, NOW_MS), registry_of, actions)
    assert seen["exact"] and seen["launcher"]
