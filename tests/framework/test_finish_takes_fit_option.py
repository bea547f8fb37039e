"""``finish_assignment`` takes a fitting option as the assignment's answer.

A head of one podSet and one resource group whose scan chose a flavor that fits was
measured on the state as it is: each of its flavor-resources within the leaf's
Available, its pods placed on the nodes, and its level the highest borrowing level of
its flavor-resources. ``finish_assignment`` handed that option (``only``) answers with
its mode and level without measuring the quota again; without it (several options, or
none handed over) the quota is measured, and both give the same assignment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from preemptd.framework import evaluate_flavor, finish_assignment
from preemptd.framework.model import Workload
from preemptd.framework.quota import Accounting
from preemptd.framework.session import (
    FIT,
    Assignment,
    FlavorOption,
    PodSetAssignment,
    Registry,
    Session,
)
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload


def _session() -> Session:
    """Queues a and b (4 cores each) in one cohort; a runs 3 cores: one more core fits a's
    nominal (level 0), two more borrow b's (level 1, the cohort's height)."""
    objects = inventory(
        [cohort("root"), queue("a", "root", cpu=4), queue("b", "root", cpu=4)],
        [
            workload("running", "a", 3, created=1, admitted=True),
            workload("one", "a", 1, created=10),
            workload("two", "a", 2, created=11),
        ],
    )
    session = Session(snapshot(objects, 100), Registry([]))
    session.open()
    return session


def _prepare(session: Session, name: str) -> tuple[Assignment, FlavorOption]:
    head = next(w for w in session.snapshot.pending if w.name == name)
    leaf = session.snapshot.tree.leaves[head.queue]
    group = leaf.spec.resource_groups[0]
    (spec,) = head.pod_sets
    option = evaluate_flavor(session, head, leaf, spec, spec.count, group, group.flavors[0].flavor, {})
    assignment = Assignment(head, leaf)
    flavors = {resource: option.flavor for resource in spec.requests}
    assignment.pod_sets.append(PodSetAssignment(spec.name, spec.count, flavors, dict(option.usage), spec))
    assignment.mode = option.mode
    return assignment, option


def _answer(a: Assignment) -> tuple[object, ...]:
    return (a.mode, a.level, a.usage, a.needed, a.node_short, a.message, a.victims, a.search, a.tried)


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    real: Callable[..., Any] = getattr(Accounting, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(Accounting, name, counting)
    return calls


@pytest.mark.parametrize(("name", "level"), [("one", 0), ("two", 1)])
def test_a_fitting_option_is_the_assignments_answer_without_measuring_the_quota_again(
    monkeypatch: pytest.MonkeyPatch, name: str, level: int
) -> None:
    session = _session()
    measured, _ = _prepare(session, name)
    expected = _answer(finish_assignment(session, measured))  # no option handed over: measured
    assert expected[:2] == (FIT, level)
    assignment, option = _prepare(session, name)
    assert option.mode == FIT
    available = _counting(monkeypatch, "available")
    levels = _counting(monkeypatch, "borrowing_level")
    fits = _counting(monkeypatch, "fit_level")
    assert _answer(finish_assignment(session, assignment, option)) == expected
    assert available == [] and levels == [] and fits == []


def test_an_option_of_another_usage_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The option of one pod handed over for two pods: the whole request borrows."""
    session = _session()
    assignment, option = _prepare(session, "one")
    head: Workload = assignment.workload
    (spec,) = head.pod_sets
    flavor = option.flavor
    assignment.pod_sets[0] = PodSetAssignment(spec.name, 2, {"cpu": flavor}, {(flavor, "cpu"): 2000}, spec)
    fits = _counting(monkeypatch, "fit_level")  # Available and the level, one walk
    done = finish_assignment(session, assignment, option)
    assert (done.mode, done.level) == (FIT, 1)
    assert fits
