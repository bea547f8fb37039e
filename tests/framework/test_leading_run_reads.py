"""What a kept leading run holds after reading candidates (``preemption/waiting.py``,
``Leading._read``), held to a plain recount of the candidates read.

A read goes on from where the last one stopped: it passes over a candidate usable only
within nominal when the attempt may borrow, stops at an elastic remainder (remembered as
the run's end), and otherwise accepts the candidate, stopping after the first one that
leaves no requested flavor-resource short, or once ``most`` are accepted. The run keeps
the candidates read, those accepted with their places, the running usage of the accepted
ones per tracked flavor-resource, per queue the places of its accepted ones and their
running usage per flavor-resource they hold (0 before the first that holds it), and per
queue of another class each set of flavor-resources held with the place of its first.
A walk whose candidates part from the kept ones cuts the run where they part
(``Leading._keep_shared``) and reads on from there; every list of the run then holds
what a plain recount of the candidates it has read gives.
"""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import FR
from preemptd.framework.preemption.waiting import Leading
from preemptd.framework.quota import QuotaNode, QuotaTree
from preemptd.framework.session import CLASS_OTHER_QUEUE, CLASS_SAME_QUEUE, Candidate
from preemptd.framework.testing import cohort, queue, workload

CPU: FR = ("default", "cpu")
GPU: FR = ("default", "nvidia.com/gpu")
_TREE = QuotaTree({s.name: s for s in [cohort("r"), queue("a", "r", cpu=1), queue("b", "r", cpu=1), queue("c", "r", cpu=1)]})
_LEAVES = [_TREE.nodes[name] for name in ("a", "b", "c")]

_UNIT = st.tuples(
    st.integers(0, 2),  # queue
    st.sampled_from([{CPU: 1}, {CPU: 2, GPU: 1}, {GPU: 3}, {GPU: 1, CPU: 1}, {}]),
    st.booleans(),  # only within nominal
    st.sampled_from(["whole", "single", "remainder"]),
    st.booleans(),  # of the preemptor's queue's class
)


def _candidates(specs: list[tuple[int, dict[FR, int], bool, str, bool]]) -> list[Candidate]:
    found = []
    for i, (at, usage, within, kind, same) in enumerate(specs):
        leaf = _LEAVES[at]
        found.append(
            Candidate(
                workload(f"w{i}", leaf.name, 1), leaf, dict(usage), "InCohortReclamation",
                CLASS_SAME_QUEUE if same else CLASS_OTHER_QUEUE, pod_set=None if kind == "whole" else "main",
                single_pod=kind == "single", only_within_nominal=within,
            )
        )
    return found


def _recount(
    candidates: list[Candidate], borrowing: bool, need: list[tuple[FR, int]], calls: list[int]
) -> tuple[int, int, list[int]]:
    """How many candidates the reads of ``calls`` (each its ``most``) read in all, the
    place of the elastic remainder that ended them (-1: none), and the places accepted."""
    read, end, accepted = 0, -1, []
    for most in calls:
        while read < len(candidates) and end < 0:
            candidate = candidates[read]
            read += 1
            if borrowing and candidate.only_within_nominal:
                continue
            if candidate.pod_set is not None and not candidate.single_pod:
                end = read - 1
                break
            accepted.append(read - 1)
            totals = {fr: sum(candidates[i].usage.get(fr, 0) for i in accepted) for fr, _ in need}
            if all(totals[fr] >= amount for fr, amount in need) or (most and len(accepted) >= most):
                break
    return read, end, accepted


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_UNIT, max_size=40),
    st.booleans(),
    st.lists(st.tuples(st.sampled_from([CPU, GPU]), st.integers(1, 12)), min_size=1, max_size=2, unique_by=lambda x: x[0]),
    st.lists(st.integers(0, 6), min_size=1, max_size=3),
)
def test_a_kept_run_holds_what_a_plain_recount_of_the_candidates_read_gives(
    specs: list[tuple[int, dict[FR, int], bool, str, bool]],
    borrowing: bool,
    need: list[tuple[FR, int]],
    calls: list[int],
) -> None:
    candidates = _candidates(specs)
    leading = Leading(frozenset(fr for fr, _ in need))
    leading._stop(need)  # tracks the requested flavor-resources, as ``run`` does first
    for most in calls:
        if leading.end < 0:
            leading._read(candidates, borrowing, need, most)
    read, end, places = _recount(candidates, borrowing, need, calls)
    accepted = [candidates[i] for i in places]
    assert leading.cands == candidates[:read]
    assert leading.end == end
    assert leading.accepted == accepted
    assert leading.at == places
    for fr, _ in need:
        assert leading.sums[fr] == list(accumulate(c.usage.get(fr, 0) for c in accepted))
    by_leaf: dict[QuotaNode, list[int]] = {}
    for j, candidate in enumerate(accepted):
        by_leaf.setdefault(candidate.leaf, []).append(j)
    assert leading.leaf_at == by_leaf
    for leaf, own in by_leaf.items():
        held = {fr for j in own for fr in accepted[j].usage}
        assert leading.leaf_sums[leaf] == {
            fr: list(accumulate(accepted[j].usage.get(fr, 0) for j in own)) for fr in held
        }
        patterns: dict[tuple[FR, ...], int] = {}
        for j in own:
            if accepted[j].group != CLASS_SAME_QUEUE:
                patterns.setdefault(tuple(accepted[j].usage), j)
        assert leading.patterns.get(leaf, {}) == patterns


