"""The Kubernetes backend's throughput, against the in-process test API server.

    python -m benchmarks.bench_kube                 # 1,000 Jobs in 10 queues, a wave of 100
    python -m benchmarks.bench_kube --jobs 2000 --wave 200

Two figures, each printed with what it counts:

1. **Burst.** ``--jobs`` suspended Jobs labelled for 10 queues (enough quota for
   all) appear at once; the daemon's loop (watch → debounced cycles → commits)
   runs until every Job is unsuspended. Printed: Jobs admitted per second (target
   ≥ 100/s), cycles, API writes per decision (Workload create, Workload status,
   Job patch; Events counted apart), conflicts.
2. **Wave.** With every queue full, ``--wave`` high-priority Jobs arrive at once,
   each needing one low-priority Job's room. Printed: how many sessions chose
   victims (the goal: one session chooses all the victims the wave needs), the
   victims chosen, and the time until every preemptor runs.

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
TARGET_JOBS_PER_SECOND = 100.0


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


async def _wait(server: ApiServer, names: list[str], timeout: float) -> float:
    started = time.perf_counter()
    while _running(server, names) < len(names):
        if time.perf_counter() - started > timeout:
            raise TimeoutError(f"{_running(server, names)} of {len(names)} Jobs running after {timeout}s")
        await asyncio.sleep(0.01)
    return time.perf_counter() - started


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
        try:
            await _wait(server, [], 1)
            writes_before, events_before = kube.writes, backend.events.written
            recording.reports.clear()
            names = [f"low-{i:05d}" for i in range(per_queue * QUEUES)]
            for i, name in enumerate(names):  # the burst: all at once, as a controller would create them
                server.put("batch", "jobs", job(name, f"q{i % QUEUES}", {"cpu": "1"}, namespace="bench",
                                                priority_class_name="low"))
            burst = await _wait(server, names, 120)
            await backend.events.flush()
            admitted = sum(len(r.decisions.admitted) for r in recording.reports)
            events = backend.events.written - events_before
            writes = kube.writes - writes_before - events
            result: dict[str, Any] = {
                "jobs": len(names),
                "seconds": burst,
                "jobs_per_second": len(names) / burst,
                "cycles": len(recording.reports),
                "admitted": admitted,
                "writes_per_decision": writes / max(admitted, 1),
                "events": events,
                "conflicts": backend.writer.conflicts,
            }

            recording.reports.clear()
            high = [f"high-{i:05d}" for i in range(wave)]
            for i, name in enumerate(high):
                server.put("batch", "jobs", job(name, f"q{i % QUEUES}", {"cpu": "1"}, namespace="bench",
                                                priority_class_name="high"))
            wave_seconds = await _wait(server, high, 120)
            preempting = [r for r in recording.reports if r.decisions.preempted]
            result |= {
                "wave": wave,
                "wave_seconds": wave_seconds,
                "sessions_choosing_victims": len(preempting),
                "victims_first_session": len(preempting[0].decisions.preempted) if preempting else 0,
                "preemptors_first_session": sum(
                    1 for p in preempting[0].decisions.pending if p.reason == "PendingPreemption"
                ) if preempting else 0,
                "victims_total": sum(len(r.decisions.preempted) for r in preempting),
            }
            return result
        finally:
            stop.set()
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
    verdict = "ok" if result["jobs_per_second"] >= TARGET_JOBS_PER_SECOND else "BELOW TARGET"
    print(f"burst: {result['jobs']} suspended Jobs in {QUEUES} queues admitted in {result['seconds']:.2f}s")
    print(f"  {result['jobs_per_second']:.0f} Jobs/s (target >= {TARGET_JOBS_PER_SECOND:.0f}/s: {verdict})")
    print(f"  {result['cycles']} cycles, {result['admitted']} admissions, "
          f"{result['writes_per_decision']:.2f} API writes per decision "
          f"(+{result['events']} Events), {result['conflicts']} conflicts")
    print(f"wave: {result['wave']} high-priority Jobs into full queues, all running after {result['wave_seconds']:.2f}s")
    print(f"  sessions that chose victims: {result['sessions_choosing_victims']} "
          f"(the first chose {result['victims_first_session']} victims for the "
          f"{result['preemptors_first_session']} preemptors it saw; {result['victims_total']} victims in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
