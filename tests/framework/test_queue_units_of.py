"""The candidate index builds a queue's units in one pass (``units.queue_units_of``).

A queue's first list of a class makes the units of its workloads that the session has
none of yet. A plain workload (not a Deployment, not elastic, not taken from, no units
kept across sessions) gives one whole unit, which the pass makes itself, without the
calls of ``candidate_units``; every other workload's units come from
``candidate_units``. These tests pin that the pass gives, field by field and in order,
what a build from the snapshot gives for every running workload of every scenario case
(elastic, shrinking, Deployments, evicted workloads; with and without nodes), also while
a node-by-node search defers Deployments' pods and after random takes, that it leaves
the session's cache as ``candidate_units`` would (the same objects are handed out
afterwards), and that a plain workload's unit costs no call of ``candidate_units``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from preemptd.framework import queue_units
from preemptd.framework.preemption import unitindex, units
from preemptd.framework.preemption.kept import KeptUnits, units_of
from preemptd.framework.session import Candidate, Session
from preemptd.framework.session.registry import Registry
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload

from tests.framework.test_unit_classes import CASES, CLASSES, PLUGINS, _fields, _running, _session
from tests.framework.test_unit_index_patch import take_at_random


def _fresh(session: Session, listed: list[Any], leaf: Any, cls: dict[str, Any]) -> list[list[Candidate]]:
    """Each workload's units of ``cls`` as ``candidate_units`` gives them with every
    cache left aside (a copy of the session's cache, restored afterwards)."""
    kept = dict(session.unit_cache)
    try:
        out = []
        for one in listed:
            session.unit_cache.pop(one.key, None)
            out.append(
                units.candidate_units(
                    session, one, leaf, reason=cls["reason"], group=cls["group"],
                    only_within_nominal=cls.get("only_within_nominal", False),
                )
            )
        return out
    finally:
        session.unit_cache.clear()
        session.unit_cache.update(kept)


def _by_queue(session: Session) -> dict[str, tuple[Any, list[Any]]]:
    found: dict[str, tuple[Any, list[Any]]] = {}
    for one, leaf in _running(session):
        found.setdefault(leaf.name, (leaf, []))[1].append(one)
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
@pytest.mark.parametrize("deferred", [False, True], ids=["whole", "deferred"])
def test_a_queues_units_in_one_pass_equal_candidate_units_of_each_workload(case: Path, deferred: bool) -> None:
    session = _session(case)
    rng = random.Random(case.stem)
    queues = _by_queue(session)
    for _ in range(3):
        for name in sorted(queues):
            leaf, listed = queues[name]
            for cls in rng.sample(CLASSES, len(CLASSES)):
                session.defer_pods = deferred
                try:
                    expected = _fresh(session, listed, leaf, cls)
                    made = units.queue_units_of(
                        session, listed, leaf, cls["reason"], cls["group"], cls.get("only_within_nominal", False),
                        deferred,
                    )
                    assert [_fields(m) for m in made] == [_fields(e) for e in expected], (name, cls)
                    # The session's cache holds them now: asked again, the same objects.
                    again = [
                        units.class_units(
                            session, one, leaf, cls["reason"], cls["group"], cls.get("only_within_nominal", False)
                        )
                        for one in listed
                    ]
                    assert all(a is m for a, m in zip(again, made, strict=True)), (name, cls)
                finally:
                    session.defer_pods = False
        if queues:
            take_at_random(session, queues[rng.choice(sorted(queues))][0], rng)


def test_a_plain_workloads_unit_is_made_without_a_call_of_candidate_units(monkeypatch: pytest.MonkeyPatch) -> None:
    queues = [cohort("all"), queue("q", "all", cpu=4), queue("r", "all", cpu=4)]
    running = [workload(f"w{i}", "q", 1, priority=i % 3, created=i, admitted=True) for i in range(5)]
    session = open_session(inventory(queues, running), PLUGINS, 1_000_000)
    called: list[str] = []
    real = units.class_units

    def counting(session: Session, one: Any, *args: Any) -> tuple[Candidate, ...]:
        called.append(one.name)
        return real(session, one, *args)

    monkeypatch.setattr(units, "class_units", counting)
    monkeypatch.setattr(unitindex, "class_units", counting)
    leaf = session.snapshot.tree.leaves["q"]
    found = queue_units(session, leaf, **CLASSES[1])
    assert called == []
    # By priority, then creation time (w0 and w3 of priority 0, w1 and w4 of 1, w2 of 2),
    # each one whole unit.
    assert [u.workload.name for u in found.units] == ["w0", "w3", "w1", "w4", "w2"]
    assert [u.unit for u in found.units] == [(w.key,) for w in sorted(running, key=lambda w: (w.priority, w.created))]
    # A workload taken from is not plain: its units come from candidate_units' class_units.
    take_at_random(session, leaf, random.Random(1))
    taken = next(iter(session.taken))
    session.state.clear()  # a fresh index: the queue's list is built again
    queue_units(session, leaf, **CLASSES[1])
    assert called == [session.snapshot.workloads[taken].name]


def test_with_units_kept_across_sessions_every_workload_goes_through_the_kept_store() -> None:
    """A snapshot that keeps units across sessions (the simulator's): the pass makes none
    itself, so each workload's units are the kept store's entry, as ``candidate_units``
    leaves them; a second session is handed the same units."""
    queues = [cohort("all"), queue("q", "all", cpu=4), queue("r", "all", cpu=4)]
    running = [workload(f"w{i}", "q", 1, priority=i % 3, created=i, admitted=True) for i in range(4)]
    cluster = inventory(queues, running)
    first = open_session(cluster, PLUGINS, 1_000_000)
    kept = KeptUnits()
    first.snapshot.kept_units = kept
    leaf = first.snapshot.tree.leaves["q"]
    listed = sorted(first.snapshot.admitted_by_queue["q"], key=lambda w: (w.priority, w.created))
    made = units.queue_units_of(first, listed, leaf, "InQueue", 2, False, False)
    assert [_fields(m) for m in made] == [_fields(units._units(first, w, leaf, "InQueue", 2, False)) for w in listed]
    for one, its_units in zip(listed, made, strict=True):
        assert first.unit_cache[one.key] is kept.workloads[one.key].units
        assert units_of(kept.workloads[one.key].units, leaf.index, ("InQueue", 2, False, False)) is its_units
    second = Session(first.snapshot, Registry(PLUGINS), actions=("allocate", "preempt"))
    second.open()
    again = units.queue_units_of(second, listed, leaf, "InQueue", 2, False, False)
    assert all(a is m for a, m in zip(again, made, strict=True))
