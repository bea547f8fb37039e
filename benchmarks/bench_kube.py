"""The Kubernetes backend's throughput, against the in-process test API server.

    python -m benchmarks.bench_kube                 # 1,000 Jobs in 10 queues, a wave of 100
    python -m benchmarks.bench_kube --jobs 2000 --wave 200

Three scenarios, each figure printed beside its target (issue 21):

1. **Burst.** ``--jobs`` suspended Jobs labelled for 10 queues (enough quota for
   all) appear at once; the daemon's loop (watch → debounced cycles → commits)
   runs until every Job is unsuspended. Printed: the rate to the half-way
   admission (the 500th of 1,000; target ≥ 100 Jobs/s), cycles, conflicts, and
   writes per admission counting everything written about the Job: its
   Workload's create and status, the Job's patches, and Events (target ≤ 3).
2. **Wave.** With every queue full, ``--wave`` high-priority Jobs arrive at once,
   each needing one low-priority Job's room. Printed: how many sessions chose
   victims (target: one session chooses all the victims the wave needs), the
   time until every preemptor runs, and writes per preemption: everything
   written about a victim — its Workload's status (evicted; then, once its
   Job has stopped, its quota given back together with the reason it waits),
   its Job's suspension, Events (target ≤ 4).
3. **Again.** The wave's Jobs complete and their victims are admitted again.
   Printed: writes per re-admission (target ≤ 3, as for any admission). A
   victim keeps its last flavor's directives while it waits, so this is where
   its template changes, if its new flavor differs from the last (one Job
   status write to clear ``startTime``, then the Job's patch): one flavor here,
   so the template is already right.

Each figure is followed by its breakdown: per decision, how many of each kind of
write (``Workload patch/status``, ``Job patch``, ``Event <reason> on <kind>``).

A stand-in for the Job controller stamps ``status.startTime`` on running Jobs,
as the real one does, since it decides which template writes the Job API allows.

The API server runs in the same process and event loop as the daemon: both
sides' JSON and HTTP work share one core, so the figures are a lower bound for
a daemon talking to a real API server. This prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.backend import CycleReport, KubernetesBackend
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import BackendConfig, Config
from preemptd.daemon.loop import Scheduler
from preemptd.daemon.plugins import resolve_plugins

from tests.kube.apiserver import ApiServer
from tests.kube.cluster import flavor, install_crds, job, priority_class, queue

QUEUES = 10
TARGET_JOBS_PER_SECOND = 100.0  # to the 500th admission of 1,000
TARGET_WRITES_PER_ADMISSION = 3
TARGET_WRITES_PER_PREEMPTION = 4


class Recording:
    """The backend, with every cycle's report kept."""

    def __init__(self, backend: KubernetesBackend) -> None:
        self.backend = backend
        self.reports: list[CycleReport] = []

    @property
    def wake(self) -> asyncio.Event:
        return self.backend.wake

    @property
    def resync(self) -> bool:
        return self.backend.resync

    @property
    def healthy(self) -> bool:
        return self.backend.healthy

    def drain(self) -> None:
        self.backend.drain()

    async def cycle(self, *, actions: Sequence[str] | None = None) -> CycleReport:
        report = await self.backend.cycle(actions=actions)
        self.reports.append(report)
        return report


def _running(server: ApiServer, names: list[str]) -> int:
    count = 0
    for name in names:
        found = server.get("batch", "jobs", name, "bench")
        if found is not None and found["spec"].get("suspend") is False:
            count += 1
    return count


async def _wait(server: ApiServer, names: list[str], timeout: float, *, marks: dict[int, float] | None = None) -> float:
    """Seconds until every Job of ``names`` runs; ``marks``: count -> seconds until that many ran."""
    started = time.perf_counter()
    while (running := _running(server, names)) < len(names):
        if marks is not None:
            for count in marks:
                if marks[count] == 0.0 and running >= count:
                    marks[count] = time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{running} of {len(names)} Jobs running after {timeout}s")
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    if marks is not None:
        for count in marks:
            marks[count] = marks[count] or elapsed
    return elapsed


async def _decided(recording: Recording, admitted: int, timeout: float = 10.0) -> None:
    """Until the cycles' reports hold ``admitted`` admissions: a Job may run before the cycle that
    admitted it has returned its report (the owner is driven while the commit finishes)."""
    deadline = time.perf_counter() + timeout
    while sum(len(r.decisions.admitted) for r in recording.reports) < admitted:
        if time.perf_counter() > deadline:
            return
        await asyncio.sleep(0.01)


async def _job_controller(server: ApiServer) -> None:
    """The part of the Job controller the daemon's writes depend on: a Job that runs gets a
    ``status.startTime`` (and keeps it when suspended), which decides what the Job API lets
    change in its template."""
    while True:
        for found in server.list("batch", "jobs", "bench"):
            status = found.get("status") or {}
            if found["spec"].get("suspend") is False and status.get("startTime") is None:
                server.put("batch", "jobs", {**found, "status": {**status, "startTime": "2026-01-01T00:00:00Z"}})
        await asyncio.sleep(0.05)


