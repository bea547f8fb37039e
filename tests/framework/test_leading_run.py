"""The leading run of a lazy victim walk (``preemption/waiting.py``, ``Leading``).

A walk with no plugin that may refuse a candidate and no scenario filter takes, in one
step, the leading candidates it accepts while the running bound is still short of the
request, when the lender test is known to pass for all of them; the part of that run the
next walk of the same queue shares is not read again. (Sessions take runs only where they
are long, ``waiting.WORTH``; the comparisons here set it to 0, so that they are taken.)
Held here to the plain walk (no leading run) on random queue trees and on generated
clusters: the same decisions, explanations and veto counts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR, PreemptionPolicy, Workload
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import waiting, walk
from preemptd.framework.preemption.waiting import Leading
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.run import run_session
from preemptd.framework.session import CLASS_OTHER_QUEUE, Candidate, Registry
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, inventory, queue, workload
from preemptd.plugins import cohort_reclaim, priority

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, Size, generate_spec, growth_spec

CPU: FR = ("default", "cpu")
RECLAIM = PreemptionPolicy("LowerPriority", "LowerPriority", "LowerPriority")


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain path: no leading run."""
    monkeypatch.setattr(walk, "leading_run", lambda *args: (0, [], {}))


def _decide(snapshot: Snapshot, registry: Registry, actions: tuple[str, ...]) -> str:
    decisions = run_session(snapshot, registry, actions=actions)
    return decisions.to_json() + repr(sorted(registry.vetoes.items())) + repr(sorted(registry.failures.items()))


def _each_way(module: Any, switch: str, decide: Callable[[], str], **fixed: object) -> dict[bool, str]:
    """What ``decide`` gives with ``module``'s ``switch`` on and with it off, the
    module's other settings ``fixed`` as given in both."""
    decided = {}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in fixed.items():
            patch.setattr(module, name, value)
        for on in (True, False):
            patch.setattr(module, switch, on)
            decided[on] = decide()
    return decided


RANDOM_PLUGINS = [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)]
RANDOM_ACTIONS = ("allocate", "preempt")


def _random_snapshot(seed: int) -> Snapshot:
    """The snapshot of :func:`_world`'s queues and workloads for ``seed``."""
    specs, workloads = _world(seed)
    return Snapshot.build(inventory(specs, workloads), now=60_000)


def _generated_snapshot(spec: object, label: str) -> Snapshot:
    """The snapshot of a generated cluster of size ``spec``, seeded by ``label``."""
    assert isinstance(spec, Size)
    objects = generate_spec(spec, label)
    return Snapshot.build(parse_objects([("g.json", o) for o in objects]), now=NOW_MS)


def _world(seed: int) -> tuple[list[Any], list[Workload]]:
    """Deep random queues: a root over two cohorts (one over a third), leaves with lending
    and borrowing limits that preempt and reclaim, most workloads admitted (some evicted,
    some elastic), many pending at higher priorities."""
    rnd = random.Random(seed)
    specs = [cohort("root"), cohort("c1", "root"), cohort("c2", "root"), cohort("c3", "c1")]
    names = []
    for i in range(rnd.randint(3, 7)):
        name = f"q{i}"
        names.append(name)
        specs.append(
            queue(
                name,
                rnd.choice(["c1", "c2", "c3"]),
                cpu=rnd.randint(2, 12),
                borrowing_limit=rnd.choice([None, None, 4, 10]),
                lending_limit=rnd.choice([None, None, 0, 2, 6]),
                preemption=RECLAIM,
            )
        )
    workloads = []
    for i in range(rnd.randint(10, 70)):
        admitted = rnd.random() < 0.6
        elastic = rnd.random() < 0.15
        workloads.append(
            workload(
                f"w{i:02d}",
                rnd.choice(names),
                rnd.choice([0.5, 1, 1, 2, 3]),
                count=rnd.randint(2, 4) if elastic else 1,
                min_count=1 if elastic else None,
                priority=rnd.randint(0, 3) if admitted else rnd.randint(1, 5),
                created=rnd.randint(0, 50),
                admitted=admitted,
                admitted_at=rnd.randint(0, 40) if admitted else None,
                evicted=admitted and rnd.random() < 0.1,
            )
        )
    return specs, workloads


@settings(max_examples=120, deadline=None)
@given(st.integers(min_value=0, max_value=100_000))
def test_walks_with_leading_runs_decide_as_the_plain_walk_on_random_queues(seed: int) -> None:
    snapshot = _random_snapshot(seed)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waiting, "WORTH", 0)  # every walk after a key's first two tries a run
        fast = _decide(snapshot, Registry(RANDOM_PLUGINS), RANDOM_ACTIONS)
    with pytest.MonkeyPatch.context() as patch:
        _plain(patch)
        plain = _decide(snapshot, Registry(RANDOM_PLUGINS), RANDOM_ACTIONS)
    assert fast == plain


