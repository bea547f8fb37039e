"""A patched unit list's running usage totals are spliced from the list before.

After a take, the candidate index patches each list of the queue (``unitindex._patch``): the
units of the workloads taken from are made again, every other unit is the same object. The
quota bound reads each run's usage from the list's running totals (``QueueUnits.totals``);
for a patched list they are made from the totals of the list before, reading only the new
units' usage (``retaken.spliced_totals``). Pinned here: the totals after any sequence of
takes equal the running sum of each kept unit's usage, read unit by unit, for every class,
needed set and ``with_room`` (scenario cases and a generated cluster with deep queues), and a
patched list reads the usage of no unit it shares with the list before.
"""

from __future__ import annotations

import random
from itertools import accumulate
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework import queue_units
from preemptd.framework.model import FR
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import unitindex
from preemptd.framework.session import Session
from preemptd.framework.testing import open_session

from benchmarks.generate import NOW_MS, generate_shape
from tests.framework.test_unit_classes import CLASSES, PLUGINS, RUNNING, _running, _session
from tests.framework.test_unit_index_patch import take_at_random


def _read_unit_by_unit(kept: list[Any], fr: FR) -> list[int]:
    return list(accumulate([unit.usage.get(fr, 0) for unit in kept], initial=0))


def _queues(session: Session) -> list[Any]:
    return sorted({leaf for _, leaf in _running(session)}, key=lambda leaf: leaf.name)


def _keys(session: Session, rng: random.Random) -> list[tuple[frozenset[FR], bool, FR]]:
    """Random needed sets (of the flavor-resources the running workloads use), each with
    ``with_room`` both ways, and a flavor-resource of the set or outside it."""
    used = sorted({fr for one, _ in _running(session) for fr in session.snapshot.usage.get(one.key, {})})
    if not used:
        return []
    keys = []
    for _ in range(3):
        needed = frozenset(rng.sample(used, rng.randint(1, len(used))))
        for with_room in (False, True):
            keys.append((needed, with_room, rng.choice(used)))
    return keys


def _takes_keep_totals(session: Session, rng: random.Random, rounds: int) -> int:
    """Take at random ``rounds`` times; before each take read the totals of random keys on
    every list (so that the patched lists have totals before them), and after it check every
    list's totals against its kept units read one by one. How many were checked."""
    queues = _queues(session)
    keys = _keys(session, rng)
    checked = 0
    for _ in range(rounds):
        for leaf in queues:
            for cls in CLASSES:
                found = queue_units(session, leaf, **cls)
                for needed, with_room, fr in keys:
                    totals = found.totals(needed, with_room, fr)
                    assert totals == _read_unit_by_unit(found.using(needed, with_room)[0], fr), (leaf.name, cls)
                    checked += 1
        if queues:
            take_at_random(session, rng.choice(queues), rng)
    return checked


@pytest.mark.parametrize("case", RUNNING, ids=[c.stem for c in RUNNING])
def test_totals_after_takes_equal_the_kept_units_read_one_by_one(case: Path) -> None:
    _takes_keep_totals(_session(case), random.Random(case.stem), 6)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_totals_after_takes_in_deep_queues_equal_the_kept_units_read_one_by_one(seed: int) -> None:
    spliced = []

    def counted(origin: Any, key: Any) -> Any:
        found = plain(origin, key)
        spliced.append(found is not None)
        return found

    plain = unitindex.spliced_totals
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(unitindex, "spliced_totals", counted)
        assert _takes_keep_totals(_generated(), random.Random(seed), 8) > 0
    assert any(spliced)  # patched lists' totals were spliced, and checked


def _generated(workloads: int = 500) -> Session:
    """A generated cluster of 100 queues (``workloads`` / 100 workloads each)."""
    objects = [("g.json", obj) for obj in generate_shape(f"grow-deep-{workloads}", seed=1)]
    return open_session(parse_objects(objects), PLUGINS, NOW_MS)


class _Counting(dict[FR, int]):
    """A unit's usage that counts what is read of it with ``get``."""

    reads = 0

    def get(self, *args: Any) -> Any:
        _Counting.reads += 1
        return super().get(*args)


def test_a_patched_list_reads_the_usage_of_no_unit_it_shares_with_the_list_before() -> None:
    session = _generated(2500)
    leaf = max(_queues(session), key=lambda q: len(queue_units(session, q, **CLASSES[0]).units))
    before = queue_units(session, leaf, **CLASSES[0])
    fr = next(iter(before.units[0].usage))
    needed = frozenset({fr})
    before.totals(needed, False, fr)
    assert len(before.units) > 10
    for unit in before.units:
        unit.usage = _Counting(unit.usage)
    take_at_random(session, leaf, random.Random(3))
    after = queue_units(session, leaf, **CLASSES[0])
    assert after is not before and after.origin is not None
    shared = set(map(id, before.units)) & set(map(id, after.units))
    assert len(shared) == len(after.units) - 1  # one workload's unit made again
    _Counting.reads = 0
    spliced = after.totals(needed, False, fr)
    assert _Counting.reads == 0  # the new unit's usage is its own dict; no shared unit is read
    assert spliced == _read_unit_by_unit(after.using(needed, False)[0], fr)
