"""The simulation backend: a discrete-event clock that drives real sessions.

Design note. Simulated time is an integer of milliseconds after the scenario's
start; nothing here reads the wall clock or sleeps. Three kinds of event change
the cluster between sessions: a workload *arrives*, a running one *finishes*
(``runtime`` after its ``admittedAt``), an evicted one is *gone*
(``terminationGrace`` after its eviction; until then it holds its quota and
node room, as SEMANTICS §1 says). Sessions run on the ticks of
``cycle_interval``; a session at tick T sees every event at or before T.

A session is a pure function of the cluster and ``now``, and ``now`` only
matters to the min-runtime plugin. So after a session that changed nothing (no
admission, preemption or flavor-scan change) the next one would decide the
same until an event happens or a min-runtime window ends; the clock jumps to
the first tick after that instant instead of running the idle ticks in between.
That is what makes a day of a large cluster take seconds. A third-party plugin
whose decisions depend on ``now`` in other ways needs ``runIdleCycles: true``.

Sessions do not share the victim-search memo (``framework/preemption/memo.py``).
Its keys name the state of a queue tree by the epoch of the session's own
statement, which starts at 0 every session; carried over, an entry would need
a name for the cluster state that lasts across sessions (bumped by every commit
and event that touches admitted workloads, pods or node room, and by an arrival
that changes a plugin's per-session tables, such as a Deployment for
gpu-victims) and would end at the next min-runtime expiry. Even then an answer
from memory is not exact: the notes and explanation lines a search writes
(min-runtime's "first protected candidate" on the pending message, deduplicated
per preemptor in its per-session state) are not part of the remembered answer,
so a later session answering from memory would drop them. And it would seldom
answer: in ``gpu-fleet.yaml`` 81 of 2,467 sessions start from the state the
session before started from, for 175 of 12,867 searches.

What sessions do share is the victim units of running workloads and the candidate
index's per-queue lists (``framework/preemption/kept.py``, ``KeptUnits``): the cluster
model hands every snapshot the same store, and a session takes a workload's units from
it only while the workload, its pods and its usage are the very objects they were built
from and the session has taken nothing from it, so a session gets the units it would
build (``keep_units=False`` builds them every session, for comparison).

Commit follows the files backend (CONTRACT §3 ``--apply``): an admitted
workload gets its admission and ``admittedAt = now``; a whole victim is marked
``Evicted`` and keeps its quota until gone, then goes back to its queue as
pending (Kueue requeues evicted workloads) having lost its progress; a shrunk
elastic victim loses its pods and their quota at once, and grows back in place
when a later session lists it in ``admitted`` again (docs/elastic.md: its count
raised, new pods bound at once, ``admittedAt`` kept); flavor scans are stored.

Deployments (SEMANTICS §6). A Deployment grown in place has its committed count
raised and its new replicas bound at once. A Deployment victim has its committed
count lowered (quota frees at once) and its chosen pods start terminating: they
hold their node room for the grace, then a *pod gone* event removes them; a
``ForceDelete`` pod action removes a pod at once. ``replicaChanges`` are events
too: the desired count changes, and a fall below the committed count lowers it
and terminates the surplus pods, as a user's scale-down would. Growth is
committed before scale-downs, as the files backend does when one session both
grows a Deployment and takes replicas from it.

What a session's decisions do to the cluster is :mod:`.commit`. Invariants are
checked on every session (:mod:`.invariants`); a
violation is recorded with its details, never raised, so one report shows all.
"""

from __future__ import annotations

import dataclasses
import gc
import heapq
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from preemptd.framework.decisions import Decisions
from preemptd.framework.model import GPU_RESOURCES, Workload
from preemptd.framework.quantity import format_timestamp
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry
from preemptd.framework.snapshot import Snapshot

from .cluster import ClusterModel
from .commit import (
    _ARRIVE,
    _DONE,
    _EVICTING,
    _FINISH,
    _FUTURE,
    _GONE,
    _PENDING,
    _POD_GONE,
    _RUNNING,
    _SCALE,
    Commits,
    Job,
    SimulationError,
    usage_difference,
)
from .invariants import Invariants
from .metrics import Recorder, leaf_changes
from .scenario import Scenario

__all__ = ["Outcome", "SimulationError", "report_resource", "simulate"]

@dataclass(slots=True)
class Outcome:
    """One run: its JSON-ready figures, and what only a person reading stderr needs."""

    figures: dict[str, Any]
    sessions: int
    admissions: int
    violations: int
    timings: dict[str, float] = field(default_factory=dict)


