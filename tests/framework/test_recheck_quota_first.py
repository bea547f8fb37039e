"""The re-check of an entry without victims (SEMANTICS §2.4, ``books.still_fits``) asks its
quota before it places a pod: placing pods changes only node room, and the quota reads
none, so an entry the view's quota or the physical quota refuses is refused without a pod
placed and given back on either room. An entry the quota lets through has each pod set's
node terms (selector, tolerations) worked out once for both rooms it is placed on.

The answers and the rooms left are those of the re-check that placed first: held here case
by case, and on generated clusters by ``test_recheck_places_pods.py`` and the equivalence
script over every example and scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from preemptd.framework.actions import books as books_module
from preemptd.framework.actions.books import Books, still_fits
from preemptd.framework.model import FR, PodSet, Workload
from preemptd.framework.nodes import Placements
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Assignment, PodSetAssignment, Registry, Session, Statement
from preemptd.framework.testing import snapshot

from benchmarks.generate import NOW_MS, generate_saturated


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
    """Every node room taken tentatively (by a statement's ``take_room``), by node."""
    taken: list[str] = []
    original = Placements.take_tentatively

    def counting(self: Placements, node: str, requests: Mapping[str, int]) -> None:
        taken.append(node)
        original(self, node, requests)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Placements, "take_tentatively", counting)
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
