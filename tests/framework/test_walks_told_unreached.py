"""Walks that never reach a fit test are told before they run
(framework/preemption/unreached.py; ``search.find_minimal`` asks it).

Where no plugin may refuse a candidate and no scenario filter is set, a lazy walk
accepts candidates by the lender test alone until its running bound reaches the
request, and runs no fit test before. ``reaches`` steps the same candidates with a
margin per lender queue: when it says the bound is never reached, the walk itself must
find nothing and run no fit test (quota or node room) on the way. In the benchmark's
contended cluster every lazy attempt of a session walking every search is asked both
ways, whatever the last attempt of its key found; many must be told unreached (or the
test proves nothing), and some must reach the bound. Sessions telling and walking decide
and explain alike, count alike, and walk less.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from preemptd.framework.preemption import room, search, unreached, walk
from preemptd.framework.run import run_session
from preemptd.framework.session import CLASS_OTHER_QUEUE, CLASS_SAME_QUEUE
from preemptd.framework.testing import snapshot

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, generate_shape


@pytest.fixture(scope="module", params=[1])
def contended(request: pytest.FixtureRequest) -> Any:
    return snapshot(generate_shape("contended", request.param), NOW_MS)


def test_a_walk_told_unreached_finds_nothing_and_runs_no_fit_test(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    monkeypatch.setattr(unreached, "TELL", False)  # every attempt walks: the plain path
    real_attempt = walk.Walk.attempt
    real_quota = walk.Walk._fits_quota
    real_room = room.FreedRoom.fits
    tests = [0]
    ways: Counter[str] = Counter()

    def fits_quota(self: walk.Walk, allow_borrowing: bool) -> bool:
        tests[0] += 1
        return real_quota(self, allow_borrowing)

    def fits_room(self: room.FreedRoom) -> bool:
        tests[0] += 1
        return real_room(self)

    def attempt(self: walk.Walk, candidates: Any, allow_borrowing: bool, *, hopeless: bool = False) -> Any:
        session = self.session
        told = None
        if not hopeless and self.may_skip_walk() and not (session.may_veto or self.filters):
            # Asked on the state the attempt starts from, before it walks.
            told = unreached.reaches(
                list(candidates), allow_borrowing, self.usage, self._headroom(), self.needed, self._chain_of,
                session.accounting.usage,
            )
        before = tests[0]
        victims, level = real_attempt(self, candidates, allow_borrowing, hopeless=hopeless)
        if told is False:
            assert not victims
            assert tests[0] == before  # not a single fit test on the way
            ways["told unreached"] += 1
        elif told:
            ways["found" if victims else "walked in vain"] += 1
        return victims, level

    monkeypatch.setattr(walk.Walk, "attempt", attempt)
    monkeypatch.setattr(walk.Walk, "_fits_quota", fits_quota)
    monkeypatch.setattr(room.FreedRoom, "fits", fits_room)
    actions, registry = default_session()
    run_session(contended, registry(), actions=actions)
    assert ways["told unreached"] >= 40 and ways["found"] >= 200 and ways["walked in vain"] >= 5, ways


def test_sessions_telling_unreached_walks_decide_and_explain_as_walking_them(
    monkeypatch: pytest.MonkeyPatch, contended: Any
) -> None:
    actions, registry = default_session()
    outcomes = []
    walks = []
    told: list[bool] = []
    real_reaches = unreached.reaches

    def asked(*args: Any) -> bool:
        answer = real_reaches(*args)
        told.append(answer)
        return answer

    monkeypatch.setattr(search, "reaches", asked)
    for tell in (False, True):
        monkeypatch.setattr(unreached, "TELL", tell)
        real = walk.Walk.attempt
        count = [0]

        def counted(self: walk.Walk, *args: Any, real: Any = real, count: list[int] = count, **kw: Any) -> Any:
            count[0] += 1
            return real(self, *args, **kw)

        monkeypatch.setattr(walk.Walk, "attempt", counted)
        counters: dict[str, int | str] = {}
        decisions = run_session(contended, registry(), actions=actions, counters=counters)
        monkeypatch.setattr(walk.Walk, "attempt", real)
        outcomes.append((json.loads(decisions.to_json()), decisions.explanations, counters))
        walks.append(count[0])
    assert outcomes[0] == outcomes[1]
    assert told.count(False) >= 10, Counter(told)
    assert walks[1] == walks[0] - told.count(False), walks  # each one told is a walk left out


GPU = ("a100", "nvidia.com/gpu")
CPU = ("a100", "cpu")


class _Queue:
    """A leaf queue as the steps read it: its index in the usage, its nominal."""

    def __init__(self, index: int, subtree: dict[Any, int]) -> None:
        self.index = index
        self.subtree = subtree


class _Unit:
    """A candidate as the steps read it."""

    def __init__(self, leaf: _Queue, usage: dict[Any, int], group: int, **more: Any) -> None:
        self.leaf = leaf
        self.usage = usage
        self.group = group
        self.only_within_nominal: bool = more.get("only_within_nominal", False)
        self.single_pod: bool = more.get("single_pod", False)
        self.pod_set: str | None = more.get("pod_set")


def _queue(index: int, nominal: dict[Any, int]) -> _Queue:
    return _Queue(index, nominal)


def _unit(queue: _Queue, usage: dict[Any, int], group: int = CLASS_OTHER_QUEUE, **more: Any) -> _Unit:
    return _Unit(queue, usage, group, **more)


def _reaches(
    units: list[_Unit], used: list[dict[Any, int]], request: dict[Any, int], needed: frozenset[Any],
    chains: dict[_Queue, tuple[_Queue, ...]] | None = None, allow_borrowing: bool = True,
) -> bool:
    room = dict.fromkeys(request, 0)
    chain_of: Any = (lambda queue: (queue,)) if chains is None else chains.__getitem__
    return unreached.reaches(units, allow_borrowing, request, room, needed, chain_of, used)


def test_a_lender_gives_while_it_is_above_its_nominal() -> None:
    # SEMANTICS §4: a lender's workload may be taken while its queue still uses more
    # than its nominal of a needed flavor-resource the workload holds. A queue 4 GPUs
    # above nominal gives two 3-GPU workloads (4 > 0, then 1 > 0; then -2): 6 GPUs,
    # short of 8; 7 above, it gives three (7, 4, 1): 9.
    lender = _queue(0, {GPU: 6})
    units = [_unit(lender, {GPU: 3}) for _ in range(4)]
    assert not _reaches(units, [{GPU: 10}], {GPU: 8}, frozenset({GPU}))
    assert _reaches(units, [{GPU: 13}], {GPU: 8}, frozenset({GPU}))
    # The preemptor's own queue gives whatever it holds.
    own = [_unit(lender, {GPU: 3}, group=CLASS_SAME_QUEUE) for _ in range(3)]
    assert _reaches(own, [{GPU: 0}], {GPU: 8}, frozenset({GPU}))
    # Usable only within nominal: passed over by an attempt that may borrow.
    within = [_unit(lender, {GPU: 3}, group=CLASS_SAME_QUEUE, only_within_nominal=True) for _ in range(3)]
    assert not _reaches(within, [{GPU: 0}], {GPU: 8}, frozenset({GPU}))
    assert _reaches(within, [{GPU: 0}], {GPU: 8}, frozenset({GPU}), allow_borrowing=False)


def test_a_lender_above_nominal_on_another_needed_resource_gives_too() -> None:
    # At or below nominal on GPUs but above on cpu, both needed: the workloads holding
    # cpu are given while cpu stays above nominal (1,000 m: two of 600 m).
    lender = _queue(0, {GPU: 8, CPU: 4000})
    units = [_unit(lender, {GPU: 4, CPU: 600}) for _ in range(4)]
    needed = frozenset({GPU, CPU})
    assert _reaches(units, [{GPU: 8, CPU: 5000}], {GPU: 8}, needed)
    assert not _reaches(units, [{GPU: 8, CPU: 4500}], {GPU: 8}, needed)
    # Holding no needed flavor-resource, a lender's workload is never given.
    assert not _reaches([_unit(lender, {("h100", "cpu"): 1})] * 3, [{GPU: 20}], {GPU: 1}, frozenset({GPU}))


def test_reaches_leaves_a_cohort_test_and_an_elastic_remainder_to_the_walk() -> None:
    lender = _queue(0, {GPU: 6})
    cohort = _queue(1, {GPU: 6})
    units = [_unit(lender, {GPU: 3}) for _ in range(4)]
    used = [{GPU: 10}, {GPU: 10}]
    assert _reaches(units, used, {GPU: 8}, frozenset({GPU}), chains={lender: (lender, cohort)})
    remainder = _unit(lender, {GPU: 3}, group=CLASS_SAME_QUEUE, pod_set="workers")
    assert _reaches([remainder, *units], used, {GPU: 8}, frozenset({GPU}))
    assert not _reaches(units, used, {GPU: 8}, frozenset({GPU}))
