"""The session seen without its chosen victims; the room and quota preemptors hold.

The rounds (:mod:`.allocate`) keep one :class:`Books` per session. It answers
SEMANTICS §2.4's re-check ("with all victims chosen so far in the session and its
own removed": :func:`still_fits`) and holds what a preemptor reserves: its quota while it waits for
its victims (:func:`reserve`) and the room its victims free (:func:`place`).

An entry without victims is re-checked against its quota first (placing pods changes only
node room, so an entry the quota refuses places nothing), then against node room by placing
its pods, best fit, where its admission places them: on the session's room and on the
view's, each pod set's node terms worked out once for both. Admission changes only quota
before it places them, so the nodes chosen are the same; when the entry fits, the
placements are kept (``Books.placed``) instead of counted, rolled back and made again; when
it does not, they are rolled back.

The session's own accounting holds at least the usage of the view and of the physical
accounting at every node of every queue tree: both are copies of it made at the first
victim, given the same admissions and reservations since, the view without the victims and
the physical one without what preemptors hold. Usage a node passes up grows with its own
(only what exceeds its guaranteed quota goes up), and Available only shrinks as usage
grows, so a flavor-resource the session's quota lets an entry take (within its nominal
when it may not borrow) the other two let it take: the re-check asks the session's first,
and theirs only when it says no.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import FR, PodSet, Toleration
from ..nodes import Placements, pod_terms
from ..quota import Accounting, QuotaNode
from ..session import Assignment, Candidate, Session, Statement

__all__ = ["Books", "place", "reserve", "still_fits"]


class Books:
    """The session's accounting seen *without* the victims chosen so far.

    SEMANTICS §2.4 re-checks each entry "with all victims chosen so far in the
    session and its own removed"; keeping that view up to date as victims are
    chosen makes the re-check cost the entry's own victims, not the session's.
    Its placements also hold the room reserved for preemptors, which nobody else
    may take in this session.

    Until the first victim is chosen the view equals the session's own, so it is
    only copied then: a session without preemption pays nothing for it.

    A Fit entry must also fit the *physical* view — every victim still holding
    its quota, preemptors not yet holding theirs — so that the Fit entries of a
    round do not, together, take quota only the victims will free.
    """

    __slots__ = ("evicted", "own", "physical", "placed", "session", "victims", "with_room")

    def __init__(self, session: Session) -> None:
        self.session = session
        self.own: Statement | None = None
        self.physical: Accounting | None = None
        self.victims: dict[tuple[object, ...], Candidate] = {}
        # Set by the re-check of an entry with victims that fits (:func:`still_fits`): its
        # victims not chosen before are evicted from ``own`` already, with their node room
        # when ``with_room``; the entry's own preemption then does not evict them again.
        self.evicted = False
        self.with_room = False
        # Set by the re-check of an entry without victims that fits (:func:`still_fits`):
        # its pods are placed on the session's room and on this view's already.
        self.placed = False

    @property
    def statement(self) -> Statement:
        return self.own if self.own is not None else self.session.statement

    def add_usage(self, leaf: QuotaNode, usage: dict[FR, int], *, preemptor: bool = False) -> None:
        """Mirror usage the session added (its own statement already has it). What a
        preemptor reserves is not physically used until its victims are gone."""
        if self.own is not None:
            self.own.add_usage(leaf, usage)
        if self.physical is not None and not preemptor:
            self.physical.add_all(leaf, usage)

    def place(self, assignment: Assignment) -> None:
        if self.own is not None:
            place(self.session, self.own, assignment)

    def evict(self, victim: Candidate) -> None:
        if self.own is None:
            session = self.session
            placements = session.placements.copy() if session.placements is not None else None
            self.own = Statement(session.accounting.copy(), placements)
            self.physical = session.accounting.copy()
        self.own.evict(victim)

    def give_room(self, victim: Candidate) -> None:
        """The node room ``evict`` gives for ``victim``, when it was evicted without it."""
        assert self.own is not None
        if self.own.placements is not None:
            self.own.give_rooms(victim.room)

    def commit(self) -> None:
        if self.own is not None:
            self.own.commit()


def reserve(session: Session, books: Books, leaf: QuotaNode, assignment: Assignment) -> None:
    """SEMANTICS §2.4: a preemptor without victims keeps later entries of its cohort tree
    from taking the quota it is waiting for."""
    used = session.accounting.usage[leaf.index]  # Accounting.used of the leaf, read directly
    subtree = leaf.subtree
    usage = assignment.usage
    borrows = False
    for fr, amount in usage.items():
        if used.get(fr, 0) + amount > subtree.get(fr, 0):
            borrows = True
            break
    reserve: dict[FR, int] = {}
    for fr, amount in usage.items():
        now = used.get(fr, 0)
        nominal = subtree.get(fr, 0)
        if borrows:
            limit = leaf.borrowing_limit.get(fr)
            value = amount if limit is None else min(amount, nominal + limit - now)
        else:
            value = min(amount, nominal - now)
        if value > 0:
            reserve[fr] = value
    if reserve:
        session.statement.add_usage(leaf, reserve)
        books.add_usage(leaf, reserve)


def place(session: Session, statement: Statement, assignment: Assignment) -> bool:
    """Place the assignment's pods, best fit, on the placements of ``statement``; whether
    every pod of each podSet on one flavor's nodes found a node (it stops at the first
    podSet short of room).

    When every pod found a node, ``Session.pods_fit`` of the node targets is true: the
    earlier podSets are placed as it places them, and the nodes hold each pod of the last
    one where it went, counted on the room before (a node's room only shrinks as pods go
    there). Not the converse in every case: a pod is placed on a node whose room covers
    each of its requests, zero ones too, while ``pods_fit`` counts a node's pods by their
    positive requests once; a short placement is asked again by ``pods_fit``."""
    placements = statement.placements
    if placements is None:
        return True
    return _place_terms(statement, _terms(session, placements, assignment.node_targets()))


_Terms = list[tuple[str, Mapping[str, int], int, dict[str, str], tuple[Toleration, ...]]]


def _terms(session: Session, placements: Placements, targets: list[tuple[PodSet, int, str]]) -> _Terms:
    """Per target whose flavor has nodes in ``placements``: its flavor, requests, count,
    node selector and tolerations (what placing its pods reads)."""
    flavors = session.snapshot.flavors
    terms: _Terms = []
    for spec, count, flavor_name in targets:
        if placements.has_nodes(flavor_name):
            selector, tolerations = pod_terms(flavors[flavor_name], spec)
            terms.append((flavor_name, spec.requests, count, selector, tolerations))
    return terms


def _place_terms(statement: Statement, terms: _Terms) -> bool:
    """Place the pods of ``terms``, best fit, on the placements of ``statement``; whether
    every one found a node (it stops at the first pod set short of room)."""
    placements = statement.placements
    assert placements is not None
    taken: list[tuple[str, Mapping[str, int]]] = []
    for flavor_name, requests, count, selector, tolerations in terms:
        # The placements take the room of several pods of a node as one change, tentatively;
        # the statement records each change as its ``take_room`` would have.
        placed = placements.place_pods(flavor_name, requests, count, selector, tolerations, taken=taken)
        statement.took_rooms(taken)
        if len(placed) < count:
            return False
        taken.clear()
    return True


def still_fits(session: Session, books: Books, leaf: QuotaNode, assignment: Assignment) -> bool:
    """Re-check ``assignment`` against what earlier entries of the session changed, with
    every victim of the session and its own removed (SEMANTICS §2.4)."""
    if assignment.replicas:
        targets: list[tuple[PodSet, int, str]] = []
        placements = session.placements
        wanted: dict[str, dict[str, int]] = {}
        for choice in assignment.replicas:
            room = wanted.setdefault(choice.node, {})
            for resource, amount in choice.from_free.items():
                room[resource] = room.get(resource, 0) + amount
        for node, room in wanted.items():
            # Free room an earlier entry of this round took is gone for these replicas.
            assert placements is not None
            free = placements.free[node]
            if any(free.get(r, 0) < amount for r, amount in room.items()):
                return False
    else:
        targets = assignment.node_targets()
    if not assignment.victims:
        return _fits_without_victims(session, books, leaf, assignment, targets)
    statement = books.statement
    accounting = statement.accounting
    checkpoint = statement.checkpoint()
    # The evictions of an entry with victims, on the session's view without its victims,
    # are the ones its preemption makes (preempting.preempt) when it fits: they are kept then,
    # and the preemption only gives back its victims' node room if they were evicted without it.
    keep = statement is books.own
    evicted: set[tuple[object, ...]] = set()
    fits = False
    try:
        new = _evict_all(statement, books, assignment, evicted)
        if len(evicted) != new:
            keep = False  # a victim listed twice: the preemption takes it once
        for fr, amount in assignment.usage.items():
            if amount > accounting.available(leaf, fr):
                return False
            if not assignment.allow_borrowing and accounting.used(leaf, fr) + amount > leaf.subtree.get(fr, 0):
                return False
        fits = not targets or session.pods_fit(targets, statement=statement)
        return fits
    finally:
        if fits and keep:
            books.evicted = True
            books.with_room = assignment.node_short
        else:
            statement.rollback(checkpoint)


def _fits_without_victims(
    session: Session, books: Books, leaf: QuotaNode, assignment: Assignment, targets: list[tuple[PodSet, int, str]]
) -> bool:
    """:func:`still_fits` of an entry without victims. Its quota is asked first (of the
    session's accounting, and of the view's and the physical one only when the session's
    says no: see the notes): placing pods changes only node room, so an entry the quota
    refuses places nothing. Node room is physical: a victim's pods still occupy it
    until they are gone. Without a listener to the admission (which would see the room
    before its pods took it), the pods are placed where the admission places them, on the
    session's room and then on the view's, and kept if both take them all."""
    statement = books.statement
    accounting = statement.accounting
    physical = books.physical
    ceiling = session.accounting
    allowed = assignment.allow_borrowing
    subtree = leaf.subtree
    for fr, amount in assignment.usage.items():
        if physical is not None and _session_lets(ceiling, leaf, fr, amount, allowed):
            continue  # so do the view's quota and the physical one (see the notes)
        if amount > accounting.available(leaf, fr):
            return False
        if physical is not None and amount > physical.available(leaf, fr):
            return False  # only victims of this session would free it
        if not allowed and accounting.used(leaf, fr) + amount > subtree.get(fr, 0):
            return False
    if not targets:
        return True
    session_statement = session.statement
    if session_statement.on_admit is None:
        placed = _place_both(session, statement, targets)
        if placed == _PLACED:
            books.placed = True
            return True
        if placed == _SHORT_ON_VIEW:
            # The session's room took them all, so ``pods_fit`` says yes there.
            return session.pods_fit(targets, statement=statement)
    # A placement short of a node is asked of ``pods_fit`` (see :func:`place`).
    if not session.pods_fit(targets):
        return False
    return statement is session_statement or session.pods_fit(targets, statement=statement)


def _session_lets(ceiling: Accounting, leaf: QuotaNode, fr: FR, amount: int, allowed: bool) -> bool:
    """Whether the session's quota (``ceiling``) lets an entry of ``leaf`` take ``amount``
    of ``fr``, within its nominal unless ``allowed`` to borrow."""
    return amount <= ceiling.available(leaf, fr) and (
        allowed or ceiling.used(leaf, fr) + amount <= leaf.subtree.get(fr, 0)
    )


_PLACED = 0
_SHORT_ON_SESSION = 1
_SHORT_ON_VIEW = 2


def _place_both(session: Session, view: Statement, targets: list[tuple[PodSet, int, str]]) -> int:
    """:func:`place` of the pods of ``targets`` on the session's statement, then on ``view``
    when it is another, each pod set's terms worked out once for both; ``_PLACED``, or
    which room came up short (both given back then)."""
    statement = session.statement
    placements = statement.placements
    if placements is None:
        return _PLACED
    terms = _terms(session, placements, targets)
    at = statement.checkpoint()
    if not _place_terms(statement, terms):
        statement.rollback(at)
        return _SHORT_ON_SESSION
    if view is statement or view.placements is None:
        return _PLACED
    view_at = view.checkpoint()
    if not _place_terms(view, terms):
        view.rollback(view_at)
        statement.rollback(at)
        return _SHORT_ON_VIEW
    return _PLACED


def _evict_all(
    statement: Statement, books: Books, assignment: Assignment, evicted: set[tuple[object, ...]]
) -> int:
    """``statement.evict`` of each victim of ``assignment`` not chosen before (adding its
    unit to ``evicted``), with node room when the nodes lacked it; returns how many victims
    were not chosen before, a unit listed twice counted twice. Without an eviction
    listener, the quota of a leaf's victims is taken off in one step: taking ``a`` then
    ``b`` off a leaf leaves every level of its tree as taking ``a + b`` once does (each
    level passes up ``min(amount, what it stored above its guaranteed quota)``), and a
    rollback gives the sum back as one step."""
    chosen = books.victims
    nodes = assignment.node_short
    new = 0
    if statement.on_evict is not None:
        for victim in assignment.victims:
            if victim.unit not in chosen:
                new += 1
                evicted.add(victim.unit)
                statement.evict(victim, nodes=nodes)
        return new
    by_leaf: dict[int, tuple[QuotaNode, dict[FR, int]]] = {}
    for victim in assignment.victims:
        if victim.unit in chosen:
            continue
        new += 1
        evicted.add(victim.unit)
        leaf = victim.leaf
        found = by_leaf.get(leaf.index)
        if found is None:
            by_leaf[leaf.index] = (leaf, dict(victim.usage))
        else:
            total = found[1]
            for fr, amount in victim.usage.items():
                total[fr] = total.get(fr, 0) + amount
        if nodes and statement.placements is not None:
            statement.give_rooms(victim.room)
    for leaf, usage in by_leaf.values():
        statement.remove_usage(leaf, usage)
    return new
