"""A plugin that raises never takes the session down: it fails safe and is counted."""

from __future__ import annotations

from types import SimpleNamespace

from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, hookimpl
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority

IN_QUEUE = PreemptionPolicy(within_queue="LowerPriority")


def _snapshot() -> Snapshot:
    """One queue of 4 cpu, full with a low-priority workload; a high one wants 4 cpu."""
    queues = [cohort("c"), queue("q", "c", cpu=4, preemption=IN_QUEUE)]
    workloads = [
        workload("low", "q", 4, priority=0, admitted=True),
        workload("high", "q", 4, priority=10, created=5),
    ]
    return Snapshot.build(inventory(queues, workloads), now=1_000)


def _plugin(**hooks: object) -> SimpleNamespace:
    return SimpleNamespace(**{name: hookimpl(fn) for name, fn in hooks.items()})


def _boom(*args: object, **kwargs: object) -> object:
    raise RuntimeError("boom")


def _registry(extra: SimpleNamespace) -> Registry:
    return Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("broken", extra, None)]
    )


def test_raising_is_preemptible_means_not_preemptible() -> None:
    """A failing is_preemptible vetoes the candidate, is counted, and the session still ends."""

    def is_preemptible(session, action, preemptor, preemptee):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    registry = _registry(_plugin(is_preemptible=is_preemptible))
    decisions = run_session(_snapshot(), registry)
    assert [] == decisions.preempted
    assert ["PreemptionNoCandidates"] == [p.reason for p in decisions.pending if p.workload == "ns/high"]
    assert 1 == registry.failures["broken"]
    assert "RuntimeError: boom" == registry.errors[0].message


def test_raising_session_open_does_not_stop_the_session() -> None:
    """A plugin failing at session_open is recorded; the other plugins still decide."""

    def session_open(session):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    registry = _registry(_plugin(session_open=session_open))
    decisions = run_session(_snapshot(), registry)
    assert ["ns/low"] == [p.workload for p in decisions.preempted]
    assert 1 == registry.failures["broken"]


def test_raising_workload_order_key_falls_back_to_fifo() -> None:
    """An order key that raises per workload leaves that workload to FIFO order, not a crash."""

    def workload_order(session):  # type: ignore[no-untyped-def]
        return _boom

    registry = _registry(_plugin(workload_order=workload_order))
    decisions = run_session(_snapshot(), registry)
    assert ["ns/low"] == [p.workload for p in decisions.preempted]
    assert registry.failures["broken"] >= 1


def test_raising_scenario_filter_rejects_the_scenario() -> None:
    """A scenario filter that raises rejects every scenario: no victim is taken."""

    def get_accumulated_scenario_filters(session, action, preemptor):  # type: ignore[no-untyped-def]
        return [_boom]

    registry = _registry(_plugin(get_accumulated_scenario_filters=get_accumulated_scenario_filters))
    decisions = run_session(_snapshot(), registry)
    assert [] == decisions.preempted
    assert registry.failures["broken"] >= 1
