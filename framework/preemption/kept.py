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

from typing import Any

from ..model import Workload
from ..quota import QuotaTree
from ..session import Candidate, Session
from ..snapshot import Snapshot

__all__ = ["KeptUnits", "KeptWorkload", "UnitsByClass", "kept_units"]

# One workload's units by class: ``(leaf.index, reason, group, only_within_nominal,
# deferred)`` -> units (``session.unit_cache[key]``).
UnitsByClass = dict[tuple[Any, ...], list[Candidate]]


class KeptWorkload:
    """One workload's units, and the inputs they were built from (compared by identity)."""

    __slots__ = ("generation", "pods", "reserved", "units", "usage", "when", "workload")

    def __init__(self, snapshot: Snapshot, workload: Workload, when: int | None, generation: int) -> None:
        key = workload.key
        self.workload = workload
        self.pods = snapshot.pods_by_workload.get(key)
        self.usage = snapshot.usage.get(key)
        self.reserved = snapshot.reserved_by_workload.get(key)
        self.when = when  # the session's ``now`` if the workload has no admittedAt, else None
        self.generation = generation
        self.units: UnitsByClass = {}

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
        self.queues: dict[str, Any] = {}  # queue name -> its kept lists (unitindex.py)
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
