"""Whole units and units of another class are made field by field, without the constructor.

``units._whole`` (the unit of almost every running workload) and ``units_like`` (a unit's
copy into another class) make a :class:`Candidate` with ``object.__new__`` and set its
fields one by one, at about half the constructor's cost. These tests pin that what they
make is, field for field over every field the dataclass declares, what the constructor
makes from the same values (the plain path: the constructor call the two functions made
before), so a field added to ``Candidate`` and not set by them fails here; that a copy's
sort key differs from its source's in the group only, and is the source's very tuple
when the group is the same; and that every unit a session hands out, in every class of
every scenario case and after random takes, has every field set.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    queue_units,
)
from preemptd.framework.model import Workload
from preemptd.framework.preemption import units
from preemptd.framework.session import Candidate, NodeRoom
from preemptd.framework.session.candidates import units_like

from tests.framework.test_unit_classes import CLASSES, RUNNING, _running, _session
from tests.framework.test_unit_index_patch import take_at_random

NAMES = [field.name for field in dataclasses.fields(Candidate)]
REASONS = [IN_QUEUE, IN_COHORT_RECLAIM, IN_COHORT_RECLAIM_WHILE_BORROWING]
GROUPS = [CLASS_HIERARCHICAL, CLASS_OTHER_QUEUE, CLASS_SAME_QUEUE]


def _values(unit: Candidate) -> dict[str, Any]:
    """Every declared field of ``unit`` (an unset one raises ``AttributeError``)."""
    return {name: getattr(unit, name) for name in NAMES}


def _plain_whole(
    workload: Workload, leaf: Any, usage: Any, reason: str, group: int, room: Any, name: Any,
    only_within_nominal: bool, evicted: bool, now: int,
) -> Candidate:
    """A whole workload's unit by the constructor, its sort key as SEMANTICS §4 orders a
    group: evicted first, lower priority, whole after single pods, most recently admitted
    (no admittedAt: now), then the tie-break (``Workload.tiebreak``: uid, namespace, name)."""
    unit = Candidate(
        workload, leaf, usage, reason, group, None, None, (), room, only_within_nominal, evicted, False,
        workload.priority, name,
    )
    admitted = workload.admitted_at if workload.admitted_at is not None else now
    unit.sort_key = (0 if evicted else 1, group, workload.priority, 1, -admitted, workload.tiebreak, 0)
    return unit


def _plain_like(unit: Candidate, reason: str, group: int, only_within_nominal: bool) -> Candidate:
    """A unit of another class by the constructor: the class fields and the sort key's group."""
    like = Candidate(
        unit.workload, unit.leaf, unit.usage, reason, group, unit.count, unit.pod_set, unit.pods, unit.room,
        only_within_nominal, unit.evicted, unit.single_pod, unit.priority, unit.unit,
    )
    like.sort_key = (unit.sort_key[0], group, *unit.sort_key[2:])
    like.pod_class = unit.pod_class
    return like


_workloads = st.builds(
    Workload,
    namespace=st.sampled_from(["a", "b"]),
    name=st.sampled_from(["w1", "w2"]),
    queue=st.just("q"),
    pod_sets=st.just(()),
    priority=st.integers(-3, 3),
    created=st.integers(0, 9),
    uid=st.sampled_from(["", "u1"]),
    admitted_at=st.none() | st.integers(0, 9),
    evicted=st.booleans(),
)
_rooms = st.lists(st.builds(NodeRoom, st.sampled_from(["n1", "n2"]), st.just({"cpu": 1})), max_size=3).map(tuple)


