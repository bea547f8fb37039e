"""The decision records the rounds make per workload without the constructor's calls
(``objects.records``: ``new_pending`` per verdict, ``new_preempted`` per victim workload)
are the very objects ``Pending(...)`` and ``Preempted(...)`` make: equal, hashed and shown
alike, of the same type, frozen, with every field of the dataclass set (a field added to
either must be given to its builder too).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.decisions import Pending, Preempted
from preemptd.framework.objects.records import new_pending, new_preempted

TEXT = st.text(max_size=12)
NAMES = st.tuples() | st.lists(TEXT, max_size=3).map(tuple)


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT, NAMES)
def test_a_pending_verdict_made_slot_by_slot_is_the_one_the_dataclass_makes(
    workload: str, reason: str, message: str, waiting_for: tuple[str, ...]
) -> None:
    made = new_pending(workload, reason, message, waiting_for)
    plain = Pending(workload, reason, message, waiting_for)
    assert type(made) is Pending
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert made.to_dict() == plain.to_dict()
    assert new_pending(workload, reason, "", ()) == Pending(workload, reason)  # the defaults


def test_a_pending_verdict_made_slot_by_slot_sets_every_field_and_stays_frozen() -> None:
    assert [f.name for f in dataclasses.fields(Pending)] == ["workload", "reason", "message", "waiting_for"]
    made = new_pending("ns/w", "NoFit", "no flavor fits", ())
    assert dataclasses.asdict(made) == {
        "workload": "ns/w",
        "reason": "NoFit",
        "message": "no flavor fits",
        "waiting_for": (),
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.reason = "WaitingForQuota"  # type: ignore[misc]


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT, st.none() | st.integers(min_value=0, max_value=10**6), NAMES, st.none() | TEXT)
def test_a_preempted_entry_made_slot_by_slot_is_the_one_the_dataclass_makes(
    workload: str, preemptor: str, reason: str, count: int | None, pods: tuple[str, ...], pod_set: str | None
) -> None:
    made = new_preempted(workload, preemptor, reason, count, pods, pod_set)
    plain = Preempted(workload, preemptor, reason, count, pods, pod_set)
    assert type(made) is Preempted
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert made.to_dict() == plain.to_dict()
    # What the rounds do to an entry whose victim is taken from again.
    assert dataclasses.replace(made, count=3, pods=("a",)) == dataclasses.replace(plain, count=3, pods=("a",))


def test_a_preempted_entry_made_slot_by_slot_sets_every_field_and_stays_frozen() -> None:
    names = ["workload", "preemptor", "reason", "count", "pods", "pod_set"]
    assert [f.name for f in dataclasses.fields(Preempted)] == names
    made = new_preempted("ml/old", "ml/new", "InQueue", None, (), None)
    assert dataclasses.asdict(made) == {
        "workload": "ml/old",
        "preemptor": "ml/new",
        "reason": "InQueue",
        "count": None,
        "pods": (),
        "pod_set": None,
    }
    assert made == Preempted("ml/old", "ml/new", "InQueue")  # the defaults
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 2  # type: ignore[misc]
