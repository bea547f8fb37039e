"""Victim units kept from one session to the next (``KeptUnits``).

A backend that hands its sessions successive snapshots of one cluster, changed a
little each time (the simulator), may give each snapshot the same ``KeptUnits``
(``Snapshot.kept_units``); a session then starts from the units earlier sessions
built (``units.py``) and the candidate index's lists (``unitindex.py``) instead of
building every workload's again.

Exactness: ``_units``, ``_pod_units`` and ``_deferred_units`` read nothing but the
workload object, the quota tree (the leaf), whether the snapshot has nodes, the
snapshot's ``usage``, ``pods_by_workload`` and ``reserved_by_workload`` entries of
the workload, ``pod_classes`` (a function of the workload and its pods), the
session's ``now`` (only for a workload without ``admittedAt``) and what the session
took from the workload (``session.taken``). A kept entry is used only while every one
of those is the very object it was built from (identity: the snapshot's values are
immutable, and a changed workload or pod list is a new object), ``now`` is equal where
it is read, and the session has taken nothing from the workload; units built after a
take are the session's own and are never kept. The same inputs give equal units, so a
kept unit is the one the session would build. The one field a session writes to a
unit, ``order_key`` (a victim order composed from this session's plugins), is cleared
the first time each session is handed a kept unit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ..model import Workload
from ..quota import QuotaTree
from ..session import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    Candidate,
    Session,
)
from ..snapshot import Snapshot

__all__ = [
    "PLACES",
    "KeptQueue",
    "KeptUnits",
    "KeptWorkload",
    "UnitClass",
    "UnitClasses",
    "Units",
    "held",
    "hold",
    "kept_units",
    "queue_current",
    "queue_inputs",
    "unit_classes",
    "units_of",
]

UnitClass = tuple[str, int, bool, bool]  # (reason, group, only_within_nominal, deferred)
Units = tuple[Candidate, ...]  # a workload's units of one class

PLACES: dict[UnitClass, int] = {
    (IN_COHORT_RECLAIM, CLASS_HIERARCHICAL, False, False): 1,
    (IN_COHORT_RECLAIM_WHILE_BORROWING, CLASS_OTHER_QUEUE, False, False): 2,
    (IN_COHORT_RECLAIM, CLASS_OTHER_QUEUE, True, False): 3,
    (IN_QUEUE, CLASS_SAME_QUEUE, False, False): 4,
}
"""The classes a workload's units are asked in by the bundled plugins' queue lists, each with
its place in a :data:`UnitClasses`."""
_OTHERS = 5

UnitClasses = list[Any]
"""One workload's units by class (``session.unit_cache[key]``, ``KeptWorkload.units``), a class
being its leaf's index and a :data:`UnitClass`: ``[leaf, *places, others]``, the index of the
leaf the places are of, the units of each class of :data:`PLACES` at that leaf (None: not
held), then a dict ``(leaf, *class) -> units`` of any other class (None: none). A list of six
places is 104 B, where a dict of the three classes most workloads hold was 224; made as a
list literal, it costs what that dict did (:func:`unit_classes`)."""


def unit_classes(leaf: int) -> UnitClasses:
    """A new :data:`UnitClasses` of ``leaf``, holding none."""
    return [leaf, None, None, None, None, None]


def units_of(classes: UnitClasses, leaf: int, cls: UnitClass) -> Units | None:
    """The units of ``cls`` at ``leaf`` that ``classes`` holds, else None."""
    place = PLACES.get(cls) if leaf == classes[0] else None
    if place is not None:
        found: Units | None = classes[place]
        return found
    others = classes[_OTHERS]
    return None if others is None else others.get((leaf, *cls))


def hold(classes: UnitClasses, leaf: int, cls: UnitClass, units: Units) -> Units:
    """Hold ``units`` in ``classes`` as those of ``cls`` at ``leaf``; answers them."""
    place = PLACES.get(cls) if leaf == classes[0] else None
    if place is not None:
        classes[place] = units
    else:
        if classes[_OTHERS] is None:
            classes[_OTHERS] = {}
        classes[_OTHERS][(leaf, *cls)] = units
    return units


def held(classes: UnitClasses) -> Iterator[tuple[tuple[Any, ...], Units]]:
    """``((leaf, *class), units)`` of every class ``classes`` holds, the places' first in
    :data:`PLACES`' order."""
    leaf = classes[0]
    for cls, place in PLACES.items():
        units = classes[place]
        if units is not None:
            yield (leaf, *cls), units
    if classes[_OTHERS] is not None:
        yield from classes[_OTHERS].items()


