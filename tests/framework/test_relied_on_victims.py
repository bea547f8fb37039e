"""An entry of a round whose victims an earlier entry of the same round relies on is
sent back (SEMANTICS §2.4, ``allocate._process``): ``WaitingForQuota``, naming each
overlapping victim once, in name order, and only those; an entry whose victims nobody
relies on goes on to its re-check and, when it preempts, its victims are relied on for
the rest of the round.

Queue a (3 cores, LowerPriority) is full of ``v1``, ``v2``, ``v3`` (1 core each,
priority 1); ``p`` (2 cores, priority 5) needs two of them.
"""

from __future__ import annotations

from preemptd.framework.actions import allocate
from preemptd.framework.actions.books import Books
from preemptd.framework.actions.nominate import nominate
from preemptd.framework.model import PreemptionPolicy
from preemptd.framework.objects.records import new_pending
from preemptd.framework.session import Session
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import priority

RELIED_ON = "its victims are relied on by another workload of this session: "


def _entry(session: Session) -> tuple[allocate._Rounds, allocate._Entry]:
    leaf = session.snapshot.tree.leaves["a"]
    (pending,) = session.snapshot.pending_by_queue["a"]
    assignment = nominate(session, leaf, pending)
    key = session.workload_key(pending)
    entry = allocate._Entry(allocate._Queue(leaf, [pending], [key], False, True), pending, assignment, (0, key))
    return allocate._Rounds(Books(session)), entry


def _session() -> Session:
    policy = PreemptionPolicy(within_queue="LowerPriority")
    objects = inventory(
        [cohort("root"), queue("a", "root", cpu=3, preemption=policy)],
        [
            workload("v1", "a", 1, priority=1, created=1, admitted=True),
            workload("v2", "a", 1, priority=1, created=2, admitted=True),
            workload("v3", "a", 1, priority=1, created=3, admitted=True),
            workload("p", "a", 2, priority=5, created=10),
        ],
    )
    return open_session(objects, [("priority", priority, None)], 100_000)


def test_an_entry_whose_victims_are_relied_on_is_sent_back_naming_each_overlap_once_in_order() -> None:
    session = _session()
    rounds, entry = _entry(session)
    victims = entry.assignment.victims
    names = sorted(v.name for v in victims)
    assert len(names) == 2 and set(names) <= {"ns/v1", "ns/v2", "ns/v3"}
    (spare,) = {"ns/v1", "ns/v2", "ns/v3"} - set(names)
    # Both victims relied on (added in reverse name order), with a unit that is not one of them.
    units = sorted((v for v in victims), key=lambda v: v.name, reverse=True)
    relied_on = {v.unit for v in units} | {("not", "a", "victim")}
    assert allocate._process(session, rounds, entry, relied_on) == allocate._AGAIN
    rounds.relied.settle(rounds.pending)  # as the rounds do when they are over
    pending = rounds.pending["ns/p"]
    assert pending.reason == "WaitingForQuota"
    assert pending.message == RELIED_ON + ", ".join(names)
    assert spare not in pending.message
    assert not session.decisions.preempted  # nothing of the entry was committed


def test_only_the_overlapping_victim_is_named() -> None:
    session = _session()
    rounds, entry = _entry(session)
    last = max(entry.assignment.victims, key=lambda v: v.name)
    assert allocate._process(session, rounds, entry, {last.unit}) == allocate._AGAIN
    rounds.relied.settle(rounds.pending)
    assert rounds.pending["ns/p"].message == RELIED_ON + last.name


def test_the_victims_named_are_those_relied_on_when_the_entry_lost() -> None:
    """Units relied on after the entry lost (later entries of its round preempting) are
    not named: the message tells what the entry lost to."""
    session = _session()
    rounds, entry = _entry(session)
    first, last = sorted(entry.assignment.victims, key=lambda v: v.name)
    relied_on: set[tuple[object, ...]] = {last.unit}
    assert allocate._process(session, rounds, entry, relied_on) == allocate._AGAIN
    relied_on.add(first.unit)  # a later entry of the round relies on the other one too
    rounds.relied.settle(rounds.pending)
    assert rounds.pending["ns/p"].message == RELIED_ON + last.name


def test_a_lost_entry_offered_again_keeps_the_verdict_of_its_next_round() -> None:
    """An entry lost to victims relied on and then, offered again, preempting: its verdict
    is the later one, in the place its first verdict took among the pending."""
    session = _session()
    rounds, entry = _entry(session)
    rounds.pending["ns/before"] = new_pending("ns/before", "NoFit", "no flavor fits", ())
    assert allocate._process(session, rounds, entry, {entry.assignment.victims[0].unit}) == allocate._AGAIN
    rounds.pending["ns/after"] = new_pending("ns/after", "NoFit", "no flavor fits", ())
    assert allocate._process(session, rounds, entry, set()) == allocate._DONE  # the next round
    rounds.relied.settle(rounds.pending)
    assert list(rounds.pending) == ["ns/before", "ns/p", "ns/after"]
    assert rounds.pending["ns/p"].reason == "PendingPreemption"
    assert rounds.pending["ns/p"].message.startswith("preempting ")


def test_a_lost_entry_whose_verdict_is_dropped_stays_dropped() -> None:
    """A verdict taken out of the pending after the entry lost (an elastic workload that
    grew) is not put back when the rounds are over."""
    session = _session()
    rounds, entry = _entry(session)
    assert allocate._process(session, rounds, entry, {entry.assignment.victims[0].unit}) == allocate._AGAIN
    del rounds.pending["ns/p"]
    rounds.relied.settle(rounds.pending)
    assert "ns/p" not in rounds.pending


def test_an_entry_whose_victims_nobody_relies_on_preempts_and_its_victims_are_relied_on() -> None:
    session = _session()
    rounds, entry = _entry(session)
    relied_on: set[tuple[object, ...]] = {("not", "a", "victim")}
    assert allocate._process(session, rounds, entry, relied_on) == allocate._DONE
    assert rounds.pending["ns/p"].reason == "PendingPreemption"
    assert relied_on == {("not", "a", "victim")} | {v.unit for v in entry.assignment.victims}
    assert sorted(p.workload for p in session.decisions.preempted) == sorted(
        v.name for v in entry.assignment.victims
    )


def test_the_first_entry_of_a_round_relies_on_nothing_and_preempts() -> None:
    session = _session()
    rounds, entry = _entry(session)
    relied_on: set[tuple[object, ...]] = set()
    assert allocate._process(session, rounds, entry, relied_on) == allocate._DONE
    assert relied_on == {v.unit for v in entry.assignment.victims}
