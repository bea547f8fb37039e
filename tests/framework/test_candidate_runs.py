"""Candidates handed over as runs of the candidate index (``Offer``, ``candidates.using``,
``bound.may_fit(..., runs)``).

``priority`` and ``cohort-reclaim`` answer with ranges of each queue's units
(``QueueUnits.offer_between``). The framework then keeps the candidates that use a
needed flavor-resource per range, from what each list keeps for that request, and the
quota bound sums a range's usage from the list's running totals instead of candidate by
candidate. Over random queues, units, ranges and requests, both give exactly what the
plain path gives on the same candidates as plain lists: the same candidates in the same
order, and the same bound (itself held to removing candidates one by one in
``test_quota_bound_grouped.py``) — the bound even when it is handed only the runs. An
answer changed other than through its runs is read as a plain list.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.preemption.bound import may_fit
from preemptd.framework.preemption.unitindex import QueueUnits
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.framework.session import Candidate, Offer
from preemptd.framework.session.candidates import using
from preemptd.framework.testing import cohort, queue

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")
MEM = ("default", "memory")


def _tree(rng: random.Random) -> QuotaTree:
    specs = [cohort("root")]
    parents = ["root"]
    for i in range(rng.randrange(2, 7)):
        parent = rng.choice(parents)
        name = f"q{i}"
        specs.append(queue(name, parent, cpu=rng.randrange(0, 9), borrowing_limit=rng.choice([None, 0, 2])))
        if rng.random() < 0.4:
            parents.append(name)
    return QuotaTree({spec.name: spec for spec in specs})


def _lists(rng: random.Random, leaves: list[QuotaNode]) -> list[QueueUnits]:
    """Per queue, one or two lists (classes) of units by (priority, creation time)."""
    workload: Any = None
    out = []
    for leaf in leaves:
        for within in rng.sample([False, True], rng.randrange(1, 3)):
            bounds = sorted((rng.randrange(0, 4), rng.randrange(0, 50)) for _ in range(rng.randrange(0, 9)))
            units = []
            for _ in bounds:
                usage = {fr: rng.randrange(0, 3000, 500) for fr in rng.sample([CPU, GPU, MEM], rng.randrange(0, 3))}
                room = (("n1", {"cpu": 1}),) if rng.random() < 0.3 else ()
                units.append(Candidate(workload, leaf, usage, "r", 1, room=room, only_within_nominal=within))
            out.append(QueueUnits(units, [p for p, _ in bounds], [c for _, c in bounds]))
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9), st.booleans(), st.booleans())
def test_runs_give_the_candidates_and_the_bound_of_the_plain_lists(
    seed: int, with_room: bool, allow_borrowing: bool
) -> None:
    rng = random.Random(seed)
    tree = _tree(rng)
    leaves: list[QuotaNode] = list(tree.leaves.values())
    accounting = Accounting(tree)
    for _ in range(rng.randrange(0, 10)):
        accounting.add_all(rng.choice(leaves), {CPU: rng.randrange(0, 6000, 500), GPU: rng.randrange(0, 2000, 500)})
    lists = _lists(rng, leaves)
    answers: list[list[Candidate]] = []
    for _ in range(rng.randrange(1, 4)):
        offer = Offer()
        for _ in range(rng.randrange(0, 5)):
            source = rng.choice(lists)
            low = rng.choice([None, *range(0, 4)])
            high = rng.choice([None, *range(0, 5)])
            if rng.random() < 0.8:
                source.offer_between(offer, low, high)
            else:
                source.offer_newer(offer, rng.randrange(0, 4), rng.randrange(0, 50))
        answers.append(offer if offer or rng.random() < 0.5 else [])
    needed = frozenset(rng.sample([CPU, GPU, MEM], rng.randrange(1, 3)))
    plain, no_runs = using([list(found) for found in answers], needed, with_room)
    # The first searches filter the runs they are handed; once a list was read enough it
    # keeps its filtered units and their totals, and later searches read those.
    for _ in range(4):
        found, runs = using(answers, needed, with_room, long_run=0)
        assert no_runs is None or not any(answers)  # plain lists have no runs (empty ones need none)
        assert runs is not None
        assert [id(c) for c in found] == [id(c) for c in plain]
        request = {fr: rng.randrange(500, 6000, 500) for fr in sorted(needed)}
        leaf = rng.choice(leaves)
        before = [{fr: n for fr, n in u.items() if n} for u in accounting.usage]
        plain_state, runs_state, alone_state = accounting.copy(), accounting.copy(), accounting.copy()
        expected = may_fit(plain_state, leaf, request, plain, allow_borrowing)
        assert may_fit(runs_state, leaf, request, found, allow_borrowing, runs) == expected
        # The runs alone: no candidate of the list is read.
        assert may_fit(alone_state, leaf, request, [], allow_borrowing, runs) == expected
        # Each leaves the usage as it found it (a 0 may be left where nothing was), the same.
        assert runs_state.usage == plain_state.usage == alone_state.usage
        assert [{fr: n for fr, n in u.items() if n} for u in plain_state.usage] == before


def test_an_answer_changed_outside_its_runs_is_read_as_a_plain_list() -> None:
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("q0", "root", cpu=4)]})
    leaf = tree.leaves["q0"]
    workload: Any = None
    units = [Candidate(workload, leaf, {CPU: 1000}, "r", 1) for _ in range(3)]
    source = QueueUnits(units, [0, 0, 1], [1, 2, 3])
    offer = Offer()
    source.offer_between(offer, None, 1)
    extra = Candidate(workload, leaf, {CPU: 500}, "r", 1)
    offer.append(extra)
    found, runs = using([offer], frozenset({CPU}), False, long_run=0)
    assert runs is None
    assert found == [units[0], units[1], extra]


def test_a_list_keeps_its_filtered_units_once_searches_read_its_length() -> None:
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("q0", "root", cpu=4)]})
    leaf = tree.leaves["q0"]
    workload: Any = None
    units = [Candidate(workload, leaf, {CPU: 1000} if i % 2 else {GPU: 1}, "r", 1) for i in range(4)]
    source = QueueUnits(units, [0] * 4, list(range(4)))
    needed = frozenset({CPU})
    assert source.read(needed, False, 2) is None
    assert source.read(needed, False, 1) is None
    kept, counts = source.read(needed, False, 1) or ([], [])
    assert kept == [units[1], units[3]]
    assert counts == [0, 0, 1, 1, 2]
    assert source.totals(needed, False, CPU) == [0, 1000, 2000]


def test_a_list_whose_units_a_search_all_keeps_answers_its_own_units_and_the_counts_0_to_n() -> None:
    """Every unit uses a needed flavor-resource: the units kept are the list's own (no copy)
    and the count of the first i is i, for i from 0 to the length; read as the units kept
    by the runs of a search, as the counts of any other list are."""
    tree = QuotaTree({spec.name: spec for spec in [cohort("root"), queue("q0", "root", cpu=4)]})
    leaf = tree.leaves["q0"]
    workload: Any = None
    units = [Candidate(workload, leaf, {CPU: 1000, GPU: i % 2}, "r", 1) for i in range(5)]
    source = QueueUnits(units, [0] * 5, list(range(5)))
    kept, counts = source.using(frozenset({CPU}), False)
    assert kept is units
    assert list(counts) == [0, 1, 2, 3, 4, 5]
    assert source.count_between(None, None, frozenset({CPU}), False) == 5
    offer = Offer()
    source.offer_between(offer, None, None)
    source.using(frozenset({CPU}), False)
    found, runs = using([offer], frozenset({CPU}), False, long_run=0)
    assert found == units and runs is not None and runs.parts == [(source, 0, 5, None)]
    # One unit without the needed flavor-resource: the counts are a list of their own.
    some = [Candidate(workload, leaf, {GPU: 1} if i == 2 else {CPU: 1000}, "r", 1) for i in range(5)]
    other = QueueUnits(some, [0] * 5, list(range(5)))
    kept, counts = other.using(frozenset({CPU}), False)
    assert kept == [some[0], some[1], some[3], some[4]]
    assert list(counts) == [0, 1, 2, 2, 3, 4]
