"""Where preemptd's decisions differ from the state Kueue produced (shadow mode).

Design note. The shadow (``shadow``) runs a session over Kueue's objects as
they are; its decisions are what preemptd would do *now*, from Kueue's state.
Three kinds of divergence come out of it:

``would-admit``
    preemptd admits a workload that Kueue holds pending (no ``status.admission``).
``would-preempt``
    preemptd chooses a victim that Kueue keeps running (a victim the session
    chose anew; one Kueue is already evicting is not chosen again).
``would-not-admit``
    Kueue admitted a workload that preemptd would have kept pending. Judged once,
    at the first cycle that sees it admitted (and not being evicted) when the
    cycle before did not — whether that cycle saw it pending, being evicted, or
    not at all (Kueue admits a new workload within moments): a second session
    runs over the same state with the workloads Kueue has just admitted put back
    to pending; one it neither admits nor preempts for, nor holds
    ``PendingPreemption`` (waiting for victims already on their way out), would
    not have been admitted by preemptd. The divergence then stays while Kueue
    keeps it admitted. A workload already running at the shadow's first cycle is
    never judged: there is no state before it to judge it on.

A divergence is keyed by (kind, workload). :class:`DivergenceLog` keeps the
current ones: one is *reported* (logged, counted, served) once it has lasted
``grace`` milliseconds, so that the moment between a workload's arrival and
Kueue's admission of it is not a divergence; it is logged again when what
either side does changes, and once more when it ends. The JSON of
``/divergence`` and the metrics are the reported ones.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from preemptd.framework.decisions import Decisions
from preemptd.framework.objects import Inventory
from preemptd.framework.quantity import format_timestamp
from prometheus_client import CollectorRegistry, Counter, Gauge

from .client import Obj

__all__ = [
    "KINDS",
    "WAITING_FOR_VICTIMS",
    "Divergence",
    "DivergenceLog",
    "admitted_without_preemptd",
    "from_decisions",
    "kueue_view",
]

KINDS = ("would-admit", "would-not-admit", "would-preempt")

WAITING_FOR_VICTIMS = "PendingPreemption"
"""The pending reason of a workload admitted once the victims chosen for it are gone."""

log = logging.getLogger("preemptd.shadow")


@dataclass(frozen=True, slots=True)
class Divergence:
    """One workload on which preemptd and Kueue differ; ``preemptd`` and ``kueue`` say how."""

    kind: str
    workload: str
    queue: str
    preemptd: Mapping[str, Any]
    kueue: Mapping[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.workload

    def to_dict(self, since: int) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "queue": self.queue,
            "kind": self.kind,
            "since": format_timestamp(since),
            "preemptd": dict(self.preemptd),
            "kueue": dict(self.kueue),
        }


def kueue_view(obj: Obj | None) -> dict[str, Any]:
    """What Kueue did with a Workload, from its status: admitted (where, on which flavors),
    evicted, or pending (with the reason and message of its ``QuotaReserved`` condition)."""
    status = (obj or {}).get("status")
    status = status if isinstance(status, dict) else {}
    conditions = {
        c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)
    }
    admission = status.get("admission")
    if isinstance(admission, dict):
        flavors = sorted({
            str(flavor)
            for assignment in admission.get("podSetAssignments") or ()
            if isinstance(assignment, dict) and isinstance(assignment.get("flavors"), dict)
            for flavor in assignment["flavors"].values()
        })
        view: dict[str, Any] = {"state": "admitted", "clusterQueue": admission.get("clusterQueue"), "flavors": flavors}
        evicted = conditions.get("Evicted")
        if evicted is not None and evicted.get("status") == "True":
            view.update(state="evicted", reason=evicted.get("reason", ""), message=evicted.get("message", ""))
        return view
    reserved = conditions.get("QuotaReserved") or {}
    return {"state": "pending", "reason": reserved.get("reason", ""), "message": reserved.get("message", "")}


def _queue(inventory: Inventory, key: str) -> str:
    workload = inventory.workloads.get(key)
    return workload.queue if workload is not None else ""


def from_decisions(decisions: Decisions, inventory: Inventory, objects: Mapping[str, Obj]) -> list[Divergence]:
    """``would-admit`` and ``would-preempt``: a session over Kueue's state against that state."""
    found: list[Divergence] = []
    for admitted in decisions.admitted:
        workload = inventory.workloads.get(admitted.workload)
        if workload is None or workload.admission is not None:
            continue  # an admitted workload grown back is not one Kueue holds pending
        flavors = sorted({flavor for ps in admitted.pod_sets for flavor in ps.flavors.values()})
        found.append(Divergence(
            "would-admit", admitted.workload, admitted.queue,
            {"action": "admit", "flavors": flavors, "borrowing": admitted.borrowing},
            kueue_view(objects.get(admitted.workload)),
        ))
    victims: dict[str, dict[str, Any]] = {}
    for preempted in decisions.preempted:
        seen = victims.get(preempted.workload)
        if seen is None:
            victims[preempted.workload] = {
                "action": "preempt", "preemptor": preempted.preemptor, "reason": preempted.reason,
                "count": preempted.count,
            }
        elif seen["count"] is not None:  # pods of more than one pod set: their sum, or the whole
            seen["count"] = None if preempted.count is None else seen["count"] + preempted.count
    for key, action in victims.items():
        found.append(Divergence(
            "would-preempt", key, _queue(inventory, key), action, kueue_view(objects.get(key)),
        ))
    return found


