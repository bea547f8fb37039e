"""The length of a leading run read at once (``preemption/waiting.py``, ``Leading._longest``).

Where every lender queue of a kept run is its own chain (its parent is on the preemptor's
path), the longest run the lender test is known to pass for is read from the queues' running
sums, instead of trying runs of several lengths (``Leading._taken``, by bisection). Held
here to ``_taken`` asked of every length, on random lenders holding random usage of three
flavor-resources, and to whole sessions that try runs (``LONGEST`` off: the bisection).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.preemption import waiting
from preemptd.framework.preemption.waiting import Leading
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.session import CLASS_OTHER_QUEUE, CLASS_SAME_QUEUE, Candidate, Registry
from preemptd.framework.testing import cohort, queue, workload

from benchmarks.bench_session import default_session
from benchmarks.generate import growth_spec
from tests.framework.test_leading_run import (
    RANDOM_ACTIONS,
    RANDOM_PLUGINS,
    _decide,
    _each_way,
    _generated_snapshot,
    _random_snapshot,
)

CPU: FR = ("default", "cpu")
GPU: FR = ("default", "nvidia.com/gpu")
MEMORY: FR = ("default", "memory")
FRS = (CPU, GPU, MEMORY)


def _lenders(rnd: random.Random) -> tuple[list[QuotaNode], list[dict[FR, int]]]:
    """The preemptor's queue ``a`` and lenders ``b``–``e`` under one cohort (a nominal of 4
    cores, none of the others), each lender using a random amount of each flavor-resource
    around its nominal (or none of it)."""
    names = ["a", "b", "c", "d", "e"]
    specs = [cohort("r")] + [queue(name, "r", cpu=4) for name in names]
    tree = QuotaTree({spec.name: spec for spec in specs})
    usage: list[dict[FR, int]] = [{} for _ in tree.nodes]
    for name in names[1:]:
        node = tree.nodes[name]
        usage[node.index] = {
            fr: max(0, node.subtree.get(fr, 0) + rnd.randint(-3, 12) * 1_000) for fr in FRS if rnd.random() < 0.8
        }
    return [tree.nodes[name] for name in names], usage


def _candidates(rnd: random.Random, queues: list[QuotaNode], count: int) -> list[Candidate]:
    """Units of random queues holding random subsets of the flavor-resources (the
    preemptor's own queue ``a`` among them, as same-queue candidates)."""
    found = []
    for i in range(count):
        leaf = rnd.choice(queues)
        held = [fr for fr in FRS if rnd.random() < 0.6] or [CPU]
        usage = {fr: rnd.choice([0, 500, 1_000, 1_000, 2_000]) for fr in held}
        group = CLASS_SAME_QUEUE if leaf.name == "a" else CLASS_OTHER_QUEUE
        found.append(
            Candidate(
                workload(f"u{i:03d}", leaf.name, 1), leaf, usage, "InCohortReclamation", group,
                unit=(f"u{i:03d}",), sort_key=(0, group, 0, 1, -i, ("", "ns", f"u{i:03d}"), 0),
            )
        )
    return found


def _chain_of(leaf: QuotaNode) -> tuple[QuotaNode, ...]:
    """The chains of a preemptor in ``a``: its own queue is on its path, a lender is its own top."""
    return () if leaf.name == "a" else (leaf,)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**6))
def test_the_longest_run_read_at_once_is_the_longest_the_lender_test_is_known_for(seed: int) -> None:
    """For every length of run, the test answers yes up to the length read at once and
    no beyond it: what the bisection finds, and every length it may try."""
    rnd = random.Random(seed)
    queues, usage = _lenders(rnd)
    needed = frozenset(fr for fr in FRS if rnd.random() < 0.7) or frozenset({CPU})
    leading = Leading(needed)
    candidates = _candidates(rnd, queues, rnd.randint(1, 60))
    # Asking for more than all of them hold reads every candidate.
    need = [(fr, 10**9) for fr in sorted(needed)]
    leading._stop(need)  # tracks the running sums of the needed flavor-resources
    leading._read(candidates, rnd.random() < 0.5, need)
    longest = leading._longest(_chain_of, usage)
    assert longest is not None
    answers = [leading._taken(stop, _chain_of, usage) is not None for stop in range(len(leading.accepted) + 1)]
    assert answers == [stop <= longest for stop in range(len(leading.accepted) + 1)]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.sampled_from((1, 4, 32)))
