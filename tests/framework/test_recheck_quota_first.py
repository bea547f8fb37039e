"""The re-check of an entry without victims (SEMANTICS §2.4, ``books.still_fits``) asks its
quota before it places a pod: placing pods changes only node room, and the quota reads
none, so an entry the view's quota or the physical quota refuses is refused without a pod
placed and given back on either room. An entry the quota lets through has each pod set's
node terms (selector, tolerations) worked out once for both rooms it is placed on.

Once the session has a view without its victims, the quota is asked of the session's own
accounting first: it holds at least the usage of the view and of the physical accounting at
every node, so what it lets through they do, and they are asked only when it says no. Held
here to the re-check that always asks both, on generated clusters (the same decisions,
explanations and rooms), and case by case.

The answers and the rooms left are those of the re-check that placed first: held here case
by case, and on generated clusters by ``test_recheck_places_pods.py`` and the equivalence
script over every example and scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest
from preemptd.framework.actions import books as books_module
from preemptd.framework.actions.books import Books, still_fits
from preemptd.framework.model import FR, PodSet, Workload
from preemptd.framework.nodes import Placements
from preemptd.framework.quota import Accounting, QuotaNode
from preemptd.framework.session import Assignment, PodSetAssignment, Registry, Session, Statement
from preemptd.framework.testing import snapshot

from benchmarks.generate import CONTENDED, NOW_MS, SIZES, generate_saturated, generate_spec
from tests.framework.test_recheck_keeps_evictions import decide_recorded


def _entry(count: int) -> tuple[Session, QuotaNode, Assignment, str]:
    """An open session of a small saturated cluster with nodes, and an entry without
    victims of one of its heads: ``count`` pods of 100m cpu on its queue's first flavor,
    asking no quota until a test gives it some."""
    snap = snapshot(generate_saturated(1, queues=10, workloads=300), NOW_MS)
    session = Session(snap, Registry([]))
    session.open()
    head: Workload = next(w for items in snap.pending_by_queue.values() for w in items if not w.is_deployment)
    leaf = snap.tree.leaves[head.queue]
    flavor = leaf.spec.resource_groups[0].flavors[0].flavor
    assert session.placements is not None and session.placements.has_nodes(flavor)
    requests = {"cpu": 100}
    spec = PodSet("main", count, requests)
    assignment = Assignment(head, leaf)
    usage: dict[FR, int] = {(flavor, "cpu"): 100 * count}
    assignment.pod_sets.append(PodSetAssignment("main", count, {"cpu": flavor}, usage, spec))
    assignment.usage = {}
    return session, leaf, assignment, flavor


def _with_view(session: Session) -> Books:
    """Books whose view without victims is a room and an accounting of its own, as
    after the session's first victim."""
    books = Books(session)
    assert session.placements is not None
    books.own = Statement(session.accounting.copy(), session.placements.copy())
    books.physical = session.accounting.copy()
    return books


@contextmanager
def _counting_takes() -> Iterator[list[str]]:
    """Every node room taken tentatively (by a statement's ``take_room``, or by its
    placements with ``taken``), by node."""
    taken: list[str] = []
    original = Placements.defer

    def counting(
        self: Placements, node: str, requests: Mapping[str, int], sign: int, before: tuple[int, int] | None = None
    ) -> None:
        if sign < 0:
            taken.append(node)
        original(self, node, requests, sign, before)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Placements, "defer", counting)
        yield taken


def _room(placements: Placements | None) -> dict[str, dict[str, int]]:
    assert placements is not None
    return {name: dict(room) for name, room in placements.free.items()}


@pytest.mark.parametrize("view", [False, True], ids=["session-view", "own-view"])
def test_an_entry_the_views_quota_refuses_places_no_pod(view: bool) -> None:
    session, leaf, assignment, flavor = _entry(3)
    assignment.usage = {(flavor, "cpu"): 10**15}  # beyond any Available
    books = _with_view(session) if view else Books(session)
    before = _room(session.placements)
    with _counting_takes() as taken:
        assert not still_fits(session, books, leaf, assignment)
    assert taken == []
    assert not books.placed
    assert session.statement.ops == [] and _room(session.placements) == before


def test_an_entry_only_the_physical_quota_refuses_places_no_pod() -> None:
    """The view has room in quota (a victim freed it there) that the physical accounting,
    where the victim still holds it, does not: the entry waits, and no pod is placed."""
    session, leaf, assignment, flavor = _entry(3)
    fr: FR = (flavor, "cpu")
    books = _with_view(session)
    assert books.own is not None and books.physical is not None
    freed = 10**6
    books.own.remove_usage(leaf, {fr: freed})  # as a victim's eviction frees it on the view
    books.own.commit()
    # Asking more than the physical accounting has, and no more than the view has.
    wanted = books.physical.available(leaf, fr) + 1
    assert wanted <= books.own.accounting.available(leaf, fr)
    assignment.usage = {fr: wanted}
    assignment.allow_borrowing = True
    before = _room(session.placements)
    with _counting_takes() as taken:
        assert not still_fits(session, books, leaf, assignment)
    assert taken == []
    assert session.statement.ops == [] and books.own.ops == []
    assert _room(session.placements) == before