def admitted_without_preemptd(
    judged: Iterable[str], decisions: Decisions, inventory: Inventory, objects: Mapping[str, Obj]
) -> list[Divergence]:
    """``would-not-admit``: of the workloads Kueue has just admitted (``judged``), those the
    session that saw them pending (``decisions``) would have kept waiting."""
    admitted = {a.workload for a in decisions.admitted}
    preempting = {p.preemptor for p in decisions.preempted}
    pending = {p.workload: p for p in decisions.pending}
    found: list[Divergence] = []
    for key in sorted(judged):
        if key in admitted or key in preempting:
            continue
        why = pending.get(key)
        if why is not None and why.reason == WAITING_FOR_VICTIMS:
            continue
        preemptd = {"action": "keep-pending", "reason": why.reason if why else "", "message": why.message if why else ""}
        found.append(Divergence("would-not-admit", key, _queue(inventory, key), preemptd, kueue_view(objects.get(key))))
    return found


@dataclass(slots=True)
class _Current:
    divergence: Divergence
    since: int
    reported: bool = False


class DivergenceLog:
    """The current divergences: logged, counted and served (see the module docstring)."""

    def __init__(self, registry: CollectorRegistry | None = None, *, grace: int = 0) -> None:
        self.grace = grace  # milliseconds a divergence lasts before it is reported
        self.cycle: int | None = None  # the last compared cycle's time (ms)
        self.current: dict[tuple[str, str], _Current] = {}
        self.log = structlog.stdlib.get_logger("preemptd.shadow")
        self.gauge = Gauge(
            "preemptd_shadow_divergences",
            "Divergences from Kueue at the last shadow cycle, by kind (would-admit, would-not-admit, would-preempt).",
            ["kind"], registry=registry,
        )
        self.new = Counter(
            "preemptd_shadow_new_divergences",
            "Divergences from Kueue reported since the start, by kind (each counted once, when it first appears).",
            ["kind"], registry=registry,
        )
        self.last_cycle = Gauge(
            "preemptd_shadow_last_cycle_timestamp_seconds", "When the last shadow cycle compared its decisions.",
            registry=registry,
        )
        for kind in KINDS:
            self.gauge.labels(kind).set(0)
            self.new.labels(kind)

    def update(self, found: Iterable[Divergence], now: int) -> None:
        """This cycle's divergences (``now`` in ms): report what appeared, changed or ended."""
        seen: set[tuple[str, str]] = set()
        for divergence in sorted(found, key=lambda d: (d.workload, d.kind)):
            key = divergence.key
            seen.add(key)
            entry = self.current.get(key)
            if entry is None:
                entry = self.current[key] = _Current(divergence, now)
            elif entry.divergence != divergence:
                entry.divergence = divergence
                if entry.reported:
                    self._line("changed", divergence)
            if not entry.reported and now - entry.since >= self.grace:
                entry.reported = True
                self.new.labels(divergence.kind).inc()
                self._line("new", divergence)
        for key in sorted(self.current.keys() - seen, key=lambda k: (k[1], k[0])):
            gone = self.current.pop(key)
            if gone.reported:
                self._line("ended", gone.divergence)
        counts = dict.fromkeys(KINDS, 0)
        for entry in self.current.values():
            if entry.reported:
                counts[entry.divergence.kind] += 1
        for kind, count in counts.items():
            self.gauge.labels(kind).set(count)
        self.cycle = now
        self.last_cycle.set(now / 1000)

    def reported(self) -> list[tuple[Divergence, int]]:
        entries = [e for e in self.current.values() if e.reported]
        return [(e.divergence, e.since) for e in sorted(entries, key=lambda e: (e.divergence.workload, e.divergence.kind))]

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``/divergence``: the last cycle's time, counts, and each divergence."""
        reported = self.reported()
        counts = dict.fromkeys(KINDS, 0)
        for divergence, _ in reported:
            counts[divergence.kind] += 1
        return {
            "source": "kueue",
            "cycle": None if self.cycle is None else format_timestamp(self.cycle),
            "counts": counts,
            "divergences": [divergence.to_dict(since) for divergence, since in reported],
        }

    def to_json(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n").encode()

    def _line(self, change: str, divergence: Divergence) -> None:
        fields = {
            "change": change, "kind": divergence.kind, "workload": divergence.workload, "queue": divergence.queue,
            "preemptd": summary(divergence.preemptd), "kueue": summary(divergence.kueue),
        }
        if structlog.is_configured():
            self.log.info("divergence", **fields)
        else:  # a library use (tests): plain logging
            log.info("divergence %s", " ".join(f"{k}={v}" for k, v in fields.items()))


def summary(view: Mapping[str, Any]) -> str:
    """One side of a divergence as a log line's text: ``admit on default``,
    ``preempt for team/high (InQueue)``, ``pending (Pending: couldn't assign flavors)``."""
    action = view.get("action") or view.get("state") or ""
    if action == "admit":
        borrowing = " (borrowing)" if view.get("borrowing") else ""
        return f"admit on {','.join(view.get('flavors') or ()) or '-'}{borrowing}"
    if action == "preempt":
        count = view.get("count")
        taken = "" if count is None else f" {count} pod(s)"
        return f"preempt{taken} for {view.get('preemptor')} ({view.get('reason')})"
    if action == "admitted":
        return f"admitted in {view.get('clusterQueue')} on {','.join(view.get('flavors') or ()) or '-'}"
    why = ": ".join(str(part) for part in (view.get("reason"), view.get("message")) if part)
    return f"{action} ({why})" if why else str(action)
