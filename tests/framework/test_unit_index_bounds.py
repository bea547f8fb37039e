"""The candidate index's ranges read from its two bound lists (``QueueUnits.priorities`` and
``created``, framework/preemption/unitindex.py).

A list holds, per unit, its workload's priority and creation time, the units ordered by
(priority, creation time). ``between(low, high)`` is the units of the workloads with
``low <= priority < high`` (``None``: no bound), ``newer(priority, created)`` those of
priority ``priority`` created strictly after ``created`` (SEMANTICS §4: ``withinQueue``'s
and ``reclaimWithinCohort``'s ranges). The expected units are picked here pair by pair from
those definitions, not by bisecting.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from preemptd.framework import QueueUnits

_BOUNDS = st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 6)), max_size=24).map(sorted)
_BOUND = st.none() | st.integers(-5, 5)


def _index(bounds: list[tuple[int, int]]) -> tuple[QueueUnits, list[Any]]:
    units: list[Any] = [object() for _ in bounds]
    return QueueUnits(units, [p for p, _ in bounds], [c for _, c in bounds]), units


@given(_BOUNDS, _BOUND, _BOUND)
def test_between_is_the_units_whose_priority_is_in_the_range(
    bounds: list[tuple[int, int]], low: int | None, high: int | None
) -> None:
    index, units = _index(bounds)
    expected = [
        unit
        for unit, (priority, _) in zip(units, bounds, strict=True)
        if (low is None or priority >= low) and (high is None or priority < high)
    ]
    assert index.between(low, high) == expected


@given(_BOUNDS, st.integers(-4, 4), st.integers(-1, 7))
def test_newer_is_the_units_of_the_priority_created_after(
    bounds: list[tuple[int, int]], priority: int, created: int
) -> None:
    index, units = _index(bounds)
    expected = [
        unit for unit, (p, c) in zip(units, bounds, strict=True) if p == priority and c > created
    ]
    assert index.newer(priority, created) == expected


def test_equal_creation_times_are_not_newer_and_other_priorities_never_are() -> None:
    # Priorities 0, 1, 1, 1, 2 created 9, 4, 5, 5, 0: after 5 at priority 1 none is newer,
    # after 4 the two created at 5, and priority 0's or 2's units never count for 1.
    index, units = _index([(0, 9), (1, 4), (1, 5), (1, 5), (2, 0)])
    assert index.newer(1, 5) == []
    assert index.newer(1, 4) == units[2:4]
    assert index.newer(1, -1) == units[1:4]
    assert index.newer(3, 0) == []
    assert index.between(1, 2) == units[1:4]
