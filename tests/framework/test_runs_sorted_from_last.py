"""Runs of candidates sorted from the last run of their queue and class
(``preemption/resorted.py``).

A run of the same length as the last one sorted for its queue, class and kind, differing
from it in a few places, is that sorted run without the units that left those places and
with the new ones put in by bisection; else it is sorted in full. Held here to
``sorted(units, key=sort_key)`` by hand, on random runs (ties, units moved, copies of one
unit), and to whole sessions on deep clusters with every run sorted in full.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.preemption import resorted
from preemptd.framework.preemption.resorted import sorted_units
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.session import CLASS_OTHER_QUEUE, Candidate, Registry
from preemptd.framework.testing import cohort, queue, workload

from benchmarks.bench_session import default_session
from benchmarks.generate import SIZES, growth_spec
from tests.framework.test_leading_run import (
    RANDOM_ACTIONS,
    RANDOM_PLUGINS,
    _decide,
    _each_way,
    _generated_snapshot,
    _random_snapshot,
)

CPU: FR = ("default", "cpu")


def _leaf() -> QuotaNode:
    specs = [cohort("r"), queue("b", "r", cpu=4)]
    return QuotaTree({spec.name: spec for spec in specs}).nodes["b"]


def _unit(leaf: QuotaNode, name: str, evicted: bool, priority: int, admitted: int) -> Candidate:
    """A unit of ``leaf`` with the key ``units.py`` gives a whole workload: evicted ones
    first, then by priority, then the latest admitted first."""
    return Candidate(
        workload(name, leaf.name, 1), leaf, {CPU: 1_000}, "InCohortReclamation", CLASS_OTHER_QUEUE,
        unit=(name,), evicted=evicted,
        sort_key=(0 if evicted else 1, CLASS_OTHER_QUEUE, priority, 1, -admitted, ("", "ns", name), 0),
    )


def _same(found: list[Candidate], expected: list[Candidate]) -> bool:
    return len(found) == len(expected) and all(a is b for a, b in zip(found, expected, strict=True))


def _derived(patch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each run sorted was sorted from the last one (else in full)."""
    told: list[bool] = []
    plain = resorted._from_last

    def spy(last: Any, units: list[Candidate]) -> list[Candidate] | None:
        found = plain(last, units)
        told.append(found is not None)
        return found

    patch.setattr(resorted, "_from_last", spy)
    return told


def test_a_run_with_one_unit_taken_since_is_sorted_from_the_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """Units at priority 0 admitted at 10, 20, 30, 40 go latest first: d c b a. The run
    after b was taken holds b's evicted twin in b's place: evicted units first, so b2 d c a."""
    told = _derived(monkeypatch)
    leaf = _leaf()
    a, b, c, d = (_unit(leaf, name, False, 0, at) for name, at in zip("abcd", (10, 20, 30, 40), strict=True))
    state: dict[str, Any] = {}
    assert _same(sorted_units(state, [a, b, c, d]), [d, c, b, a])
    b2 = _unit(leaf, "b", True, 0, 20)
    assert _same(sorted_units(state, [a, b2, c, d]), [b2, d, c, a])
    # Taken again: c's twin, from the run above.
    c2 = _unit(leaf, "c", True, 0, 30)
    assert _same(sorted_units(state, [a, b2, c2, d]), [c2, b2, d, a])
    assert told == [True, True]
    assert _same(sorted_units(state, [a, b2, c2]), [c2, b2, a])  # another length: in full
    assert told == [True, True, False]


def test_units_moved_are_put_in_again_and_a_shared_key_sorts_the_run_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """e (priority 5) and f (6) go after every unit at priority 0. Units that changed places
    are put in again; a unit in two places, or a new unit of the key of one there, leave
    only the stable sort of the run to order them (by place); units of one key that stay
    in their places keep that order."""
    told = _derived(monkeypatch)
    leaf = _leaf()
    a, b, c, d = (_unit(leaf, name, False, 0, at) for name, at in zip("abcd", (10, 20, 30, 40), strict=True))
    state: dict[str, Any] = {}
    sorted_units(state, [a, b, c, d])
    e = _unit(leaf, "e", False, 5, 50)
    assert _same(sorted_units(state, [e, a, b, d]), [d, b, a, e])  # a and b moved, c left
    assert _same(sorted_units(state, [e, a, a, d]), [d, a, a, e])  # a again
    twin = _unit(leaf, "a", False, 0, 10)  # a's key exactly
    assert _same(sorted_units(state, [e, a, twin, d]), [d, a, twin, e])  # a came twice
    assert _same(sorted_units(state, [e, twin, a, d]), [d, twin, a, e])  # twin put in by a
    assert told == [True, False, False, False]
    f = _unit(leaf, "f", False, 6, 60)
    assert _same(sorted_units(state, [f, twin, a, d]), [d, twin, a, f])
    assert told[-1] is True


