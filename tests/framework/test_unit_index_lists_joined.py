"""The candidate index's lists are the queue's workloads' units joined in order; a unit's
room is its bound pods.

``unitindex._build`` and ``_build_like`` join each workload's units into the queue's list
at once (``itertools.chain``) and give every unit its workload's (priority, creation time)
bound, taking the one-unit-per-workload case in one step. These tests pin both against the
plain reading of the module notes, worked out here workload by workload: the admitted
workloads of the queue in (priority, creation time) order, ties in listing order, each
one's ``candidate_units`` of the class in turn (the very objects), and per unit its
workload's bound; for every scenario case with running workloads (elastic workloads give
several units, Deployments one per pod), in every class, before and after random takes.
A whole unit's room (``units._held``) is its workload's bound pods, the snapshot's tuple
itself when every pod in it is bound.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from preemptd.framework import candidate_units, queue_units
from preemptd.framework.model import Pod
from preemptd.framework.preemption import unitindex, units
from preemptd.framework.session import Candidate, Session

from tests.framework.test_unit_classes import CLASSES, RUNNING, _running, _session
from tests.framework.test_unit_index_patch import take_at_random


def _plain(session: Session, leaf: Any, cls: dict[str, Any]) -> tuple[list[Candidate], list[tuple[int, int]]]:
    listing = session.snapshot.admitted_by_queue.get(leaf.name, ())
    ordered = [w for _, _, w in sorted(((w.priority, w.created), i, w) for i, w in enumerate(listing))]
    units: list[Candidate] = []
    bounds: list[tuple[int, int]] = []
    for workload in ordered:
        for unit in candidate_units(session, workload, leaf, **cls):
            units.append(unit)
            bounds.append((workload.priority, workload.created))
    return units, bounds


def _check(session: Session, leaf: Any, cls: dict[str, Any], built: Any) -> None:
    units, bounds = _plain(session, leaf, cls)
    assert len(built.units) == len(units), (leaf.name, cls)
    assert all(a is b for a, b in zip(built.units, units, strict=True)), (leaf.name, cls)
    assert list(zip(built.priorities, built.created, strict=True)) == bounds, (leaf.name, cls)


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_a_queue_list_is_its_workloads_units_in_order_with_their_bounds(case: Path) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    leaves = sorted({leaf.name: leaf for _, leaf in _running(session)}.items())
    for _ in range(3):
        for name, leaf in leaves:
            for cls in rng.sample(CLASSES, len(CLASSES)):
                # The first class asked is built from the snapshot, the others made from it.
                _check(session, leaf, cls, queue_units(session, leaf, **cls))
            listing = session.snapshot.admitted_by_queue.get(name, ())
            cls = rng.choice(CLASSES)
            built = unitindex._build(
                session, leaf, cls["reason"], cls["group"], cls.get("only_within_nominal", False), False, listing
            )
            _check(session, leaf, cls, built)
        take_at_random(session, rng.choice(leaves)[1], rng)


def test_the_cases_hold_workloads_of_several_units() -> None:
    """The branch for lists with a workload of other than one unit is read by the test above."""
    several = 0
    for case in RUNNING:
        session = _session(case)
        for workload, leaf in _running(session):
            several += len(candidate_units(session, workload, leaf, **CLASSES[0])) != 1
    assert several > 0


@given(st.lists(st.sampled_from([None, "", "n1", "n2"]), max_size=8), st.booleans())
def test_a_units_room_is_its_bound_pods_and_the_snapshots_tuple_when_all_are(nodes: list[str | None], as_tuple: bool) -> None:
    """``units._held``: the pods with a node, in order; the very tuple when every one has one."""
    pods = [Pod("ns", f"p{i}", {"cpu": 1}, node_name=node) for i, node in enumerate(nodes)]
    given_pods = tuple(pods) if as_tuple else pods
    held = units._held(given_pods)
    assert type(held) is tuple
    assert list(held) == [p for p in pods if p.node_name]
    assert (held is given_pods) == (as_tuple and all(p.node_name for p in pods))
