"""Victim candidates: the units a preemptor may take, and what a session took.

A :class:`Candidate` is one *unit* that can be taken from a running
workload: the whole workload, one pod of an elastic workload above its
``minCount``, or (for Deployments) one replica's pod. Taking a unit frees its
``usage`` in the queue tree and the room of its ``pods`` on their nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any, Protocol

from ..model import FR, Pod, Workload
from ..quota import QuotaNode

__all__ = [
    "CLASS_HIERARCHICAL",
    "CLASS_OTHER_QUEUE",
    "CLASS_SAME_QUEUE",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_QUEUE",
    "UNIT_SOURCES",
    "Candidate",
    "DeferredPods",
    "HeldRoom",
    "NodeRoom",
    "Offer",
    "Runs",
    "Source",
    "Taken",
    "UnitIndex",
    "base_order",
    "sort_candidates",
    "units_like",
    "using",
]

IN_QUEUE = "InQueue"
IN_COHORT_RECLAIM = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"  # SEMANTICS §7.4: a share strategy allowed it

# SEMANTICS §4 "Order": hierarchical-reclaim candidates, then the other cohort
# candidates, then same-queue candidates.
CLASS_HIERARCHICAL = 0
CLASS_OTHER_QUEUE = 1
CLASS_SAME_QUEUE = 2


class HeldRoom(Protocol):
    """One pod's node room as a unit lists it: its node and its requests. A bound Pod is
    one as it is (a unit lists its workload's Pods, not copies); a pod placed at session
    start without a Pod object is a :class:`NodeRoom`."""

    @property
    def node_name(self) -> str: ...

    @property
    def requests(self) -> Mapping[str, int]: ...


class NodeRoom:
    """The node room of a pod that has no Pod object: its node and its requests."""

    __slots__ = ("node_name", "requests")

    def __init__(self, node_name: str, requests: Mapping[str, int]) -> None:
        self.node_name = node_name
        self.requests = requests

    def __repr__(self) -> str:
        return f"NodeRoom({self.node_name!r}, {dict(self.requests)!r})"


@dataclass(eq=False, slots=True)
class Candidate:
    """One unit a preemptor may take. Identity matters: compare with ``is``."""

    workload: Workload
    leaf: QuotaNode
    usage: Mapping[FR, int]
    reason: str
    group: int
    # None: the whole workload (or all that is left of it); n: n pods of an elastic
    # workload or replicas of a Deployment.
    count: int | None = None
    pod_set: str | None = None
    pods: tuple[Pod, ...] = ()
    # Node room the unit frees, one entry per pod (``node_name``, ``requests``): its
    # bound Pods themselves, and a NodeRoom per pod placed at session start.
    room: tuple[HeldRoom, ...] = ()
    # "Reclaim without borrowing" (SEMANTICS §4): usable only in an attempt that
    # must end within nominal.
    only_within_nominal: bool = False
    # Already on its way out: evicted in the snapshot, or chosen earlier in this session.
    evicted: bool = False
    # Elastic workloads: the single pods above minCount and the remainder share a
    # unit group so fill-back can keep the workload at or above minCount.
    single_pod: bool = False
    priority: int = 0
    # Identifies the unit across searches: (key,) whole, (key, i) i-th single pod,
    # (key, "rest") the remainder of an elastic workload.
    unit: tuple[object, ...] = ()
    # The victim order when no plugin adds a key (set when the unit is made).
    sort_key: tuple[Any, ...] = ()
    # Pods of Deployments (SEMANTICS §6): lifecycle class (see :mod:`..pods`); every
    # other unit is of class normal (3).
    pod_class: int = 3
    # The composed victim order key, kept for the session when every plugin key
    # is preemptor-independent (see hook ``victim_order``).
    order_key: tuple[Any, ...] | None = None

    @property
    def key(self) -> str:
        return self.workload.key

    @property
    def admitted_at(self) -> int | None:
        return self.workload.admitted_at

    @property
    def created(self) -> int:
        """A pod's creationTimestamp; a workload unit counts from its admission."""
        if self.pods:
            return self.pods[0].created
        return self.workload.admitted_at if self.workload.admitted_at is not None else self.workload.created

    @property
    def name(self) -> str:
        """``namespace/name`` of the pod, or of the workload for workload units."""
        return self.pods[0].key if self.pods else self.workload.key

    def __repr__(self) -> str:
        unit = "whole" if self.count is None else f"{self.count} pod(s)"
        return f"Candidate({self.key}, {unit}, {self.reason})"


NEW_UNIT = object.__new__
"""A unit made without the constructor's call (``object.__new__(Candidate)``), its fields then
set one by one, every one of them: :func:`units_like` and ``preemption/units.py``'s whole
units, tens of thousands a session, each at about half the constructor's cost."""


def units_like(units: Sequence[Candidate], reason: str, group: int, only_within_nominal: bool) -> tuple[Candidate, ...]:
    """The units of another class made from ``units``, a workload's units of one class (not
    deferred) built in the same take state (``preemption/units.py``): every class has the same
    units — workload, usage, pods, room, evicted, priority, unit name, pod class — and the same
    sort key but for its group (the second of its seven places: the very tuple when the group
    is the same); only the class fields differ. ``order_key`` is unset, as the constructor
    leaves it. The units come as a tuple, as the session holds a class's units."""
    out = list(units)
    for at, unit in enumerate(units):
        like = NEW_UNIT(Candidate)
        like.workload = unit.workload
        like.leaf = unit.leaf
        like.usage = unit.usage
        like.reason = reason
        like.group = group
        like.count = unit.count
        like.pod_set = unit.pod_set
        like.pods = unit.pods
        like.room = unit.room
        like.only_within_nominal = only_within_nominal
        like.evicted = unit.evicted
        like.single_pod = unit.single_pod
        like.priority = unit.priority
        like.unit = unit.unit
        key = unit.sort_key
        like.sort_key = key if key[1] == group else (key[0], group, key[2], key[3], key[4], key[5], key[6])
        like.pod_class = unit.pod_class
        like.order_key = None
        out[at] = like
    return tuple(out)


@dataclass(eq=False, slots=True, repr=False)
class DeferredPods(Candidate):
    """All the pod units of one running Deployment, not built yet.

    ``candidate_units`` hands one out instead of the pods while a node-by-node victim
    search collects candidates (SEMANTICS §6): with tens of thousands of pods, the
    search builds the units of the pods on the nodes it looks at, not of every pod. A
    plugin returns it as it is; it never reaches ``is_preemptible``, victim order keys
    or scenario filters, which see the pod units it stands for. Its ``usage`` (one
    replica's quota) and ``pod_set`` are filled in when it is first expanded.
    """

    def __repr__(self) -> str:
        return f"DeferredPods({self.key}, {self.reason})"


@dataclass(slots=True)
class UnitIndex:
    """The session's candidate index (``preemption/unitindex.py``, kept in
    ``session.state``): per queue name and unit class, the queue's units by priority;
    ``seen``: how many entries of ``session.relied`` it has already dropped lists for;
    ``stale``: the lists it dropped, per queue and class (the last of each), and
    ``changed``: per queue, the keys of the workloads taken from, in order of the takes."""

    lists: dict[str, dict[tuple[str, int, bool, bool], Any]] = field(default_factory=dict)
    seen: int = 0
    stale: dict[str, dict[tuple[str, int, bool, bool], Any]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)

    def catch_up(self, relied: Mapping[Any, Candidate]) -> None:
        """Record the units taken since the last call: their queues' lists are out of date,
        in the segments of the workloads taken from (``changed``: a unit's queue and, when
        its workload names another, that one too). Its one caller asks only once ``relied``
        grew (``unitindex._unit_index``)."""
        lists = self.lists
        changed = self.changed
        for victim in islice(relied.values(), self.seen, None):
            names = (victim.leaf.name, victim.workload.queue)
            for name in names[:1] if names[0] == names[1] else names:
                stale = lists.pop(name, None)
                if stale is not None:
                    self.stale.setdefault(name, {}).update(stale)
                changed.setdefault(name, []).append(victim.workload.key)
        self.seen = len(relied)


@dataclass(slots=True)
class Taken:
    """What this session (or an eviction already under way) takes from one workload."""

    whole: bool = False
    pods: int = 0  # single pods of an elastic workload
    pod_names: list[str] = field(default_factory=list)  # every pod taken, whatever its class
    scaled: list[str] = field(default_factory=list)  # normal pods: the scale-down's victims
    preemptor: str = ""
    reason: str = ""
    pod_set: str | None = None


def base_order(c: Candidate) -> tuple[Any, ...]:
    """The victim order when no plugin adds a key: the unit's own ``sort_key``."""
    return c.sort_key


base_order.preemptor_independent = True  # type: ignore[attr-defined]
_BY_SORT_KEY = attrgetter("sort_key")  # the same key, read without a Python call per candidate


def sort_candidates(candidates: list[Candidate], order: Callable[[Candidate], tuple[Any, ...]]) -> None:
    """Sort ``candidates`` in place by ``order`` (a key of ``session.order_for``)."""
    candidates.sort(key=_BY_SORT_KEY if order is base_order else order)


class Source(Protocol):
    """A list of units a plugin's answer takes runs of (``preemption/unitindex.py``'s
    ``QueueUnits``: one queue's units of one class), which keeps what every search
    reads of it: per (needed flavor-resources, ``with_room``), the units a search keeps
    (:func:`using`) with their running count, and their running usage totals."""

    units: list[Candidate]
    # Per (needed, with_room, flavor-resource): the running totals :meth:`totals` made.
    sums: dict[tuple[frozenset[FR], bool, FR], list[int]]

    def using(self, needed: frozenset[FR], with_room: bool) -> tuple[list[Candidate], Sequence[int]]:
        """The units a search keeps, and per i how many of the first i units are kept."""
        ...

    def totals(self, needed: frozenset[FR], with_room: bool, fr: FR) -> list[int]:
        """Per i, the usage of ``fr`` of the first i units :meth:`using` keeps."""
        ...

    def read(self, needed: frozenset[FR], with_room: bool, count: int) -> tuple[list[Candidate], Sequence[int]] | None:
        """:meth:`using`, once runs of ``count`` units at a time have been read from the
        list for this request often enough that keeping it costs less than filtering
        them; ``None`` before."""
        ...


UNIT_SOURCES: set[type] = set()
"""The :class:`Source` types whose units are candidates the framework made (the candidate
index's lists register theirs): an intact :class:`Offer` of their runs alone holds only
candidates, and the registry checks it without reading them."""


class Offer(list[Candidate]):
    """A plugin's answer made of runs ``units[start:end]`` of :class:`Source` lists,
    which it keeps beside the candidates (:meth:`add`): the framework then reads the
    answer by its runs, filtering and summing its usage per run instead of per candidate.
    An answer changed any other way than by :meth:`add` is read as a plain list."""

    __slots__ = ("foreign", "runs", "size")

    def __init__(self, runs: Sequence[tuple[Source, int, int]] = ()) -> None:
        # A new list is empty: list.__init__ has nothing to do.
        self.runs: list[tuple[Source, int, int]] = []
        self.size = 0  # the candidates :meth:`add` appended
        self.foreign = 0  # the runs :meth:`add` appended of a source not in UNIT_SOURCES
        for source, start, end in runs:
            self.add(source, start, end)

    def copy_offer(self) -> Offer:
        """A copy, with its runs."""
        copied = Offer()
        copied.extend(self)
        copied.runs = list(self.runs)
        copied.size = self.size
        copied.foreign = self.foreign
        return copied

    def add(self, source: Source, start: int, end: int) -> None:
        """Append ``source.units[start:end]``."""
        if end > start:
            self.extend(source.units[start:end])
            self.runs.append((source, start, end))
            self.size += end - start
            if type(source) not in UNIT_SOURCES:
                self.foreign += 1

    def intact(self) -> bool:
        """Whether the candidates are still exactly the runs' (only :meth:`add` changed it)."""
        return len(self) == self.size


@dataclass(slots=True)
class Runs:
    """Where the candidates of a search come from, when every answer was an intact
    :class:`Offer`: in order, runs ``kept[first:last]`` of each source's kept units
    (``source.using(needed, with_room)``), or, where the source keeps none yet
    (:meth:`Source.read`), the run's candidates themselves with the range of
    ``source.units`` they come from; each run is one queue's units of one class."""

    needed: frozenset[FR]
    with_room: bool
    parts: list[tuple[Source, int, int, list[Candidate] | None]]


_LONG_RUN = 16  # candidates per run, on average, for the answers to be read as runs


def using(
    answers: list[list[Candidate]],
    needed: frozenset[FR],
    with_room: bool,
    long_run: int = _LONG_RUN,
    filtered: dict[tuple[Any, ...], list[Candidate]] | None = None,
) -> tuple[list[Candidate], Runs | None]:
    """The candidates of ``answers``, in order, that use a needed flavor-resource (or,
    ``with_room``, that occupy node room or stand for a Deployment's pods), and their
    runs when every answer is an intact :class:`Offer` or empty and the runs are long
    (then no candidate is read here once the sources keep their filtered units).
    ``filtered``: the session's runs filtered here, by source and range, for the
    sources that keep none yet (a source's units never change). An intact
    :class:`Offer` is read by its runs, never by its own items (so the registry checks
    the sources of its runs, not each candidate: :data:`UNIT_SOURCES`)."""
    runs = 0
    for found in answers:
        if type(found) is Offer and found.intact():
            runs += len(found.runs)
        elif found:
            runs = -1
            break
    # Runs of a few candidates each cost more to hand over as runs than as one list.
    if runs >= 0 and sum(map(len, answers)) >= long_run * runs:
        out: list[Candidate] = []
        parts: list[tuple[Source, int, int, list[Candidate] | None]] = []
        for found in answers:
            if not found:
                continue
            for source, start, end in found.runs:  # type: ignore[attr-defined]
                read = source.read(needed, with_room, end - start)
                if read is None:
                    place = (source, needed, with_room, start, end)
                    items = filtered.get(place) if filtered is not None else None
                    if items is None:
                        items = _kept(source.units[start:end], needed, with_room)
                        if filtered is not None:
                            filtered[place] = items
                    if items:
                        out.extend(items)
                        parts.append((source, start, end, items))
                    continue
                kept, counts = read
                first = counts[start]
                last = counts[end]
                if last > first:
                    out.extend(kept[first:last])
                    parts.append((source, first, last, None))
        return out, Runs(needed, with_room, parts)
    if runs >= 0:
        # Short runs: each filtered once per session, as above.
        return _filtered_runs(answers, needed, with_room, filtered), None
    raw: list[Candidate] = []
    for found in answers:
        if type(found) is Offer and found.intact():
            for source, start, end in found.runs:
                raw.extend(source.units[start:end])
        else:
            raw.extend(found)
    return _kept(raw, needed, with_room), None


def _filtered_runs(
    answers: list[list[Candidate]],
    needed: frozenset[FR],
    with_room: bool,
    filtered: dict[tuple[Any, ...], list[Candidate]] | None,
) -> list[Candidate]:
    """What :func:`_kept` keeps of ``answers``, every one an intact :class:`Offer` or empty,
    read run by run: each run's kept candidates taken from ``filtered`` (by source and
    range) or filtered there, so a run handed to several searches is read once."""
    if filtered is None:
        filtered = {}
    out: list[Candidate] = []
    for found in answers:
        if not found:
            continue
        for source, start, end in found.runs:  # type: ignore[attr-defined]
            place = (source, needed, with_room, start, end)
            items = filtered.get(place)
            if items is None:
                items = filtered[place] = _kept(source.units[start:end], needed, with_room)
            out.extend(items)
    return out


def _kept(raw: list[Candidate], needed: frozenset[FR], with_room: bool) -> list[Candidate]:
    if with_room:
        return [c for c in raw if c.room or not needed.isdisjoint(c.usage) or isinstance(c, DeferredPods)]
    return [c for c in raw if not needed.isdisjoint(c.usage)]
