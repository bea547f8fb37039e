"""What the decisions of one session do to the simulated cluster.

Commit follows the files backend (CONTRACT §3 ``--apply``): an admitted
workload gets its admission and ``admittedAt = now``; a whole victim is marked
``Evicted`` and keeps its quota until gone; a shrunk elastic victim loses its
pods and their quota at once; a Deployment grown in place, or an elastic
workload grown back (an ``admitted`` entry with ``grown``), has its committed
count raised and its new pods bound, ``admittedAt`` kept; a Deployment victim's
chosen pods start terminating; flavor scans are stored. Growth is committed
before scale-downs, as the files backend does.

:class:`Commits` is the engine's half that changes the cluster and schedules the
events that follow (a finish, a victim gone, a pod gone); the clock and the
sessions are :mod:`.engine`'s.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections import Counter
from dataclasses import dataclass

from preemptd.framework.decisions import Admitted, Decisions, Preempted
from preemptd.framework.model import FR, Admission, PodSetAdmission

from .cluster import ClusterModel
from .invariants import Invariants
from .metrics import Recorder, leaf_changes

__all__ = ["Commits", "Job", "SimulationError", "usage_difference"]

# Event kinds, in the order events of one instant apply; and the states of a job.
_FINISH, _GONE, _POD_GONE, _ARRIVE, _SCALE = range(5)
_FUTURE, _PENDING, _RUNNING, _EVICTING, _DONE = range(5)


class SimulationError(Exception):
    """The simulator's model disagreed with ``Snapshot.build`` (``verify`` mode only)."""


@dataclass(slots=True)
class Job:
    key: str
    queue: str
    runtime: int | None
    state: int = _FUTURE
    pending_since: int = 0
    generation: int = 0  # bumped on every admission and eviction: stale events are ignored
    reason: str = ""  # the last pending reason a session gave
    replicas: int | None = None  # a Deployment's desired count set by replicaChanges


