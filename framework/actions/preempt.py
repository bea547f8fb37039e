"""The victim search for one preemptor (SEMANTICS §4): mechanism only.

Which workloads may be victims, and of which class, is policy: plugins answer
``preemption_candidates`` (``priority`` for the preemptor's own queue,
``cohort-reclaim`` for the cohort) using :func:`candidate_units`. This module
orders the candidates, plans the attempts, walks them with a statement so that
every step is exact and undoable, and fills back to a minimal set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..candidates import (
    CLASS_HIERARCHICAL,
    CLASS_SAME_QUEUE,
    Candidate,
    DeferredPods,
    Scenario,
)
from ..flavors import pods_fit
from ..model import FR, Pod, PodSet, PodSetAdmission, Workload
from ..pods import NORMAL, SURPLUS, classify
from ..quota import QuotaNode
from ..registry import bad_answer
from ..snapshot import pod_set_usage
from .nodechoice import lender_may_give

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["SearchResult", "VictimSearch", "candidate_units", "find_victims", "pod_unit"]


@dataclass(slots=True)
class VictimSearch:
    """What a preemptor asks for: handed to ``preemption_candidates``."""

    preemptor: Workload
    leaf: QuotaNode
    usage: dict[FR, int]
    needed: frozenset[FR]


@dataclass(slots=True)
class SearchResult:
    victims: list[Candidate] = field(default_factory=list)
    allow_borrowing: bool = True
    level: int = 0
    vetoed_by: frozenset[str] = frozenset()
    message: str = ""
    # What the search looked at, in plain words, for `preemptd explain`.
    lines: list[str] = field(default_factory=list)
    # Deployments: the replicas placed so far and the search that can place more.
    replicas: list[Any] = field(default_factory=list)
    resume: Any = None


def candidate_units(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    *,
    reason: str,
    group: int,
    only_within_nominal: bool = False,
) -> list[Candidate]:
    """The units a running workload can give: the whole workload, or for an elastic
    one its single pods above ``minCount`` then the rest as one unit (SEMANTICS §4,
    "Elastic victims").

    Cached for the session per workload and class: a search over 10k candidates
    builds them once per session, not once per search. The allocate action drops a
    workload's entry when the session takes something from it.

    While a node-by-node search collects candidates (``session.defer_pods``), a
    running Deployment's pods come as one :class:`DeferredPods` instead, which the
    search expands only on the nodes it looks at."""
    if session.defer_pods and workload.is_deployment:
        return _deferred_units(session, workload, leaf, reason, group, only_within_nominal)
    return _cached_units(session, workload, leaf, reason, group, only_within_nominal)


def _deferred_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> list[Candidate]:
    """``[DeferredPods]`` for a running Deployment with Pod objects, else its units."""
    key = workload.key
    cache = session.unit_cache.get(key)
    cache_key = (leaf.index, reason, group, only_within_nominal, True)
    if cache is not None:
        found = cache.get(cache_key)
        if found is not None:
            return found
    if not _gives_pods(session, workload):
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    if cache is None:
        cache = session.unit_cache[key] = {}
    # Its usage (one replica's) and pod set are filled in when it is first expanded.
    found = cache[cache_key] = [
        DeferredPods(
            workload, leaf, {}, reason, group, None, None, (), (), only_within_nominal, False, False,
            workload.priority, (key, "pods"),
        )
    ]
    return found


def _cached_units(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
) -> list[Candidate]:
    key = workload.key
    cache = session.unit_cache.get(key)
    if cache is None:
        cache = session.unit_cache[key] = {}
    cache_key = (leaf.index, reason, group, only_within_nominal, False)
    found = cache.get(cache_key)
    if found is None:
        found = cache[cache_key] = _units(session, workload, leaf, reason, group, only_within_nominal)
    return found


def _gives_pods(session: Session, workload: Workload) -> bool:
    """A running Deployment whose units are its Pod objects (see ``_pod_units``)."""
    if not workload.is_deployment or workload.evicted or workload.admission is None:
        return False
    taken = session.taken.get(workload.key)
    if taken is not None and taken.whole:
        return False
    return bool(session.snapshot.pods_by_workload.get(workload.key))


def _units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> list[Candidate]:
    key = workload.key
    taken = session.taken.get(key)
    evicted = workload.evicted or (taken is not None and taken.whole)
    if workload.is_deployment and not evicted and workload.admission is not None:
        return _pod_units(session, workload, leaf, reason, group, only_within_nominal)
    usage = session.snapshot.usage.get(key, {})
    room = _room(session, workload) if session.placements is not None else ()
    priority = workload.priority
    elastic = None if evicted or workload.admission is None else _elastic_pod_set(workload)
    if elastic is None:
        unit = Candidate(
            workload, leaf, usage, reason, group, None, None, (), room, only_within_nominal, evicted, False,
            priority, (key,),
        )
        # _base_key, written out: this is the path of almost every candidate.
        admitted_at = workload.admitted_at
        unit.sort_key = (
            0 if evicted else 1,
            group,
            priority,
            1,
            -(admitted_at if admitted_at is not None else session.now),
            workload.tiebreak,
            0,
        )
        return [unit]
    spec, admitted = elastic
    assert spec.min_count is not None and workload.admission is not None
    flavors = next(psa.flavors for psa in workload.admission.pod_sets if psa.name == spec.name)
    per_pod = pod_set_usage(spec, 1, flavors)
    units: list[Candidate] = []
    pods = session.snapshot.pods_by_workload.get(key, ())
    committed = sum(psa.count for psa in workload.admission.pod_sets)
    if len(pods) > committed:
        # Shrinking (SEMANTICS §4): the surplus pods are on their way out. Their usage
        # is gone from the committed count already; each is a unit already evicted,
        # relied on for its room and never taken again.
        gone = set(taken.pod_names) if taken is not None else set()
        live: list[Pod] = []
        for one, pod_class in classify(pods, committed, ordered=True):
            if pod_class != SURPLUS:
                live.append(one)
            elif one.key not in gone:
                unit = Candidate(
                    workload, leaf, {}, reason, group, 1, spec.name, (one,),
                    ((one.node_name, one.requests),) if one.node_name else (), only_within_nominal,
                    True, True, priority, (key, "pod", one.name),
                )
                unit.pod_class = SURPLUS
                units.append(unit)
        pods = live
    # Newest pods go first, as a scale-down would pick them.
    pods = sorted(pods, key=lambda p: (-p.created, p.name))
    singles = admitted - spec.min_count
    already = taken.pods if taken is not None else 0
    rest = dict(usage)
    for i in range(singles):
        pod = tuple(pods[i : i + 1])
        unit_room = tuple((p.node_name, p.requests) for p in pod if p.node_name is not None)
        units.append(
            Candidate(
                workload, leaf, per_pod, reason, group, 1, spec.name, pod, unit_room, only_within_nominal,
                i < already, True, priority, (key, i),
            )
        )
        for fr, amount in per_pod.items():
            rest[fr] -= amount
    rest_room = tuple((p.node_name, p.requests) for p in pods[singles:] if p.node_name)
    rest_room += _reserved_room(session, workload)
    units.append(
        Candidate(
            workload, leaf, rest, reason, group, None, spec.name, (), rest_room, only_within_nominal, False,
            False, priority, (key, "rest"),
        )
    )
    now = session.now
    for i, unit in enumerate(units):
        unit.sort_key = (0 if unit.evicted else 1, group, *_base_key(unit, now), i)
    return units


def _pod_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> list[Candidate]:
    """A Deployment gives pods (SEMANTICS §6): each bound pod is a unit of its lifecycle
    class; only a normal pod carries a replica's quota (taking it lowers the committed
    count). Without Pod objects (no nodes) the committed replicas but one are units."""
    key = workload.key
    spec, psa = _replica_spec(workload)
    per_replica = pod_set_usage(spec, 1, psa.flavors)
    taken = session.taken.get(key)
    gone = set(taken.pod_names) if taken is not None else set()
    units: list[Candidate] = []
    pods = session.snapshot.pods_by_workload.get(key, ())
    if pods:
        admitted = workload.admitted_at if workload.admitted_at is not None else session.now
        for i, (pod, pod_class) in enumerate(session.snapshot.pod_classes(workload)):
            if gone and pod.key in gone:
                continue  # its room went to an earlier preemptor of this session
            units.append(
                _pod_unit(
                    workload, leaf, reason, group, only_within_nominal, spec.name, per_replica, pod, pod_class, i,
                    admitted,
                )
            )
        return units
    already = taken.pods if taken is not None else 0
    for i in range(already, psa.count - 1):
        units.append(
            Candidate(
                workload, leaf, per_replica, reason, group, 1, spec.name, (), (), only_within_nominal,
                False, True, workload.priority, (key, "replica", i),
            )
        )
    now = session.now
    for i, unit in enumerate(units):
        unit.sort_key = (0 if unit.evicted else 1, group, *_base_key(unit, now), i)
    return units


def _pod_unit(
    workload: Workload,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    pod_set: str,
    per_replica: Mapping[FR, int],
    pod: Pod,
    pod_class: int,
    index: int,
    admitted: int,
) -> Candidate:
    """One pod of a Deployment as a unit of its class: only a normal pod carries a
    replica's quota. ``index``: its place in ``classify`` order, the last tie-break."""
    normal = pod_class == NORMAL
    priority = pod.priority if pod.priority is not None else workload.priority
    unit = Candidate(
        workload, leaf, per_replica if normal else {}, reason, group, 1, pod_set, (pod,),
        ((pod.node_name, pod.requests),) if pod.node_name else (), only_within_nominal,
        not normal, True, priority, (workload.key, "pod", pod.name),
    )
    unit.pod_class = pod_class
    # _base_key of a single pod, written out.
    unit.sort_key = (1 if normal else 0, group, priority, 0, -admitted, workload.tiebreak, index)
    return unit


