"""``finish_assignment`` takes over what the option whose search it reuses measured.

A head of one podSet and one resource group consists of the flavor option its scan chose;
when that option's victim search is asked again in the same state (the memo checks its
epochs), what the option needed and whether its nodes lacked room are the assignment's
too, so neither the quota nor the nodes are measured a second time. On the plain path
(no memo) the search is run again and everything is measured; both give the same
assignment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from preemptd.framework import evaluate_flavor, finish_assignment
from preemptd.framework.model import Workload
from preemptd.framework.quota import Accounting
from preemptd.framework.session import Assignment, FlavorOption, PodSetAssignment, Session
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated


def _head(session: Session) -> Workload:
    """A pending head whose flavor needs a victim search (its queue is at its nominal)."""
    for items in sorted(session.snapshot.pending_by_queue.values(), key=lambda ws: ws[0].queue):
        for w in items:
            if not w.is_deployment and len(w.pod_sets) == 1:
                return w
    raise AssertionError("no pending head")


def _prepare(session: Session, workload: Workload) -> tuple[Assignment, FlavorOption]:
    """The option a scan of the first flavor gives, and the assignment made of it."""
    leaf = session.snapshot.tree.leaves[workload.queue]
    group = leaf.spec.resource_groups[0]
    (spec,) = workload.pod_sets
    option = evaluate_flavor(session, workload, leaf, spec, spec.count, group, group.flavors[0].flavor, {})
    assert option.search is not None  # the scan searched: this is the case under test
    assignment = Assignment(workload, leaf)
    flavors = {resource: option.flavor for resource in spec.requests}
    assignment.pod_sets.append(PodSetAssignment(spec.name, spec.count, flavors, dict(option.usage), spec))
    assignment.mode = option.mode
    return assignment, option


def _answer(a: Assignment) -> tuple[object, ...]:
    return (a.mode, a.level, a.usage, a.needed, a.node_short, a.message, [v.name for v in a.victims], a.tried)


def _counting(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Any] = getattr(cls, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cls, name, counting)
    return calls


def test_a_reused_search_takes_the_options_needs_without_measuring_again(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    actions, registry = default_session()
    fast = Session(snap, registry(), actions=actions)
    plain = Session(snap, registry(), actions=actions, memo=False)
    fast.open()
    plain.open()
    head = _head(fast)
    assignment, option = _prepare(plain, head)
    expected = _answer(finish_assignment(plain, assignment, option, again=True))
    assignment, option = _prepare(fast, head)
    available = _counting(monkeypatch, Accounting, "available")
    fits = _counting(monkeypatch, Session, "pods_fit")
    got = finish_assignment(fast, assignment, option, again=True)
    assert _answer(got) == expected
    assert fast.counters.memo_hits == 1  # the option's search, asked again
    assert (len(available), len(fits)) == (0, 0)


def test_a_search_asked_after_the_state_moved_is_measured_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    actions, registry = default_session()
    session = Session(snap, registry(), actions=actions)
    session.open()
    head = _head(session)
    assignment, option = _prepare(session, head)
    # A commit to the head's tree between the scan and finish_assignment: the memo no
    # longer answers, the quota is measured and the search run again.
    leaf = snap.tree.leaves[head.queue]
    session.statement.remove_usage(leaf, {fr: 1 for fr in option.usage})
    session.statement.commit()
    available = _counting(monkeypatch, Accounting, "available")
    searches = session.counters.searches
    finish_assignment(session, assignment, option, again=True)
    assert len(available) >= len(option.usage)
    assert session.counters.searches == searches + 1
