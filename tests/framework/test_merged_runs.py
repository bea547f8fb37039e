"""Candidates that come as runs, put in victim order run by run (``preemption/search.py``,
``_merged_runs``; ``session/candidates.py``, ``Merged``).

A search whose candidates come as runs of the candidate index sorts each run once per
session and merges the runs only as far as its walks read. Held here to the plain path:
the merge, read in any way a list is (a part, then more, indexes, slices, every other
list method), is the stable sort of the runs' concatenation; the runs a search merges,
with the within-nominal ones left out when every attempt borrows, give the candidates
and classes the plain path gives; and on generated clusters the searches decide as the
plain path does: the same decisions, explanations and veto counts.
"""

from __future__ import annotations

import copy
import random
from bisect import bisect_left
from itertools import islice
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.objects import parse_objects
from preemptd.framework.preemption import search
from preemptd.framework.preemption.search import _heads, _merged_runs, _walked
from preemptd.framework.preemption.unitindex import QueueUnits
from preemptd.framework.quota import QuotaTree
from preemptd.framework.session import Candidate, Offer
from preemptd.framework.session.candidates import base_order, sort_candidates, using
from preemptd.framework.session.merged import Merged
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, queue

from benchmarks.bench_session import default_session
from benchmarks.generate import NOW_MS, Size, generate_spec
from tests.framework.test_ordering_kept import CLUSTERS, _decide

CPU = ("default", "cpu")
GPU = ("default", "nvidia.com/gpu")
_KEY = attrgetter("sort_key")


def _unit(key: tuple[int, ...]) -> Candidate:
    unit = Candidate(SimpleNamespace(key=f"ns/{key}"), None, {}, "r", 1)  # type: ignore[arg-type]
    unit.sort_key = key
    return unit


def _runs(rng: random.Random) -> list[list[Candidate]]:
    """Sorted runs whose keys often tie, within a run and across runs."""
    spread = rng.choice([1, 2, 3, 8, 1000])
    runs = []
    for _ in range(rng.randrange(0, 6)):
        units = [_unit((rng.randrange(2), rng.randrange(spread))) for _ in range(rng.randrange(0, 90))]
        runs.append(sorted(units, key=_KEY))
    return runs


def _same(got: Any, want: list[Candidate]) -> None:
    assert type(got) is list or type(got) is Merged
    assert len(got) == len(want)
    assert [id(c) for c in got] == [id(c) for c in want]


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_a_merge_read_as_far_as_needed_is_the_stable_sort_of_its_runs(seed: int) -> None:
    """Keys tie within and across runs: the earliest run's come first, each in its run's
    order. Read a part at a time, by iteration (two at once), index and slice."""
    rng = random.Random(seed)
    runs = _runs(rng)
    want = sorted([unit for run in runs for unit in run], key=_KEY)
    merged = Merged(runs)
    assert len(merged) == len(want)
    assert bool(merged) == bool(want)
    first, second = iter(merged), iter(merged)
    done = 0  # read from ``second``
    for _ in range(rng.randrange(0, 8)):
        step = rng.randrange(0, 40)
        way = rng.randrange(4)
        if way == 0:
            first = iter(merged)
            assert [id(c) for c in islice(first, step)] == [id(c) for c in want[:step]]
        elif way == 1 and want:
            at = rng.randrange(-len(want), len(want))
            assert merged[at] is want[at]
        elif way == 2:
            start = rng.choice([None, rng.randrange(-5, len(want) + 5)])
            stop = rng.choice([None, rng.randrange(-5, len(want) + 5)])
            stride = rng.choice([None, 1, 2, -1])
            assert [id(c) for c in merged[start:stop:stride]] == [id(c) for c in want[start:stop:stride]]
        else:
            assert [id(c) for c in islice(second, step)] == [id(c) for c in want[done : done + step]]
            done = min(done + step, len(want))
        assert len(merged) == len(want)
    with pytest.raises(IndexError):
        merged[len(want)]
    _same(merged, want)


def test_ties_across_runs_come_from_the_earliest_run_first() -> None:
    a, b, c, d = _unit((1,)), _unit((1,)), _unit((0,)), _unit((1,))
    merged = Merged([[a, b], [c, d]])
    assert [id(x) for x in merged] == [id(x) for x in (c, a, b, d)]
    late = Merged([[c, d], [a, b]])
    assert [id(x) for x in late] == [id(x) for x in (c, d, a, b)]