def pod_unit(session: Session, deferred: DeferredPods, pod: Pod, pod_class: int, index: int) -> Candidate | None:
    """The unit of one pod a :class:`DeferredPods` stands for, as ``_pod_units`` builds
    it (``pod_class`` and ``index`` from ``classify``); ``None`` if this session already
    took the pod."""
    workload = deferred.workload
    taken = session.taken.get(workload.key)
    if taken is not None and pod.key in taken.pod_names:
        return None
    if deferred.pod_set is None:
        spec, psa = _replica_spec(workload)
        deferred.pod_set = spec.name
        deferred.usage = pod_set_usage(spec, 1, psa.flavors)
    admitted = workload.admitted_at if workload.admitted_at is not None else session.now
    return _pod_unit(
        workload, deferred.leaf, deferred.reason, deferred.group, deferred.only_within_nominal, deferred.pod_set,
        deferred.usage, pod, pod_class, index, admitted,
    )


def _replica_spec(workload: Workload) -> tuple[PodSet, PodSetAdmission]:
    """A Deployment's replica: its (first) admitted pod set and that pod set's spec."""
    assert workload.admission is not None
    psa = workload.admission.pod_sets[0]
    return next((ps for ps in workload.pod_sets if ps.name == psa.name), workload.pod_sets[0]), psa


