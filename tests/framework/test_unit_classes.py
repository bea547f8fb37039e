"""A workload's units of one class are made from its units of another (``units.units_like``).

The classes of victim units (``InQueue``, hierarchical reclaim, reclaim within nominal,
reclaim while borrowing) differ only in their reason, group and "only within nominal"
flag, and in the group part of the sort key; everything else (usage, pods, node room,
evicted, priority, unit name, pod class) is read from the same workload in the same take
state. The session builds a workload's first class from the snapshot and copies the
others; the candidate index builds a queue's list of a second class from its list of the
first. These tests pin that both give, field by field, what a build from the snapshot
gives, for every running workload of every scenario case (elastic workloads, shrinking
ones, Deployments with pod classes, evicted ones) and after random takes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    candidate_units,
    queue_units,
)
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import unitindex, units
from preemptd.framework.quantity import parse_timestamp
from preemptd.framework.session import Candidate, Session
from preemptd.framework.testing import open_session
from preemptd.plugins import cohort_reclaim, gpu_victims, priority

from tests.framework.test_unit_index_patch import take_at_random

CASES = sorted((Path(__file__).parents[1] / "scenarios" / "cases").glob("*.yaml"))
RUNNING = [c for c in CASES if "admission:" in c.read_text()]  # the cases with running workloads
PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("gpu-victims", gpu_victims, None)]
CLASSES: list[dict[str, Any]] = [
    {"reason": IN_QUEUE, "group": CLASS_SAME_QUEUE},
    {"reason": IN_COHORT_RECLAIM, "group": CLASS_HIERARCHICAL},
    {"reason": IN_COHORT_RECLAIM, "group": CLASS_OTHER_QUEUE, "only_within_nominal": True},
    {"reason": IN_COHORT_RECLAIM_WHILE_BORROWING, "group": CLASS_OTHER_QUEUE},
]
FIELDS = (
    "workload", "leaf", "usage", "reason", "group", "count", "pod_set", "pods", "room", "only_within_nominal",
    "evicted", "single_pod", "priority", "unit", "sort_key", "pod_class", "order_key",
)


def _fields(found: list[Candidate]) -> list[tuple[Any, ...]]:
    return [(type(unit), *(getattr(unit, name) for name in FIELDS)) for unit in found]


def _fresh(session: Session, workload: Any, leaf: Any, cls: dict[str, Any]) -> list[Candidate]:
    """The units of ``cls`` built from the snapshot, bypassing every cache."""
    return units._units(
        session, workload, leaf, cls["reason"], cls["group"], cls.get("only_within_nominal", False)
    )


def _session(case: Path) -> Session:
    """The case's session; the objects a case holds to be refused are left out."""
    spec = yaml.safe_load(case.read_text())
    parsed = parse_objects((case.name, obj) for obj in spec["objects"])
    return open_session(parsed, PLUGINS, parse_timestamp(spec["now"]))


def _running(session: Session) -> list[tuple[Any, Any]]:
    tree = session.snapshot.tree
    return [
        (workload, tree.leaves[name])
        for name, listed in sorted(session.snapshot.admitted_by_queue.items())
        if name in tree.leaves
        for workload in listed
    ]


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_every_class_of_a_workloads_units_equals_a_build_from_the_snapshot(case: Path) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    for workload, leaf in _running(session):
        order = list(CLASSES)
        rng.shuffle(order)  # whichever class comes first is built, the others copied
        for cls in order:
            found = candidate_units(session, workload, leaf, **cls)
            assert _fields(found) == _fields(_fresh(session, workload, leaf, cls)), (workload.key, cls)
            again = candidate_units(session, workload, leaf, **cls)
            assert again is not found and list(map(id, again)) == list(map(id, found)), "kept for the session"


def test_units_like_sets_the_class_fields_and_the_group_of_the_sort_key_only() -> None:
    """An elastic workload (3 pods, minCount 1): two single pods and the rest, all copied."""
    case = next(c for c in CASES if c.stem == "elastic_growth_back_to_count_when_quota_is_free")
    session = _session(case)
    workload, leaf = next((w, q) for w, q in _running(session) if w.pod_sets[0].min_count is not None)
    first = _fresh(session, workload, leaf, CLASSES[0])
    assert len(first) > 1, "single pods and the rest"
    made = units.units_like(first, IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False)
    for one, like in zip(first, made, strict=True):
        assert like is not one
        assert (like.reason, like.group, like.only_within_nominal) == (
            IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False,
        )
        assert like.sort_key == (one.sort_key[0], CLASS_OTHER_QUEUE, *one.sort_key[2:])
        assert (like.usage, like.room, like.unit, like.evicted) == (one.usage, one.room, one.unit, one.evicted)


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_a_queue_list_made_from_another_class_equals_its_build_after_takes(case: Path) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    names = sorted({leaf.name for _, leaf in _running(session)})
    leaves = session.snapshot.tree.leaves
    for _ in range(4):
        for name in names:
            for cls in rng.sample(CLASSES, len(CLASSES)):
                found = queue_units(session, leaves[name], **cls)
                fresh = unitindex._build(
                    session, leaves[name], cls["reason"], cls["group"], cls.get("only_within_nominal", False),
                    False, session.snapshot.admitted_by_queue.get(name, ()),
                )
                assert _fields(found.units) == _fields(fresh.units), (name, cls)
                assert (found.priorities, found.created) == (fresh.priorities, fresh.created)
        # Take one unit of some queue, as a preemptor would; every list is then patched
        # or built again from the classes left.
        take_at_random(session, leaves[rng.choice(names)], rng)
