"""The re-check of an entry without victims (SEMANTICS §2.4, ``books.still_fits``) places
its pods, best fit, on the session's room and on the view without victims, where its
admission places them; when the entry fits they stay placed (``Books.placed``) and the
admission does not place them again, otherwise both rooms are given back.

Held here to the re-check that asks ``Session.pods_fit`` and lets the admission place the
pods: the same answers, the same decisions and explanations, the same room at the end
(the session's and the view's), on generated clusters with nodes; and, case by case, the
room given back when the quota or the view's nodes say no, and a placement short of a
node that ``pods_fit`` still counts (a zero request on over-committed room) answered as
``pods_fit`` answers it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from preemptd.framework.actions import allocate
from preemptd.framework.actions.books import Books, place, still_fits
from preemptd.framework.model import PodSet, Workload
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Assignment, PodSetAssignment, Registry, Session, Statement
from preemptd.framework.testing import snapshot

from benchmarks.generate import CONTENDED, NOW_MS, SIZES, generate_saturated, generate_spec
from tests.framework.test_recheck_keeps_evictions import decide_recorded

CLUSTERS = {
    "contended-40-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "place/contended"
    ),
    "contended-80-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=80, workloads=500, queues=20, leaves_per_cohort=5), "place/contended-2"
    ),
    "typical-60-nodes": lambda: generate_spec(
        replace(SIZES["S"], nodes=60, workloads=600, queues=12), "place/typical"
    ),
}


def _run(objects: list[dict[str, Any]], seen: dict[str, int] | None) -> tuple[Any, ...]:
    """Decisions, explanations, the session's room and the view's at the end; with ``seen``
    None, every placement a re-check kept is given back so that the admission places the
    pods itself (the re-check as it was before it placed them), else ``seen`` counts the
    re-checks of entries without victims by outcome."""
    def checked(session: Session, books: Books, leaf: QuotaNode, assignment: Assignment) -> bool:
        room = dict(session.placements.free) if session.placements is not None else None
        own = books.own
        at = own.checkpoint() if own is not None else 0
        fits = still_fits(session, books, leaf, assignment)
        if seen is not None and not assignment.victims and assignment.node_targets():
            if books.placed:
                seen["kept"] += 1
            elif not fits:
                seen["refused"] += 1
                # Refused: both rooms as they were (no placement left behind).
                assert session.statement.ops == [] and session.placements is not None
                assert session.placements.free == room
                assert own is None or len(own.ops) == at
        if seen is None and books.placed:
            session.statement.rollback(0)  # only the kept placements since the last commit
            if own is not None:
                own.rollback(at)
            books.placed = False
        return fits

    decisions, books, session = decide_recorded(objects, (allocate, "still_fits", checked))
    assert session.placements is not None
    own = books.own
    own_room = own.placements.free if own is not None and own.placements is not None else None
    return decisions.to_json(), decisions.explanations, session.placements.free, own_room


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_a_fitting_entry_keeps_the_pods_its_recheck_placed_and_ends_with_the_same_rooms(name: str) -> None:
    objects = CLUSTERS[name]()
    seen = {"kept": 0, "refused": 0}
    fast = _run(objects, seen)
    plain = _run(objects, None)
    assert fast[0] == plain[0]
    assert fast[1] == plain[1]
    assert fast[2] == plain[2]  # free room of every node, the session's
    assert fast[3] == plain[3]  # and the view's without victims
    assert seen["kept"] > 0


def test_the_clusters_refuse_entries_whose_pods_were_placed_then_given_back() -> None:
    seen = {"kept": 0, "refused": 0}
    for make in CLUSTERS.values():
        _run(make(), seen)
    assert seen["refused"] > 0


# -- case by case, on one session ---------------------------------------------------


def _setup(requests: dict[str, int], count: int) -> tuple[Session, QuotaNode, Assignment]:
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]))
    session.open()
    assert session.placements is not None
    head: Workload = next(w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment)
    leaf = snap.tree.leaves[head.queue]
    flavor = leaf.spec.resource_groups[0].flavors[0].flavor
    assert session.placements.has_nodes(flavor)
    spec = PodSet("main", count, requests)
    usage = {(flavor, r): a * count for r, a in requests.items() if a}
    assignment = Assignment(head, leaf)
    assignment.pod_sets.append(PodSetAssignment("main", count, {r: flavor for r in requests}, usage, spec))
    # Its quota asks nothing (every queue of the cluster is at its nominal): only the nodes
    # answer, unless a test gives it usage.
    assignment.usage = {}
    return session, leaf, assignment


def _nodes_of(session: Session, assignment: Assignment) -> list[str]:
    placements = session.placements
    assert placements is not None
    flavor = next(iter(assignment.pod_sets[0].flavors.values()))
    return sorted(placements.pool.by_flavor[flavor])


def _room_after_placing(session: Session, statement: Statement, assignment: Assignment) -> dict[str, dict[str, int]]:
    """The room ``place`` leaves on a copy of ``statement``'s placements."""
    assert statement.placements is not None
    copy = Statement(statement.accounting.copy(), statement.placements.copy())
    place(session, copy, assignment)
    assert copy.placements is not None
    return {n: dict(r) for n, r in copy.placements.free.items()}