def test_runs_read_at_once_are_the_runs_the_bisection_finds(seed: int, worth: int) -> None:
    """``Leading.run`` answers each walk of a sequence as with the bisection: the same
    candidates covered, victims and usage per queue, and the same runs missed."""
    rnd = random.Random(seed)
    queues, usage = _lenders(rnd)
    needed = frozenset(fr for fr in FRS if rnd.random() < 0.7) or frozenset({CPU})
    candidates = _candidates(rnd, queues, rnd.randint(1, 80))
    walks = [
        (candidates[rnd.randint(0, 3) :], rnd.random() < 0.5, [(fr, rnd.randint(1, 40) * 1_000) for fr in sorted(needed)])
        for _ in range(4)
    ]
    answers = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waiting, "WORTH", worth)
        for longest in (True, False):
            patch.setattr(waiting, "LONGEST", longest)
            leading = Leading(needed)
            answers[longest] = [
                (leading.run(walk, borrowing, need, _chain_of, usage), leading.misses, leading.wait)
                for walk, borrowing, need in walks
            ]
    assert answers[True] == answers[False]


def test_a_lender_below_its_nominal_cuts_the_run_at_its_first_candidate() -> None:
    """By hand: ``b`` uses 6 cores of its nominal 4, so it stays above its nominal with at
    most 1 core of it taken (2 taken would leave it at its nominal). Its 1-core units are
    the run's 3rd, 5th and 7th: runs of up to 4 candidates hold one of them (known), a run of
    5 holds two. ``c`` holds only memory, which is not needed: it is never known above its
    nominal, so a run may not reach its unit, the 9th (a run of 8 stops before it)."""
    specs = [cohort("r"), queue("a", "r", cpu=4), queue("b", "r", cpu=4), queue("c", "r", cpu=4)]
    tree = QuotaTree({spec.name: spec for spec in specs})
    a, b, c = (tree.nodes[name] for name in "abc")
    usage: list[dict[FR, int]] = [{} for _ in tree.nodes]
    usage[b.index] = {CPU: 6_000}
    usage[c.index] = {CPU: 9_000, MEMORY: 9_000}
    units = []
    for i, (leaf, held) in enumerate([(a, CPU), (a, CPU), (b, CPU), (a, CPU), (b, CPU), (a, CPU), (b, CPU), (a, CPU)]):
        group = CLASS_SAME_QUEUE if leaf is a else CLASS_OTHER_QUEUE
        units.append(Candidate(workload(f"u{i}", leaf.name, 1), leaf, {held: 1_000}, "InCohortReclamation", group))
    units.append(Candidate(workload("u8", "c", 1), c, {MEMORY: 1_000}, "InCohortReclamation", CLASS_OTHER_QUEUE))
    leading = Leading(frozenset({CPU}))
    leading._stop([(CPU, 10**9)])
    leading._read(units, True, [(CPU, 10**9)])
    assert leading._longest(_chain_of, usage) == 4
    usage[b.index] = {CPU: 10_000}  # above it with all three taken
    assert leading._longest(_chain_of, usage) == 8


CLUSTERS = {
    "deep-1200-seed-1": (growth_spec("deep", 1_200), 1),
    "deep-2500-seed-4": (growth_spec("deep", 2_500), 4),
}


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("worth", [0, waiting.WORTH])
def test_generated_deep_clusters_decide_as_with_runs_found_by_bisection(name: str, worth: int) -> None:
    spec, seed = CLUSTERS[name]
    snapshot = _generated_snapshot(spec, f"longest/{name}/{seed}")
    actions, registry = default_session()
    decided = _each_way(waiting, "LONGEST", lambda: _decide(snapshot, registry(), actions), WORTH=worth)
    assert decided[True] == decided[False]


@settings(max_examples=80, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_random_queue_trees_decide_as_with_runs_found_by_bisection(seed: int) -> None:
    """Deep random trees: lenders in a cohort below another (chains of two) and beside
    the preemptor's (chains of one)."""
    snapshot = _random_snapshot(seed)
    decided = _each_way(
        waiting, "LONGEST", lambda: _decide(snapshot, Registry(RANDOM_PLUGINS), RANDOM_ACTIONS), WORTH=0
    )
    assert decided[True] == decided[False]
