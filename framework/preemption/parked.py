"""The whole request of a workload with a launcher, searched on nodes, answered by the
search of its last podSet (``victims.py``).

A workload of a launcher (one pod) and a podSet of GPU pods, both on flavor ``f``,
whose GPU pods lack node room, asks twice: the flavor scan searches the GPU podSet on
top of the launcher's usage (``prior``), with node target ``[(main, k, f)]``; then
``flavors.finish_assignment`` searches the whole request, with the same usage (the
launcher's and the podSet's, added up) and the same needed flavor-resources (the
nodes lack room: every flavor-resource of ``f``), but with node targets
``[(launcher, 1, f), (main, k, f)]``. The memo keys of the two differ only there.

What the plugins are asked does not read the node targets: the request they are
offered (``VictimSearch``) says only that node room is searched, so in the same state
they offer the same candidates, and refuse the same ones. The walks, their bounds,
fill-back and level differ only where a step tests whether the pods fit: the whole's
test places the launcher best fit (least free GPUs, then cpu, then name) and counts
the podSet's pods on what is left (``Placements.fit_all``; ``room.FreedRoom`` answers
the same without placing), the podSet's counts them alone. The two answers agree at
every step when:

    some node *m* of the launcher's flavor, hosting no candidate of the search, fits
    the launcher on its room now and has fewer free GPUs than one pod of the podSet
    asks (``G``).

Every state a walk or its fill-back tests is the room now (the memo keys name the node
epoch, and the statement holds nothing) plus the room of some of the candidates, given
to the placements or kept beside them (``room.py``): no candidate is on *m*, so its room is the same in all of them and it
fits the launcher there. The best fit is no worse than *m*: it has at most as many free
GPUs, fewer than ``G``, so that node takes none of the podSet's pods (a pod asking
``G`` GPUs in all does not fit fewer), neither before nor after the launcher takes
room there; every other node keeps its room. The podSet's pods fit with the launcher
placed exactly when they fit alone. So the first step that fits, every put-back of
fill-back, the questions to the plugins (in the same order, with the same victims so
far) and the level are the same: the whole request's answer is the podSet search's,
its vetoes counted again as the memo counts them (``memo.replay``), and a search the
quota bound proved hopeless is counted as bounded as the walk would count it.

The candidates are collected as the search collects them (counted as examined), and
the nodes their pods are on are read from them: *m* is the best fit of the launcher on
the nodes neither stale nor among those (``Placements.best_fit_unchanged``). When they
come in runs (``Runs``: the candidates are exactly the runs' units, in order), those
nodes are the union of each run's, and a run's are gathered once per session: a run is
named as ``search.kept_of_runs`` names it (a source's units, kept or not, never change,
nor does a unit's room), and the union of the same runs is kept too. Whenever
anything else holds (another memo key, a podSet not last, more than one earlier pod, no
GPUs asked, no node found, a podSet search not kept in the memo), the whole request is
searched as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain, repeat
from operator import attrgetter

from ..model import PodSet
from ..nodes import gpu_amount, pod_terms
from ..session import Candidate, Runs, SearchResult, Session, VictimSearch
from ..session.candidates import DeferredPods
from .memo import Key, replay
from .search import kept_of_runs, kept_union

__all__ = ["ENABLED", "count_bounded", "same_walk_on_nodes"]

ENABLED = True
"""Whether a whole request may be answered by its podSet's search (tests turn it off to
compare with the search that walks)."""

_TARGETS = 9  # where memo_key puts the node targets (after the usage and needed)
_BOUNDED = "_bounded_with_targets"
"""Where a session keeps (``session.state``) the memo keys of the searches with node
targets of workloads with several podSets that the quota bound proved hopeless."""

_ROOM = attrgetter("room")
_NOTHING: Mapping[str, int] = {}  # what ``best_fit_unchanged`` is told of a node it skips
_NODE = attrgetter("node_name")  # of a room entry: a bound Pod or a NodeRoom
_HOSTS = "_hosts_of_runs"
"""Where a session keeps (``session.state``) the nodes hosting each run's candidates,
``None`` for a run holding a :class:`DeferredPods` (see :func:`_runs_hosts`)."""
_UNITED = "_hosts_of_united_runs"
"""Where a session keeps (``session.state``) the union of several runs' host nodes, by
the ids of the runs' kept host maps (kept as long as the state: their ids name them)."""

Hosts = dict[str, Mapping[str, int]]


