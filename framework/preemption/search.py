"""The search for a minimal set of victims (SEMANTICS §4): mechanism only.

Which workloads may be victims, and of which class, is policy: plugins answer
``preemption_candidates`` (``priority`` for the preemptor's own queue,
``cohort-reclaim`` for the cohort) using
:func:`~preemptd.framework.preemption.candidate_units`. This module orders the
candidates and plans the attempts; :mod:`.walk` walks them with a statement so that
every step is exact and undoable, and fills back to a minimal set; :mod:`.strategy`
runs the search a plugin's ``victim_strategy`` drives.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from itertools import filterfalse, islice
from operator import attrgetter, is_, lt
from typing import Any, TypeVar

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import (
    CLASS_HIERARCHICAL,
    CLASS_SAME_QUEUE,
    Candidate,
    Runs,
    SearchResult,
    Session,
    Source,
    VictimSearch,
    collect_runs,
    order_for,
    sort_candidates,
    with_vetoes,
)
from ..session.candidates import base_order
from ..session.merged import Merged
from . import unreached
from .bound import may_fit, session_kept
from .hopeless import walk_hopeless
from .resorted import sorted_units
from .strategy import by_strategy
from .unreached import in_vain, reaches
from .walk import Walk

__all__ = ["find_minimal"]

_GROUP = attrgetter("group")
_ONLY_WITHIN_NOMINAL = attrgetter("only_within_nominal")
_SORT_KEY = attrgetter("sort_key")


def find_minimal(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
    collected: Callable[[VictimSearch, list[Candidate], Runs | None], SearchResult | None] | None = None,
    likely: bool = False,
) -> SearchResult:
    """``collected``: told what the plugins offered (``victims.py``), with the runs it came
    in; an answer it gives is the search's.

    ``likely``: expected to find victims (the same search found some earlier). Where no
    plugin may refuse a candidate or a scenario, it walks before asking the quota bound, as
    does a search the bound's tests per flavor-resource alone do not prove hopeless; a walk
    finding none tells nobody, so the bound then answers as it would before it (silent, bounded)."""
    policy = session.policy
    if policy is not None and policy.strategy is not None and not preemptor.is_deployment:
        return by_strategy(session, VictimSearch(preemptor, leaf, usage, needed), targets, policy.strategy)
    bwc = leaf.spec.preemption.borrow_within_cohort
    accounting = session.accounting
    strictly_below = all(accounting.used(leaf, fr) < leaf.subtree.get(fr, 0) for fr in needed)
    borrowing_only = bwc == "Never" and not strictly_below
    request = VictimSearch(preemptor, leaf, usage, needed, borrowing_only, bool(targets))
    candidates, runs = collect_runs(session, preemptor, request, with_room=bool(targets))
    session.counters.candidates += len(candidates)
    if collected is not None:
        answer = collected(request, candidates, runs)
        if answer is not None:
            return answer
    found = len(candidates) + request.left_out
    if not found:
        # A later search counting what it leaves out, offered no more, may count some, and
        # is worded as a search with candidates.
        return SearchResult(
            message="no running workload that uses the needed quota may be preempted", silent=True,
            lasting=request.lasting and not request.counts_later,
        )
    # The classes present: each run's (its units share their class), or read in C.
    heads = _heads(runs) if runs is not None else None
    groups = set(map(_GROUP, heads if heads is not None else candidates))
    has_other = bool(groups.difference((CLASS_SAME_QUEUE,)))
    if not has_other or borrowing_only:
        attempts = [True]
    elif bwc == "Never" and CLASS_HIERARCHICAL not in groups:
        attempts = [False, True]
    else:
        attempts = [True, False]
    # The bound is handed the candidates as collected, with their runs.
    offered = candidates
    search = Walk(session, preemptor, leaf, usage, needed, targets, session.scenario_filters(preemptor))
    lines = [f"{found} candidate(s) use the needed {_wanted(session, needed)}"]
    silent = False
    skip = search.may_skip_walk()
    tells_nobody = not (session.may_veto or search.filters)  # no plugin may refuse a candidate or a scenario
    quiet = skip and WALK_FIRST and tells_nobody
    by_sums = quiet and not likely and SUMS_FIRST and _hopeless(session, leaf, usage, offered, attempts, runs, False)
    walk_first = quiet and not by_sums and (likely or SUMS_FIRST)
    if walk_first or not (skip and (by_sums or _hopeless(session, leaf, usage, offered, attempts, runs))):
        candidates = _walk_order(session, preemptor, leaf, candidates, attempts, request, runs, heads)
        # Walks that found nothing here lately are told first when that tells nobody (unreached.py).
        vain = in_vain(session.state) if unreached.TELL and skip and tells_nobody else None
        for allow_borrowing in attempts:
            if vain is not None:
                key = (leaf.index, needed, allow_borrowing)
                last = vain.get(key, False)
                if last and not reaches(
                    candidates, allow_borrowing, usage, {fr: accounting.headroom(leaf, fr) for fr in usage}, needed,
                    search._chain_of, accounting.usage,
                ):
                    continue  # no fit test: the walk finds nothing
            victims, level = search.attempt(candidates, allow_borrowing)
            if vain is not None and last is bool(victims):
                vain[key] = not victims
            if victims:
                lines.extend(search.veto_lines())
                lines.append(f"minimal set of victims: {_named(session, victims)}")
                return SearchResult(victims, allow_borrowing, level, frozenset(search.vetoed_by), lines=lines)
        if walk_first and _hopeless(session, leaf, usage, offered, attempts, runs):
            # What the bound would have answered before any walk: hopeless, and silent.
            session.counters.bounded += 1
            silent = True
    else:
        session.counters.bounded += 1
        silent = tells_nobody  # a hopeless walk tells the plugins only what the full walk would
        if not silent:
            candidates = _walk_order(session, preemptor, leaf, candidates, attempts, request, runs, heads)
            walk_hopeless(session, search, candidates, attempts)
    lines.extend(search.veto_lines())
    message = with_vetoes("no set of preemptible victims frees enough room", search.vetoed_by)
    lines.append(message)
    return SearchResult(
        vetoed_by=frozenset(search.vetoed_by), message=message, lines=lines, silent=silent,
        lasting=silent and request.lasting,
    )


def _hopeless(
    session: Session, leaf: QuotaNode, usage: dict[FR, int], offered: list[Candidate], attempts: list[bool],
    runs: Runs | None, exact: bool = True,
) -> bool:
    """Whether the quota bound proves every attempt of a search hopeless (``bound.may_fit``)."""
    sums, kept = session_kept(session.state)
    return not any(may_fit(session.accounting, leaf, usage, offered, a, runs, sums, kept, exact) for a in attempts)


# Whether a search that tells nobody walks before the quota bound when expected to find victims, or
# when the bound's tests per flavor-resource do not prove it hopeless (tests turn them off).
WALK_FIRST = SUMS_FIRST = True


def _heads(runs: Runs) -> list[Candidate]:
    """Each run's first unit (a run's units share their class)."""
    needed = runs.needed
    with_room = runs.with_room
    return [
        items[0] if items is not None else source.using(needed, with_room)[0][first]
        for source, first, _, items in runs.parts
    ]


def _walk_order(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    candidates: list[Candidate],
    attempts: list[bool],
    request: VictimSearch,
    runs: Runs | None,
    heads: list[Candidate] | None,
) -> list[Candidate]:
    """The candidates the walks go over (:func:`_walked`), in victim order: with the base
    order and long runs, merged from the runs as far as the walks read
    (:func:`_merged_runs`). Short runs (a cohort of many queues offering a few units each)
    cost more per run than the walks save: those candidates are sorted as they come."""
    if (
        runs is not None
        and heads is not None
        and len(candidates) >= _MERGED_RUN * len(heads)
        and order_for(session, preemptor) is base_order
    ):
        return _merged_runs(session, runs, heads, False not in attempts)
    return _ordered(session, preemptor, leaf, _walked(candidates, attempts), request)


_MERGED_RUN = 32  # candidates per run, on average, for the runs to be merged (``_walk_order``)
_SORTED_RUNS = "_sorted_runs"  # in ``session.state``: see :func:`_merged_runs`
_MERGED_RUNS = "_merged_runs"  # in ``session.state``: see :func:`_merged_runs`


def _merged_runs(session: Session, runs: Runs, heads: list[Candidate], borrowing: bool) -> list[Candidate]:
    """The candidates of ``runs`` in the base victim order, without the runs usable only
    within nominal when every attempt may borrow (``borrowing``: :func:`_walked`, run by
    run: a run's units share their class).

    Each run is sorted once per session (stably, by ``sort_key``): a unit's key is set
    when it is made and a source's kept units never change, so the same run of the same
    source is the same sorted list (a run of a source that keeps no units yet is named by
    its range of the source's units, kept units by their range of those); a new run is
    sorted from the last of its queue and class where that is exact (``resorted.py``). The runs are
    then merged as far as the walks read (:class:`Merged`): the stable sort of their
    concatenation, which is the collected candidates'. A merge is kept for the session,
    with what was made of it, for the searches that walk the same runs; a single run is
    handed over as it is kept (walks only read their candidates)."""
    parts = [part for part, head in zip(runs.parts, heads, strict=True) if not (borrowing and head.only_within_nominal)]
    state = session.state
    out = kept_of_runs(session, _SORTED_RUNS, runs, parts, lambda units: sorted_units(state, units))
    if len(out) == 1:
        return out[0]
    return kept_union(session, _MERGED_RUNS, out, Merged)


_Part = tuple[Source, int, int, "list[Candidate] | None"]  # a run of ``Runs.parts``
_T = TypeVar("_T")
_U = TypeVar("_U")


def kept_of_runs(
    session: Session, name: str, runs: Runs, parts: Iterable[_Part], make: Callable[[list[Candidate]], _T]
) -> list[_T]:
    """``make`` of the candidates of each of ``parts`` (runs of ``runs``), kept for the
    session in ``session.state[name]``: a source's units, kept or not, never change, nor
    does a unit's key or room, so the same run of the same source (a run of a source that
    keeps no units yet named by its range of the source's units, kept units by their range
    of those) gives the same answer."""
    state = session.state
    kept: dict[tuple[Source, frozenset[FR], bool, int, int, bool], _T] | None = state.get(name)
    if kept is None:
        kept = state[name] = {}
    needed = runs.needed
    with_room = runs.with_room
    out: list[_T] = []
    for source, first, last, items in parts:
        place = (source, needed, with_room, first, last, items is None)
        if place in kept:
            found = kept[place]
        else:
            units = items if items is not None else source.using(needed, with_room)[0][first:last]
            found = kept[place] = make(units)
        out.append(found)
    return out


def kept_union(session: Session, name: str, parts: list[_T], make: Callable[[list[_T]], _U]) -> _U:
    """``make`` of ``parts``, kept for the session in ``session.state[name]`` by the ids of
    the parts: they are kept for the session (:func:`kept_of_runs`), so their ids name them."""
    state = session.state
    kept: dict[tuple[int, ...], _U] | None = state.get(name)
    if kept is None:
        kept = state[name] = {}
    key = tuple(map(id, parts))
    if key in kept:
        return kept[key]
    found = kept[key] = make(parts)
    return found


def _walked(candidates: list[Candidate], attempts: list[bool]) -> list[Candidate]:
    """The candidates the walks go over. When every attempt may borrow, such an attempt
    passes over each candidate usable only within nominal before anything else: they are
    never looked at. Made only for a search that walks (a search the bound proves hopeless
    walks only when a plugin may refuse a candidate or a scenario)."""
    if False not in attempts:
        return list(filterfalse(_ONLY_WITHIN_NOMINAL, candidates))
    return candidates


_ORDERED = "_ordered_candidates"  # in ``session.state``: see :func:`_ordered`
_SORTED = "_sorted_lists"  # in ``session.state``: see :func:`sorted_again`
_HINTED = 512  # fewer candidates than this are sorted as they come


def _ordered(
    session: Session, preemptor: Workload, leaf: QuotaNode, candidates: list[Candidate], request: VictimSearch
) -> list[Candidate]:
    """``candidates`` in victim order, as ``sort_candidates`` orders them; with the base
    order, as a list sorted before (:func:`sorted_again`) or, when long, merged into the
    order of the last search of the same leaf, needed flavor-resources and node room
    (:func:`in_order`)."""
    order = order_for(session, preemptor)
    if order is not base_order:
        sort_candidates(candidates, order)
        return candidates
    if len(candidates) < _HINTED:
        sorted_again(session.state, candidates)
        return candidates
    kept: dict[tuple[int, frozenset[FR], bool], Ordered] | None = session.state.get(_ORDERED)
    if kept is None:
        kept = session.state[_ORDERED] = {}
    place = (leaf.index, request.needed, request.with_room)
    found = in_order(kept.get(place), candidates)
    if found is None:
        kept.pop(place, None)
        return candidates
    kept[place] = found
    return found.units


def sorted_again(state: dict[str, Any], candidates: list[Candidate]) -> None:
    """``sort_candidates`` with the base order, in place. The last list sorted of each
    length and first unit is kept, as it came and sorted: a list equal to it (the same
    units in the same order, ``Candidate`` compares by identity) sorts as it did, since a
    unit's ``sort_key`` never changes and the sort is stable."""
    if not candidates:
        return
    kept: dict[tuple[int, int], tuple[list[Candidate], list[Candidate]]] | None = state.get(_SORTED)
    if kept is None:
        kept = state[_SORTED] = {}
    place = (len(candidates), id(candidates[0]))
    found = kept.get(place)
    if found is not None and found[0] == candidates:
        candidates[:] = found[1]
        return
    came = list(candidates)
    sort_candidates(candidates, base_order)
    kept[place] = (came, list(candidates))


class Ordered:
    """Units in the base order with their keys, strictly increasing (no two equal), and
    the set of the units."""

    __slots__ = ("keys", "members", "units")

    def __init__(self, units: list[Candidate], keys: list[tuple[Any, ...]], members: set[Candidate]) -> None:
        self.units = units
        self.keys = keys
        self.members = members


def in_order(last: Ordered | None, candidates: list[Candidate]) -> Ordered | None:
    """``candidates`` sorted by their ``sort_key``s, exactly as ``sort_candidates`` sorts
    them with the base order, kept for the next search when the keys are all different
    (else ``None``, ``candidates`` then sorted in place).

    The searches of one queue mostly sort the candidates the last one sorted (the same
    preemptor sent back by its round, or the next head): a few units are new (the
    victims taken since come back as units already evicted), a few gone. The units of
    ``last`` still among the candidates keep their order, the gone ones are found by
    bisection and dropped, the new ones are sorted among themselves and placed by
    bisection: only their keys are compared. That is the sort's answer: every unit of
    ``last`` still has the key it was ordered by (the same object), the keys of ``last``
    increase strictly, so do the new ones' and none equals a key of ``last``, and the
    candidates hold each unit once (as many different units as candidates). A list of
    distinct keys has one sorted order, the one the stable sort gives (base keys are
    tuples of numbers and strings, totally ordered). Anything else, and the candidates
    are sorted as they came."""
    if last is not None:
        units = last.units
        keys = last.keys
        if all(map(is_, map(_SORT_KEY, units), keys)):
            here = set(candidates)
            had = last.members
            new = here.difference(had)
            gone = had.difference(here)
            if len(units) - len(gone) + len(new) == len(candidates):
                merged = _merged(units, keys, gone, new)
                if merged is not None:
                    return Ordered(*merged, here)
    sort_candidates(candidates, base_order)
    keys = list(map(_SORT_KEY, candidates))
    if all(map(lt, keys, islice(keys, 1, None))):
        return Ordered(candidates, keys, set(candidates))
    return None


def _merged(
    units: list[Candidate], keys: list[tuple[Any, ...]], gone: set[Candidate], new: set[Candidate]
) -> tuple[list[Candidate], list[tuple[Any, ...]]] | None:
    """``units`` (keys strictly increasing) without ``gone``, with ``new`` sorted in;
    ``None`` when a new key equals another key."""
    units = list(units)  # the kept lists stay as they are
    keys = list(keys)
    for at in sorted((bisect_left(keys, unit.sort_key) for unit in gone), reverse=True):
        del units[at]
        del keys[at]
    if not new:
        return units, keys
    added = sorted(new, key=_SORT_KEY)
    out: list[Candidate] = []
    out_keys: list[tuple[Any, ...]] = []
    start = 0
    before = None
    for unit in added:
        key = unit.sort_key
        if before is not None and not before < key:
            return None
        at = bisect_left(keys, key, start)
        if at < len(keys) and keys[at] == key:
            return None
        out.extend(units[start:at])
        out_keys.extend(keys[start:at])
        out.append(unit)
        out_keys.append(key)
        start = at
        before = key
    out.extend(units[start:])
    out_keys.extend(keys[start:])
    return out, out_keys


_WANTED = "_wanted_words"  # in ``session.state``: needed flavor-resources -> their words


def _wanted(session: Session, needed: frozenset[FR]) -> str:
    """The needed flavor-resources in words, as every search's first line names them;
    made once per set in a session."""
    words: dict[frozenset[FR], str] | None = session.state.get(_WANTED)
    if words is None:
        words = session.state[_WANTED] = {}
    found = words.get(needed)
    if found is None:
        found = words[needed] = ", ".join(f"{fr[1]} in flavor {fr[0]}" for fr in sorted(needed))
    return found


_NAMED = "_victims_named"  # in ``session.state``: see :func:`_named`


class _Named(dict[Candidate, str]):
    """Each unit's words in a victims line, ``key (reason)``, made when first asked for."""

    def __missing__(self, unit: Candidate) -> str:
        words = self[unit] = f"{unit.workload.key} ({unit.reason})"
        return words


def _named(session: Session, victims: list[Candidate]) -> str:
    """The victims as the line of a search that found them names them: ``key (reason)``,
    comma-separated. A unit's words are made once per session (its workload's key and its
    reason never change; units are told apart by identity): a session's searches name
    hundreds of thousands of victims, a few thousand different units."""
    named: _Named | None = session.state.get(_NAMED)
    if named is None:
        named = session.state[_NAMED] = _Named()
    return ", ".join(map(named.__getitem__, victims))
