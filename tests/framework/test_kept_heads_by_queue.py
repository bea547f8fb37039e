"""The rounds judge a queue's heads by the heads kept in its leaf while its tree's search
state stands (``actions/allocate.py``, ``KEPT_BY_QUEUE``), not by ``heads.judge`` asked
afresh for each head.

A queue holds the kept heads it read and the state it read them in; a tree's state that
equals the last round's is that very tuple, so the queue tells by identity that its heads
still stand, and reads them again when the state moved or its own nomination may have
kept one. The judgements are counted once a round. Held to the plain path two ways: each
head judged so is judged alike by the kept heads and state read afresh at that moment,
and whole sessions on generated clusters decide, explain, store flavor scans and count
exactly as the same sessions with every head asked of ``heads.judge``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.actions import allocate
from preemptd.framework.model import Workload
from preemptd.framework.preemption import heads
from preemptd.framework.preemption.failures import search_state
from preemptd.framework.quota import QuotaNode
from preemptd.framework.run import run_session
from preemptd.framework.session import Session
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated

Outcome = tuple[Any, ...]


def _session(monkeypatch: pytest.MonkeyPatch, by_queue: bool, objects: list[dict[str, Any]]) -> Outcome:
    monkeypatch.setattr(allocate, "KEPT_BY_QUEUE", by_queue)
    return session_outcome(objects)


def session_outcome(objects: list[dict[str, Any]]) -> Outcome:
    """Everything a session over ``objects`` (the default configuration) tells: its decisions,
    the order it left the pending in, its explanations and flavor scans, its counters (not
    its timings) and the plugins' vetoes."""
    actions, registry = default_session()
    plugins = registry()
    counters: dict[str, Any] = {}
    decisions = run_session(snapshot(objects, NOW_MS), plugins, counters=counters, actions=actions)
    counted = {name: value for name, value in counters.items() if not isinstance(value, float)}
    return (
        json.loads(decisions.to_json()),
        [entry.workload for entry in decisions.pending],  # the order the rounds left them in
        list(decisions.explanations.items()),
        list(decisions.flavor_scans.items()),
        counted,
        dict(plugins.vetoes),
    )


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Check every judgement the rounds make by a queue's kept heads against the kept
    heads and state read afresh; the count of judgements checked."""
    real = allocate.judged_by
    checked = [0]

    def judged_by(session: Session, leaf: QuotaNode, kept: list[heads.Kept], state: heads.State, w: Workload) -> Any:
        found = real(session, leaf, kept, state, w)
        assert state == search_state(session, leaf)
        assert kept is heads.kept_heads(session, leaf, state)
        assert found == real(session, leaf, list(kept), search_state(session, leaf), w)
        checked[0] += 1
        return found

    monkeypatch.setattr(allocate, "judged_by", judged_by)
    return checked


CLUSTERS = [
    pytest.param(lambda: generate_saturated(1, queues=20, workloads=1500), id="saturated"),
    pytest.param(lambda: generate_saturated(2, queues=30, workloads=2000, pending_share=0.5), id="half-pending"),
    pytest.param(lambda: generate_saturated(3, queues=10, workloads=1200, pending_share=0.9), id="mostly-pending"),
]


@pytest.mark.parametrize("objects", CLUSTERS)
def test_each_head_judged_by_its_queues_kept_heads_is_judged_as_by_the_heads_read_afresh(
    monkeypatch: pytest.MonkeyPatch, objects: Any
) -> None:
    checked = _checked(monkeypatch)
    outcome = _session(monkeypatch, True, objects())
    assert checked[0] >= outcome[4]["heads-judged"] > 0


@pytest.mark.parametrize("objects", CLUSTERS)
def test_sessions_judging_by_each_queues_kept_heads_decide_explain_and_count_as_judging_each_head_afresh(
    monkeypatch: pytest.MonkeyPatch, objects: Any
) -> None:
    cluster = objects()
    by_queue = _session(monkeypatch, True, cluster)
    assert by_queue[4]["heads-judged"] > 0
    assert by_queue == _session(monkeypatch, False, cluster)


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    queues=st.sampled_from([10, 20]),
    per_queue=st.integers(5, 40),
    share=st.sampled_from([0.3, 0.6, 0.9]),
)
def test_generated_sessions_decide_alike_judging_by_each_queues_kept_heads_or_afresh(
    seed: int, queues: int, per_queue: int, share: float
) -> None:
    cluster = generate_saturated(seed, queues=queues, workloads=queues * per_queue, pending_share=share)
    with pytest.MonkeyPatch.context() as monkeypatch:
        checked = _checked(monkeypatch)
        by_queue = _session(monkeypatch, True, cluster)
        assert checked[0] >= by_queue[4]["heads-judged"]
        assert by_queue == _session(monkeypatch, False, cluster)


def test_a_queue_judging_by_heads_of_a_state_that_moved_on_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above fails when a queue judges by the heads its leaf kept in a state
    that has moved on (the heads read whatever state they were kept in)."""

    def whatever_state(session: Session, leaf: QuotaNode, state: heads.State) -> list[heads.Kept] | None:
        kept = session.state.get(heads._HEADS, {}).get(leaf.index)
        return kept[1] if kept is not None else None

    monkeypatch.setattr(allocate, "kept_heads", whatever_state)
    _checked(monkeypatch)
    with pytest.raises(AssertionError):
        _session(monkeypatch, True, generate_saturated(1, queues=20, workloads=1500))
