"""Walks of searches the quota bound proves hopeless, told again from what they asked.

A search the bound proves hopeless still walks when a plugin may refuse a candidate
(``search.find_minimal``): the walk tells the plugins what the full walk would, and finds
nothing. Such a walk without scenario filters (``Walk.attempt`` with ``hopeless``) asks
``Walk._preemptible`` about candidates in an order that is a function of its inputs
and of the answers it gets: the candidates (the same objects in the same order), whether
it may borrow, the preemptor's leaf (its path, the lender chains) and needed
flavor-resources, and the quota usage of the leaf's tree, which a walk that starts with
nothing uncommitted (``Statement.ops`` empty) reads as the tree's commit epoch names it
(``Statement.epoch``). It reads neither the preemptor's request nor node room, runs no
fit test, and leaves nothing behind but what ``_preemptible`` does (the plugins' answers
and the walk's veto records): everything else is rolled back.

So a hopeless walk with the same inputs as one walked before in the session asks about
the same candidates in the same order as long as it gets the same answers. The session
keeps, per such inputs, the candidates an attempt asked about with the answer each got
(``Walk.visits``); a later one asks ``_preemptible`` about those candidates in that
order, and when every answer is the one kept, its walk would have asked exactly that and
nothing else: it is done. At the first other answer it stops, and the attempt walks; the
walk's verdict cache answers it for the candidates already asked, which are the first
ones it asks about (the same answers so far), so every plugin is asked what the walk
asks, once. Plugins are asked the same questions in the same order either way: the
vetoes, their counts and the plugins' notes are those of the walk.

The candidates a walk need not visit past the last one a plugin may refuse
(:func:`asked_up_to`) are a function of the same list, and are kept with it.
"""

from __future__ import annotations

from operator import is_

from ..model import FR
from ..session import Candidate, Session
from .walk import Walk

__all__ = ["REPLAY", "asked_up_to", "walk_hopeless"]

REPLAY = True
"""Whether a hopeless walk walked before with the same inputs is told again from what it
asked (tests turn it off to compare with the walks themselves)."""

_KEPT = "_hopeless_walks"  # in ``session.state``: see walk_hopeless


class _Walked:
    """The candidates of hopeless walks with the same inputs (a copy, which keeps its
    items alive: they are those objects), how many a walk visits, and per attempt (may
    it borrow) what the last walk of it asked and was answered."""

    __slots__ = ("asked", "candidates", "visits")

    def __init__(self, candidates: tuple[Candidate, ...], asked: int) -> None:
        self.candidates = candidates
        self.asked = asked
        self.visits: dict[bool, list[tuple[Candidate, bool]]] = {}


def walk_hopeless(session: Session, search: Walk, candidates: list[Candidate], attempts: list[bool]) -> None:
    """Every attempt of a search the bound proves hopeless, over ``candidates`` in walk
    order, as ``search.attempt(..., hopeless=True)`` walks them (see the module notes)."""
    horizon = session.veto_horizon
    statement = session.statement
    if search.filters or statement.ops or not REPLAY:
        if horizon is not None and not search.filters:
            candidates = candidates[: asked_up_to(candidates, horizon)]
        for allow_borrowing in attempts:
            search.attempt(candidates, allow_borrowing, hopeless=True)
        return
    kept: dict[tuple[int, frozenset[FR], int, int, int], list[_Walked]] | None = session.state.get(_KEPT)
    if kept is None:
        kept = session.state[_KEPT] = {}
    leaf = search.leaf
    place = (leaf.index, search.needed, statement.epoch(leaf), len(session.relied), len(session.taken))
    walks = kept.get(place)
    if walks is None:
        walks = kept[place] = []
    found = None
    size = len(candidates)
    for walked in walks:
        listed = walked.candidates
        if len(listed) == size and all(map(is_, listed, candidates)):
            found = walked
            break
    if found is None:
        found = _Walked(tuple(candidates), size if horizon is None else asked_up_to(candidates, horizon))
        walks.append(found)
    visited = candidates if found.asked == size else candidates[: found.asked]
    for allow_borrowing in attempts:
        visits = found.visits.get(allow_borrowing)
        if visits is not None and _told_again(search, visits):
            continue
        recorded: list[tuple[Candidate, bool]] = []
        search.visits = recorded
        try:
            search.attempt(visited, allow_borrowing, hopeless=True)
        finally:
            search.visits = None
        found.visits[allow_borrowing] = recorded


def _told_again(search: Walk, visits: list[tuple[Candidate, bool]]) -> bool:
    """Ask ``search`` about the candidates a walk with its inputs asked about, in order,
    while each answer is the one that walk got; whether every one was."""
    ask = search._preemptible
    return all(ask(candidate) is verdict for candidate, verdict in visits)  # stops at the first other


def asked_up_to(candidates: list[Candidate], horizon: int) -> int:
    """How many of the ordered candidates a hopeless walk without scenario filters must
    still visit: up to the last one a plugin may refuse (not evicted, admitted after
    ``horizon``, see :meth:`Session.never_vetoes`).

    Such a walk tells the plugins only which candidates reach ``is_preemptible``, and
    whether a candidate does depends only on the candidates before it (the victims
    accepted so far, the lender tests they change). Past the last one a plugin may
    refuse, each visit is answered "allowed" with no effect, and the attempt ends
    without a fit test and is rolled back: those visits tell nobody anything, in either
    attempt (the same list, the same verdicts)."""
    for i in range(len(candidates) - 1, -1, -1):
        candidate = candidates[i]
        admitted_at = candidate.workload.admitted_at
        if admitted_at is not None and admitted_at > horizon and not candidate.evicted:
            return i + 1
    return 0
