"""``preemptd run``: the daemon's asyncio loop.

Design note. The process is a handful of named tasks — one informer per
watched resource, the Event writer, and the ``scheduler`` — and one rule:
**cycles never overlap**. The scheduler task runs a cycle, awaits it to the
end (commits included), then waits for the next reason to run one:

* a relevant watch event (the backend's ``wake``), debounced: after the first
  event the loop waits ``debounce`` more so that a burst (a thousand Jobs
  created at once) is one cycle, not a thousand;
* a refused write (409): the decision was made on stale state and is made
  again at once, without waiting;
* otherwise ``cycle_interval``, so time-based rules (min-runtime) move on even
  in a quiet cluster.

SIGTERM and SIGINT set ``stop``: the cycle under way finishes (each of its
requests is bounded by a timeout), no new one starts, the informers are
cancelled, the client is closed, and :func:`run_daemon` returns 0. Issue 9 adds
leader election, health and metrics around the same tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable
from typing import Protocol

from .config import Config
from .plugins import Plugins

__all__ = ["Cycler", "Scheduler", "run_daemon"]

log = logging.getLogger("preemptd.loop")


class Cycler(Protocol):
    """What the loop drives: the Kubernetes backend, or a test's stand-in."""

    @property
    def wake(self) -> asyncio.Event: ...

    @property
    def resync(self) -> bool: ...

    async def cycle(self) -> object: ...


class Scheduler:
    """Runs cycles of one backend until ``stop`` is set (see the module docstring)."""

    def __init__(self, backend: Cycler, *, interval: float, debounce: float = 0.05) -> None:
        self.backend = backend
        self.interval = interval
        self.debounce = debounce
        self.cycles = 0
        self.failures = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.backend.cycle()
                self.cycles += 1
            except Exception:  # a bug in one cycle must not end the daemon; the next one retries
                self.failures += 1
                log.exception("cycle failed")
            if self.backend.resync:
                continue
            woken = await _first(self.backend.wake.wait(), stop.wait(), timeout=self.interval)
            if woken and not stop.is_set() and self.debounce > 0:
                await _first(stop.wait(), timeout=self.debounce)


async def _first(*waits: Awaitable[object], timeout: float | None) -> bool:
    """Wait until one of ``waits`` is done or ``timeout`` passes; True when one was done."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return bool(done)


async def run_daemon(
    config: Config,
    plugins: Plugins,
    *,
    dry_run: bool = False,
    kubeconfig: str | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Connect, sync the caches, and schedule until SIGTERM/SIGINT (or ``stop``); returns 0."""
    from .backends.kubernetes.backend import KubernetesBackend
    from .backends.kubernetes.client import Kube, load_configuration

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
            loop.add_signal_handler(signum, stop.set)
            handled.append(signum)
    kube = Kube.from_configuration(await load_configuration(kubeconfig=kubeconfig))
    backend = KubernetesBackend(kube, config=config, plugins=plugins, dry_run=dry_run)
    scheduler = Scheduler(backend, interval=config.scheduler.cycle_interval / 1000)
    try:
        started = asyncio.create_task(backend.start(), name="informers-sync")
        if not await _first(started, stop.wait(), timeout=None) or stop.is_set():
            return 0
        await started
        log.info("caches synced; scheduling%s", " (dry run: nothing is written)" if dry_run else "")
        task = asyncio.create_task(scheduler.run(stop), name="scheduler")
        await task
        log.info("stopping after %d cycles", scheduler.cycles)
        return 0
    finally:
        await backend.stop()
        await kube.close()
        for signum in handled:
            loop.remove_signal_handler(signum)