CLUSTERS = {
    "deep-1200-seed-1": (growth_spec("deep", 1_200), 1),
    "deep-2500-seed-3": (growth_spec("deep", 2_500), 3),
    "queues-1500-seed-2": (growth_spec("queues", 1_500), 2),
}


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_walks_with_leading_runs_decide_as_the_plain_walk_on_generated_clusters(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, seed = CLUSTERS[name]
    snapshot = _generated_snapshot(spec, f"leading/{name}/{seed}")
    actions, registry = default_session()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(waiting, "WORTH", 0)
        fast = _decide(snapshot, registry(), actions)
    _plain(monkeypatch)
    plain = _decide(snapshot, registry(), actions)
    assert fast == plain


# -- the kept leading run ---------------------------------------------------------------


class _Counted(list[Candidate]):
    """A candidate list that counts the candidates read from it one by one."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int):
            _Counted.reads += 1
        return super().__getitem__(index)


def _lenders() -> tuple[QuotaTree, QuotaNode, list[dict[FR, int]]]:
    """Leaf ``a`` (the preemptor's) beside lenders ``b`` and ``c`` that borrow far above
    their nominal of 1 core: 40 cores used each."""
    specs = [cohort("r"), queue("a", "r", cpu=1), queue("b", "r", cpu=1), queue("c", "r", cpu=1)]
    tree = QuotaTree({spec.name: spec for spec in specs})
    usage: list[dict[FR, int]] = [{} for _ in tree.nodes]
    for name in ("b", "c"):
        usage[tree.nodes[name].index] = {CPU: 40_000}
    usage[tree.nodes["r"].index] = {CPU: 80_000}
    return tree, tree.nodes["a"], usage


def _units(tree: QuotaTree, names: list[str]) -> list[Candidate]:
    found = []
    for i, name in enumerate(names):
        leaf = tree.nodes[name[0]]
        found.append(
            Candidate(
                workload(f"{name}", leaf.name, 1), leaf, {CPU: 1_000}, "InCohortReclamation", CLASS_OTHER_QUEUE,
                unit=(name,), sort_key=(0, CLASS_OTHER_QUEUE, 0, 1, -i, ("", "ns", name), 0),
            )
        )
    return found


def _chains(tree: QuotaTree) -> Callable[[QuotaNode], tuple[QuotaNode, ...]]:
    return lambda leaf: (leaf,)


def test_a_later_walk_of_the_queue_reads_only_the_candidates_it_does_not_share(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "WORTH", 1)
    tree, _, usage = _lenders()
    units = _units(tree, [f"b{i}" for i in range(8)] + [f"c{i}" for i in range(8)])
    leading = Leading(frozenset({CPU}))
    first = _Counted(units)
    _Counted.reads = 0
    count, victims, by_leaf = leading.run(first, True, [(CPU, 5_000)], _chains(tree), usage)
    # Four victims leave the request 1 core short; the fifth is where the walk tests the fit.
    assert (count, victims) == (4, units[:4])
    assert by_leaf == {tree.nodes["b"]: {CPU: 4_000}}
    assert _Counted.reads == 5
    # The next walk: one new candidate after the first three, and a request of 9 cores.
    new = _units(tree, ["c9"])[0]
    second = _Counted([*units[:3], new, *units[3:]])
    _Counted.reads = 0
    count, victims, by_leaf = leading.run(second, True, [(CPU, 9_000)], _chains(tree), usage)
    assert (count, victims) == (8, second[:8])
    assert by_leaf == {tree.nodes["b"]: {CPU: 7_000}, tree.nodes["c"]: {CPU: 1_000}}
    assert _Counted.reads == 6  # the shared three are not read again
    # The same candidates again, asking less: nothing is read.
    _Counted.reads = 0
    count, victims, _ = leading.run(second, True, [(CPU, 2_000)], _chains(tree), usage)
    assert (count, victims) == (1, second[:1])
    assert _Counted.reads == 0


def test_a_run_the_lender_test_may_refuse_within_is_cut_where_the_test_is_known_to_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "WORTH", 1)
    tree, _, usage = _lenders()
    # b (40 cores used, 1 nominal) stays above its nominal with up to 38 of its cores taken.
    units = _units(tree, [f"b{i:02d}" for i in range(45)])
    leading = Leading(frozenset({CPU}))
    count, victims, by_leaf = leading.run(units, True, [(CPU, 41_000)], _chains(tree), usage)
    assert (count, victims, by_leaf) == (38, units[:38], {tree.nodes["b"]: {CPU: 38_000}})
    count, victims, _ = leading.run(units, True, [(CPU, 30_000)], _chains(tree), usage)
    assert (count, victims) == (29, units[:29])
    # Nothing is known when b is within its nominal from the start.
    usage[tree.nodes["b"].index] = {CPU: 1_000}
    assert leading.run(units, True, [(CPU, 30_000)], _chains(tree), usage) == (0, [], {})


def test_a_run_shorter_than_worth_taking_is_left_to_the_step_by_step_walk() -> None:
    tree, _, usage = _lenders()
    units = _units(tree, [f"b{i:02d}" for i in range(45)])
    leading = Leading(frozenset({CPU}))
    # Five victims before the first test: fewer than WORTH, so no run, and the next two
    # walks of the key go step by step.
    assert leading.run(units, True, [(CPU, 6_000)], _chains(tree), usage) == (0, [], {})
    assert leading.wait == 2
    count, victims, _ = leading.run(units, True, [(CPU, 36_000)], _chains(tree), usage)
    assert (count, victims) == (35, units[:35]) and leading.wait == 2 and leading.misses == 0


def test_a_run_the_lender_test_refuses_within_its_first_worth_candidates_reads_no_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``b`` uses 3 cores of its nominal 1: it stays above its nominal with at most 1 core
    taken, so no run of two or more of its 1-core candidates is known to pass the lender
    test. With WORTH at 4, the first four candidates read tell there is no run worth
    taking: a request of 41 cores does not read the 37 candidates after them (before, all
    41 up to the first fit test were read, and the run cut by bisection to nothing)."""
    monkeypatch.setattr(waiting, "WORTH", 4)
    tree, _, usage = _lenders()
    usage[tree.nodes["b"].index] = {CPU: 3_000}
    units = _Counted(_units(tree, [f"b{i:02d}" for i in range(45)]))
    leading = Leading(frozenset({CPU}))
    _Counted.reads = 0
    assert leading.run(units, True, [(CPU, 41_000)], _chains(tree), usage) == (0, [], {})
    assert _Counted.reads == 4
    assert (leading.misses, leading.wait) == (1, 2)
