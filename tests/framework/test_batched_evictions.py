"""The re-check of an entry with victims (``books.still_fits``) takes the quota of each
leaf's victims off in one step (``books._evict_all``) instead of victim by victim.

That rests on one property of the accounting, pinned here on random queue trees with
lending limits (where levels store only what is above their guaranteed quota): taking
``a`` and then ``b`` off a leaf leaves every node of the tree as taking ``a + b`` once does,
and giving the sum back restores it. The rounds are then held to the victim-by-victim
re-check on generated clusters: the same decisions, explanations and final view.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.actions import books
from preemptd.framework.actions.allocate import Books
from preemptd.framework.model import FR
from preemptd.framework.quota import Accounting, QuotaTree
from preemptd.framework.run import run_session
from preemptd.framework.session import Assignment, Statement
from preemptd.framework.testing import cohort, queue, snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_saturated
from tests.framework.test_recheck_keeps_evictions import CLUSTERS as RECHECKED

CPU: FR = ("default", "cpu")


def _tree(lending: list[float | None]) -> QuotaTree:
    """Root ``r`` over cohorts ``c0`` and ``c1``, each over two leaves of 4 cores with the
    given lending limits (``None``: lends everything)."""
    specs = [cohort("r"), cohort("c0", "r"), cohort("c1", "r")]
    for i, limit in enumerate(lending):
        specs.append(queue(f"q{i}", f"c{i // 2}", cpu=4, lending_limit=limit))
    return QuotaTree({spec.name: spec for spec in specs})


@settings(max_examples=300, deadline=None)
@given(
    lending=st.lists(st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, 4.0])), min_size=4, max_size=4),
    used=st.lists(st.integers(0, 9000), min_size=4, max_size=4),
    leaf=st.integers(0, 3),
    parts=st.lists(st.integers(0, 3000), min_size=1, max_size=5),
)
def test_taking_parts_off_a_leaf_one_by_one_equals_taking_their_sum_once(
    lending: list[float | None], used: list[int], leaf: int, parts: list[int]
) -> None:
    tree = _tree(lending)
    accounting = Accounting(tree)
    for i, amount in enumerate(used):
        accounting.add_all(tree.leaves[f"q{i}"], {CPU: amount})
    node = tree.leaves[f"q{leaf}"]
    parts = [min(p, used[leaf]) for p in parts]
    if sum(parts) > used[leaf]:
        parts = [used[leaf] // len(parts)] * len(parts)
    before = [dict(u) for u in accounting.usage]
    one_by_one, at_once = accounting.copy(), accounting.copy()
    for amount in parts:
        one_by_one.remove_all(node, {CPU: amount})
    at_once.remove_all(node, {CPU: sum(parts)})
    assert one_by_one.usage == at_once.usage
    at_once.add_all(node, {CPU: sum(parts)})
    assert at_once.usage == before


def _one_by_one(statement: Statement, view: Books, assignment: Assignment, evicted: set[tuple[object, ...]]) -> None:
    """The re-check's evictions as they were made before: ``statement.evict`` per victim."""
    for victim in assignment.victims:
        if victim.unit not in view.victims:
            evicted.add(victim.unit)
            statement.evict(victim, nodes=assignment.node_short)


CLUSTERS = {
    **RECHECKED,
    "saturated-20x900-seed-2": lambda: generate_saturated(2, queues=20, workloads=900),
}


def _run(objects: list[dict[str, Any]], one_by_one: bool) -> tuple[Any, ...]:
    made: list[Books] = []
    original = books.Books.__init__

    def recording(view: Books, session: Any) -> None:
        original(view, session)
        made.append(view)

    actions, registry_of = default_session()
    with pytest.MonkeyPatch.context() as local:
        local.setattr(books.Books, "__init__", recording)
        if one_by_one:
            local.setattr(books, "_evict_all", _one_by_one)
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
    (view,) = made
    assert view.own is not None
    free = view.own.placements.free if view.own.placements is not None else None
    return decisions.to_json(), decisions.explanations, view.own.accounting.usage, free


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_rechecks_taking_each_leafs_victims_at_once_decide_and_end_as_victim_by_victim(name: str) -> None:
    objects = CLUSTERS[name]()
    at_once = _run(objects, False)
    one_by_one = _run(objects, True)
    assert at_once[0] == one_by_one[0]  # decisions
    assert at_once[1] == one_by_one[1]  # explanations
    assert at_once[2] == one_by_one[2]  # quota used at every node of every queue tree
    assert at_once[3] == one_by_one[3]  # free room of every node
