"""Victim candidates: the units a preemptor may take, and what a session took.

A :class:`Candidate` is one *unit* that can be taken from a running
workload: the whole workload, one pod of an elastic workload above its
``minCount``, or (for Deployments) one replica's pod. Taking a unit frees its
``usage`` in the queue tree and the room of its ``pods`` on their nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

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
    "Taken",
    "UnitIndex",
    "base_order",
    "sort_candidates",
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