def _writes_by_owner(server: ApiServer, since_request: int, since_change: int) -> Counter[str]:
    """Writes since the marks, by the Job they are about: its Workload (spec and status), the Job
    itself (spec and status), and Events about either (created or updated)."""
    counts: Counter[str] = Counter()
    for record in server.requests[since_request:]:
        if record.verb not in ("create", "update", "patch", "delete") or record.plural == "events":
            continue
        if record.plural == "jobs" and record.name:
            counts[record.name] += 1
        elif record.plural == "workloads" and record.name:  # a create names its object in the body
            counts[record.name.removeprefix("job-")] += 1
    for change in server.journal[since_change:]:
        if change.kind.plural == "events" and change.type in ("ADDED", "MODIFIED"):
            counts[change.obj["involvedObject"]["name"].removeprefix("job-")] += 1
        elif change.kind.plural == "workloads" and change.type == "ADDED":
            counts[change.obj["metadata"]["name"].removeprefix("job-")] += 1
    return counts


def _breakdown(server: ApiServer, since_request: int, since_change: int, owners: set[str]) -> Counter[str]:
    """The writes :func:`_writes_by_owner` counts for ``owners``, by what was written."""
    counts: Counter[str] = Counter()
    for record in server.requests[since_request:]:
        if record.verb not in ("create", "update", "patch", "delete") or record.plural not in ("jobs", "workloads"):
            continue
        if not record.name or record.name.removeprefix("job-") not in owners:
            continue
        what = "Job" if record.plural == "jobs" else "Workload"
        counts[f"{what} {record.verb}{'/' + record.subresource if record.subresource else ''}"] += 1
    for change in server.journal[since_change:]:
        if change.kind.plural == "events" and change.type in ("ADDED", "MODIFIED"):
            involved = change.obj["involvedObject"]
            if involved["name"].removeprefix("job-") in owners:
                counts[f"Event {change.obj['reason']} on {involved['kind']}"] += 1
        elif (change.kind.plural == "workloads" and change.type == "ADDED"
              and change.obj["metadata"]["name"].removeprefix("job-") in owners):
            counts["Workload create"] += 1
    return counts


def _per(counts: Counter[str], by: int) -> str:
    return ", ".join(f"{what} {count / max(by, 1):.2f}" for what, count in sorted(counts.items()))


