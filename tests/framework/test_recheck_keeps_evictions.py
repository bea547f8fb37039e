"""The re-check of an entry with victims (SEMANTICS §2.4, ``books.still_fits``) evicts
them from the session's view without its victims; when the entry fits, those evictions
are the ones its preemption makes, so they are kept instead of being rolled back and made
again (``Books.evicted``), and only the victims' node room is given back afterwards when
the re-check evicted them without it.

Held here to the re-check that rolls everything back, on generated clusters with nodes:
the same decisions and explanations, and the same view at the end of the session (the
quota of every queue-tree node, the free room of every node).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from preemptd.framework.actions import allocate
from preemptd.framework.actions.books import Books
from preemptd.framework.run import run_session
from preemptd.framework.session import Session
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import CONTENDED, NOW_MS, generate_saturated, generate_spec

CLUSTERS = {
    "contended-40-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=40, workloads=250, queues=10, leaves_per_cohort=5), "recheck/contended"
    ),
    "contended-80-nodes": lambda: generate_spec(
        replace(CONTENDED, nodes=80, workloads=500, queues=20, leaves_per_cohort=5), "recheck/contended-2"
    ),
    "saturated-10x300": lambda: generate_saturated(1, queues=10, workloads=300),
}


def decide_recorded(objects: list[dict[str, Any]], *patches: tuple[object, str, object]) -> tuple[Any, Books, Session]:
    """One default session over ``objects`` with each ``(target, name, value)`` of
    ``patches`` set, and the view (``Books``) and the session its rounds made."""
    made: list[tuple[Books, Session]] = []
    original_books = allocate.Books

    def recording(session: Session) -> Books:
        books = original_books(session)
        made.append((books, session))
        return books

    actions, registry_of = default_session()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allocate, "Books", recording)
        for target, name, value in patches:
            patch.setattr(target, name, value)
        decisions = run_session(snapshot(objects, NOW_MS), registry_of(), actions=actions)
    ((books, session),) = made
    return decisions, books, session


def _run(objects: list[dict[str, Any]], kept: dict[bool, int] | None) -> tuple[Any, ...]:
    """Decisions, explanations and the final view without victims; ``kept`` (when given)
    counts the re-checks that kept their evictions, by whether they gave node room."""
    original_still_fits = allocate.still_fits

    def still_fits(session: Session, view: Books, leaf: Any, assignment: Any) -> bool:
        fits = original_still_fits(session, view, leaf, assignment)
        if view.evicted:
            if kept is None:  # the re-check that rolls back: its preemption evicts again
                assert view.own is not None
                view.own.rollback(0)
                view.evicted = False
            else:
                kept[view.with_room] += 1
        return fits

    decisions, view, _ = decide_recorded(objects, (allocate, "still_fits", still_fits))
    own = view.own
    assert own is not None and not own.ops
    free = own.placements.free if own.placements is not None else None
    return decisions.to_json(), decisions.explanations, own.accounting.usage, free


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_a_fitting_entry_keeps_its_recheck_evictions_and_ends_with_the_same_view(name: str) -> None:
    objects = CLUSTERS[name]()
    kept = {True: 0, False: 0}
    fast = _run(objects, kept)
    again = _run(objects, None)
    assert fast[0] == again[0]
    assert fast[1] == again[1]
    assert fast[2] == again[2]  # quota used at every node of every queue tree
    assert fast[3] == again[3]  # free room of every node
    assert sum(kept.values()) > 0


def test_the_clusters_keep_evictions_both_with_and_without_node_room() -> None:
    """Between them the clusters above keep re-check evictions made with the victims'
    node room (the entry's nodes were short) and without it (room given afterwards)."""
    seen = {True: 0, False: 0}
    for make in CLUSTERS.values():
        _run(make(), seen)
    assert seen[True] > 0 and seen[False] > 0
