"""Victim candidates: the units a preemptor may take, and what a session took.

A :class:`Candidate` is one *unit* that can be taken from a running
workload: the whole workload, one pod of an elastic workload above its
``minCount``, or (for Deployments) one replica's pod. Taking a unit frees its
``usage`` in the queue tree and the room of its ``pods`` on their nodes.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, index
from typing import Any, Protocol, SupportsIndex

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
    "Candidate",
    "DeferredPods",
    "Merged",
    "Offer",
    "Runs",
    "Source",
    "Taken",
    "UnitIndex",
    "base_order",
    "sort_candidates",
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
    # Node room the unit frees: (node name, requests) per pod, Pod objects and pods
    # placed at session start alike.
    room: tuple[tuple[str, Mapping[str, int]], ...] = ()
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

    def using(self, needed: frozenset[FR], with_room: bool) -> tuple[list[Candidate], list[int]]:
        """The units a search keeps, and per i how many of the first i units are kept."""
        ...

    def totals(self, needed: frozenset[FR], with_room: bool, fr: FR) -> list[int]:
        """Per i, the usage of ``fr`` of the first i units :meth:`using` keeps."""
        ...

    def read(self, needed: frozenset[FR], with_room: bool, count: int) -> tuple[list[Candidate], list[int]] | None:
        """:meth:`using`, once runs of ``count`` units at a time have been read from the
        list for this request often enough that keeping it costs less than filtering
        them; ``None`` before."""
        ...


class Offer(list[Candidate]):
    """A plugin's answer made of runs ``units[start:end]`` of :class:`Source` lists,
    which it keeps beside the candidates (:meth:`add`): the framework then filters the
    answer and sums its usage per run instead of per candidate. An answer changed any
    other way than by :meth:`add` is read as a plain list."""

    __slots__ = ("runs", "size")

    def __init__(self, runs: Sequence[tuple[Source, int, int]] = ()) -> None:
        # A new list is empty: list.__init__ has nothing to do.
        self.runs: list[tuple[Source, int, int]] = []
        self.size = 0  # the candidates :meth:`add` appended
        for source, start, end in runs:
            self.add(source, start, end)

    def copy_offer(self) -> Offer:
        """A copy, with its runs."""
        copied = Offer()
        copied.extend(self)
        copied.runs = list(self.runs)
        copied.size = self.size
        return copied

    def add(self, source: Source, start: int, end: int) -> None:
        """Append ``source.units[start:end]``."""
        if end > start:
            self.extend(source.units[start:end])
            self.runs.append((source, start, end))
            self.size += end - start

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
    sources that keep none yet (a source's units never change)."""
    runs = 0
    for found in answers:
        if type(found) is Offer and found.intact():
            runs += len(found.runs)
        elif found:
            runs = -1
            break
    # Runs of a few candidates each cost more to read as runs than one by one.
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
    raw: list[Candidate] = []
    for found in answers:
        raw.extend(found)
    return _kept(raw, needed, with_room), None


def _kept(raw: list[Candidate], needed: frozenset[FR], with_room: bool) -> list[Candidate]:
    if with_room:
        return [c for c in raw if c.room or not needed.isdisjoint(c.usage) or isinstance(c, DeferredPods)]
    return [c for c in raw if not needed.isdisjoint(c.usage)]


_list_len = list.__len__
_list_item = list.__getitem__
_list_extend = list.extend
_FIRST_WINDOW = 32  # candidates per run the first stretch of a merge looks at