def _elastic_pod_set(workload: Workload) -> tuple[PodSet, int] | None:
    assert workload.admission is not None
    for spec in workload.pod_sets:
        if spec.min_count is not None:
            for psa in workload.admission.pod_sets:
                if psa.name == spec.name:
                    return spec, psa.count
    return None


def _room(session: Session, workload: Workload) -> tuple[tuple[str, Any], ...]:
    if session.placements is None:
        return ()
    pods = session.snapshot.pods_by_workload.get(workload.key, ())
    return tuple((p.node_name, p.requests) for p in pods if p.node_name) + _reserved_room(session, workload)


def _reserved_room(session: Session, workload: Workload) -> tuple[tuple[str, Any], ...]:
    """Room held by the workload's pods that have no Pod object yet (placed at session start)."""
    reserved = session.snapshot.reserved_by_workload.get(workload.key)
    if not reserved or session.placements is None:
        return ()
    specs = {ps.name: ps for ps in workload.pod_sets}
    return tuple((r.node, specs[r.pod_set].requests) for r in reserved)


def _base_key(c: Candidate, now: int) -> tuple[Any, ...]:
    """SEMANTICS §4 within a group: lower priority, single pods of elastic workloads
    before whole ones, most recently admitted (no admittedAt = now), tie-break key."""
    admitted = c.workload.admitted_at if c.workload.admitted_at is not None else now
    return (c.priority, 0 if c.single_pod else 1, -admitted, c.workload.tiebreak)


