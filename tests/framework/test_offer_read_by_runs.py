"""An intact ``Offer`` is read by its runs: filtered run by run, checked by its sources.

``candidates.using`` reads an answer that is an intact :class:`Offer` (changed only
through its runs) from the runs' own units, never from the answer's items: on the long-run
path as before, and now on the others too. Where every answer is an intact Offer with
short runs, each run is filtered once per session (``filtered``, by source, request and
range) and a run handed to a later search is taken from there. So the registry checks
such an answer by its runs' sources (the candidate index's lists hold only units the
framework made, ``candidates.UNIT_SOURCES``) instead of every candidate's type.
And ``cohort-reclaim`` hands its kept answer itself, not a copy: the framework only reads
an answer.

The expected candidates are worked out here from SEMANTICS §4 (a search keeps the
candidates that use a needed flavor-resource; when node room is short, also those that
hold room or stand for a Deployment's pods), over the runs' units in order.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR, PreemptionPolicy
from preemptd.framework.preemption.unitindex import QueueUnits
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.session import Candidate, DeferredPods, Offer, VictimSearch
from preemptd.framework.session.candidates import UNIT_SOURCES, using
from preemptd.framework.session.registry import ANSWERS
from preemptd.framework.session.session import collect_runs
from preemptd.framework.testing import cohort, inventory, open_session, queue, workload
from preemptd.plugins import cohort_reclaim, priority

from tests.framework.test_candidate_runs import _lists, _tree

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")
MEM = ("default", "memory")
CHECK = ANSWERS["preemption_candidates"][0]


def _kept_by_hand(units: list[Candidate], needed: frozenset[FR], with_room: bool) -> list[Candidate]:
    out = []
    for unit in units:
        uses = any(fr in needed for fr in unit.usage)
        if uses or (with_room and (len(unit.room) > 0 or type(unit) is DeferredPods)):
            out.append(unit)
    return out


def _offer(rng: random.Random, lists: list[QueueUnits]) -> Offer:
    offer = Offer()
    for _ in range(rng.randrange(0, 6)):
        source = rng.choice(lists)
        if rng.random() < 0.8:
            source.offer_between(offer, rng.choice([None, *range(0, 4)]), rng.choice([None, *range(0, 5)]))
        else:
            source.offer_newer(offer, rng.randrange(0, 4), rng.randrange(0, 50))
    return offer


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_searches_sharing_a_session_read_the_candidates_of_the_runs_in_order(seed: int) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    lists = _lists(rng, leaves)
    filtered: dict[tuple[Any, ...], list[Candidate]] = {}  # one session's
    for _ in range(rng.randrange(1, 12)):
        answers: list[list[Candidate]] = []
        expected_items: list[Candidate] = []
        for _ in range(rng.randrange(1, 4)):
            kind = rng.random()
            if kind < 0.7:
                offer = _offer(rng, lists)
                answers.append(offer)
                expected_items.extend(c for source, start, end in offer.runs for c in source.units[start:end])
            elif kind < 0.85:
                plain = [c for source in rng.sample(lists, min(2, len(lists))) for c in source.units]
                answers.append(plain)
                expected_items.extend(plain)
            else:
                changed = _offer(rng, lists)
                extra = rng.choice(lists).units
                changed.extend(extra)  # changed outside its runs: read as a plain list
                answers.append(changed)
                expected_items.extend(changed)
        needed = frozenset(rng.sample([CPU, GPU, MEM], rng.randrange(1, 3)))
        with_room = rng.random() < 0.5
        before = [(list(found), list(getattr(found, "runs", []))) for found in answers]
        long_run = rng.choice([0, 16, 10**6])  # runs read as runs, by the length, never
        found, _ = using(answers, needed, with_room, long_run=long_run, filtered=filtered)
        expected = _kept_by_hand(expected_items, needed, with_room)
        assert [id(c) for c in found] == [id(c) for c in expected]
        # Nothing handed in is changed.
        assert [(list(a), list(getattr(a, "runs", []))) for a in answers] == before


def test_an_intact_offer_is_read_from_its_runs_not_from_its_items() -> None:
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("q0", "root", cpu=4)]})
    leaf = tree.leaves["q0"]
    workload_: Any = None
    units = [Candidate(workload_, leaf, {CPU: 1000}, "r", 1) for _ in range(3)]
    source = QueueUnits(units, [0, 0, 1], [1, 2, 3])
    offer = Offer()
    source.offer_between(offer, None, 2)
    list.__setitem__(offer, 1, "not a candidate")  # same length: still intact
    assert offer.intact()
    for long_run in (0, 10**6):
        for answers in ([offer], [offer, [units[2]]]):
            found, _ = using(answers, frozenset({CPU}), False, long_run=long_run)
            assert found[:3] == units
    assert CHECK(offer)  # its items are never read: its runs' source is checked


class _OwnSource:
    """A plugin's own source: not one of the framework's, so its items are checked."""

    def __init__(self, units: list[Any]) -> None:
        self.units = units


def test_offers_of_other_sources_and_changed_offers_are_checked_item_by_item() -> None:
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("q0", "root", cpu=4)]})
    leaf = tree.leaves["q0"]
    workload_: Any = None
    units = [Candidate(workload_, leaf, {CPU: 1000}, "r", 1) for _ in range(2)]
    assert QueueUnits in UNIT_SOURCES
    good = Offer()
    good.add(_OwnSource(units), 0, 2)  # type: ignore[arg-type]
    assert CHECK(good)
    bad = Offer()
    bad.add(_OwnSource([units[0], "junk"]), 0, 2)  # type: ignore[arg-type]
    assert not CHECK(bad)
    changed = Offer()
    QueueUnits(units, [0, 0], [1, 2]).offer_between(changed, None, None)
    changed.append("junk")  # type: ignore[arg-type]
    assert not changed.intact()
    assert not CHECK(changed)
    assert CHECK(list(units))
    assert not CHECK([units[0], "junk"])
    assert not CHECK({"a": units[0]})


def test_a_kept_cohort_reclaim_answer_is_handed_again_unchanged_and_filtered_alike() -> None:
    policy = PreemptionPolicy(reclaim_within_cohort="Any")
    specs = [cohort("org"), queue("a", "org", cpu=1, preemption=policy), queue("b", "org", cpu=4, preemption=policy)]
    running = [
        workload(f"w{i}", "a", 1, priority=i % 3, created=i, admitted=True) for i in range(40)
    ]
    cluster = inventory(specs, running)
    session = open_session(cluster, [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None)], 1_000_000)
    leaf = session.snapshot.tree.leaves["b"]
    preemptor = workload("p", "b", 2, priority=5, created=99)
    request = VictimSearch(preemptor, leaf, {CPU: 2000}, frozenset({CPU}), False)
    first = cohort_reclaim.preemption_candidates(session, preemptor, request)
    items, runs = list(first), list(first.runs)  # type: ignore[attr-defined]
    assert len(items) == 40
    searches = [collect_runs(session, preemptor, request, with_room=with_room) for with_room in (False, True)]
    again = cohort_reclaim.preemption_candidates(session, preemptor, request)
    assert again is first  # kept, not copied
    assert list(again) == items and again.runs == runs  # type: ignore[attr-defined]
    plain = [c for source, start, end in runs for c in source.units[start:end]]
    for found, _ in searches:
        assert [id(c) for c in found] == [id(c) for c in plain]