def test_a_long_merge_is_made_only_somewhat_past_what_was_read() -> None:
    runs = [sorted((_unit((i, r)) for i in range(1000)), key=_KEY) for r in range(3)]
    merged = Merged(runs)
    assert [x.sort_key for x in islice(merged, 10)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0),
                                                        (2, 1), (2, 2), (3, 0)]
    assert list.__len__(merged) <= 200
    assert merged[100].sort_key == (33, 1)
    assert list.__len__(merged) <= 400
    assert len(merged) == 3000


_READS = [
    lambda x: x.count(x[0] if len(x) else None),
    lambda x: x.index(x[-1]) if len(x) else 0,
    lambda x: [id(c) for c in reversed(x)],
    lambda x: (x[0] in x) if len(x) else None in x,
    lambda x: [id(c) for c in x.copy()],
    lambda x: [id(c) for c in x + x],
    lambda x: [id(c) for c in x * 2],
    lambda x: [id(c) for c in copy.copy(x)],
    lambda x: repr(x),
    lambda x: x == list(x),
    lambda x: x != [],
    lambda x: [id(c) for c in sorted(x, key=_KEY, reverse=True)],
    lambda x: bisect_left(x, (1, 0), key=_KEY),
]


def _changes(rng: random.Random, extra: Candidate) -> list[Any]:
    at = rng.randrange(-3, 4)
    return [
        lambda x: x.append(extra),
        lambda x: x.insert(at, extra),
        lambda x: x.pop() if len(x) else None,
        lambda x: x.remove(x[len(x) // 2]) if len(x) else None,
        lambda x: x.reverse(),
        lambda x: x.sort(key=lambda c: -c.sort_key[1]),
        lambda x: x.extend([extra, extra]),
        lambda x: x.__iadd__([extra]),
        lambda x: x.__imul__(2),
        lambda x: x.__setitem__(slice(1, 3), [extra]),
        lambda x: x.__delitem__(0) if len(x) else None,
        lambda x: x.clear(),
    ]


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_every_list_method_answers_as_on_the_whole_merged_list(seed: int) -> None:
    """After part of it was read, a merge answers every read and change of a list as the
    plain sorted list does (what a change makes, it makes of the whole list)."""
    rng = random.Random(seed)
    runs = _runs(rng)
    want = sorted([unit for run in runs for unit in run], key=_KEY)
    merged = Merged(runs)
    read = rng.randrange(0, 50)
    assert [id(c) for c in islice(merged, read)] == [id(c) for c in want[:read]]
    if want:
        assert want[-1] in merged  # found where it is not made yet
    for probe in rng.sample(_READS, 4):
        assert probe(merged) == probe(want)
    change = rng.choice(_changes(rng, _unit((9, 9))))
    change(merged)
    change(want)
    _same(merged, want)



@pytest.mark.parametrize("change", ["append", "insert", "extend", "iadd"])
def test_a_merge_of_no_runs_changed_holds_what_it_was_given(change: str) -> None:
    """A merge with nothing to merge is all made from the start: a change to it is a
    change to a plain empty list (its length counts what the change added)."""
    extra = _unit((9, 9))
    merged = Merged([[], []])
    if change == "append":
        merged.append(extra)
    elif change == "insert":
        merged.insert(0, extra)
    elif change == "extend":
        merged.extend([extra, extra])
    else:
        merged += [extra]
    want = [extra, extra] if change == "extend" else [extra]
    _same(merged, want)
    assert bool(merged)

def _sources(rng: random.Random, tree: QuotaTree) -> list[QueueUnits]:
    """Per queue, lists of one class each (its units share class and the within-nominal
    flag), by (priority, creation time), their units' keys often tied."""
    workload: Any = None
    out = []
    for leaf in tree.leaves.values():
        for group, within in rng.sample([(0, False), (1, False), (1, True), (2, False)], rng.randrange(1, 4)):
            bounds = sorted((rng.randrange(0, 4), rng.randrange(0, 50)) for _ in range(rng.randrange(0, 30)))
            units = []
            for priority, _ in bounds:
                usage = {fr: rng.randrange(0, 3000, 500) for fr in rng.sample([CPU, GPU], rng.randrange(0, 3))}
                unit = Candidate(workload, leaf, usage, "r", group, only_within_nominal=within)
                unit.sort_key = (rng.randrange(2), group, priority, rng.randrange(3))
                units.append(unit)
            out.append(QueueUnits(units, [p for p, _ in bounds], [c for _, c in bounds]))
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10**9))
def test_runs_merged_give_the_walked_candidates_sorted_and_their_classes(seed: int) -> None:
    """Searches of one session over the same and other runs (filtered runs, sorted runs
    and merges read again): each gets the plain path's candidates and what it sorts, and
    each run's first unit gives the classes and the within-nominal flag of its units."""
    rng = random.Random(seed)
    tree = QuotaTree({s.name: s for s in [cohort("root"), *(queue(f"q{i}", "root", cpu=4) for i in range(3))]})
    sources = _sources(rng, tree)
    session: Any = SimpleNamespace(state={})
    needed = frozenset(rng.sample([CPU, GPU], rng.randrange(1, 3)))
    offers: list[list[Offer]] = []
    for _ in range(6):
        answers = []
        for _ in range(rng.randrange(1, 3)):
            offer = Offer()
            for _ in range(rng.randrange(0, 5)):
                rng.choice(sources).offer_between(offer, rng.choice([None, 0, 1, 2]), rng.choice([None, 2, 3, 4]))
            answers.append(offer)
        offers.append(answers)
    filtered: dict[tuple[Any, ...], list[Candidate]] = {}  # the session's filtered runs
    for answers in rng.choices(offers, k=10):
        with_room = rng.random() < 0.3
        candidates, runs = using(answers, needed, with_room, long_run=0, filtered=rng.choice([filtered, None]))
        assert runs is not None
        assert [id(c) for c in candidates] == [id(c) for c in using([list(a) for a in answers], needed, with_room)[0]]
        heads = _heads(runs)
        assert {c.group for c in heads} == {c.group for c in candidates}
        assert all(c.only_within_nominal == head.only_within_nominal for c, head in _members(runs, heads))
        attempts = rng.choice([[True], [False, True], [True, False]])
        plain = _walked(list(candidates), attempts)
        sort_candidates(plain, base_order)
        got = _merged_runs(session, runs, heads, False not in attempts)
        read = rng.randrange(0, len(plain) + 2)
        assert [id(c) for c in islice(got, read)] == [id(c) for c in plain[:read]]
        _same(got, plain)


