"""The candidate index: per queue, the units of its admitted workloads by priority.

Which running workloads of a queue a victim search may take is a priority range:
``withinQueue`` and ``reclaimWithinCohort: LowerPriority`` take those below the
preemptor's priority, ``borrowWithinCohort``'s threshold splits the rest between two
classes (SEMANTICS §4). Building the units workload by workload made every search
cost O(admitted workloads of the cohort). The index keeps, per queue and unit class,
the units of all the queue's admitted workloads ordered by (workload priority,
creation time, admission order), so one range is two bisections and a slice.

The units are the ones :func:`.units.candidate_units` makes (the same objects), so a
search gets the same candidates as before; their victim order is still decided by the
search's sort. A queue's units change only when the session takes something from one
of its workloads, and the rounds record every unit taken in ``session.relied``: before
it answers, the index drops the lists of the queues the units recorded since its last
answer came from. While a node-by-node search collects candidates
(``session.defer_pods``) a running Deployment's pods come as one deferred unit; the
lists are then built for that collection only, not kept. A queue's first list is built
from the snapshot; a list of another class is made from it (the same workloads in the same
order and bounds, each workload's units copied into the new class: ``units.units_like``).

Across sessions the lists are kept in the snapshot's :class:`.kept.KeptUnits` (see
:mod:`.kept`), per queue and class, with the queue's admitted listing they were built
from and each workload's inputs. A session takes a kept list only while the snapshot
lists the very same admitted workloads for the queue (the same sequence object: the
simulator replaces a queue's listing whenever a workload of it comes, goes or
changes), every one of them still has the inputs its units were built from (the
test of :meth:`.kept.KeptWorkload.current`) and the session has taken nothing from
any of them: the list it would build is then made of the same kept units in the same
order. A list built after a take is the session's own, never kept.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence, Sized
from itertools import accumulate, chain, compress, repeat
from operator import attrgetter
from typing import Any

from ..model import FR, Workload
from ..quota import QuotaNode
from ..session import Candidate, Offer, Session
from ..session.candidates import UnitIndex
from .kept import (
    PLACES,
    KeptQueue,
    KeptUnits,
    UnitClasses,
    Units,
    hold,
    kept_units,
    queue_current,
    queue_inputs,
    units_of,
)
from .retaken import Origin, retaken_units, spliced_totals, usage_totals
from .units import class_units, queue_units_of, unit_flags, units_like

__all__ = ["QueueUnits", "queue_takes", "queue_units", "takes_by_queue"]

_STATE = "_unit_index"  # the session's index, in ``session.state`` (as ``_node_index``)
_BY_PRIORITY = attrgetter("priority", "created")
_PRIORITY = attrgetter("priority")
_CREATED = attrgetter("created")


class QueueUnits:
    """One queue's units of one class, by (workload priority, creation time)."""

    __slots__ = ("created", "flags", "made", "matching", "origin", "patched", "positions", "priorities", "reads", "running", "sums", "units")

    def __init__(
        self, units: list[Candidate], priorities: list[int], created: list[int],
        running: list[Workload] | None = None, made: list[Units] | None = None, patched: int = 0,
    ) -> None:
        self.units = units
        # Per unit, its workload's priority and creation time: bisected in turn, the latter
        # within a priority's range (two lists of the workloads' own ints, not a pair per unit).
        self.priorities = priorities
        self.created = created
        # The queue's workloads in that order, and each one's units (``units`` is their
        # concatenation): what a take from one of them replaces.
        self.running = running if running is not None else []
        self.made = made if made is not None else []
        # How many of the queue's entries of ``UnitIndex.changed`` the list reflects.
        self.patched = patched
        # Workload key -> its place in ``running``, made by the first patch and handed on
        # with ``running`` to the lists made from this one.
        self.positions: dict[str, int] | None = None
        # (needed, with_room) -> what :meth:`using` (its counts a range when it keeps all, as
        # most lists do) and :meth:`totals` answer, and how many units searches were handed
        # before it was kept (:meth:`read`).
        self.matching: dict[tuple[frozenset[FR], bool], tuple[list[Candidate], Sequence[int]]] = {}
        self.sums: dict[tuple[frozenset[FR], bool, FR], list[int]] = {}
        self.reads: dict[tuple[frozenset[FR], bool], int] = {}
        # (needed, with_room) -> per unit, whether :meth:`using` keeps it (``unit_flags``: alike
        # in every class), shared with ``sums`` by the lists made from this one; ``origin``, a
        # patched list's: the flags and sums before and the segments replaced since (``retaken``).
        self.flags: dict[tuple[frozenset[FR], bool], list[bool]] = {}
        self.origin: Origin | None = None

    def read(self, needed: frozenset[FR], with_room: bool, count: int) -> tuple[list[Candidate], Sequence[int]] | None:
        """:meth:`using` once searches were handed as many units as the list holds: keeping
        it reads them all, which pays only if they are read that much before a take."""
        key = (needed, with_room)
        if key in self.matching:
            return self.matching[key]
        seen = self.reads.get(key, 0) + count
        if seen < len(self.units):
            self.reads[key] = seen
            return None
        return self.using(needed, with_room)

    def using(self, needed: frozenset[FR], with_room: bool) -> tuple[list[Candidate], Sequence[int]]:
        """The units a search needing ``needed`` keeps, and per i how many of the first i
        units it keeps; built once per (``needed``, ``with_room``) for the list's life."""
        key = (needed, with_room)
        found = self.matching.get(key)
        if found is None:
            units = self.units
            flags = self.flags.get(key) or self.flags.setdefault(key, self._spliced(key) or unit_flags(units, needed, with_room))
            all_kept = all(flags)
            counts = range(len(units) + 1) if all_kept else list(accumulate(flags, initial=0))
            found = self.matching[key] = (units if all_kept else list(compress(units, flags)), counts)
        return found

    def _spliced(self, key: tuple[frozenset[FR], bool]) -> list[bool] | None:
        if self.origin is None or (flags := self.origin[0].get(key)) is None:
            return None
        for start, end, new in self.origin[1]:
            flags = [*flags[:start], *unit_flags(new, *key), *flags[end:]]
        return flags

    def totals(self, needed: frozenset[FR], with_room: bool, fr: FR) -> list[int]:
        """Per i, the usage of ``fr`` of the first i units :meth:`using` keeps."""
        key = (needed, with_room, fr)
        found = self.sums.get(key)
        if found is None:
            made = spliced_totals(self.origin, key)
            found = self.sums[key] = made or usage_totals(self.using(needed, with_room)[0], fr)
        return found

    def count_between(self, low: int | None, high: int | None, needed: frozenset[FR], with_room: bool) -> int:
        """How many units of :meth:`between` a search needing ``needed`` keeps (:meth:`using`)."""
        counts = self.using(needed, with_room)[1]
        start, end = self._range(low, high)
        return counts[end] - counts[start] if end > start else 0

    def _range(self, low: int | None, high: int | None) -> tuple[int, int]:
        priorities = self.priorities
        start = 0 if low is None else bisect_left(priorities, low)
        end = len(priorities) if high is None else bisect_left(priorities, high)
        return start, end

    def between(self, low: int | None, high: int | None) -> list[Candidate]:
        """The units of the workloads with ``low <= priority < high`` (``None``: no bound)."""
        return self.units[slice(*self._range(low, high))]

    def newer(self, priority: int, created: int) -> list[Candidate]:
        """The units of the workloads of ``priority`` created after ``created``."""
        return self.units[slice(*self._newer(priority, created))]

    def _newer(self, priority: int, created: int) -> tuple[int, int]:
        priorities = self.priorities
        first, end = bisect_left(priorities, priority), bisect_right(priorities, priority)
        return bisect_right(self.created, created, first, end), end

    def offer_between(self, out: Offer, low: int | None, high: int | None) -> None:
        """Append :meth:`between` to ``out`` as one run (``Offer.add``, written out: it runs
        for every queue of every search)."""
        priorities = self.priorities
        start = 0 if low is None else bisect_left(priorities, low)
        end = len(priorities) if high is None else bisect_left(priorities, high)
        if end > start:
            out.extend(self.units[start:end])
            out.runs.append((self, start, end))
            out.size += end - start

    def offer_newer(self, out: Offer, priority: int, created: int) -> None:
        """Append :meth:`newer` to ``out`` as one run."""
        out.add(self, *self._newer(priority, created))