class KeptWorkload:
    """One workload's units, and the inputs they were built from (compared by identity)."""

    __slots__ = ("generation", "pods", "reserved", "units", "usage", "when", "workload")

    def __init__(self, snapshot: Snapshot, workload: Workload, when: int | None, generation: int, leaf: int) -> None:
        key = workload.key
        self.workload = workload
        self.pods = snapshot.pods_by_workload.get(key)
        self.usage = snapshot.usage.get(key)
        self.reserved = snapshot.reserved_by_workload.get(key)
        self.when = when  # the session's ``now`` if the workload has no admittedAt, else None
        self.generation = generation
        self.units = unit_classes(leaf)

    def current(self, snapshot: Snapshot, workload: Workload, when: int | None) -> bool:
        """Whether the units built from this entry are still the ones ``workload`` gives."""
        key = workload.key
        return (
            self.workload is workload
            and self.when == when
            and snapshot.pods_by_workload.get(key) is self.pods
            and snapshot.usage.get(key) is self.usage
            and snapshot.reserved_by_workload.get(key) is self.reserved
        )


class KeptUnits:
    """Victim units kept across the sessions of one cluster (see the module docstring).

    ``workloads``: per workload key, its kept units; ``queues``: the candidate index's
    lists (``unitindex.py``), per queue and class. Bound to one quota tree and to
    whether the snapshots have nodes; a snapshot with another tree starts it afresh.
    """

    __slots__ = ("generation", "placed", "queues", "serving", "tree", "workloads")

    def __init__(self) -> None:
        self.tree: QuotaTree | None = None
        self.placed = False
        self.workloads: dict[str, KeptWorkload] = {}
        self.queues: dict[str, KeptQueue] = {}  # queue name -> its kept lists (unitindex.py)
        # The unit cache of the session served last (a new one is a new session), and
        # how many sessions it has served: an entry whose generation is older has
        # ``order_key`` values of an earlier session.
        self.serving: object = None
        self.generation = 0

    def prune(self, snapshot: Snapshot) -> None:
        """Drop the entries of workloads the snapshot no longer has as they were."""
        workloads = snapshot.workloads
        self.workloads = {
            key: entry for key, entry in self.workloads.items() if workloads.get(key) is entry.workload
        }


class KeptQueue:
    """One queue's lists of the candidate index (``unitindex.py``), kept across sessions, with
    the listing they were built from."""

    __slots__ = ("checked", "inputs", "listing", "lists", "taken", "when")

    def __init__(self, listing: Sequence[Workload], inputs: list[tuple[Any, Any, Any]], when: int | None) -> None:
        self.listing = listing
        self.inputs = inputs  # per workload of ``listing``: its pods, usage and reserved room
        self.when = when  # the session's ``now`` if a workload has no admittedAt, else None
        # Per class: the list, and the generation of the session last handed it.
        self.lists: dict[tuple[Any, ...], tuple[Any, int]] = {}  # class -> (``QueueUnits``, generation)
        # The generation of the session that last found ``inputs`` current, and how many
        # workloads that session had taken from then.
        self.checked = -1
        self.taken = 0


def queue_inputs(session: Session, listing: Sequence[Workload]) -> tuple[list[tuple[Any, Any, Any]], int | None] | None:
    """What the units of ``listing`` are built from, in this session; None if the session
    has taken from one of its workloads."""
    taken = session.taken
    snapshot = session.snapshot
    pods, usage, reserved = snapshot.pods_by_workload, snapshot.usage, snapshot.reserved_by_workload
    inputs = []
    when = None
    for workload in listing:
        name = workload.key
        if taken and name in taken:
            return None
        if workload.admitted_at is None:
            when = session.now
        inputs.append((pods.get(name), usage.get(name), reserved.get(name)))
    return inputs, when


def queue_current(session: Session, kept: KeptUnits, found: KeptQueue) -> bool:
    """Whether the lists of ``found`` are the ones this session would build. Its inputs
    are checked once per session (the snapshot does not change during one); what the
    session takes, whenever it has taken more since the last check."""
    taken = session.taken
    if found.checked == kept.generation:
        if found.taken == len(taken):
            return True
        for workload in found.listing:
            if workload.key in taken:
                return False
        found.taken = len(taken)
        return True
    snapshot = session.snapshot
    pods, usage, reserved = snapshot.pods_by_workload, snapshot.usage, snapshot.reserved_by_workload
    when = None
    for workload, (had_pods, had_usage, had_reserved) in zip(found.listing, found.inputs, strict=True):
        name = workload.key
        if (
            pods.get(name) is not had_pods
            or usage.get(name) is not had_usage
            or reserved.get(name) is not had_reserved
            or (taken and name in taken)
        ):
            return False
        if workload.admitted_at is None:
            when = session.now
    if when != found.when:
        return False
    found.checked = kept.generation
    found.taken = len(taken)
    return True


def kept_units(session: Session) -> KeptUnits | None:
    """The snapshot's :class:`KeptUnits`, made ready for ``session`` (None: none kept)."""
    kept: KeptUnits | None = session.snapshot.kept_units
    if kept is None or kept.serving is session.unit_cache:
        return kept
    snapshot = session.snapshot
    placed = session.placements is not None
    if kept.tree is not snapshot.tree or kept.placed != placed:
        kept.tree = snapshot.tree
        kept.placed = placed
        kept.workloads.clear()
        kept.queues.clear()
    elif len(kept.workloads) > 2 * len(snapshot.workloads) + 64:
        kept.prune(snapshot)
    kept.serving = session.unit_cache
    kept.generation += 1
    return kept
