"""Memory over a long soak: what the daemon's own code keeps per idle cycle and per churn cycle.

The Kubernetes backend and the scheduling loop run against the in-process API server, as in
``bench_kube``. Two phases, each after a warm-up: **idle** (nothing changes; every cycle is
a session over the same cluster) and **churn** (before each cycle a finished Job and its
Workload are deleted and a new Job is created, so Workloads, pods' index entries, owner
syncs and Events come and go). tracemalloc compares the memory allocated by preemptd's own
modules (``daemon/``, ``framework/``, ``plugins/``; the test server's own history and
request log are left out) at the start and the end of each phase, and prints the growth
per cycle with the lines that grew most.

    python -m benchmarks.soak_memory --cycles 3000
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import tracemalloc
from pathlib import Path

from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import BackendConfig, Config
from preemptd.daemon.loop import Scheduler
from preemptd.daemon.plugins import resolve_plugins

from tests.kube.apiserver import ApiServer
from tests.kube.cluster import flavor, install_crds, job, queue

ROOT = Path(__file__).resolve().parent.parent
OWN = [tracemalloc.Filter(True, str(ROOT / part / "*")) for part in ("daemon", "framework", "plugins")]


def _rss_kb() -> int:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def _cycles(scheduler: Scheduler, count: int, before: object = None) -> None:
    target = scheduler.cycles + count
    while scheduler.cycles < target:
        if callable(before):
            before()
        scheduler.backend.wake.set()
        done = scheduler.cycles
        while scheduler.cycles == done:
            await asyncio.sleep(0.001)


def _phase(name: str, first: tracemalloc.Snapshot, last: tracemalloc.Snapshot, cycles: int, rss: int) -> None:
    stats = last.filter_traces(OWN).compare_to(first.filter_traces(OWN), "lineno")
    grown = sum(s.size_diff for s in stats)
    print(f"{name}: {cycles} cycles, preemptd's own memory {grown / 1024:+.1f} KiB "
          f"({grown / cycles:+.1f} B per cycle); process RSS {rss:+d} KiB ({rss * 1024 / cycles:+.1f} B per cycle)")
    for stat in stats[:8]:
        if stat.size_diff:
            frame = stat.traceback[0]
            print(f"  {stat.size_diff / 1024:+8.1f} KiB {stat.count_diff:+6d} blocks  "
                  f"{Path(frame.filename).relative_to(ROOT)}:{frame.lineno}")


async def run(cycles: int, warmup: int, phases: list[str], remembered: int | None) -> None:
    async with ApiServer(history=2_000, bookmark_interval=0.5) as server:
        install_crds(server)
        server.put("preemptd.io", "resourceflavors", flavor("default"))
        server.put("preemptd.io", "queues", queue("team-a", {"cpu": "40"}))
        for number in range(30):
            server.put("batch", "jobs", job(f"job-{number:05d}", "team-a", {"cpu": "1"}))
        config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
        plugins, _ = resolve_plugins(config)
        kube = Kube.from_configuration(Configuration(host=server.url))
        backend = KubernetesBackend(kube, config=config, plugins=plugins, settle_owners=False)
        await backend.start(timeout=10)
        if remembered is not None:
            backend.events.remembered = remembered  # the Event de-duplication's bound, reached sooner
        scheduler = Scheduler(backend, interval=60.0, debounce=0.0)
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop), name="scheduler")
        serial = [30]

        def churn() -> None:
            server.requests.clear()
            oldest = min(j["metadata"]["name"] for j in server.list("batch", "jobs"))
            server.remove("batch", "jobs", oldest, "default")
            if server.get("preemptd.io", "workloads", f"job-{oldest}", "default") is not None:
                server.remove("preemptd.io", "workloads", f"job-{oldest}", "default")
            server.put("batch", "jobs", job(f"job-{serial[0]:05d}", "team-a", {"cpu": "1"}))
            serial[0] += 1

        try:
            tracemalloc.start(1)
            for name, before in (("idle", server.requests.clear), ("churn", churn)):
                if name not in phases:
                    continue
                await _cycles(scheduler, warmup, before)
                await backend.events.flush()
                first, rss = tracemalloc.take_snapshot(), _rss_kb()
                await _cycles(scheduler, cycles, before)
                await backend.events.flush()
                _phase(name, first, tracemalloc.take_snapshot(), cycles, _rss_kb() - rss)
        finally:
            stop.set()
            await task
            await backend.stop()
            await kube.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--phases", nargs="+", choices=("idle", "churn"), default=["idle", "churn"])
    parser.add_argument("--remember", type=int, default=None,
                        help="bound the Event de-duplication to this many keys (default: its own, 10,000)")
    args = parser.parse_args(argv)
    asyncio.run(run(args.cycles, args.warmup, args.phases, args.remember))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
