"""The simulated cluster's snapshot is read-only, as ``Snapshot.build``'s is.

The simulator keeps its cluster in place between sessions and hands each session a
view of it, without copying. A plugin that writes through that view at
``session_close`` must fail (its failure, counted) and leave the next session's
view unchanged.

Queue q (no parent): cpu nominal 100. ns/a (cpu 60) is admitted; ns/b (cpu 60,
same priority, created later) is pending. SEMANTICS §1: usage 60, Available
100 - 60 = 40 < 60 → b does not fit; withinQueue Never → no victims → b stays
pending, nothing admitted — in both sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from preemptd.daemon.simulation.cluster import ClusterModel
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.testing import inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority


def _model() -> ClusterModel:
    inv = inventory([queue("q", cpu=100)], [])
    model = ClusterModel(inv)
    model.add(
        [workload("a", "q", 60, created=1, admitted=True), workload("b", "q", 60, created=2)], now=0
    )
    return model


def _registry(*extra: tuple[str, object, None]) -> Registry:
    return Registry([("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), *extra])


def _summary(decisions: Any) -> tuple[list[str], list[str]]:
    return [a.workload for a in decisions.admitted], [p.workload for p in decisions.pending]


def _clear_usage(session: Session) -> None:
    session.snapshot.usage["ns/a"].clear()


def _add_usage(session: Session) -> None:
    session.snapshot.usage["ns/b"] = {("default", "cpu"): 60}  # type: ignore[index]


def _drop_workload(session: Session) -> None:
    del session.snapshot.workloads["ns/a"]  # type: ignore[attr-defined]


def _extend_admitted(session: Session) -> None:
    session.snapshot.admitted.append(session.snapshot.workloads["ns/b"])  # type: ignore[attr-defined]


def _extend_pending_of_queue(session: Session) -> None:
    session.snapshot.pending_by_queue["q"].clear()  # type: ignore[attr-defined]


def _mark_inadmissible(session: Session) -> None:
    session.snapshot.inadmissible["ns/b"] = "meddled"  # type: ignore[index]


@pytest.mark.parametrize(
    "mutate",
    [_clear_usage, _add_usage, _drop_workload, _extend_admitted, _extend_pending_of_queue, _mark_inadmissible],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_write_through_the_simulated_snapshot_fails_and_the_next_session_is_unaffected(
    mutate: Callable[[Session], None],
) -> None:
    model = _model()
    plugin = SimpleNamespace(session_close=hookimpl(lambda session: mutate(session)))
    first = _registry(("meddler", plugin, None))
    assert _summary(run_session(model.snapshot(now=1_000), first)) == ([], ["ns/b"])
    assert first.failures["meddler"] == 1
    assert first.errors[0].message.startswith(("TypeError", "AttributeError"))
    assert _summary(run_session(model.snapshot(now=2_000), _registry())) == ([], ["ns/b"])