async def run(jobs: int, wave: int, concurrency: int) -> dict[str, Any]:
    per_queue = jobs // QUEUES
    async with ApiServer() as server:
        install_crds(server)
        server.put("preemptd.io", "resourceflavors", flavor("default"))
        server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
        server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
        for index in range(QUEUES):
            server.put("preemptd.io", "queues", queue(f"q{index}", {"cpu": str(per_queue)},
                                                      preemption={"withinQueue": "LowerPriority"}))
        config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
        plugins, _ = resolve_plugins(config)
        kube = Kube.from_configuration(Configuration(host=server.url))
        backend = KubernetesBackend(kube, config=config, plugins=plugins, concurrency=concurrency)
        await backend.start(timeout=10)
        recording = Recording(backend)
        stop = asyncio.Event()
        loop_task = asyncio.create_task(Scheduler(recording, interval=1.0).run(stop), name="scheduler")
        controller = asyncio.create_task(_job_controller(server), name="bench-job-controller")
        try:
            await _wait(server, [], 1)
            recording.reports.clear()
            names = [f"low-{i:05d}" for i in range(per_queue * QUEUES)]
            since_request, since_change = len(server.requests), len(server.journal)
            for i, name in enumerate(names):  # the burst: all at once, as a controller would create them
                server.put("batch", "jobs", job(name, f"q{i % QUEUES}", {"cpu": "1"}, namespace="bench",
                                                priority_class_name="low"))
            marks = {len(names) // 2: 0.0}
            burst = await _wait(server, names, 120, marks=marks)
            await _decided(recording, len(names))
            await backend.events.flush()
            admitted = sum(len(r.decisions.admitted) for r in recording.reports)
            by_owner = _writes_by_owner(server, since_request, since_change)
            events = sum(1 for c in server.journal[since_change:] if c.kind.plural == "events")
            half = len(names) // 2
            result: dict[str, Any] = {
                "jobs": len(names),
                "seconds": burst,
                "half": half,
                "half_seconds": marks[half],
                "jobs_per_second_to_half": half / marks[half],
                "jobs_per_second": len(names) / burst,
                "cycles": len(recording.reports),
                "admitted": admitted,
                "writes_per_admission": sum(by_owner[n] for n in names) / max(admitted, 1),
                "events": events,
                "admission_breakdown": _per(_breakdown(server, since_request, since_change, set(names)), admitted),
                "conflicts": backend.writer.conflicts,
            }

            recording.reports.clear()
            await asyncio.sleep(0.2)  # the job controller stamps the last starts
            since_request, since_change = len(server.requests), len(server.journal)
            high = [f"high-{i:05d}" for i in range(wave)]
            for i, name in enumerate(high):
                server.put("batch", "jobs", job(name, f"q{i % QUEUES}", {"cpu": "1"}, namespace="bench",
                                                priority_class_name="high"))
            wave_seconds = await _wait(server, high, 120)
            await _decided(recording, len(high))
            await asyncio.sleep(0.5)  # the victims' last writes (their quota given back) finish
            await backend.events.flush()
            preempting = [r for r in recording.reports if r.decisions.preempted]
            victims = sorted({p.workload.removeprefix("bench/job-") for r in preempting for p in r.decisions.preempted})
            by_owner = _writes_by_owner(server, since_request, since_change)
            result |= {
                "wave": wave,
                "wave_seconds": wave_seconds,
                "sessions_choosing_victims": len(preempting),
                "victims_first_session": len(preempting[0].decisions.preempted) if preempting else 0,
                "preemptors_first_session": sum(
                    1 for p in preempting[0].decisions.pending if p.reason == "PendingPreemption"
                ) if preempting else 0,
                "victims_total": len(victims),
                "writes_per_preemption": sum(by_owner[v] for v in victims) / max(len(victims), 1),
                "writes_per_preemptor": sum(by_owner[h] for h in high) / max(len(high), 1),
                "preemption_breakdown": _per(_breakdown(server, since_request, since_change, set(victims)),
                                             len(victims)),
                "wave_events": sum(1 for c in server.journal[since_change:] if c.kind.plural == "events"),
            }

            # The wave's Jobs complete; their victims, suspended on their last flavor, run again.
            recording.reports.clear()
            since_request, since_change = len(server.requests), len(server.journal)
            for name in high:
                found = server.get("batch", "jobs", name, "bench")
                assert found is not None
                done = {**(found.get("status") or {}), "conditions": [{"type": "Complete", "status": "True"}]}
                server.put("batch", "jobs", {**found, "status": done})
            again_seconds = await _wait(server, victims, 120)
            await _decided(recording, len(victims))
            await backend.events.flush()
            readmitted = sum(len(r.decisions.admitted) for r in recording.reports)
            by_owner = _writes_by_owner(server, since_request, since_change)
            result |= {
                "again_seconds": again_seconds,
                "readmitted": readmitted,
                "writes_per_readmission": sum(by_owner[v] for v in victims) / max(readmitted, 1),
                "readmission_breakdown": _per(_breakdown(server, since_request, since_change, set(victims)),
                                              readmitted),
            }
            return result
        finally:
            stop.set()
            controller.cancel()
            await asyncio.gather(controller, return_exceptions=True)
            await loop_task
            await backend.stop()
            await kube.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--wave", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32, help="bound on concurrent API writes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    result = asyncio.run(run(args.jobs, args.wave, args.concurrency))
    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    rate = result["jobs_per_second_to_half"]
    print(f"burst: {result['jobs']} suspended Jobs in {QUEUES} queues")
    print(f"  {result['half']}th admission after {result['half_seconds']:.2f}s: {rate:.0f} Jobs/s "
          f"(target >= {TARGET_JOBS_PER_SECOND:.0f}/s: {verdict(rate >= TARGET_JOBS_PER_SECOND)}); "
          f"all after {result['seconds']:.2f}s ({result['jobs_per_second']:.0f} Jobs/s)")
    print(f"  {result['cycles']} cycles, {result['admitted']} admissions, {result['conflicts']} conflicts")
    per_admission = result["writes_per_admission"]
    print(f"  {per_admission:.2f} writes per admission, status and Events included "
          f"(target <= {TARGET_WRITES_PER_ADMISSION}: {verdict(per_admission <= TARGET_WRITES_PER_ADMISSION)}); "
          f"{result['events']} Event writes")
    print(f"    {result['admission_breakdown']}")
    print(f"wave: {result['wave']} high-priority Jobs into full queues, all running after {result['wave_seconds']:.2f}s")
    one = result["sessions_choosing_victims"] == 1
    print(f"  sessions that chose victims: {result['sessions_choosing_victims']} (target 1: {verdict(one)}; "
          f"the first chose {result['victims_first_session']} victims for the "
          f"{result['preemptors_first_session']} preemptors it saw; {result['victims_total']} victims in all)")
    per_preemption = result["writes_per_preemption"]
    print(f"  {per_preemption:.2f} writes per preemption, status and Events included "
          f"(target <= {TARGET_WRITES_PER_PREEMPTION}: {verdict(per_preemption <= TARGET_WRITES_PER_PREEMPTION)}); "
          f"{result['writes_per_preemptor']:.2f} per preemptor; {result['wave_events']} Event writes")
    print(f"    {result['preemption_breakdown']}")
    again = result["writes_per_readmission"]
    print(f"again: the wave completes; {result['readmitted']} victims admitted again, all running after "
          f"{result['again_seconds']:.2f}s")
    print(f"  {again:.2f} writes per re-admission, status and Events included "
          f"(target <= {TARGET_WRITES_PER_ADMISSION}: {verdict(again <= TARGET_WRITES_PER_ADMISSION)})")
    print(f"    {result['readmission_breakdown']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