class Merged(list[Candidate]):
    """The stable merge of ``runs``, each already in victim order (sorted by ``sort_key``,
    stably), made only as far as it is read: what ``sort_candidates`` with the base order
    makes of the runs' concatenation, in the same order (a key that comes in several runs
    comes first from the earliest run, and in a run's own order).

    It is a list: the made part is its storage, and every use of a list (length, index,
    slice, iteration, comparison, search, copy, change) answers as the whole merged list
    would, making what it reads first (a change makes it all). A walk that reads the
    first tenth of its candidates makes little more than that tenth.

    Each stretch looks at a window of the next ``w`` units of each run (``w`` doubling):
    the first unit past a window that comes first in the merge — by key, then by run —
    bounds what is known; every unit of the windows before it is placed (those of its
    own run's window all are; of an earlier run, those with a key up to its key; of a
    later run, those with a smaller key), and those are the merge's next units, sorted
    stably in run order. Nothing past a window can come before that bound: its run's
    units are in order."""

    __slots__ = ("_at", "_runs", "_size", "_window")

    def __init__(self, runs: Sequence[list[Candidate]]) -> None:
        super().__init__()
        live = [run for run in runs if run]
        self._runs: list[list[Candidate]] | None = live or None  # None: all made
        self._at = [0] * len(live)
        self._size = sum(map(len, live))
        self._window = _FIRST_WINDOW

    def _more(self) -> bool:
        """Make the next stretch; ``False`` when everything is made."""
        runs = self._runs
        if runs is None:
            return False
        at = self._at
        live = [i for i, run in enumerate(runs) if at[i] < len(run)]
        if len(live) <= 1:
            for i in live:
                _list_extend(self, runs[i][at[i] :])
            self._runs = None
            return bool(live)
        window = self._window
        self._window = window * 2
        bound: tuple[Any, ...] | None = None
        first = -1
        ends = []
        for i in live:
            run = runs[i]
            end = at[i] + window
            if end < len(run):
                key = run[end].sort_key
                if bound is None or key < bound:
                    bound, first = key, i
            else:
                end = len(run)
            ends.append(end)
        stretch: list[Candidate] = []
        taking = 0
        for i, end in zip(live, ends, strict=True):
            start = at[i]
            if bound is not None and i != first:
                run = runs[i]
                place = bisect_right if i < first else bisect_left
                end = place(run, bound, start, end, key=_BY_SORT_KEY)
            if end > start:
                stretch.extend(runs[i][start:end])
                at[i] = end
                taking += 1
        if taking > 1:
            stretch.sort(key=_BY_SORT_KEY)
        _list_extend(self, stretch)
        if bound is None:
            self._runs = None
        return True

    def _make(self, size: int) -> None:
        """Make at least ``size`` units, or all."""
        while _list_len(self) < size and self._more():
            pass

    def _make_all(self) -> None:
        """Make every unit: the list is then a plain list."""
        while self._more():
            pass

    def __len__(self) -> int:
        return self._size if self._runs is not None else _list_len(self)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Candidate]:
        done = 0
        while True:
            made = _list_len(self)
            if done < made:
                yield from _list_item(self, slice(done, made))
                done = made
            elif not self._more():
                return

    def __getitem__(self, at: Any) -> Any:
        if self._runs is not None:
            if isinstance(at, slice):
                whole = at.stop is None or at.stop < 0 or (at.start or 0) < 0 or (at.step or 1) < 0
                self._make(self._size if whole else at.stop)
            else:
                place = index(at)
                self._make(place + 1 if place >= 0 else self._size)
        return _list_item(self, at)

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return list, (list(self),)


def _making_all(name: str) -> Callable[..., Any]:
    """A list method that reads or changes the whole list: made all first (and the other
    operand too when it is a :class:`Merged`)."""
    plain = getattr(list, name)

    def method(self: Merged, *args: Any, **kwargs: Any) -> Any:
        self._make_all()
        for other in args:
            if type(other) is Merged:
                other._make_all()
        return plain(self, *args, **kwargs)

    method.__name__ = name
    return method


for _name in (
    "__contains__", "__reversed__", "__repr__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__add__", "__mul__", "__rmul__", "__iadd__", "__imul__", "__setitem__", "__delitem__", "__sizeof__",
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "copy", "count", "index",
):
    setattr(Merged, _name, _making_all(_name))