def _members(runs: Any, heads: list[Candidate]) -> list[tuple[Candidate, Candidate]]:
    out = []
    for (source, first, last, items), head in zip(runs.parts, heads, strict=True):
        units = items if items is not None else source.using(runs.needed, runs.with_room)[0][first:last]
        out.extend((unit, head) for unit in units)
    return out


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_searches_merged_from_runs_decide_as_the_plain_path_on_generated_clusters(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, seed = CLUSTERS[name]
    assert isinstance(spec, Size)
    objects = generate_spec(spec, f"merged-runs/{name}/{seed}")
    snapshot = Snapshot.build(parse_objects([("g.json", o) for o in objects]), now=NOW_MS)
    actions, registry = default_session()
    merged: list[int] = []
    merge = search._merged_runs

    def counted(*args: Any) -> list[Candidate]:
        found = merge(*args)
        merged.append(type(found) is Merged and len(found) > 0)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search, "_MERGED_RUN", 0)  # runs merged however short
        patch.setattr(search, "_merged_runs", counted)
        fast = _decide(snapshot, registry(), actions)
    assert sum(merged) > 10  # searches did merge their runs
    collect = search.collect_runs

    def without_runs(*args: Any, **kwargs: Any) -> tuple[list[Candidate], None]:
        return collect(*args, **kwargs)[0], None

    monkeypatch.setattr(search, "collect_runs", without_runs)
    plain = _decide(snapshot, registry(), actions)
    assert fast == plain



def test_a_place_is_read_from_the_made_part_only_when_it_is_made() -> None:
    """Two runs of 100 (keys 0, 2, ... and 1, 3, ...): the first stretch makes the units up
    to the first unit past a window of 32 in either run, key 64. The place just past that
    stretch, and a place counted from the end, are made before they are read; iteration
    after those reads goes on from where it stopped, every unit once."""
    runs = [[_unit((2 * i + r,)) for i in range(100)] for r in range(2)]
    want = sorted([unit for run in runs for unit in run], key=_KEY)
    merged = Merged(runs)
    reading = iter(merged)
    assert [x.sort_key for x in islice(reading, 3)] == [(0,), (1,), (2,)]
    made = list.__len__(merged)
    assert made == 64
    assert merged[made - 1] is want[made - 1]
    assert merged[made] is want[made]  # just past the stretch: made first
    assert list.__len__(merged) > made
    assert merged[-1] is want[-1]  # from the end of the whole merge, not of the made part
    assert merged[-200] is want[0]
    assert [id(c) for c in reading] == [id(c) for c in want[3:]]
