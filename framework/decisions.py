"""What a session decided, and its JSON form (CONTRACT §3).

Every list is sorted by workload, then pod, so identical input gives
byte-identical output whatever order the session found things in.

Queue positions (:func:`number_pending`) are what Kueue's visibility API gives: where
each workload left pending stands in its queue, counted in the order the next session
takes a queue's workloads (the session's own ``workload_key``), 1-based, among the
workloads still pending; a workload that came through a LocalQueue also gets its place
among that LocalQueue's workloads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .model import Workload
from .quantity import format_timestamp

__all__ = [
    "Admitted",
    "AdmittedPodSet",
    "Decisions",
    "Pending",
    "PodAction",
    "Preempted",
    "QueuePosition",
    "QueueShare",
    "number_pending",
]


@dataclass(frozen=True, slots=True)
class AdmittedPodSet:
    name: str
    count: int
    flavors: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "count": self.count, "flavors": dict(sorted(self.flavors.items()))}


@dataclass(frozen=True, slots=True)
class Admitted:
    workload: str
    queue: str
    borrowing: bool
    pod_sets: tuple[AdmittedPodSet, ...]
    # Already running and grown in place (a Deployment's or an elastic workload's count
    # raised; ``pod_sets`` holds the new totals): a backend raises the owner's count and
    # keeps ``admittedAt``. In the JSON as ``"grown": true``, on such entries only, so an
    # admission's entry keeps CONTRACT §3's exact keys.
    grown: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload,
            "queue": self.queue,
            "borrowing": self.borrowing,
            "podSets": [ps.to_dict() for ps in self.pod_sets],
        }
        if self.grown:
            out["grown"] = True
        return out


@dataclass(frozen=True, slots=True)
class Preempted:
    workload: str
    preemptor: str
    reason: str
    count: int | None = None  # pods/replicas taken; None = the whole workload
    pods: tuple[str, ...] = ()
    pod_set: str | None = None  # which podSet loses ``count`` pods (for --apply)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "preemptor": self.preemptor,
            "reason": self.reason,
            "count": self.count,
            "pods": sorted(self.pods),
        }


@dataclass(frozen=True, slots=True)
class PodAction:
    pod: str
    action: str
    preemptor: str

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "action": self.action, "preemptor": self.preemptor}


@dataclass(frozen=True, slots=True)
class Pending:
    workload: str
    reason: str
    message: str = ""
    waiting_for: tuple[str, ...] = ()

    def to_dict(self, position: QueuePosition | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "workload": self.workload,
            "reason": self.reason,
            "message": self.message,
            "waitingFor": sorted(self.waiting_for),
            "positionInQueue": None if position is None else position.position,
        }
        if position is not None and position.local_position is not None:
            out["positionInLocalQueue"] = position.local_position
        return out


class QueuePosition(NamedTuple):
    """Where a pending workload waits (:func:`number_pending`)."""

    queue: str
    position: int  # in the queue, from 1
    local_queue: str | None  # the LocalQueue's name, when it came through one
    local_position: int | None  # among that LocalQueue's workloads, from 1
    priority: int


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue's reported weighted share (SEMANTICS §7.6, CONTRACT §3 ``shares``)."""

    queue: str
    weighted_share: int

    def to_dict(self) -> dict[str, Any]:
        return {"queue": self.queue, "weightedShare": self.weighted_share}


@dataclass(slots=True)
class Decisions:
    now: int
    admitted: list[Admitted] = field(default_factory=list)
    preempted: list[Preempted] = field(default_factory=list)
    pod_actions: list[PodAction] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    # Workload key -> the flavorScan to store in its status ({} clears it). Not part of the
    # JSON: it is what ``--apply`` and the Kubernetes backend write back.
    flavor_scans: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    # Per workload, the lines of its explanation (``preemptd explain``).
    explanations: dict[str, list[str]] = field(default_factory=dict)
    # Every queue's share once the decisions are committed; ``None`` (absent from the
    # JSON) unless the fair-sharing plugin is enabled.
    shares: list[QueueShare] | None = None
    # Workload key -> its place in its queue, for every pending workload that waits in one.
    positions: dict[str, QueuePosition] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "now": format_timestamp(self.now),
            "admitted": [a.to_dict() for a in sorted(self.admitted, key=lambda a: a.workload)],
            "preempted": [
                p.to_dict() for p in sorted(self.preempted, key=lambda p: (p.workload, p.pods))
            ],
            "podActions": [
                a.to_dict() for a in sorted(self.pod_actions, key=lambda a: (a.pod, a.action))
            ],
            "pending": [
                p.to_dict(self.positions.get(p.workload))
                for p in sorted(self.pending, key=lambda p: p.workload)
            ],
        }
        if self.shares is not None:
            out["shares"] = [s.to_dict() for s in sorted(self.shares, key=lambda s: s.queue)]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"

    def explain(self, workload: str) -> list[str]:
        return list(self.explanations.get(workload, ()))


def number_pending(
    decisions: Decisions,
    pending_by_queue: Mapping[str, Sequence[Workload]],
    key: Callable[[Workload], Any],
    ordered: Mapping[str, Sequence[Workload]] | None = None,
) -> None:
    """Fill ``decisions.positions`` for the pending workloads (module docstring).

    ``pending_by_queue`` is the snapshot's, ``key`` the session's in-queue order;
    ``ordered``, when given, holds each queue's workloads of ``pending_by_queue`` already
    sorted by ``key`` (the rounds sort them so), and saves sorting them again.
    """
    waiting = {entry.workload for entry in decisions.pending}
    positions = decisions.positions
    make = tuple.__new__  # a QueuePosition from its fields in order, as its own __new__ makes it
    for queue, workloads in sorted(pending_by_queue.items()):
        listed = ordered.get(queue) if ordered is not None else None
        in_order = listed if listed is not None else sorted(workloads, key=key)
        in_local: dict[tuple[str, str], int] = {}
        position = 0
        for workload in in_order:
            name = workload.key
            if name not in waiting:
                continue
            position += 1
            local = workload.local_queue
            if local is None:
                positions[name] = make(QueuePosition, (queue, position, None, None, workload.priority))
            else:
                at = in_local[workload.namespace, local] = in_local.get((workload.namespace, local), 0) + 1
                positions[name] = make(QueuePosition, (queue, position, local, at, workload.priority))