def test_a_fitting_entrys_pod_terms_are_worked_out_once_for_both_rooms() -> None:
    session, leaf, assignment, _ = _entry(3)
    books = _with_view(session)
    calls: list[tuple[Any, ...]] = []
    original: Callable[..., Any] = books_module.pod_terms

    def counting(*args: Any) -> Any:
        calls.append(args)
        return original(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(books_module, "pod_terms", counting)
        with _counting_takes() as taken:
            assert still_fits(session, books, leaf, assignment)
    assert books.placed
    assert len(calls) == 1  # one pod set, placed on the session's room and on the view's
    assert len(taken) >= 2  # each room took the pods (one take per node a room gave)
    assert session.statement.ops and books.own is not None and books.own.ops


@contextmanager
def _counting_quota() -> Iterator[list[Accounting]]:
    """Every accounting whose Available a check asks, once per question."""
    asked: list[Accounting] = []
    original = Accounting.available

    def counting(self: Accounting, node: QuotaNode, fr: FR) -> int:
        asked.append(self)
        return original(self, node, fr)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Accounting, "available", counting)
        yield asked


def test_an_entry_the_sessions_quota_lets_through_asks_neither_the_view_nor_the_physical_one() -> None:
    session, leaf, assignment, flavor = _entry(2)
    fr: FR = (flavor, "cpu")
    freed = 1000
    # Room in quota for every accounting (as a committed change of all three would leave it).
    session.statement.remove_usage(leaf, {fr: freed})
    session.statement.commit()
    books = _with_view(session)
    assignment.usage = {fr: 200}
    with _counting_quota() as asked:
        assert still_fits(session, books, leaf, assignment)
    assert asked and all(accounting is session.accounting for accounting in asked)
    assert books.placed


def test_an_entry_the_sessions_quota_refuses_is_asked_of_the_view_and_the_physical_one() -> None:
    """The session holds both a preemptor's usage and its victim's: the view has the room
    the victim frees, the physical accounting the room the preemptor does not hold yet."""
    session, leaf, assignment, flavor = _entry(2)
    fr: FR = (flavor, "cpu")
    room = 1000
    session.statement.remove_usage(leaf, {fr: room})
    session.statement.commit()
    books = _with_view(session)
    assert books.own is not None and books.physical is not None
    session.statement.add_usage(leaf, {fr: room})  # a preemptor's quota, held in the session
    books.add_usage(leaf, {fr: room}, preemptor=True)  # and in the view, not physically
    session.statement.commit()
    books.own.remove_usage(leaf, {fr: room})  # its victim's, gone from the view
    books.own.commit()
    assert session.accounting.available(leaf, fr) < room
    assignment.usage = {fr: room}
    with _counting_quota() as asked:
        assert still_fits(session, books, leaf, assignment)
    assert books.own.accounting in asked and books.physical in asked
    assert books.placed


CLUSTERS = {
    "contended-40-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "quota-first/contended"
    ),
    "contended-80-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=80, workloads=500, queues=20, leaves_per_cohort=5), "quota-first/contended-2"
    ),
    "typical-60-nodes": lambda: generate_spec(
        replace(SIZES["S"], nodes=60, workloads=600, queues=12), "quota-first/typical"
    ),
}


def _run(objects: list[dict[str, Any]], ceiling: bool, seen: dict[str, int]) -> tuple[Any, ...]:
    """Decisions, explanations, the session's room and the view's (room and quota) at the
    end; without ``ceiling`` the re-check asks the view's and the physical quota always.
    ``seen`` counts the flavor-resources the session's quota let through."""
    lets = books_module._session_lets

    def session_lets(ceiling_: Accounting, leaf: QuotaNode, fr: FR, amount: int, allowed: bool) -> bool:
        if not ceiling:
            return False
        answer = lets(ceiling_, leaf, fr, amount, allowed)
        seen["let"] += answer
        return answer

    decisions, books, session = decide_recorded(objects, (books_module, "_session_lets", session_lets))
    assert session.placements is not None
    own = books.own
    view = (own.accounting.usage, own.placements.free if own.placements is not None else None) if own else None
    return decisions.to_json(), decisions.explanations, session.placements.free, view


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_asking_the_sessions_quota_first_leaves_every_decision_and_room_as_asking_both(name: str) -> None:
    objects = CLUSTERS[name]()
    seen = {"let": 0}
    fast = _run(objects, True, seen)
    plain = _run(objects, False, {"let": 0})
    assert fast == plain
    assert seen["let"] > 0