def _runs(rnd: random.Random, leaves: list[QuotaNode]) -> list[list[Candidate]]:
    """A sequence of runs of a few queues: each mostly the last of its queue with a few
    places changed (a unit taken, a new one, one moved, a copy of another, a unit of the
    same key as another), now and then of another length."""
    pool: list[Candidate] = []
    last: dict[str, list[Candidate]] = {}
    out = []
    for step in range(rnd.randint(1, 30)):
        leaf = rnd.choice(leaves)
        run = last.get(leaf.name)
        if run is None or rnd.random() < 0.1:
            run = [_fresh(rnd, leaf, pool) for _ in range(rnd.randint(1, 40))]
        else:
            run = list(run)
            for _ in range(rnd.choice([0, 1, 1, 2, 3, 20])):
                at = rnd.randrange(len(run))
                kind = rnd.random()
                if kind < 0.5:
                    old = run[at]
                    run[at] = _unit(leaf, old.key, True, old.sort_key[2], -old.sort_key[4])
                elif kind < 0.7:
                    run[at] = _fresh(rnd, leaf, pool)
                elif kind < 0.85:
                    run[at] = rnd.choice(run)  # moved, or a copy
                else:
                    run[at] = rnd.choice([u for u in pool if u.leaf is leaf])
            if rnd.random() < 0.1:
                run.append(_fresh(rnd, leaf, pool))
        last[leaf.name] = run
        out.append(run)
        pool.extend(run)
        assert step >= 0
    return out


def _fresh(rnd: random.Random, leaf: QuotaNode, pool: list[Candidate]) -> Candidate:
    if pool and rnd.random() < 0.1:
        # Another unit of the same key as one made before.
        other = rnd.choice(pool)
        return _unit(leaf, other.key, other.evicted, other.sort_key[2], -other.sort_key[4])
    return _unit(leaf, f"w{len(pool)}-{rnd.randrange(10**6)}", rnd.random() < 0.2, rnd.randint(0, 3), rnd.randint(0, 50))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_every_run_is_sorted_as_sorted_sorts_it(seed: int) -> None:
    rnd = random.Random(seed)
    specs = [cohort("r"), queue("b", "r", cpu=4), queue("c", "r", cpu=4)]
    tree = QuotaTree({spec.name: spec for spec in specs})
    state: dict[str, Any] = {}
    for run in _runs(rnd, [tree.nodes["b"], tree.nodes["c"]]):
        came = list(run)
        found = sorted_units(state, run)
        assert _same(found, sorted(came, key=lambda unit: unit.sort_key))
        assert _same(run, came)  # the run handed over is not changed


CLUSTERS = {
    "deep-1200-seed-1": (growth_spec("deep", 1_200), 1),
    "deep-2500-seed-4": (growth_spec("deep", 2_500), 4),
}


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_generated_deep_clusters_decide_as_with_every_run_sorted_in_full(name: str) -> None:
    spec, seed = CLUSTERS[name]
    snapshot = _generated_snapshot(spec, f"resorted/{name}/{seed}")
    actions, registry = default_session()
    decided = _each_way(resorted, "RESORT", lambda: _decide(snapshot, registry(), actions))
    assert decided[True] == decided[False]


def test_the_typical_m_cluster_decides_as_with_every_run_sorted_in_full() -> None:
    """The generated M cluster (10,000 workloads on 1,000 nodes, as ``compare-decisions``
    builds it): its walks meet victims in the re-sorted runs' order, so a run handed in
    another order than ``sorted``'s changes its decisions, where the deep clusters above
    and the random trees below may not."""
    snapshot = _generated_snapshot(SIZES["M"], "preemptd-benchmark/M/1")
    actions, registry = default_session()
    decided = _each_way(resorted, "RESORT", lambda: _decide(snapshot, registry(), actions))
    assert decided[True] == decided[False]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_random_queue_trees_decide_as_with_every_run_sorted_in_full(seed: int) -> None:
    snapshot = _random_snapshot(seed)
    decided = _each_way(resorted, "RESORT", lambda: _decide(snapshot, Registry(RANDOM_PLUGINS), RANDOM_ACTIONS))
    assert decided[True] == decided[False]
