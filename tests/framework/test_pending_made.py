"""A pending verdict the rounds make per workload (framework/decisions.py, ``pending``) is
the very object ``Pending(...)`` makes: equal, hashed and shown alike, frozen, with every
field of the dataclass set (a field added to ``Pending`` must be added there too).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.decisions import Pending, pending

TEXT = st.text(max_size=12)


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT, st.tuples() | st.lists(TEXT, max_size=3).map(tuple))
def test_a_pending_verdict_made_slot_by_slot_is_the_one_the_dataclass_makes(
    workload: str, reason: str, message: str, waiting_for: tuple[str, ...]
) -> None:
    made = pending(workload, reason, message, waiting_for)
    plain = Pending(workload, reason, message, waiting_for)
    assert type(made) is Pending
    assert made == plain and hash(made) == hash(plain) and repr(made) == repr(plain)
    assert made.to_dict() == plain.to_dict()
    assert pending(workload, reason) == Pending(workload, reason)  # the defaults too


def test_a_pending_verdict_made_slot_by_slot_sets_every_field_and_stays_frozen() -> None:
    assert [f.name for f in dataclasses.fields(Pending)] == ["workload", "reason", "message", "waiting_for"]
    made = pending("ns/w", "NoFit", "no flavor fits")
    assert dataclasses.asdict(made) == {
        "workload": "ns/w",
        "reason": "NoFit",
        "message": "no flavor fits",
        "waiting_for": (),
    }
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.reason = "WaitingForQuota"  # type: ignore[misc]