def queue_units(
    session: Session,
    leaf: QuotaNode,
    *,
    reason: str,
    group: int,
    only_within_nominal: bool = False,
    any_class: bool = False,
) -> QueueUnits:
    """The units of every admitted workload of ``leaf``, of the class given as for
    :func:`.units.candidate_units`, for ranges of their workloads' priorities.

    ``any_class``: the caller only counts (``count_between``), and a queue's lists of one take
    state count alike (one class's units are another's copied, ``units_like``): any will do."""
    deferred = session.defer_pods
    index = _unit_index(session)
    lists = index.lists
    key = (reason, group, only_within_nominal, deferred)
    by_class = lists.get(leaf.name)
    if by_class is not None:
        found: QueueUnits | None = by_class.get(key)
        if found is None and any_class and not deferred:
            found = next(iter(by_class.values()))  # held lists are never deferred ones
        if found is not None:
            return found
    if not deferred:
        stale_lists = index.stale.get(leaf.name)
        if stale_lists is not None:
            old = stale_lists.get(key)
            if old is None and any_class:
                key, old = next(iter(stale_lists.items()))
                reason, group, only_within_nominal, _ = key
            if old is not None:
                # The list before the take, with the segments of the workloads taken
                # from built again: what a build would give, at the cost of those only.
                changes = index.changed[leaf.name]
                patched = _patch(session, leaf, reason, group, only_within_nominal, old, changes)
                if by_class is None:
                    by_class = lists[leaf.name] = {}
                by_class[key] = patched
                return patched
    listing = session.snapshot.admitted_by_queue.get(leaf.name, ())
    kept = None if deferred else kept_units(session)
    built: QueueUnits | None = None
    if kept is not None:
        built = _kept_list(session, kept, leaf.name, key, listing)
        if built is not None:
            # Served only when the session has taken from none of its workloads: it
            # reflects every change recorded for the queue so far in this session.
            recorded = index.changed.get(leaf.name)
            built.patched = len(recorded) if recorded is not None else 0
    if built is None:
        # From a held list (never a deferred one), of the group if held: sort keys shared (units_like).
        held = {of: found for (_, of, _, _), found in by_class.items()} if by_class and not deferred else {}
        like = held.get(group) or next(iter(held.values()), None)
        if like is not None:
            built = _build_like(session, leaf, reason, group, only_within_nominal, like)
        else:
            built = _build(session, leaf, reason, group, only_within_nominal, deferred, listing)
        if kept is not None:
            _keep_list(session, kept, leaf.name, key, listing, built)
    if not deferred:
        lists.setdefault(leaf.name, {})[key] = built
    return built


