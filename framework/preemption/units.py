"""Victim units: what one running workload can give a preemptor (SEMANTICS §4, §6).

A unit is the whole workload; or, for an elastic workload, one pod above its
``minCount`` and then the rest; or, for a Deployment, one pod of its lifecycle
class. Plugins hand units to the search through :func:`candidate_units`, which
builds them once per session per workload and class (``session.unit_cache``; a class
after the first is copied from one already built, :func:`units_like`), and
the node-by-node search builds a deferred Deployment's pod units with
:func:`pod_unit` only on the nodes it looks at. This is the lowest room of the
floor but one: every other module of ``preemption/`` may use it, it uses only
``kept``, the store a backend may keep units in across sessions (:class:`.kept.KeptUnits`;
``_session_units`` hands a session a workload's kept units while they are exact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, cast

from ..model import FR, Pod, PodSet, PodSetAdmission, Workload
from ..pods import NORMAL, SURPLUS, classify
from ..quota import QuotaNode
from ..session import Candidate, DeferredPods, HeldRoom, NodeRoom, Session
from ..session.candidates import NEW_UNIT, units_like
from ..snapshot import pod_set_usage
from .kept import PLACES, KeptWorkload, Units, held, hold, kept_units, unit_classes, units_of

__all__ = ["candidate_units", "class_units", "pod_unit", "queue_units_of", "unit_flags", "units_like"]

_NODE_NAME = attrgetter("node_name")  # a pod's node, read without a Python frame per pod (_held)


def _session_units(session: Session, workload: Workload, leaf: QuotaNode) -> list[Any]:
    """The session's cache entry for ``workload`` (in ``leaf``), new: its kept units when they
    are still exact (shared with :class:`KeptUnits`, which then keeps what the session adds),
    else an empty one of the session's own."""
    key = workload.key
    kept = kept_units(session) if key not in session.taken else None
    if kept is None:
        found = session.unit_cache[key] = unit_classes(leaf.index)
        return found
    snapshot = session.snapshot
    when = session.now if workload.admitted_at is None else None
    entry = kept.workloads.get(key)
    if entry is None or not entry.current(snapshot, workload, when):
        entry = kept.workloads[key] = KeptWorkload(snapshot, workload, when, kept.generation, leaf.index)
    elif entry.generation != kept.generation:
        entry.generation = kept.generation
        for _, units in held(entry.units):
            for unit in units:
                unit.order_key = None
    session.unit_cache[key] = entry.units
    return entry.units


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
    builds them once per session, not once per search (:func:`class_units`, in a new list).
    The allocate action drops a workload's entry when the session takes something from it.

    While a node-by-node search collects candidates (``session.defer_pods``), a
    running Deployment's pods come as one :class:`DeferredPods` instead, which the
    search expands only on the nodes it looks at."""
    return list(class_units(session, workload, leaf, reason, group, only_within_nominal))


def class_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> Units:
    """:func:`candidate_units`' units as the session holds them (``session.unit_cache``): a tuple
    per workload and class (most hold one unit: 48 B, where a list was 80)."""
    if session.defer_pods and workload.is_deployment:
        return _deferred_units(session, workload, leaf, reason, group, only_within_nominal)
    return _cached_units(session, workload, leaf, reason, group, only_within_nominal)


def _deferred_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> Units:
    """``(DeferredPods,)`` for a running Deployment with Pod objects, else its units."""
    key = workload.key
    cache: list[Any] | None = session.unit_cache.get(key)
    if cache is None:
        cache = _session_units(session, workload, leaf)
    cls = (reason, group, only_within_nominal, True)
    found = units_of(cache, leaf.index, cls)
    if found is not None:
        return found
    if not _gives_pods(session, workload):
        return _cached_units(session, workload, leaf, reason, group, only_within_nominal)
    # Its usage (one replica's) and pod set are filled in when it is first expanded.
    deferred = DeferredPods(
        workload, leaf, {}, reason, group, None, None, (), (), only_within_nominal, False, False,
        workload.priority, (key, "pods"),
    )
    return hold(cache, leaf.index, cls, (deferred,))


def _cached_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> Units:
    cache: list[Any] | None = session.unit_cache.get(workload.key)
    if cache is None:
        cache = _session_units(session, workload, leaf)
    cls = (reason, group, only_within_nominal, False)
    found = units_of(cache, leaf.index, cls)
    if found is None:
        # Made from the units of another class, one of the same group if built: those keep
        # their sort keys (``units_like``), one tuple for both.
        like = None
        for (index, _, of, _, deferred), other in held(cache):
            if index == leaf.index and not deferred:
                like = other
                if of == group:
                    break
        if like is not None:
            found = hold(cache, leaf.index, cls, units_like(like, reason, group, only_within_nominal))
        else:
            found = hold(cache, leaf.index, cls, _units(session, workload, leaf, reason, group, only_within_nominal, cache))
    return found


def queue_units_of(
    session: Session,
    workloads: list[Workload],
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    deferred: bool,
) -> list[Units]:
    """:func:`class_units` of each of ``workloads`` (a queue's, for the candidate index),
    read from the session's cache where it has them. The units of a plain workload — one
    whole unit: not a Deployment, not elastic, not taken from, no kept units — are made
    here by ``_units``' own constructor (:func:`_whole`), without the calls around it: most
    units of a session are these."""
    unit_cache = session.unit_cache
    index = leaf.index
    cls = (reason, group, only_within_nominal, False)
    place = PLACES.get(cls)  # read and set in place below when the class has one (``units_of``)
    taken, all_usage, placed, now = session.taken, session.snapshot.usage, session.placements is not None, session.now
    plain: bool | None = None  # no kept units: read where ``_session_units`` would read it
    out: list[Units] = []
    for workload in workloads:
        key = workload.key
        cache: list[Any] | None = None if deferred and workload.is_deployment else unit_cache.get(key)
        if cache is not None:
            made = cache[place] if place is not None and cache[0] == index else units_of(cache, index, cls)
            if made is not None:
                out.append(made)
                continue
        elif (
            not workload.is_deployment
            and key not in taken
            and (workload.evicted or workload.admission is None or _elastic_pod_set(workload) is None)
            and (plain if plain is not None else (plain := kept_units(session) is None))
        ):
            room = _room(session, workload) if placed else ()
            usage = all_usage.get(key, {})
            made = (_whole(workload, leaf, usage, reason, group, room, (key,), only_within_nominal, workload.evicted, now),)
            unit_cache[key] = cache = unit_classes(index)
            if place is None:
                hold(cache, index, cls, made)
            else:
                cache[place] = made
            out.append(made)
            continue
        out.append(class_units(session, workload, leaf, reason, group, only_within_nominal))
    return out


def unit_flags(units: Sequence[Candidate], needed: frozenset[FR], with_room: bool) -> list[bool]:
    """Per unit, whether it uses a needed flavor-resource (``with_room``: or holds room)."""
    if with_room:
        return [bool(unit.room) or not needed.isdisjoint(unit.usage) or isinstance(unit, DeferredPods) for unit in units]
    return [not needed.isdisjoint(unit.usage) for unit in units]


def _gives_pods(session: Session, workload: Workload) -> bool:
    """A running Deployment whose units are its Pod objects (see ``_pod_units``)."""
    if not workload.is_deployment or workload.evicted or workload.admission is None:
        return False
    taken = session.taken.get(workload.key)
    if taken is not None and taken.whole:
        return False
    return bool(session.snapshot.pods_by_workload.get(workload.key))


def _units(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    cache: list[Any] | None = None,
) -> Units:
    key = workload.key
    taken = session.taken.get(key)
    evicted = workload.evicted or (taken is not None and taken.whole)
    if workload.is_deployment and not evicted and workload.admission is not None:
        return _pod_units(session, workload, leaf, reason, group, only_within_nominal)
    usage = session.snapshot.usage.get(key, {})
    priority = workload.priority
    elastic = None if evicted or workload.admission is None else _elastic_pod_set(workload)
    if elastic is None:
        # The whole workload's unit of another class, if one is built (``cache``: this
        # workload's entry, all of one take state): the same room and unit name, shared.
        other = _whole_unit(cache) if cache else None
        if other is not None:
            room, name = other.room, other.unit
        else:
            room = _room(session, workload) if session.placements is not None else ()
            name = (key,)
        return (_whole(workload, leaf, usage, reason, group, room, name, only_within_nominal, evicted, session.now),)
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
                alone = (one,)
                unit = Candidate(
                    workload, leaf, {}, reason, group, 1, spec.name, alone, _held(alone), only_within_nominal,
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
        unit_room = _held(pod)
        units.append(
            Candidate(
                workload, leaf, per_pod, reason, group, 1, spec.name, pod, unit_room, only_within_nominal,
                i < already, True, priority, (key, i),
            )
        )
        for fr, amount in per_pod.items():
            rest[fr] -= amount
    rest_room = _held(pods[singles:]) + _reserved_room(session, workload)
    units.append(
        Candidate(
            workload, leaf, rest, reason, group, None, spec.name, (), rest_room, only_within_nominal, False,
            False, priority, (key, "rest"),
        )
    )
    now = session.now
    for i, unit in enumerate(units):
        unit.sort_key = (0 if unit.evicted else 1, group, *_base_key(unit, now), i)
    return tuple(units)


def _whole(
    workload: Workload, leaf: QuotaNode, usage: Mapping[FR, int], reason: str, group: int,
    room: tuple[HeldRoom, ...], name: tuple[object, ...], only_within_nominal: bool, evicted: bool, now: int,
) -> Candidate:
    """The whole workload as one unit, with its sort key (``_base_key`` written out: this is
    the path of almost every candidate); made field by field (``NEW_UNIT``), every field set."""
    unit = NEW_UNIT(Candidate)
    unit.workload = workload
    unit.leaf = leaf
    unit.usage = usage
    unit.reason = reason
    unit.group = group
    unit.count = unit.pod_set = None
    unit.pods = ()
    unit.room = room
    unit.only_within_nominal = only_within_nominal
    unit.evicted = evicted
    unit.single_pod = False
    unit.priority = priority = workload.priority
    unit.unit = name
    admitted_at = workload.admitted_at
    # ``workload.tiebreak`` read field by field, without the property's call.
    tiebreak = (workload.uid, workload.namespace, workload.name)
    unit.sort_key = (0 if evicted else 1, group, priority, 1, -(admitted_at if admitted_at is not None else now), tiebreak, 0)
    unit.pod_class = NORMAL
    unit.order_key = None
    return unit


def _whole_unit(cache: list[Any]) -> Candidate | None:
    """A whole-workload unit among a workload's units of other classes."""
    for _, units in held(cache):
        if len(units) == 1:
            unit = units[0]
            if unit.count is None and unit.pod_set is None and type(unit) is Candidate:
                return unit
    return None


def _pod_units(
    session: Session, workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool
) -> Units:
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
        return tuple(units)
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
    return tuple(units)


def _pod_unit(
    workload: Workload, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool, pod_set: str,
    per_replica: Mapping[FR, int], pod: Pod, pod_class: int, index: int, admitted: int,
) -> Candidate:
    """One pod of a Deployment as a unit of its class: only a normal pod carries a
    replica's quota. ``index``: its place in ``classify`` order, the last tie-break."""
    normal = pod_class == NORMAL
    priority = pod.priority if pod.priority is not None else workload.priority
    alone = (pod,)
    unit = Candidate(
        workload, leaf, per_replica if normal else {}, reason, group, 1, pod_set, alone,
        cast("tuple[HeldRoom, ...]", alone) if pod.node_name else (), only_within_nominal,
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


def _room(session: Session, workload: Workload) -> tuple[HeldRoom, ...]:
    """A whole workload's node room: its bound Pods (the snapshot's tuple itself when all are
    bound, as they are there: no copy), then its pods placed at session start."""
    if session.placements is None:
        return ()
    room = _held(session.snapshot.pods_by_workload.get(workload.key, ()))
    reserved = session.snapshot.reserved_by_workload.get(workload.key)
    return room + _reserved_room(session, workload) if reserved else room


def _held(pods: Sequence[Pod]) -> tuple[HeldRoom, ...]:
    """The bound ones of ``pods`` as a unit's room (a Pod gives its own ``node_name`` and
    ``requests``): ``pods`` itself when it is a tuple of bound pods."""
    if type(pods) is not tuple or not all(map(_NODE_NAME, pods)):
        pods = tuple([p for p in pods if p.node_name])
    return pods  # type: ignore[return-value]  # bound pods, each with its node: as a cast, without a call per unit


def _reserved_room(session: Session, workload: Workload) -> tuple[HeldRoom, ...]:
    """Room held by the workload's pods that have no Pod object yet (placed at session start)."""
    reserved = session.snapshot.reserved_by_workload.get(workload.key)
    if not reserved or session.placements is None:
        return ()
    specs = {ps.name: ps for ps in workload.pod_sets}
    return tuple(NodeRoom(r.node, specs[r.pod_set].requests) for r in reserved)


def _base_key(c: Candidate, now: int) -> tuple[Any, ...]:
    """SEMANTICS §4 within a group: lower priority, single pods of elastic workloads
    before whole ones, most recently admitted (no admittedAt = now), tie-break key."""
    admitted = c.workload.admitted_at if c.workload.admitted_at is not None else now
    return (c.priority, 0 if c.single_pod else 1, -admitted, c.workload.tiebreak)
