"""The rounds of a session (SEMANTICS §2): heads, nomination, order, processing.

One round is what Kueue calls a scheduling cycle: every leaf queue offers its
head, every head is nominated against the accounting as it stands at the
start of the round, and the heads are then processed in order, each seeing
what the earlier ones changed. A head that lost to an earlier entry of the
same round is offered again in the next round; every other outcome finishes
it for the session. Every round finishes at least its first entry, so a
session ends.

A head a kept head of its queue judges (``preemption/heads.py``) is pending with a
message of its own. When it reserves nothing and no plugin listens to admissions and
evictions, processing it reads and changes nothing the round's other entries read, so
it is processed where it is judged instead of being ordered among them; the round
remembers only which queues it processed so, to tell whether one of them was the least
entry, the one never offered again, when that is asked (rarely: only when the first
entry in order is to be offered again).

An admitted elastic workload below its count is in its queue's order too, as a
pending workload of its priority and creation time (§4 Growth, docs/elastic.md):
it grows by what fits, never preempts, and when it does not grow it gets no
pending entry and does not block a StrictFIFO queue (it is running, not waiting).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from ..decisions import Admitted, AdmittedPodSet, Pending
from ..model import Workload
from ..objects.records import new_pending
from ..preemption.heads import Kept, State, judge, judged_by, kept_heads, state_now
from ..preemption.memo import tally
from ..quota import QuotaNode
from ..session import NOFIT, Assignment, Session
from .books import Books, place, reserve, still_fits
from .deployments import growing_in
from .nominate import nominate
from .preempting import preempt
from .verdicts import Relied, grows, noted, record_scan

__all__ = ["QUEUE_ORDER", "nominate", "run_rounds"]

QUEUE_ORDER = "_queue_order"
"""In ``session.state`` after the rounds: each queue's pending workloads in the session's
order (``workload_key``), for :func:`~preemptd.framework.decisions.number_pending`."""

AT_ONCE = True
"""Whether a judged head that reserves nothing is processed where it is judged (tests turn
it off to compare with the same head ordered among the round's entries)."""

KEPT_BY_QUEUE = True
"""Whether the rounds keep, per queue, the heads kept in its leaf while its tree's search
state stands, and judge each head by them (``heads.judged_by``), instead of asking
``heads.judge`` afresh for each (tests turn it off to compare)."""

_UNKEPT: State = (-1, -1, -1)  # a queue's ``state`` while its leaf keeps no head to judge by
_DONE = 0  # finished for the session, not admitted
_AGAIN = 1  # lost to an earlier entry of this round: offered again next round
_ADMITTED = 2


@dataclass(slots=True)
class _Queue:
    leaf: QuotaNode
    items: list[Workload]
    keys: list[tuple[object, ...]]  # the session's order key of each item
    strict: bool  # StrictFIFO
    reserves: bool  # a preemptor without victims reserves quota (not ``reclaimWithinCohort: Any``)
    pos: int = 0
    blocked: bool = False
    level: int = 0  # the borrowing level of its head last processed at once (``_least_first``)
    state: State | None = None  # its tree's search state when it read ``kept`` (None: read again)
    kept: list[Kept] | None = None  # the heads its leaf keeps in that state (``heads.kept_heads``)
    root: int = field(init=False)  # its tree: the index of its leaf's root

    def __post_init__(self) -> None:
        self.root = self.leaf.root.index


@dataclass(slots=True)
class _Rounds:
    """What the rounds of one session keep besides the session itself."""

    books: Books
    # The verdict of every workload not admitted; one offered again in a later round
    # replaces its earlier verdict.
    pending: dict[str, Pending] = field(default_factory=dict)
    # Victim workload -> its entry in ``decisions.preempted`` (one per victim).
    preempted_at: dict[str, int] = field(default_factory=dict)
    relied: Relied = field(default_factory=Relied)  # verdicts of entries lost to victims relied on


@dataclass(slots=True)
class _Entry:
    queue: _Queue
    workload: Workload
    # A judged head's is its kept head's, read only (preemption/heads.py, ``judge``).
    assignment: Assignment
    order: tuple[object, ...]
    judged: Kept | None = None  # the kept head that judged it
    message: str = ""  # a judged head's pending message


_ORDER = attrgetter("order")
_UNIT = attrgetter("unit")


def run_rounds(session: Session) -> None:
    started = time.perf_counter()
    snapshot = session.snapshot
    pending_by_queue = snapshot.pending_by_queue
    may_grow: dict[str, list[Workload]] = {}  # admitted elastic workloads that may grow, by queue
    for name, admitted in snapshot.admitted_by_queue.items():
        elastic = growing_in(name, admitted)
        if elastic:
            may_grow[name] = elastic
    queues = []
    in_order: dict[str, list[Workload]] = {}  # each queue's pending workloads, in key order
    for name in sorted(pending_by_queue.keys() | may_grow.keys()):
        listed = pending_by_queue.get(name, ())
        more = may_grow.get(name)
        items = listed if more is None else [*listed, *more]  # the growing ones after them
        keys = session.order_keys(items)  # session.workload_key of each
        order = sorted(range(len(items)), key=keys.__getitem__)  # stable: sorted(items, key=key)
        leaf = snapshot.tree.leaves[name]
        strict = leaf.spec.queueing_strategy == "StrictFIFO"
        reserves = leaf.spec.preemption.reclaim_within_cohort != "Any"
        ordered = [items[i] for i in order]
        queues.append(_Queue(leaf, ordered, [keys[i] for i in order], strict, reserves))
        # The rounds never change a queue's list: without growing ones it is the same list.
        in_order[name] = ordered if more is None else [items[i] for i in order if i < len(listed)]
    session.state[QUEUE_ORDER] = in_order
    rounds = _Rounds(Books(session))
    books = rounds.books
    statement = session.statement
    picker = session.policy is not None and session.policy.picker is not None
    counters = session.counters
    # Without a listener to admissions and evictions, processing an entry asks no plugin
    # anything: a judged head that reserves nothing is processed where it is judged.
    quiet = AT_ONCE and statement.on_admit is None and statement.on_evict is None
    explanations = session.decisions.explanations if session.explaining else None
    flavor_scans = session.decisions.flavor_scans
    pending_of = rounds.pending
    by_queue = KEPT_BY_QUEUE and not picker
    ops = statement.ops  # the same list for the session: empty while nothing is held
    states: dict[int, State] = {}
    while True:
        entries = []
        offering = []  # the queues offering a head this round, in order
        at_once: list[_Queue] = []  # the queues whose head was processed at once
        # Search states of the round's nominations (heads.judge), by tree; one equal to the
        # last round's is that tuple: a queue tells by identity that its ``kept`` stand.
        before, states = states, {}
        judged_count = answered = 0
        for queue in queues:
            if queue.blocked:
                continue
            pos = queue.pos
            if pos >= len(queue.items):
                continue
            offering.append(queue)
            workload = queue.items[pos]
            # A head a kept head judges takes that head's assignment as it is; a plugin
            # ordering the round reads assignments, and gets one of its own (nominate).
            judged = None
            if not by_queue:
                judged = None if picker else judge(session, queue.leaf, workload, states)
                counters.nominations += judged is not None
            elif queue.state is not _UNKEPT:
                root = queue.root
                state = states.get(root)
                if state is None:
                    state = states[root] = state_now(session, queue.leaf, before.get(root))
                if queue.state is not state:  # none kept now: none before it nominates again
                    queue.kept = kept_heads(session, queue.leaf, state)
                    queue.state = state if queue.kept is not None else _UNKEPT
                kept_now = queue.kept
                if kept_now is not None and not (
                    ops or workload.flavor_scan or workload.is_deployment or workload.admission is not None
                ):
                    judged = judged_by(session, queue.leaf, kept_now, state, workload)
                    if judged is not None:  # counted as heads.judge counts it
                        judged_count += 1
                        answered += judged[0].answers is not None
            if judged is not None:
                kept, message = judged
                if quiet and (kept.nofit or not queue.reserves):
                    # Pending with a message of its own and nothing reserved: it changes
                    # nothing another entry of the round reads, so it is processed now
                    # (only the first entry of the round is told apart, ``_least_first``).
                    queue.level = kept.level
                    at_once.append(queue)
                    key = workload.key
                    if explanations is not None:  # _judged, nothing reserved
                        lines = explanations.get(key)
                        if lines is None:
                            explanations[key] = [kept.tried]
                        else:
                            lines.append(kept.tried)
                    if kept.nofit:
                        made = new_pending(key, "NoFit", message or "no flavor fits", ())
                    elif message and not session.notes_added:
                        made = new_pending(key, "PreemptionNoCandidates", message, ())
                    else:
                        made = new_pending(key, "PreemptionNoCandidates", noted(session, key, message), ())
                    pending_of[key] = made
                    scan = kept.scan
                    if scan is not None:
                        flavor_scans[key] = scan
                    queue.pos += 1
                    if queue.strict:
                        _block(session, rounds, queue, workload)
                    continue
                at = (kept.level, queue.keys[pos])  # its order among the round's entries
                entries.append(_Entry(queue, workload, kept.assignment, at, kept, message))
                continue
            queue.state = None  # its nomination may keep a head: read them again
            assignment = nominate(session, queue.leaf, workload, judged=picker)
            level = assignment.level if assignment.mode != NOFIT else 0
            entries.append(_Entry(queue, workload, assignment, (level, queue.keys[pos])))
        if judged_count:
            counters.nominations += judged_count
            counters.judged += judged_count
            counters.dominated += answered
            tally(session).answered += answered
        if not offering:
            break
        if len(offering) < len(queues):
            # A queue blocked or emptied stays so: the later rounds go over the others only.
            queues = offering
        entries.sort(key=_ORDER)
        relied_on: set[tuple[object, ...]] = set()
        for i, entry in enumerate(_picked(session, entries) if picker else entries):
            queue = entry.queue
            workload = entry.workload
            if entry.judged is not None:
                # Pending for the session (a judged head is not growing, not a Deployment).
                _judged(session, rounds, queue, workload, entry.judged, entry.message)
                if statement.ops:  # what it reserved
                    statement.commit()
                if books.own is not None and books.own.ops:
                    books.own.commit()
                queue.pos += 1
                if queue.strict:
                    _block(session, rounds, queue, workload)
                continue
            outcome = _process(session, rounds, entry, relied_on)
            if statement.ops:  # Statement.commit of nothing changes nothing
                statement.commit()
            if books.own is not None and books.own.ops:
                books.own.commit()
            growing = workload.admission is not None and not workload.is_deployment  # grows
            if growing:
                rounds.pending.pop(workload.key, None)  # running: never listed pending
            if outcome == _AGAIN and (i or not _least_first(entries[0], at_once)):
                continue
            # The first entry of a round (the least in order of all, heads processed at
            # once included) is never offered again, so every round finishes at least
            # one workload and the session ends.
            queue.pos += 1
            if queue.strict and outcome != _ADMITTED and not growing:
                _block(session, rounds, queue, workload)
    rounds.relied.settle(rounds.pending)
    session.decisions.pending.extend(rounds.pending.values())
    searching = session.timings.get("preempt", 0.0) + session.timings.get("reclaim", 0.0)
    session.timings["allocate"] = time.perf_counter() - started - searching


def _least_first(entry: _Entry, at_once: list[_Queue]) -> bool:
    """Whether ``entry``, the least of a round's entries in order, is also less than
    every head the round processed at once (each its queue's last one, made the pair
    the entries are ordered by only here)."""
    order = entry.order
    return all(order < (queue.level, queue.keys[queue.pos - 1]) for queue in at_once)


def _block(session: Session, rounds: _Rounds, queue: _Queue, workload: Workload) -> None:
    """A StrictFIFO queue whose head ``workload`` was not admitted: blocked for the session,
    every workload behind it pending (an elastic one growing back is not pending)."""
    queue.blocked = True
    for behind in queue.items[queue.pos :]:
        if grows(behind):
            session.explain(
                behind.key,
                f"does not grow: behind {workload.key}, the head of StrictFIFO queue "
                f"{queue.leaf.name}, which was not admitted",
            )
            continue
        _pending(
            rounds,
            behind.key,
            "WaitingForQuota",
            f"behind {workload.key}, the head of StrictFIFO queue {queue.leaf.name}, which was not admitted",
        )


def _picked(session: Session, entries: list[_Entry]) -> Iterator[_Entry]:
    """The round's entries in processing order: the classic order (§2.3) unless a plugin
    answers ``round_order``, whose picker chooses each next entry among those left, on
    the accounting as the entries before it left it (§7.2)."""
    policy = session.policy
    if policy is None or policy.picker is None:
        yield from entries
        return
    left = list(entries)
    while left:
        yield left.pop(policy.pick([e.assignment for e in left]) if len(left) > 1 else 0)


def _process(session: Session, rounds: _Rounds, entry: _Entry, relied_on: set[tuple[object, ...]]) -> int:
    books = rounds.books
    workload = entry.workload
    assignment = entry.assignment
    decisions = session.decisions
    key = workload.key
    tried = assignment.tried
    if tried and session.explaining:
        # session.explain of each line, in one step.
        explanations = decisions.explanations
        lines = explanations.get(key)
        if lines is None:
            explanations[key] = list(tried)
        else:
            lines.extend(tried)
    mode = assignment.mode
    if mode == NOFIT:
        if grows(workload):
            session.explain(key, assignment.message)
            return _DONE
        return _without_victims(session, rounds, entry, assignment.message)
    if assignment.blocked:
        _pending(rounds, key, "WaitingForQuota", f"a Deployment does not grow while {assignment.blocked}")
        return _DONE
    if assignment.needs_preemption and not assignment.victims:
        return _without_victims(session, rounds, entry, assignment.message)
    victims = assignment.victims
    if relied_on and not relied_on.isdisjoint(map(_UNIT, victims)):
        rounds.relied.lose(rounds.pending, key, victims, relied_on)
        return _AGAIN
    if not still_fits(session, books, entry.queue.leaf, assignment):
        _pending(rounds, key, "WaitingForQuota", "no longer fits after other workloads of this session")
        return _AGAIN
    leaf = entry.queue.leaf
    if assignment.victims:
        rounds.pending[key] = preempt(session, books, rounds.preempted_at, workload, assignment)
        relied_on.update(map(_UNIT, victims))
        session.statement.add_usage(leaf, assignment.usage)
        books.add_usage(leaf, assignment.usage, preemptor=True)
        if assignment.replicas:
            # Each replica takes its victims' room and, on the same node, what it
            # needs beyond it: nobody else gets either in this session.
            for choice in assignment.replicas:
                if choice.from_free:
                    session.statement.take_room(choice.node, choice.from_free)
        else:
            books.place(assignment)  # the room its victims free is now its
        decisions.flavor_scans[key] = {}
        return _DONE
    session.statement.admit(workload, leaf, assignment.usage)
    books.add_usage(leaf, assignment.usage)
    if books.placed:  # by still_fits, on both rooms
        books.placed = False
    else:
        place(session, session.statement, assignment)
        books.place(assignment)
    borrowing = False
    accounting = session.accounting
    for fr in assignment.usage:  # any(...), without a generator's frame
        if accounting.borrowing(leaf, fr):
            borrowing = True
            break
    totals = assignment.committed_total
    admission = workload.admission
    # Grown in place: every podSet of the admission with its new total.
    listed = admission.pod_sets if admission is not None and not workload.is_deployment else assignment.pod_sets
    decisions.admitted.append(
        Admitted(
            key,
            leaf.name,
            borrowing,
            tuple(AdmittedPodSet(ps.name, totals.get(ps.name, ps.count), dict(ps.flavors)) for ps in listed),
            grown=admission is not None,
        )
    )
    if workload.flavor_scan:
        decisions.flavor_scans[key] = {}  # an admitted workload starts its next scan afresh
    rounds.pending.pop(key, None)
    return _ADMITTED


def _judged(session: Session, rounds: _Rounds, queue: _Queue, workload: Workload, judged: Kept, message: str) -> None:
    """:func:`_process` of a head ``judged`` judges, made directly: pending as the kept
    head's assignment with the judged ``message``, as :func:`_without_victims` makes it.
    Nothing else of :func:`_process` applies to it (not growing, not a Deployment, no
    flavor scan of its own to resume, no victims) and its kept head's assignment names no
    plugin that vetoed (``heads.keep_head``): ``NoFit``, or ``PreemptionNoCandidates``
    with its quota reserved unless its queue reclaims ``Any``."""
    key = workload.key
    if session.explaining:
        explanations = session.decisions.explanations
        lines = explanations.get(key)
        if lines is None:
            explanations[key] = [judged.tried]
        else:
            lines.append(judged.tried)
    assignment = judged.assignment
    if assignment.mode == NOFIT:
        rounds.pending[key] = new_pending(key, "NoFit", message or "no flavor fits", ())
    else:
        if queue.reserves:
            reserve(session, rounds.books, queue.leaf, assignment)
        rounds.pending[key] = new_pending(key, "PreemptionNoCandidates", noted(session, key, message), ())
    if judged.scan is not None:  # record_scan: a judged head stores no scan of its own
        session.decisions.flavor_scans[key] = judged.scan


def _without_victims(session: Session, rounds: _Rounds, entry: _Entry, message: str) -> int:
    """SEMANTICS §2.4 for an entry left without victims: ``NoFit``, or one that needs
    preemption and found none (its quota reserved unless its queue reclaims ``Any``)."""
    assignment = entry.assignment
    workload = entry.workload
    key = workload.key
    if assignment.mode == NOFIT:
        _pending(rounds, key, "NoFit", message or "no flavor fits")
        record_scan(session, workload, assignment)
        return _DONE
    reason = "PreemptionNoCandidates"
    vetoed_by = assignment.vetoed_by
    for plugin in sorted(vetoed_by) if vetoed_by else ():
        veto = session.veto_reason(plugin)
        if veto is not None:
            reason = veto
            break
    queue = entry.queue
    if queue.reserves:
        reserve(session, rounds.books, queue.leaf, assignment)
    rounds.pending[key] = new_pending(key, reason, noted(session, key, message), ())
    record_scan(session, workload, assignment)
    return _DONE


def _pending(rounds: _Rounds, key: str, reason: str, message: str) -> None:
    rounds.pending[key] = new_pending(key, reason, message, ())