class Commits:
    """The engine's state that commits change, and the commit itself."""

    cluster: ClusterModel
    invariants: Invariants
    recorder: Recorder
    jobs: dict[str, Job]
    events: list[tuple[int, int, int, str, int]]
    expiries: list[int]
    windows: list[int]
    terminating: dict[str, int]  # pod key -> the sequence of its gone event
    timings: dict[str, float]
    sequence: int
    start: int
    grace: int
    resource: str

    def _push(self, at: int, kind: int, job: Job) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, kind, self.sequence, job.key, job.generation))

    def _expiries(self, admitted_at: int) -> None:
        for window in self.windows:
            heapq.heappush(self.expiries, admitted_at + window)

    def _terminate(self, at: int, pod_key: str) -> None:
        """A pod got its deletionTimestamp at ``at``: it is gone after the grace."""
        self.sequence += 1
        self.terminating[pod_key] = self.sequence
        heapq.heappush(self.events, (at + self.grace, _POD_GONE, self.sequence, pod_key, self.sequence))

    def _timed(self, phase: str, started: float) -> None:
        self.timings[phase] = self.timings.get(phase, 0.0) + time.perf_counter() - started

    def _commit(self, t: int, decisions: Decisions) -> bool:
        started = time.perf_counter()
        now = self.start + t
        self.invariants.before_commit(t, decisions)
        admitted = sorted(decisions.admitted, key=lambda a: a.workload)
        # A workload may grow and then lose pods to a later preemptor of the same
        # session: like the files backend, raise its committed count first, then lower it.
        grown = [a for a in admitted if a.grown]
        for entry in grown:
            self._admit(t, entry, decisions)
        for preempted in sorted(decisions.preempted, key=lambda p: p.workload):
            self._preempt(t, preempted)
        for action in sorted(decisions.pod_actions, key=lambda a: a.pod):
            if action.action == "ForceDelete":
                # A force delete removes the pod object at once.
                self.terminating.pop(action.pod, None)
                self.cluster.remove_pod(action.pod)
        for entry in admitted:
            if entry not in grown:
                self._admit(t, entry, decisions)
        self.cluster.place_admitted([a.workload for a in admitted], now=now)
        changed = bool(admitted or decisions.preempted or decisions.pod_actions)
        for key, scan in sorted(decisions.flavor_scans.items()):
            workload = self.cluster.workloads.get(key)
            if workload is None or dict(workload.flavor_scan) == scan:
                continue
            self.cluster.replace(dataclasses.replace(workload, flavor_scan={ps: dict(r) for ps, r in scan.items()}))
            changed = True
        for pending in decisions.pending:
            job = self.jobs.get(pending.workload)
            if job is not None:
                job.reason = pending.reason
        self.invariants.after_commit(t, decisions, admitted)
        self._timed("commit", started)
        return changed

    def _preempt(self, t: int, preempted: Preempted) -> None:
        job = self.jobs[preempted.workload]
        workload = self.cluster.workloads[preempted.workload]
        leaf = self.cluster.leaf_of(job.key)
        preemptor = self.jobs.get(preempted.preemptor)
        preemptor_queue = preemptor.queue if preemptor is not None else ""
        victim_queue = leaf.name if leaf is not None else job.queue
        ran = t + self.start - (workload.admitted_at if workload.admitted_at is not None else self.start + t)
        if preempted.count is None:
            self.cluster.replace(dataclasses.replace(workload, evicted=True))
            job.state = _EVICTING
            job.generation += 1
            self._push(t + self.grace, _GONE, job)
            amount = sum(a for (_, r), a in self.cluster.usage.get(job.key, {}).items() if r == self.resource)
            self.recorder.preempted(
                victim=job.key, victim_queue=victim_queue, preemptor_queue=preemptor_queue,
                reason=preempted.reason, whole=True, lost=amount * ran, ran=ran,
            )
            return
        before = self.cluster.usage.get(job.key, {})
        if workload.is_deployment:
            for pod in self.cluster.scale_down(job.key, preempted.count, preempted.pods):
                self._terminate(t, pod.key)
        else:
            self.cluster.shrink(job.key, preempted.pod_set, preempted.count, preempted.pods)
        after = self.cluster.usage.get(job.key, {})
        changes = usage_difference(before, after, self.resource)
        self.recorder.usage(t, victim_queue, changes)
        self.recorder.preempted(
            victim=job.key, victim_queue=victim_queue, preemptor_queue=preemptor_queue,
            reason=preempted.reason, whole=False, lost=0, ran=0,
        )

    def _admit(self, t: int, entry: Admitted, decisions: Decisions) -> None:
        job = self.jobs[entry.workload]
        workload = self.cluster.workloads[entry.workload]
        if entry.grown:
            if job.state not in (_RUNNING, _EVICTING) or workload.admission is None:
                raise SimulationError(f"{entry.workload} grew while not running")
            # Grown in place: the committed count is raised, its run goes on.
            before = self.cluster.usage[job.key]
            scan = decisions.flavor_scans.get(entry.workload, workload.flavor_scan)
            self.cluster.recount(job.key, {ps.name: ps.count for ps in entry.pod_sets}, scan=scan)
            changes = usage_difference(before, self.cluster.usage[job.key], self.resource)
            self.recorder.usage(t, entry.queue, changes)
            added = sum(ps.count for ps in entry.pod_sets) - sum(ps.count for ps in workload.admission.pod_sets)
            self.recorder.grown(entry.queue, max(0, added))
            return
        if job.state != _PENDING:
            raise SimulationError(f"{entry.workload} was admitted while not pending")
        admission = Admission(
            entry.queue, tuple(PodSetAdmission(ps.name, ps.count, dict(ps.flavors)) for ps in entry.pod_sets)
        )
        scan = decisions.flavor_scans.get(entry.workload, workload.flavor_scan)
        self.cluster.admit(entry.workload, admission, now=self.start + t, scan=scan)
        job.state = _RUNNING
        job.generation += 1
        job.reason = ""
        self.recorder.admitted(entry.queue, t - job.pending_since)
        self.recorder.usage(t, entry.queue, leaf_changes(self.cluster.usage[job.key], self.resource, 1))
        if job.runtime is not None:
            self._push(t + job.runtime, _FINISH, job)
        self._expiries(t)


def usage_difference(before: dict[FR, int], after: dict[FR, int], resource: str) -> dict[str, int]:
    changes: Counter[str] = Counter()
    for (flavor, res), amount in after.items():
        if res == resource:
            changes[flavor] += amount
    for (flavor, res), amount in before.items():
        if res == resource:
            changes[flavor] -= amount
    return {flavor: amount for flavor, amount in changes.items() if amount}
