"""find_victims: the victim search for one preemptor (SEMANTICS §4, §6).

A Deployment whose one missing replica lacks node room frees it node by node
(:mod:`.replicas`); every other preemptor takes whole-workload and elastic units
until its request fits (:mod:`.search`). A search already run in the same state
is answered from the session's memo (:mod:`.memo`), and so is one a failed search
of the same state dominates. The time spent here is reported under
the name of the preemption action.

The whole request of a workload with several podSets asks for what the search of one
of its podSets asked (``bases``: ``flavors.finish_assignment`` hands the searches of
the options it chose), plus flavor-resources that fit: within the leaf's Available and
its nominal, so they fit at every step of a walk (the state only loses usage) and add
nothing to the borrowing level. Such a search needs the same flavor-resources, and
when the plugins offer it the very candidates they offered the podSet's search (the
same objects in the same order, as many left out), in the same state, every step of
its walk is the same: the quota bound, the fit tests, the questions to the plugins,
fill-back and the level. Its answer is then the podSet's search's, its vetoes counted
again as the memo counts them (:func:`_same_walk`). That is for searches without node
targets. With node targets, a launcher and GPU pods on one flavor ask the same usage
and needed flavor-resources as the GPU podSet's search and differ only in the
launcher's target: when a node hosting no candidate keeps the launcher apart from the
GPU pods at every step, the podSet's answer is the whole request's (:mod:`.parked`).

A launcher on one flavor and GPU pods on another ask for node room on two sets of nodes.
Placing podSets together (``Session.pods_fit``) puts each podSet's pods on nodes of its
own flavor only, each seeing the room the earlier ones took. When no node of the
launcher's flavor is a node of another target's flavor, the launcher takes room no other
target can use: the targets fit together exactly when the launcher fits on its own and
the others fit without it. A single pod that fits the nodes now fits every state a walk
or its fill-back tests: each is the room now plus room freed by victims (a node with room
for it keeps it). So the launcher's target changes no fit test of the search, and
:func:`search_targets` leaves it out: the search walks, fills back and answers as with
it, without placing the launcher at each test nor following the room victims free on its
nodes. The request the plugins are offered (``VictimSearch``: that node room is
searched, the usage and needed flavor-resources) is the same; the memo keeps the answer
under the targets searched. Not for a Deployment (its one target is searched node by
node) nor under a plugin's victim strategy (it may read the walk's targets).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from operator import is_

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import Candidate, Runs, SearchResult, Session, VictimSearch, with_vetoes
from .failures import dominated, remember_failure, search_state_at
from .memo import (  # _USAGE, _STATE: where memo_key puts the usage asked for and the state
    _STATE,
    _USAGE,
    Key,
    memo_key,
    plugins_said,
    recall,
    remember,
    remember_unsaid,
    replay,
    snapshot_counts,
    tally,
)
from .parked import count_bounded, same_walk_on_nodes
from .replicas import replica_victims
from .search import find_minimal

__all__ = ["APART", "find_victims", "search_targets"]


def find_victims(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]] = (),
    bases: Sequence[SearchResult] = (),
) -> SearchResult:
    """The minimal set of victims that lets ``usage`` fit in ``leaf`` (and its pods fit
    the nodes), or an empty result. The accounting is left exactly as it was.
    ``bases``: searches of parts of this request whose walk this one may repeat (see
    the module notes)."""
    if not (session.in_queue_enabled or session.cross_queue_enabled):
        return SearchResult(message="preemption is not enabled")
    started = time.perf_counter()
    counts = tally(session)
    counts.asked += 1
    try:
        key = memo_key(session, preemptor, leaf, usage, needed, targets)
        if key is not None:
            found = recall(session, key, counts)
            if found is not None:
                found.memo_key = key
                return found
            # Read once: a search moves no epoch and chooses no victim (failures.search_state);
            # the tree's epoch as the key read it.
            state = None if preemptor.is_deployment else search_state_at(session, leaf, key[_STATE])
            found = dominated(session, preemptor, leaf, usage, needed, targets, state)
            if found is not None:
                remember_unsaid(session, key, found)
                found.memo_key = key
                counts.keys.add(key)
                return found
            # Nothing counted or said by ``dominated``: what the plugins said before the search.
            before = snapshot_counts(session, preemptor)
        session.counters.searches += 1
        found_before = _found(session)
        likely = key is not None and key[:_STATE] in found_before and needed not in found_before
        if preemptor.is_deployment and len(targets) == 1:
            # A Deployment whose replica lacks node room frees it node by node (§6).
            result = _replicas(session, preemptor, leaf, targets[0])
        elif key is not None and not targets and len(preemptor.pod_sets) > 1:
            walks = _same_walk(session, key, bases)
            result = find_minimal(session, preemptor, leaf, usage, needed, targets, walks, likely)
        elif key is not None and len(preemptor.pod_sets) > 1:
            # With node targets: the whole request may take its last podSet's walk (parked.py).
            bounded = session.counters.bounded
            on_nodes = same_walk_on_nodes(session, key, bases, targets)
            result = find_minimal(session, preemptor, leaf, usage, needed, targets, on_nodes, likely)
            if session.counters.bounded != bounded:
                count_bounded(session, key)
        else:
            result = find_minimal(session, preemptor, leaf, usage, needed, targets, None, likely)
        if key is not None:
            after = plugins_said(session, preemptor)
            if remember(session, key, result, before, after):
                result.memo_key = key
            remember_failure(session, preemptor, leaf, usage, needed, targets, result, before, after, state, counts)
            if result.victims:
                found_before.add(key[:_STATE])
            elif likely and result.silent:
                found_before.add(needed)  # walked in vain where the bound proved it hopeless
        return result
    finally:
        name = "preempt" if "preempt" in session.actions else "reclaim"
        session.timings[name] = session.timings.get(name, 0.0) + time.perf_counter() - started


_FOUND = "_found_victims"
"""Where a session keeps (``session.state``) the searches that found victims, named by their
memo keys less the state: the same search asked again in a later state (a head offered
again next round) most likely finds victims again, and walks before it asks the quota
bound (``search.find_minimal``, ``likely``). Beside them, the needed flavor-resources of
such a search that found none, the bound proving it hopeless: their flavors are filling
up, and a walk that finds nothing costs more than the bound it would spare, so no later
search needing them walks first."""


def _found(session: Session) -> set[Key | frozenset[FR]]:
    found: set[Key | frozenset[FR]] | None = session.state.get(_FOUND)
    if found is None:
        found = session.state[_FOUND] = set()
    return found


APART = True
"""Whether :func:`search_targets` leaves out the targets that change no fit test (tests turn
it off to compare with the search that keeps them)."""

Target = tuple[PodSet, int, str]


def search_targets(
    session: Session, preemptor: Workload, targets: list[Target], fits_now: Callable[[list[Target]], bool]
) -> list[Target]:
    """The node targets the search of a whole request is asked with: ``targets`` less each
    one-pod target that fits the nodes now (``fits_now``: ``Session.pods_fit`` on the
    state the search starts from) on nodes no other target's flavor has (module notes);
    ``targets`` when none is left out, or every one would be."""
    placements = session.placements
    policy = session.policy
    if (
        not APART
        or placements is None
        or len(targets) < 2
        or preemptor.is_deployment
        or (policy is not None and policy.strategy is not None)
    ):
        return targets
    sharing = placements.pool.sharing
    kept = [t for t in targets if t[1] != 1 or not _apart(sharing, t, targets) or not fits_now([t])]
    return kept if kept and len(kept) < len(targets) else targets


def _apart(sharing: Mapping[str, frozenset[str]], target: Target, targets: list[Target]) -> bool:
    """Whether the flavor of ``target`` has nodes, none of them a node of another target's
    flavor. ``sharing``: per flavor with nodes, the flavors its nodes serve
    (``NodePool.sharing``, read from the pool's layout: no node is visited)."""
    flavor = target[2]
    shared = sharing.get(flavor)
    return shared is not None and all(other is target or other[2] not in shared for other in targets)


def _replicas(session: Session, preemptor: Workload, leaf: QuotaNode, target: tuple[PodSet, int, str]) -> SearchResult:
    spec, count, flavor = target
    choices, vetoed, search = replica_victims(session, preemptor, leaf, spec, flavor, count)
    if len(choices) < count:
        message = with_vetoes("no node has victims that free room for a replica", vetoed)
        return SearchResult(vetoed_by=vetoed, message=message)
    victims = [v for choice in choices for v in choice.victims]
    lines = [f"replica on node {c.node}: victims " + ", ".join(v.name for v in c.victims) for c in choices]
    return SearchResult(victims, True, 0, vetoed, lines=lines, replicas=choices, resume=search)


_OFFERED = "_offered_by_key"
"""Where a session keeps (``session.state``), per memo key of a search without node
targets of a workload with several podSets, what the plugins offered it: how many
they left out, and the candidates."""


def _same_walk(
    session: Session, key: Key, bases: Sequence[SearchResult]
) -> Callable[[VictimSearch, list[Candidate], Runs | None], SearchResult | None]:
    """What ``find_minimal`` tells what the plugins offered the search of ``key``: it keeps
    the offer, and answers with a search of ``bases`` that walks the same (module notes)."""

    def collected(request: VictimSearch, candidates: list[Candidate], runs: Runs | None) -> SearchResult | None:
        offered: dict[Key, tuple[int, tuple[Candidate, ...]]] = session.state.setdefault(_OFFERED, {})
        offered[key] = (request.left_out, tuple(candidates))
        memo = session.memo
        for base in bases:
            found = offered.get(base.memo_key)
            if (
                found is None
                or memo is None
                or found[0] != request.left_out
                or len(found[1]) != len(candidates)
                or not _extends(session, base.memo_key, key, request)
                or not all(map(is_, found[1], candidates))
            ):
                continue
            kept = memo.get(base.memo_key)
            if kept is not None:
                return replay(session, kept)
        return None

    return collected


def _extends(session: Session, base: Key, key: Key, request: VictimSearch) -> bool:
    """Whether the search of ``key`` asks, in the state the search of ``base`` was run in,
    for what that one asked plus flavor-resources that fit the leaf's Available and
    nominal; both without node targets and needing the same flavor-resources."""
    # Everything but the usage: the preemptor, the leaf, the needed flavor-resources, the
    # targets and the state (memo.memo_key).
    if base[:_USAGE] != key[:_USAGE] or base[_USAGE + 1 :] != key[_USAGE + 1 :]:
        return False
    asked = dict(base[_USAGE])
    usage = request.usage
    if len(asked) >= len(usage):
        return False
    leaf = request.leaf
    accounting = session.accounting
    used = accounting.usage[leaf.index]
    nominal = leaf.subtree
    for fr, amount in usage.items():
        had = asked.pop(fr, None)
        if had is not None:
            if had != amount:
                return False
        elif (
            fr in request.needed
            or amount > accounting.available(leaf, fr)
            or used.get(fr, 0) + amount > nominal.get(fr, 0)
        ):
            return False
    return not asked