def test_a_fitting_entry_is_placed_on_the_session_room_and_the_view_as_its_admission_places_it() -> None:
    session, leaf, assignment = _setup({"cpu": 100}, 3)
    books = Books(session)
    assert session.placements is not None
    books.own = Statement(session.accounting.copy(), session.placements.copy())
    books.physical = session.accounting.copy()
    node = _nodes_of(session, assignment)[0]
    books.own.give_room(node, {"cpu": 50_000})  # the view's room differs from the session's
    books.own.commit()
    wanted_session = _room_after_placing(session, session.statement, assignment)
    wanted_own = _room_after_placing(session, books.own, assignment)
    assert wanted_session != wanted_own
    assert still_fits(session, books, leaf, assignment)
    assert books.placed
    assert {n: dict(r) for n, r in session.placements.free.items()} == wanted_session
    assert books.own.placements is not None
    assert {n: dict(r) for n, r in books.own.placements.free.items()} == wanted_own


def test_an_entry_the_quota_refuses_after_its_pods_were_placed_gives_the_room_back() -> None:
    session, leaf, assignment = _setup({"cpu": 100}, 3)
    flavor = next(iter(assignment.pod_sets[0].flavors.values()))
    assignment.usage = {(flavor, "cpu"): 10**15}  # beyond any Available
    books = Books(session)
    assert session.placements is not None
    before = {n: dict(r) for n, r in session.placements.free.items()}
    assert not still_fits(session, books, leaf, assignment)
    assert not books.placed
    assert session.statement.ops == []
    assert {n: dict(r) for n, r in session.placements.free.items()} == before


def test_an_entry_the_views_nodes_refuse_gives_both_rooms_back() -> None:
    session, leaf, assignment = _setup({"cpu": 100}, 3)
    books = Books(session)
    assert session.placements is not None
    own_placements = session.placements.copy()
    for node in _nodes_of(session, assignment):
        own_placements.free[node] = {**own_placements.free[node], "cpu": -1}  # the view has no room
    books.own = Statement(session.accounting.copy(), own_placements)
    books.physical = session.accounting.copy()
    before = {n: dict(r) for n, r in session.placements.free.items()}
    own_before = {n: dict(r) for n, r in own_placements.free.items()}
    assert not still_fits(session, books, leaf, assignment)
    assert not books.placed
    assert session.statement.ops == [] and books.own.ops == []
    assert {n: dict(r) for n, r in session.placements.free.items()} == before
    assert {n: dict(r) for n, r in own_placements.free.items()} == own_before


def test_a_placement_short_of_a_node_that_pods_fit_counts_is_answered_as_pods_fit_answers() -> None:
    """A pod is placed only on a node whose room covers each of its requests, a zero one
    too; ``pods_fit`` counts a node's pods by their positive requests. On room
    over-committed in memory, pods asking for no memory are counted as fitting: the
    re-check says so, leaving the placing to the admission."""
    session, leaf, assignment = _setup({"cpu": 100, "memory": 0}, 2)
    placements = session.placements
    assert placements is not None
    for node in _nodes_of(session, assignment):
        placements.free[node] = {**placements.free[node], "memory": -1}
    targets = assignment.node_targets()
    assert session.pods_fit(targets)
    books = Books(session)
    before = {n: dict(r) for n, r in placements.free.items()}
    assert still_fits(session, books, leaf, assignment)
    assert not books.placed  # nothing kept: the admission places what it can
    assert session.statement.ops == []
    assert {n: dict(r) for n, r in placements.free.items()} == before