def _unit_index(session: Session) -> UnitIndex:
    """The session's index, with the units taken since its last answer recorded."""
    index: UnitIndex | None = session.state.get(_STATE)
    if index is None:
        index = session.state[_STATE] = UnitIndex()
    if len(session.relied) != index.seen:
        index.catch_up(session.relied)
    return index


def queue_takes(session: Session, leaf: QuotaNode) -> int:
    """How many takes from the workloads of ``leaf``'s lists the session recorded: its
    units change only with them (see the module notes)."""
    found = _unit_index(session).changed.get(leaf.name)
    return len(found) if found is not None else 0


def takes_by_queue(session: Session) -> Mapping[str, Sized]:
    """Per queue name, what :func:`queue_takes` counts (``len``; absent: none): read-only, current until a take."""
    return _unit_index(session).changed


def _build(
    session: Session,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    deferred: bool,
    listing: Sequence[Workload],
) -> QueueUnits:
    # By (priority, creation time), ties in listing order (a stable sort).
    running = sorted(listing, key=_BY_PRIORITY)
    made_all = queue_units_of(session, running, leaf, reason, group, only_within_nominal, deferred)
    units = list(chain.from_iterable(made_all))
    sizes = list(map(len, made_all))
    if sizes.count(1) == len(sizes):  # one unit per workload, as almost always
        priorities, created = list(map(_PRIORITY, running)), list(map(_CREATED, running))
    else:
        priorities = list(chain.from_iterable(map(repeat, map(_PRIORITY, running), sizes)))
        created = list(chain.from_iterable(map(repeat, map(_CREATED, running), sizes)))
    changes = None if deferred else session.state[_STATE].changed.get(leaf.name)
    return QueueUnits(units, priorities, created, running, made_all, len(changes) if changes is not None else 0)