def order_for(session: Session, preemptor: Workload) -> Callable[[Candidate], tuple[Any, ...]]:
    """The victim order of one search: already evicted first, then by class; plugin
    keys (``victim_order``) decide within a class before the base order."""
    keys = session.registry.call_all("victim_order", session=session, preemptor=preemptor)
    if not keys:
        # Units are cached per session, so are their keys: no tuple is built per search.
        return _sort_key

    def key(c: Candidate) -> tuple[Any, ...]:
        parts: list[Any] = [0 if c.evicted else 1, c.group]
        for name, extra in keys:
            # A key that raises leaves the candidate to the base order, after the
            # candidates the plugin could rank: (0, *key) sorts before (1,).
            try:
                parts.append((0, *extra(c)))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                session.registry.record_failure(name, "victim_order", exc)
                parts.append((1,))
        parts.extend(c.sort_key[2:])  # the base order and the unit's index, computed once
        return tuple(parts)

    if not all(getattr(extra, "preemptor_independent", False) for _, extra in keys):
        return key

    def kept(c: Candidate) -> tuple[Any, ...]:
        found = c.order_key
        if found is None:
            found = c.order_key = key(c)
        return found

    kept.preemptor_independent = True  # type: ignore[attr-defined]
    return kept


def collect_candidates(
    session: Session, preemptor: Workload, request: VictimSearch, *, with_room: bool, defer_pods: bool = False
) -> list[Candidate]:
    """Every plugin's candidates that use a needed flavor-resource (or, when node room
    is what is missing, that occupy room on a node). ``defer_pods``: running
    Deployments' pods may come as :class:`DeferredPods` (node-by-node search only)."""
    raw: list[Candidate] = []
    session.defer_pods = defer_pods
    try:
        for _, found in session.registry.call_all(
            "preemption_candidates", session=session, preemptor=preemptor, assignment=request
        ):
            raw.extend(found)
    finally:
        session.defer_pods = False
    needed = request.needed
    if with_room:
        return [c for c in raw if c.room or not needed.isdisjoint(c.usage) or isinstance(c, DeferredPods)]
    return [c for c in raw if not needed.isdisjoint(c.usage)]


def _sort_key(c: Candidate) -> tuple[Any, ...]:
    return c.sort_key


_sort_key.preemptor_independent = True  # type: ignore[attr-defined]


def find_victims(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]] = (),
) -> SearchResult:
    """The minimal set of victims that lets ``usage`` fit in ``leaf`` (and its pods fit
    the nodes), or an empty result. The accounting is left exactly as it was."""
    if not (session.in_queue_enabled or session.cross_queue_enabled):
        return SearchResult(message="preemption is not enabled")
    started = time.perf_counter()
    try:
        if preemptor.is_deployment and len(targets) == 1:
            # A Deployment whose replica lacks node room frees it node by node (§6).
            return _replicas(session, preemptor, leaf, targets[0])
        return _find(session, preemptor, leaf, usage, needed, targets)
    finally:
        name = "preempt" if "preempt" in session.actions else "reclaim"
        session.timings[name] = session.timings.get(name, 0.0) + time.perf_counter() - started


def _replicas(session: Session, preemptor: Workload, leaf: QuotaNode, target: tuple[PodSet, int, str]) -> SearchResult:
    from .deployments import replica_victims

    spec, count, flavor = target
    choices, vetoed, search = replica_victims(session, preemptor, leaf, spec, flavor, count)
    if len(choices) < count:
        message = "no node has victims that free room for a replica"
        if vetoed:
            message += " (vetoed by " + ", ".join(sorted(vetoed)) + ")"
        return SearchResult(vetoed_by=vetoed, message=message)
    victims = [v for choice in choices for v in choice.victims]
    lines = [f"replica on node {c.node}: victims " + ", ".join(v.name for v in c.victims) for c in choices]
    return SearchResult(victims, True, 0, vetoed, lines=lines, replicas=choices, resume=search)