def _held_by_a_plain_recount(leading: Leading, candidates: list[Candidate], borrowing: bool) -> None:
    """``leading`` holds what reading its candidates (a prefix of ``candidates``) one by one
    gives: the accepted ones, their places, the running sums per tracked flavor-resource and
    per queue, and per queue of another class the first place of each set held."""
    read = leading.cands
    assert read == candidates[: len(read)]
    places = []
    for i, candidate in enumerate(read):
        if borrowing and candidate.only_within_nominal:
            continue
        if candidate.pod_set is not None and not candidate.single_pod:
            assert leading.end == i == len(read) - 1
            break
        places.append(i)
    else:
        assert leading.end == -1
    accepted = [read[i] for i in places]
    assert leading.accepted == accepted
    assert leading.at == places
    for fr, sums in leading.sums.items():
        assert sums == list(accumulate(c.usage.get(fr, 0) for c in accepted))
    by_leaf: dict[QuotaNode, list[int]] = {}
    for j, candidate in enumerate(accepted):
        by_leaf.setdefault(candidate.leaf, []).append(j)
    assert {leaf: own for leaf, own in leading.leaf_at.items() if own} == by_leaf
    for leaf, own in by_leaf.items():
        held = {fr for j in own for fr in accepted[j].usage}
        got = leading.leaf_sums[leaf]
        assert held <= got.keys()
        assert got == {fr: list(accumulate(accepted[j].usage.get(fr, 0) for j in own)) for fr in got}
        patterns: dict[tuple[FR, ...], int] = {}
        for j in own:
            if accepted[j].group != CLASS_SAME_QUEUE:
                patterns.setdefault(tuple(accepted[j].usage), j)
        assert leading.patterns.get(leaf, {}) == patterns


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_UNIT, min_size=1, max_size=40),
    st.booleans(),
    st.lists(st.tuples(st.sampled_from([CPU, GPU]), st.integers(1, 12)), min_size=1, max_size=2, unique_by=lambda x: x[0]),
    st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39), st.integers(0, 6)), min_size=1, max_size=5),
)
def test_a_kept_run_cut_by_a_changed_list_and_read_again_holds_what_a_plain_recount_gives(
    specs: list[tuple[int, dict[FR, int], bool, str, bool]],
    borrowing: bool,
    need: list[tuple[FR, int]],
    changes: list[tuple[int, int, int]],
) -> None:
    # Each walk's list is the last one with a unit moved from one place to another (as an
    # evicted twin moves to the front); the kept run is cut where they part, then read on.
    candidates = _candidates(specs)
    leading = Leading(frozenset(fr for fr, _ in need))
    for source, target, most in changes:
        leading._keep_shared(candidates)
        leading._stop(need)
        if leading.end < 0:
            leading._read(candidates, borrowing, need, most)
        leading._stop(need)
        _held_by_a_plain_recount(leading, candidates, borrowing)
        candidates = list(candidates)
        moved = candidates.pop(source % len(candidates))
        candidates.insert(target % (len(candidates) + 1), moved)