def count_bounded(session: Session, key: Key) -> None:
    """Keep ``key`` as a search the quota bound proved hopeless (see :data:`_BOUNDED`)."""
    bounded: set[Key] | None = session.state.get(_BOUNDED)
    if bounded is None:
        bounded = session.state[_BOUNDED] = set()
    bounded.add(key)


def same_walk_on_nodes(
    session: Session, key: Key, bases: Sequence[SearchResult], targets: Sequence[tuple[PodSet, int, str]]
) -> Callable[[VictimSearch, list[Candidate], Runs | None], SearchResult | None] | None:
    """What ``find_minimal`` tells what the plugins offered the whole request of ``key``,
    when one of ``bases`` is the search of its last podSet with the same key but for the
    launcher's target; ``None`` when none is (module notes)."""
    memo = session.memo
    placements = session.placements
    if not ENABLED or memo is None or placements is None or len(targets) != 2 or not bases:
        return None
    launcher, last = targets
    spec, count, flavor = launcher
    if count != 1 or not placements.has_nodes(flavor):
        return None
    gpus = gpu_amount(last[0].requests)
    if gpus <= 0:
        return None
    wanted = ((last[0].name, last[1], last[2]),)
    for base in bases:
        base_key = base.memo_key
        if (
            base_key is not None
            and base_key[_TARGETS] == wanted
            and base_key[:_TARGETS] == key[:_TARGETS]
            and base_key[_TARGETS + 1 :] == key[_TARGETS + 1 :]
        ):
            kept = memo.get(base_key)
            if kept is not None:
                bounded: set[Key] | None = session.state.get(_BOUNDED)
                return _answer(session, spec, flavor, gpus, kept, bounded is not None and base_key in bounded)
    return None


def _answer(
    session: Session,
    spec: PodSet,
    flavor: str,
    gpus: int,
    kept: tuple[SearchResult, Sequence[tuple[str, int]]],
    bounded: bool,
) -> Callable[[VictimSearch, list[Candidate], Runs | None], SearchResult | None]:
    """The podSet search's answer ``kept`` (and whether the quota bound proved it hopeless)
    for the whole request, once its candidates show that the launcher parks apart."""

    def collected(request: VictimSearch, candidates: list[Candidate], runs: Runs | None) -> SearchResult | None:
        if not _parked(session, spec, flavor, gpus, candidates, runs):
            return None
        if bounded:
            session.counters.bounded += 1
        return replay(session, kept)

    return collected


def _parked(
    session: Session, spec: PodSet, flavor: str, gpus: int, candidates: list[Candidate], runs: Runs | None
) -> bool:
    """Whether a node of ``flavor`` with fewer than ``gpus`` free GPUs, hosting none of
    ``candidates`` (which come in ``runs``, when given), fits a pod of ``spec`` now (the
    node *m* of the module notes)."""
    placements = session.placements
    assert placements is not None
    hosts = _hosts(candidates) if runs is None else _runs_hosts(session, runs)
    if hosts is None:
        return False  # their pods are not listed yet
    selector, tolerations = pod_terms(session.snapshot.flavors[flavor], spec)
    found = placements.best_fit_unchanged(flavor, spec.requests, selector, tolerations, hosts)
    return found is not None and found[0] < gpus


def _hosts(candidates: Sequence[Candidate]) -> Hosts | None:
    """The nodes the pods of ``candidates`` are on (told nothing of them: :data:`_NOTHING`),
    gathered in C (a search offers hundreds); ``None`` when a :class:`DeferredPods` is
    among them (its pods are not listed yet)."""
    if any(map(isinstance, candidates, repeat(DeferredPods))):
        return None
    return dict.fromkeys(map(_NODE, chain.from_iterable(map(_ROOM, candidates))), _NOTHING)


def _runs_hosts(session: Session, runs: Runs) -> Hosts | None:
    """:func:`_hosts` of the candidates of ``runs``: the union of each run's (module notes)."""
    found = kept_of_runs(session, _HOSTS, runs, runs.parts, _hosts)
    if len(found) == 1:
        return found[0]
    listed: list[Hosts] = []
    for hosts in found:
        if hosts is None:
            return None  # a run holds pods not listed yet
        listed.append(hosts)
    return kept_union(session, _UNITED, listed, _union)


def _union(parts: list[Hosts]) -> Hosts:
    union: Hosts = {}
    for hosts in parts:
        union.update(hosts)
    return union