def report_resource(scenario: Scenario) -> str:
    """The resource the figures are about: the scenario's choice, else a GPU resource
    that some quota covers, else cpu."""
    if scenario.report_resource:
        return scenario.report_resource
    resources = {
        resource for queue in scenario.inventory.queues.values() for group in queue.resource_groups
        for resource in group.covered
    }
    gpus = sorted(resources & GPU_RESOURCES)
    if gpus:
        return gpus[0]
    return "cpu" if "cpu" in resources or not resources else sorted(resources)[0]


def simulate(
    scenario: Scenario,
    registry: Registry,
    *,
    actions: tuple[str, ...],
    cycle_interval: int,
    progress: Callable[[int, int, int], bool | None] | None = None,
    verify: Registry | None = None,
    keep_units: bool = True,
) -> Outcome:
    """Run ``scenario`` through sessions of ``registry``'s plugins and measure it.

    ``progress`` is called after every session with the simulated time (ms), the
    sessions run and the admissions made so far; an answer that is true stops the run
    there, and its figures cover the simulated time reached.
    ``verify``, a second registry of the same plugins, makes every session also run
    on ``Snapshot.build`` of the same objects and raises :class:`SimulationError`
    unless both decide the same (slow; for tests).
    ``keep_units=False`` builds every session's victim units afresh instead of keeping
    them from session to session (see :mod:`.cluster`); the decisions are the same.
    """
    collecting = gc.isenabled()
    gc.disable()  # see _Collector
    try:
        engine = _Engine(scenario, registry, actions, cycle_interval, progress, verify, keep_units)
        return engine.run(_Collector() if collecting else None)
    finally:
        if collecting:
            gc.enable()