@settings(max_examples=200, deadline=None)
@given(
    workload=_workloads, reason=st.sampled_from(REASONS), group=st.sampled_from(GROUPS), room=_rooms,
    usage=st.dictionaries(st.sampled_from([("f", "cpu"), ("f", "gpu")]), st.integers(0, 4)),
    only_within_nominal=st.booleans(), evicted=st.booleans(), now=st.integers(0, 20),
)
def test_a_whole_unit_is_what_the_constructor_makes(
    workload: Workload, reason: str, group: int, room: Any, usage: Any, only_within_nominal: bool, evicted: bool, now: int,
) -> None:
    leaf = object()
    name = (workload.key,)
    args = (workload, leaf, usage, reason, group, room, name, only_within_nominal, evicted, now)
    made = units._whole(*args)  # type: ignore[arg-type]
    assert type(made) is Candidate
    assert _values(made) == _values(_plain_whole(*args))
    assert made.usage is usage and made.room is room and made.unit is name


_keys = st.tuples(
    st.integers(0, 1), st.sampled_from(GROUPS), st.integers(-3, 3), st.integers(0, 1), st.integers(-9, 0),
    st.tuples(st.sampled_from(["", "u"]), st.just("ns"), st.sampled_from(["w1", "w2"])), st.integers(0, 3),
)


@st.composite
def _units(draw: st.DrawFn) -> Candidate:
    """A unit of any shape: whole, single pod or the rest, of any class, pod class, order key."""
    workload = draw(_workloads)
    unit = Candidate(
        workload, object(), draw(st.dictionaries(st.sampled_from([("f", "cpu")]), st.integers(0, 4))),  # type: ignore[arg-type]
        draw(st.sampled_from(REASONS)), draw(st.sampled_from(GROUPS)), draw(st.none() | st.integers(1, 2)),
        draw(st.none() | st.just("ps")), (), draw(_rooms), draw(st.booleans()), draw(st.booleans()), draw(st.booleans()),
        draw(st.integers(-3, 3)), draw(st.sampled_from([(workload.key,), (workload.key, 0), (workload.key, "rest")])),
    )
    unit.sort_key = draw(_keys)
    unit.pod_class = draw(st.integers(0, 3))
    unit.order_key = draw(st.none() | st.just((1, 2)))
    return unit


@settings(max_examples=200, deadline=None)
@given(
    found=st.lists(_units(), max_size=4), reason=st.sampled_from(REASONS), group=st.sampled_from(GROUPS),
    only_within_nominal=st.booleans(),
)
def test_a_unit_of_another_class_is_what_the_constructor_makes(
    found: list[Candidate], reason: str, group: int, only_within_nominal: bool
) -> None:
    before = [_values(unit) for unit in found]
    made = units_like(found, reason, group, only_within_nominal)
    assert [_values(like) for like in made] == [_values(_plain_like(unit, reason, group, only_within_nominal)) for unit in found]
    assert [_values(unit) for unit in found] == before, "the units copied are left as they were"
    for unit, like in zip(found, made, strict=True):
        assert like is not unit and type(like) is Candidate
        assert (like.sort_key is unit.sort_key) == (unit.sort_key[1] == group), "the very key when the group is the same"
    assert units.units_like is units_like


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_every_unit_a_session_hands_out_has_every_field_set(case: Path) -> None:
    """Every class of every queue's list, before and after random takes (whole units made
    again, lists copied and patched): every field of every unit reads, and is what the
    constructor makes from the same values."""
    session = _session(case)
    rng = random.Random(case.stem)
    leaves = sorted({leaf.name for _, leaf in _running(session)})
    tree = session.snapshot.tree
    seen = 0
    for _ in range(4):
        for name in leaves:
            for cls in rng.sample(CLASSES, len(CLASSES)):
                for unit in queue_units(session, tree.leaves[name], **cls).units:
                    values = _values(unit)
                    again = type(unit)(**{key: value for key, value in values.items() if key not in ("sort_key", "pod_class", "order_key")})
                    again.sort_key, again.pod_class, again.order_key = values["sort_key"], values["pod_class"], values["order_key"]
                    assert _values(again) == values
                    assert len(unit.sort_key) == 7 and unit.sort_key[1] == cls["group"]
                    seen += 1
        take_at_random(session, tree.leaves[rng.choice(leaves)], rng)
    assert seen