def _find(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
) -> SearchResult:
    request = VictimSearch(preemptor, leaf, usage, needed)
    candidates = collect_candidates(session, preemptor, request, with_room=bool(targets))
    if not candidates:
        return SearchResult(message="no running workload that uses the needed quota may be preempted")
    candidates.sort(key=order_for(session, preemptor))

    filters: list[tuple[str, Callable[[Scenario], bool]]] = []
    for name, found in session.registry.call_all(
        "get_accumulated_scenario_filters", session=session, action="preempt", preemptor=preemptor
    ):
        filters.extend((name, f) for f in found)

    search = _Walk(session, preemptor, leaf, usage, needed, targets, filters)
    has_other = any(c.group != CLASS_SAME_QUEUE for c in candidates)
    bwc = leaf.spec.preemption.borrow_within_cohort
    accounting = session.accounting
    strictly_below = all(accounting.used(leaf, fr) < leaf.subtree.get(fr, 0) for fr in needed)
    if not has_other or (bwc == "Never" and not strictly_below):
        attempts = [True]
    elif bwc == "Never" and not any(c.group == CLASS_HIERARCHICAL for c in candidates):
        attempts = [False, True]
    else:
        attempts = [True, False]
    wanted = ", ".join(f"{fr[1]} in flavor {fr[0]}" for fr in sorted(needed))
    lines = [f"{len(candidates)} candidate(s) use the needed {wanted}"]
    for allow_borrowing in attempts:
        victims, level = search.attempt(candidates, allow_borrowing)
        if victims:
            lines.extend(search.veto_lines())
            names = ", ".join(f"{v.key} ({v.reason})" for v in victims)
            lines.append(f"minimal set of victims: {names}")
            return SearchResult(victims, allow_borrowing, level, frozenset(search.vetoed_by), lines=lines)
    lines.extend(search.veto_lines())
    message = "no set of preemptible victims frees enough room"
    if search.vetoed_by:
        message += " (vetoed by " + ", ".join(sorted(search.vetoed_by)) + ")"
    lines.append(message)
    return SearchResult(vetoed_by=frozenset(search.vetoed_by), message=message, lines=lines)