class _Collector:
    """The cyclic collector's work during a run, done between sessions.

    The cluster model, the victim units kept across sessions and the recorder's figures
    live as long as the run and grow with it; the collector, left to its thresholds,
    walks them again and again between sessions (in a large run, two seconds of
    commits) for garbage that is not there: neither the model nor the built-in plugins
    make reference cycles. So the run keeps the automatic collector off and collects in
    full only after the objects the collector follows grew by half of what the last
    collection left alive (at least :data:`FIRST` objects): the work stays in
    proportion to what is made, and garbage cycles a third-party plugin may leave
    behind are freed, at most that many at a time.
    """

    FIRST = 200_000

    __slots__ = ("threshold",)

    def __init__(self) -> None:
        self.threshold = self.FIRST

    def between_sessions(self, timings: dict[str, float]) -> None:
        # With collection off, the youngest generation's count is the number of objects
        # the collector follows made and not freed since the last collection.
        if gc.get_count()[0] < self.threshold:
            return
        started = time.perf_counter()
        gc.collect()
        self.threshold = max(self.FIRST, len(gc.get_objects()) // 2)
        timings["gc"] = timings.get("gc", 0.0) + time.perf_counter() - started


class _Engine(Commits):
    def __init__(
        self,
        scenario: Scenario,
        registry: Registry,
        actions: tuple[str, ...],
        interval: int,
        progress: Callable[[int, int, int], bool | None] | None,
        verify: Registry | None,
        keep_units: bool = True,
    ) -> None:
        started = time.perf_counter()
        self.scenario = scenario
        self.registry = registry
        self.actions = actions
        self.interval = interval
        self.progress = progress
        self.verify = verify
        self.start = scenario.start
        self.duration = scenario.duration
        self.grace = scenario.termination_grace
        self.cluster = ClusterModel(scenario.inventory, keep_units=keep_units)
        self.resource = report_resource(scenario)
        self.recorder = Recorder(
            self.cluster.tree,
            resource=self.resource,
            capacity=self._capacity(),
            start=self.start,
            duration=self.duration,
        )
        self.invariants = Invariants(
            self.cluster,
            registry,
            start=scenario.start,
            queue_of=lambda key: self.jobs[key].queue if key in self.jobs else None,
            leaving=self._leaving,
            reason_of=lambda key: self.jobs[key].reason if key in self.jobs else "",
        )
        self.jobs: dict[str, Job] = {}
        self.events: list[tuple[int, int, int, str, int]] = []
        self.sequence = 0
        self.expiries: list[int] = []
        self.windows = self.invariants.windows()
        self.arrivals = {a.key: a for a in scenario.arrivals}
        self.terminating: dict[str, int] = {}  # pod key -> the sequence of its gone event
        self.timings: dict[str, float] = {}
        self.sessions = 0
        self._load_initial()
        self._timed("setup", started)

    # -- set-up ---------------------------------------------------------------------------

    def _capacity(self) -> dict[str, int]:
        """Per flavor, the report resource its nodes offer (their quota where it has none)."""
        capacity: Counter[str] = Counter()
        pool = self.cluster.pool
        for flavor, members in pool.by_flavor.items():
            capacity[flavor] = sum(pool.nodes[name].allocatable.get(self.resource, 0) for name in members)
        for root in self.cluster.tree.roots:
            for (flavor, resource), amount in root.subtree.items():
                if resource == self.resource and flavor not in pool.by_flavor:
                    capacity[flavor] += amount
        return dict(capacity)

    def _load_initial(self) -> None:
        inventory = self.scenario.inventory
        initial = [inventory.workloads[key] for key in sorted(inventory.workloads)]
        self.cluster.add(initial, now=self.start)
        for workload in initial:
            job = self.jobs[workload.key] = Job(
                workload.key, workload.queue, self.scenario.runtimes.get(workload.key), _PENDING
            )
            leaf = self.cluster.leaf_of(workload.key)
            if workload.admission is None or leaf is None:
                continue
            usage = self.cluster.usage[workload.key]
            self.recorder.usage(0, leaf.name, leaf_changes(usage, self.resource, 1))
            admitted_at = (workload.admitted_at if workload.admitted_at is not None else self.start) - self.start
            if workload.evicted:
                job.state = _EVICTING
                self._push(self.grace, _GONE, job)
            else:
                job.state = _RUNNING
                if job.runtime is not None:
                    self._push(max(0, admitted_at + job.runtime), _FINISH, job)
                self._expiries(admitted_at)
        for arrival in self.scenario.arrivals:
            job = self.jobs[arrival.key] = Job(
                arrival.key, arrival.workload.queue if arrival.workload else "", arrival.runtime
            )
            self._push(arrival.at, _ARRIVE, job)
        for index, change in enumerate(self.scenario.replica_changes):
            self.sequence += 1
            heapq.heappush(self.events, (change.at, _SCALE, self.sequence, change.workload, index))


    # -- the clock ------------------------------------------------------------------------

    def run(self, collector: _Collector | None) -> Outcome:
        t = 0
        while True:
            self._advance(t)
            decisions = self._session(t)
            changed = self._commit(t, decisions)
            self.recorder.session(t, decisions, self._queue_of, self.cluster.accounting)
            if collector is not None:
                collector.between_sessions(self.timings)
            if self.progress is not None and self.progress(t, self.sessions, self.recorder.admissions):
                self.duration = t  # stopped: the run, and every figure, ends here
                self.recorder.stop(t)
                break
            following = t + self.interval if changed or self.scenario.run_idle_cycles else self._wake(t)
            if following is None or following > self.duration:
                break
            t = following
        self._advance(self.duration)
        return self._outcome()

    def _wake(self, t: int) -> int | None:
        """The first tick after ``t`` at which a session could decide differently."""
        events = self.events
        while events and self._stale(events[0]):
            heapq.heappop(events)
        moments = [events[0][0]] if events else []
        expiries = self.expiries
        while expiries and expiries[0] <= t:
            heapq.heappop(expiries)
        if expiries and self.cluster.pending_keys():
            moments.append(expiries[0])
        if not moments:
            return None
        moment = max(min(moments), t + 1)
        return -(-moment // self.interval) * self.interval

    def _stale(self, event: tuple[int, int, int, str, int]) -> bool:
        _, kind, _, key, generation = event
        if kind == _POD_GONE:
            return self.terminating.get(key) != generation
        if kind == _SCALE:
            return False
        job = self.jobs[key]
        return kind != _ARRIVE and (job.generation != generation or job.state not in (_RUNNING, _EVICTING))

    def _advance(self, until: int) -> None:
        """Apply every event at or before ``until``, in time order."""
        started = time.perf_counter()
        self._apply_events(until)
        self._timed("events", started)

    def _apply_events(self, until: int) -> None:
        events = self.events
        while events and events[0][0] <= until:
            at, kind, _, key, generation = heapq.heappop(events)
            if kind == _POD_GONE:
                if self.terminating.get(key) == generation:
                    del self.terminating[key]
                    self.cluster.remove_pod(key)
                continue
            if kind == _SCALE:
                self._scale(at, key, self.scenario.replica_changes[generation].replicas)
                continue
            job = self.jobs[key]
            if kind == _ARRIVE:
                self._arrive(at, job)
            elif job.generation != generation:
                continue
            elif kind == _FINISH and job.state == _RUNNING:
                self._leave(at, job)
                job.state = _DONE
            elif kind == _GONE and job.state == _EVICTING:
                workload = self._leave(at, job)
                # Kueue requeues an evicted workload: it waits again, with nothing kept.
                requeued = dataclasses.replace(
                    workload, admission=None, admitted_at=None, evicted=False, flavor_scan={}
                )
                self.cluster.add([requeued], now=self.start + at)
                job.state = _PENDING
                job.pending_since = at

    def _arrive(self, at: int, job: Job) -> None:
        arrival = self.arrivals[job.key]
        job.state = _PENDING
        job.pending_since = at
        if arrival.workload is None:
            self.cluster.inadmissible[job.key] = arrival.inadmissible
            job.reason = "Inadmissible"
            return
        workload = arrival.workload
        if job.replicas is not None:
            # Scaled before it arrived: it arrives with the count set last.
            spec = dataclasses.replace(workload.pod_sets[0], count=job.replicas)
            workload = dataclasses.replace(workload, pod_sets=(spec, *workload.pod_sets[1:]))
        self.cluster.add([workload], now=self.start + at)

    def _scale(self, at: int, key: str, replicas: int) -> None:
        """replicaChanges: the Deployment's desired count changes; a scale-down below the
        committed count lowers it and the surplus pods terminate with the grace."""
        job = self.jobs.get(key)
        if job is None:
            return  # an initial workload isolated as invalid
        job.replicas = replicas
        if job.state in (_FUTURE, _DONE) or key not in self.cluster.workloads:
            return
        before = dict(self.cluster.usage.get(key, {}))
        leaving = self.cluster.set_replicas(key, replicas)
        leaf = self.cluster.leaf_of(key)
        changes = usage_difference(before, self.cluster.usage.get(key, {}), self.resource)
        if leaf is not None and changes:
            self.recorder.usage(at, leaf.name, changes)
        for pod in leaving:
            self._terminate(at, pod.key)


    def _queue_of(self, key: str) -> str:
        job = self.jobs.get(key)
        return job.queue if job is not None else ""

    def _leaving(self, key: str) -> bool:
        """A victim a preemptor waits for is still there: an evicted workload, or a pod
        (``pod:ns/name``) that has not gone yet."""
        if key.startswith("pod:"):
            return key[4:] in self.cluster.pods
        job = self.jobs.get(key)
        return job is not None and job.state == _EVICTING

    def _leave(self, at: int, job: Job) -> Workload:
        leaf = self.cluster.leaf_of(job.key)
        usage = self.cluster.usage.get(job.key, {})
        if leaf is not None:
            self.recorder.usage(at, leaf.name, leaf_changes(usage, self.resource, -1))
        return self.cluster.remove(job.key)

    # -- one session ------------------------------------------------------------------------

    def _session(self, t: int) -> Decisions:
        now = self.start + t
        started = time.perf_counter()
        snapshot = self.cluster.snapshot(now=now)
        self._timed("snapshot", started)
        timings: dict[str, float] = {}
        # Nothing the simulator reports reads an explanation line: none are kept.
        decisions = run_session(snapshot, self.registry, actions=self.actions, timings=timings, explain=False)
        for phase, seconds in timings.items():
            self.timings[phase] = self.timings.get(phase, 0.0) + seconds
        self.sessions += 1
        if self.verify is not None:
            self._verify(now, decisions)
        return decisions

    def _verify(self, now: int, decisions: Decisions) -> None:
        assert self.verify is not None
        built = Snapshot.build(self.cluster.inventory(), now=now)
        expected = run_session(built, self.verify, actions=self.actions)
        if expected.to_json() != decisions.to_json() or expected.flavor_scans != decisions.flavor_scans:
            raise SimulationError(
                f"at {format_timestamp(now)} the simulator's snapshot decided differently from "
                f"Snapshot.build:\n--- simulator\n{decisions.to_json()}--- Snapshot.build\n{expected.to_json()}"
            )


    # -- the end ------------------------------------------------------------------------------

    def _outcome(self) -> Outcome:
        pending: dict[str, list[int]] = {}
        reasons: Counter[str] = Counter()
        for job in self.jobs.values():
            if job.state != _PENDING:
                continue
            pending.setdefault(job.queue, []).append(self.duration - job.pending_since)
            reasons[job.reason or "NotScheduledYet"] += 1
        ticks = self.duration // self.interval + 1
        counters = {
            "sessions": self.sessions,
            "idleCyclesSkipped": max(0, ticks - self.sessions),
        }
        figures = self.recorder.figures(
            pending=pending,
            pending_reasons=reasons,
            vetoes=self.registry.vetoes,
            failures=self.registry.failures,
            invariants=self.invariants.figures(),
            counters=counters,
        )
        return Outcome(
            figures=figures,
            sessions=self.sessions,
            admissions=self.recorder.admissions,
            violations=self.invariants.count(),
            timings=dict(self.timings),
        )