def _build_like(
    session: Session, leaf: QuotaNode, reason: str, group: int, only_within_nominal: bool, like: QueueUnits
) -> QueueUnits:
    """The list of one class made from the queue's current list of another (``like``):
    the same workloads in the same order, each with its units of this class — the ones
    the session has, else made from its units of the other class (``units._like``)."""
    unit_cache = session.unit_cache
    index = leaf.index
    cls = (reason, group, only_within_nominal, False)
    place = PLACES.get(cls)  # read and set in place below when the class has one (``units_of``)
    made_all: list[Units] = []
    for workload, other in zip(like.running, like.made, strict=True):
        cache: UnitClasses | None = unit_cache.get(workload.key)
        if cache is None:
            made = class_units(session, workload, leaf, reason, group, only_within_nominal)
        elif place is not None and cache[0] == index:
            made = cache[place]
            if made is None:
                made = cache[place] = units_like(other, reason, group, only_within_nominal)
        else:
            found = units_of(cache, index, cls)
            made = found if found is not None else hold(cache, index, cls, units_like(other, reason, group, only_within_nominal))
        made_all.append(made)
    units = list(chain.from_iterable(made_all))
    built = QueueUnits(units, like.priorities, like.created, like.running, made_all, like.patched)
    built.positions = like.positions
    built.flags, built.sums, built.origin = like.flags, like.sums, like.origin
    return built


def _patch(
    session: Session,
    leaf: QuotaNode,
    reason: str,
    group: int,
    only_within_nominal: bool,
    old: QueueUnits,
    changes: list[str],
) -> QueueUnits:
    """``old`` with the units of the workloads named in ``changes`` since it was made built
    again (``candidate_units``: the session dropped their cache entries when it took; a whole
    unit taken is made again from the one ``old`` holds, ``retaken.retaken_units``)."""
    units, made, running, positions = old.units, old.made, old.running, old.positions
    priorities, created = old.priorities, old.created
    names = dict.fromkeys(changes[old.patched :])
    if names and positions is None:
        positions = {w.key: i for i, w in enumerate(running)}
    made = list(made) if names else made
    places = positions or {}
    splices: list[tuple[int, int, Units]] = []
    for name in names:
        i = places.get(name)
        if i is None:
            continue
        workload = running[i]
        new = retaken_units(session, workload, leaf, reason, group, only_within_nominal, made[i])
        start = sum(map(len, made[:i]))
        end = start + len(made[i])
        made[i] = new
        units = [*units[:start], *new, *units[end:]]
        splices.append((start, end, new))
        if len(new) != end - start:
            priorities = [*priorities[:start], *[workload.priority] * len(new), *priorities[end:]]
            created = [*created[:start], *[workload.created] * len(new), *created[end:]]
    patched = QueueUnits(units, priorities, created, running, made, len(changes))
    patched.positions = positions
    patched.origin = (old.flags, splices, old.sums)
    return patched


def _keep_list(
    session: Session,
    kept: KeptUnits,
    name: str,
    key: tuple[Any, ...],
    listing: Sequence[Workload],
    built: QueueUnits,
) -> None:
    """Keep a list the session built, unless it took from one of the queue's workloads."""
    found = kept.queues.get(name)
    if found is None or found.listing is not listing or not queue_current(session, kept, found):
        made = queue_inputs(session, listing)
        if made is None:
            kept.queues.pop(name, None)
            return
        found = kept.queues[name] = KeptQueue(listing, *made)
        found.checked = kept.generation
        found.taken = len(session.taken)
    found.lists[key] = (built, kept.generation)


def _kept_list(
    session: Session, kept: KeptUnits, name: str, key: tuple[Any, ...], listing: Sequence[Workload]
) -> QueueUnits | None:
    """The kept list of queue ``name`` and class ``key`` if it is the one the session
    would build, else None."""
    found = kept.queues.get(name)
    if found is None or found.listing is not listing:
        return None
    entry = found.lists.get(key)
    if entry is None or not queue_current(session, kept, found):
        return None
    units: QueueUnits = entry[0]
    if entry[1] != kept.generation:
        found.lists[key] = (units, kept.generation)
        for unit in units.units:
            unit.order_key = None
    return units