class _Walk:
    """One preemptor's attempts; remembers plugin verdicts across attempts."""

    __slots__ = (
        "filters", "leaf", "needed", "path", "preemptor", "session", "targets", "usage", "verdicts", "vetoed_by",
        "vetoes",
    )

    def __init__(
        self,
        session: Session,
        preemptor: Workload,
        leaf: QuotaNode,
        usage: dict[FR, int],
        needed: frozenset[FR],
        targets: Sequence[tuple[PodSet, int, str]],
        filters: list[tuple[str, Callable[[Scenario], bool]]],
    ) -> None:
        self.session = session
        self.preemptor = preemptor
        self.leaf = leaf
        self.usage = usage
        self.needed = needed
        self.targets = [
            t for t in targets if session.placements is not None and session.placements.has_nodes(t[2])
        ]
        self.filters = filters
        self.verdicts: dict[int, bool] = {}
        self.path = frozenset(leaf.path())
        self.vetoed_by: set[str] = set()
        self.vetoes: dict[str, str] = {}  # candidate key -> plugin that vetoed it

    def attempt(self, candidates: list[Candidate], allow_borrowing: bool) -> tuple[list[Candidate], int]:
        session = self.session
        statement = session.statement
        start = statement.checkpoint()
        victims: list[Candidate] = []
        try:
            for candidate in candidates:
                if candidate.only_within_nominal and allow_borrowing:
                    continue
                if candidate.group != CLASS_SAME_QUEUE and not self._lender_may_give(candidate):
                    continue
                if (
                    not candidate.single_pod
                    and candidate.pod_set is not None
                    and not self._singles_taken(candidate, victims)
                ):
                    continue
                if not self._preemptible(candidate):
                    continue
                mark = statement.checkpoint()
                statement.evict(candidate, nodes=bool(self.targets))
                victims.append(candidate)
                if not self._scenario_ok(victims):
                    statement.rollback(mark)
                    victims.pop()
                    continue
                if self._fits(allow_borrowing):
                    self._fill_back(victims, allow_borrowing)
                    level = self._level()
                    return victims, level
            return [], 0
        finally:
            statement.rollback(start)

    def _singles_taken(self, rest: Candidate, victims: list[Candidate]) -> bool:
        """The remainder of an elastic workload goes only after all its single pods."""
        spec = next(ps for ps in rest.workload.pod_sets if ps.name == rest.pod_set)
        admission = rest.workload.admission
        assert admission is not None and spec.min_count is not None
        count = next(psa.count for psa in admission.pod_sets if psa.name == spec.name)
        taken = sum(
            1 for v in victims if v.workload is rest.workload and v.single_pod and v.pod_class == NORMAL
        )
        return taken >= count - spec.min_count

    def _lender_may_give(self, candidate: Candidate) -> bool:
        """Never push a lender — or a cohort between it and the common ancestor — below nominal."""
        return lender_may_give(self.session.accounting, self.leaf, candidate, self.needed, self.path)

    def _preemptible(self, candidate: Candidate) -> bool:
        cached = self.verdicts.get(id(candidate))
        if cached is not None:
            return cached
        action = "preempt" if candidate.leaf is self.leaf else "reclaim"
        vetoed = self.session.is_preemptible(action, self.preemptor, candidate)
        if vetoed is not None:
            self.vetoed_by.add(vetoed)
            self.vetoes.setdefault(candidate.key, vetoed)
        verdict = vetoed is None
        self.verdicts[id(candidate)] = verdict
        return verdict

    def veto_lines(self, most: int = 10) -> list[str]:
        keys = sorted(self.vetoes)
        lines = [f"{key}: not preemptible (plugin {self.vetoes[key]})" for key in keys[:most]]
        if len(keys) > most:
            lines.append(f"... and {len(keys) - most} more vetoed candidate(s)")
        return lines

    def _scenario_ok(self, victims: list[Candidate], *, veto: bool = True) -> bool:
        """Every filter accepts the accumulated victims. The list is handed over as it
        is, not copied per step: filters read it and must not keep or change it.
        ``veto=False`` (fill-back) does not count a rejection as a plugin veto: the
        search has already succeeded."""
        if not self.filters:
            return True
        scenario = Scenario(self.session, self.preemptor, victims, "preempt")
        for plugin, accept in self.filters:
            ok: Any  # a plugin may answer anything
            try:
                ok = accept(scenario)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.session.registry.record_failure(plugin, "scenario_filter", exc)
                ok = False
            if ok is not True:
                if ok is not False:
                    self.session.registry.record_failure(
                        plugin, "scenario_filter", bad_answer(ok, "a bool")
                    )
                if veto:
                    self.vetoed_by.add(plugin)
                    self.session.registry.vetoes[plugin] += 1
                return False
        return True

    def _fits(self, allow_borrowing: bool) -> bool:
        accounting = self.session.accounting
        leaf = self.leaf
        for fr, amount in self.usage.items():
            if amount > accounting.available(leaf, fr):
                return False
            if not allow_borrowing and accounting.used(leaf, fr) + amount > leaf.subtree.get(fr, 0):
                return False
        if self.targets:
            return pods_fit(self.session, self.targets)
        return True

    def _fill_back(self, victims: list[Candidate], allow_borrowing: bool) -> None:
        """Walk the victims in reverse from the second-to-last, putting back each one
        the preemptor does not need (Kueue keeps the last victim added: it made it fit)."""
        statement = self.session.statement
        for i in range(len(victims) - 2, -1, -1):
            victim = victims[i]
            if victim.single_pod and any(
                v.workload is victim.workload and not v.single_pod for v in victims
            ):
                continue  # its remainder is gone: the pod cannot stay on its own
            mark = statement.checkpoint()
            statement.add_usage(victim.leaf, victim.usage)
            if self.targets:
                for node, requests in victim.room:
                    statement.take_room(node, requests)
            remaining = victims[:i] + victims[i + 1 :]
            if self._fits(allow_borrowing) and self._scenario_ok(remaining, veto=False):
                del victims[i]
                continue
            statement.rollback(mark)

    def _level(self) -> int:
        accounting = self.session.accounting
        return max(
            (accounting.borrowing_level(self.leaf, fr, amount) for fr, amount in self.usage.items()),
            default=0,
        )
