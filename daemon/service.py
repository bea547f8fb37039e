"""``preemptd run``: the daemon process — its tasks, signals and reloads.

Design note. A :class:`Daemon` is a handful of named tasks around one
:class:`~preemptd.daemon.backends.kubernetes.KubernetesBackend`:

==================  ====================================================================
``informer:*``      list+watch caches (the backend's), from start to exit
``events``          the Event writer (the backend's)
``leader-election`` the Lease campaign (:mod:`.backends.kubernetes.lease`); absent when election is off
``scheduler``       cycles (:mod:`.loop`); it cycles only while this replica leads
``watchdog``        feeds systemd's watchdog from the scheduler's heartbeat
==================  ====================================================================

plus the HTTP server's, and with ``[webhook] enabled`` the admission webhook's
(:mod:`.webhook`; every replica serves it, from before the caches sync). Start: HTTP up (``/healthz`` answers at once,
``/readyz`` says "syncing"), caches synced, ``READY=1``, then the campaign and
the scheduler. A replica that stands by keeps its caches warm and takes over
within a lease duration.

Signals. SIGTERM and SIGINT set ``stop``: ``STOPPING=1``; the scheduler lets
the cycle under way finish (new decisions are no longer begun) or abandons it
after ``shutdown_timeout``; *then* the campaign ends and the Lease is released
— the leader keeps renewing while its last commit drains, and no replica takes
over before it is done; the caches, the HTTP server and the client close;
exit 0. SIGHUP re-reads the configuration file: it is checked in full first,
and a configuration with any problem is refused (each problem logged, the
old one kept running). What a reload changes takes effect at the next cycle:
a cycle under way keeps the plugins and actions it started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from preemptd.framework.decisions import Decisions
from preemptd.framework.snapshot import Snapshot

from .backends.kubernetes.backend import CycleReport, KubernetesBackend
from .backends.kubernetes.client import Kube, load_configuration
from .backends.kubernetes.integrations.registry import resolve_integrations
from .backends.kubernetes.lease import Elector, identity
from .backends.kubernetes.shadow import KueueShadow
from .clock import Clock, SystemClock, first_of
from .config import Config, ConfigProblem, read_config
from .http import HttpServer
from .logging import set_level
from .loop import AlwaysLeader, CycleOutcome, Leadership, Scheduler
from .metrics import Metrics
from .notify import Notifier, feed_watchdog
from .pending import pending_view
from .plugins import Plugins, resolve_plugins
from .webhook import WebhookServer, pod_groups, suspend_fields
from .webhook_certs import CertificateKeeper

__all__ = ["Daemon", "check_configuration", "run_daemon"]

log = logging.getLogger("preemptd.daemon")

# Keys a reload cannot change in a running process: they are read once, at start.
_RESTART_ONLY = (
    ("backend", "kind"),
    ("daemon", "http_address"),
    ("daemon", "metrics_cert_file"),
    ("daemon", "metrics_key_file"),
    ("daemon", "metrics_token_file"),
    ("leader_election", "enabled"),
    ("leader_election", "lease_namespace"),
    ("leader_election", "lease_name"),
    ("leader_election", "lease_duration"),
    ("leader_election", "renew_deadline"),
    ("leader_election", "retry_period"),
    ("webhook", "enabled"),
    ("webhook", "address"),
    ("webhook", "cert_file"),
    ("webhook", "key_file"),
    ("webhook", "reload_interval"),
    ("webhook", "certificate"),
    ("webhook", "service"),
    ("webhook", "namespace"),
    ("webhook", "secret"),
    ("webhook", "configuration"),
)


def check_configuration(path: str | Path | None) -> tuple[Config, Plugins, list[ConfigProblem]]:
    """Read the configuration and load its plugins; every problem, sorted (none raised)."""
    config, problems = read_config(path)
    plugins, more = resolve_plugins(config)
    problems = problems + more + resolve_integrations(config)[1]
    if not problems and ("backend", "kind") not in config.lines:
        # Not written: the daemon is what watches a cluster, so it uses the kubernetes
        # backend (the built-in default names the simulation, for the other commands).
        config = dataclasses.replace(config, backend=dataclasses.replace(config.backend, kind="kubernetes"))
    if not problems and config.backend.kind != "kubernetes":
        message = f'`preemptd run` needs kind = "kubernetes"; this configuration has {config.backend.kind!r}'
        problems.append(config.problem(("backend", "kind"), message))
    return config, plugins, sorted(problems, key=ConfigProblem.sort_key)


class Daemon:
    """One ``preemptd run`` process (see the module docstring)."""

    def __init__(
        self,
        kube: Kube,
        config: Config,
        plugins: Plugins,
        *,
        config_path: str | Path | None = None,
        dry_run: bool = False,
        http_address: str | None = None,
        log_level: str | None = None,
        clock: Clock | None = None,
        notifier: Notifier | None = None,
        holder_identity: str | None = None,
        stop: asyncio.Event | None = None,
        shadow: str | None = None,
        shadow_grace: float = 0.0,
    ) -> None:
        dry_run = dry_run or shadow is not None  # a shadow never writes (backends.kubernetes.shadow)
        self.kube = kube
        self.config = config
        self.config_path = config_path
        self.dry_run = dry_run
        self.log_level = log_level  # from the command line: wins over the file, also after a reload
        self.clock: Clock = clock or SystemClock()
        self.notifier = notifier or Notifier()
        self.stop = stop or asyncio.Event()
        self.metrics = Metrics()
        self.metrics.dry_run.set(1 if dry_run else 0)
        kube.observer = self.metrics.observe_write
        election = config.leader_election
        self.elector: Elector | None = None
        self.leadership: Leadership
        if election.enabled and not dry_run:
            self.elector = Elector(
                kube,
                namespace=election.lease_namespace,
                name=election.lease_name,
                identity=holder_identity or identity(),
                lease_duration=election.lease_duration / 1000,
                renew_deadline=election.renew_deadline / 1000,
                retry_period=election.retry_period / 1000,
                clock=self.clock,
                on_change=self._leadership_changed,
            )
            self.leadership = self.elector
        else:
            # A dry run never campaigns: holding the Lease would keep the real leader out.
            self.leadership = AlwaysLeader()
        # Leader means "commits": a lone replica without election does, a dry run never.
        self.metrics.leader.set(1 if self.elector is None and not dry_run else 0)
        self._counted: set[tuple[str, str, str]] = set()  # a dry run's decisions of the last cycle
        self.backend: KubernetesBackend | KueueShadow
        if shadow is not None:
            self.backend = KueueShadow(kube, config=config, plugins=plugins, registry=self.metrics.registry,
                                       grace=shadow_grace)
        else:
            self.backend = KubernetesBackend(
                kube, config=config, plugins=plugins, dry_run=dry_run, gate=lambda: self.leadership.leading,
                settle_owners=config.daemon.owner_settle / 1000,
            )
        self.backend.on_discard = self.metrics.sessions_discarded.inc
        self.backend.owners.on_retry = self.metrics.owner_retries.inc
        daemon = config.daemon
        self.scheduler = Scheduler(
            self.backend,
            interval=config.scheduler.cycle_interval / 1000,
            actions=config.scheduler.actions,
            deadline=daemon.cycle_deadline / 1000,
            stale_after=daemon.stale_after / 1000,
            shutdown_timeout=daemon.shutdown_timeout / 1000,
            clock=self.clock,
            leadership=self.leadership,
            on_cycle=self._observe_cycle,
            on_stale=lambda stale: self.metrics.stale.set(1 if stale else 0),
        )
        self._last_cycle: CycleReport | None = None  # the waiting workloads of /pending
        self.http = HttpServer(
            http_address or daemon.http_address, live=self.live, ready=self.ready, metrics=self.metrics.exposition,
            pending=self.pending,
            cert_file=daemon.metrics_cert_file, key_file=daemon.metrics_key_file, token_file=daemon.metrics_token_file,
            divergence=self.backend.divergences.to_json if isinstance(self.backend, KueueShadow) else None,
        )
        # The admission webhook (daemon/webhook.py), when enabled: every replica serves it,
        # for the kinds of the enabled integrations.
        self.webhook: WebhookServer | None = None
        if config.webhook.enabled:
            hook = config.webhook
            keeper = None
            if hook.certificate == "self-managed":
                keeper = CertificateKeeper(
                    kube, namespace=hook.namespace, secret=hook.secret, configuration=hook.configuration,
                    service=hook.service, cert_file=hook.cert_file, key_file=hook.key_file,
                    leading=lambda: self.leadership.leading, dry_run=dry_run,
                )
            if isinstance(self.backend, KubernetesBackend):
                enabled = list(self.backend.integrations.values())
            else:
                enabled = list(resolve_integrations(config)[0].by_kind().values())
            self.webhook = WebhookServer(
                hook, suspend_fields=suspend_fields(enabled), pod_groups=pod_groups(enabled), keeper=keeper,
                on_review=self.metrics.count_webhook_review,
            )
        self.synced = False
        self.exit_code = 0

    # -- probes -----------------------------------------------------------------------------

    def live(self) -> tuple[bool, str]:
        heartbeat = self.scheduler.heartbeat
        if not heartbeat.fresh():
            return False, f"the scheduling loop made no progress for {heartbeat.age:.0f}s"
        # An abandoned session that never ends holds back every later one: the loop beats,
        # but nothing is decided. Past the heartbeat's window, a restart is the way out.
        age = self.backend.session_age()
        if age > heartbeat.window:
            return False, f"a session has been running for {age:.0f}s (abandoned at its deadline)"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self.synced:
            return False, "caches are syncing"
        if self.stop.is_set():
            return False, "stopping"
        if self.elector is None:
            return True, "ok (dry run)" if self.dry_run else "ok"
        if self.elector.leading:
            return True, "ok: leading"
        if self.elector.in_contact():
            return True, f"ok: standing by (leader: {self.elector.holder or 'none'})"
        return False, "no answer from the API server about the lease"

    def pending(self, queue: str | None) -> dict[str, Any] | None:
        """``/pending`` and ``/pending/<queue>``: the last cycle's waiting workloads."""
        last = self._last_cycle
        if last is None:
            return None
        if queue is not None and queue not in last.queues:
            raise LookupError(queue)
        return pending_view(last.decisions, queue)

    # -- feeds ------------------------------------------------------------------------------

    def _leadership_changed(self, leading: bool) -> None:
        self.metrics.set_leader(leading)
        if leading:
            self.backend.wake.set()  # decide at once: the caches are warm
        self.notifier.status(self._status())

    def _status(self) -> str:
        if self.stop.is_set():
            return "stopping"
        if self.elector is None:
            return "scheduling (dry run: nothing is written)" if self.dry_run else "scheduling"
        if self.elector.leading:
            return f"leading as {self.elector.identity}"
        return f"standing by (leader: {self.elector.holder or 'none'})"

    def _observe_cycle(self, outcome: CycleOutcome) -> None:
        metrics = self.metrics
        metrics.cycles.labels(outcome.outcome).inc()
        metrics.cycle_seconds.observe(outcome.seconds)
        report = outcome.report
        if not isinstance(report, CycleReport):
            return
        self._last_cycle = report
        metrics.observe_session(report.timings, report.actions)
        metrics.observe_queues(report.queues)
        metrics.observe_shares(report.decisions.shares)
        metrics.observe_plugins(report.plugin_failures, report.plugin_vetoes)
        snapshot = report.snapshot
        if snapshot is not None:
            metrics.observe_quota(snapshot.tree, snapshot.accounting)
            metrics.observe_pending(report.decisions, _queue_of(snapshot))
        if self.dry_run:
            # Nothing is written, so every cycle decides the same again: count a decision
            # when it first appears (and again only after it went away), as it is logged.
            self._counted = _count_decisions(metrics, report.decisions, self._counted, snapshot)
        else:
            _count_decisions(metrics, report.decisions, snapshot=snapshot)

    # -- reload -----------------------------------------------------------------------------

    def reload(self) -> bool:
        """Re-read the configuration file (SIGHUP); True when the new one was applied."""
        if self.config_path is None:
            log.warning("reload: started without --config; nothing to re-read")
            return False
        self.notifier.reloading()
        try:
            config, plugins, problems = check_configuration(self.config_path)
        except Exception as exc:  # a plugin's import gone wrong in a way resolve_plugins did not catch
            config, plugins = self.config, self.backend.plugins
            problems = [self.config.problem((), f"cannot load: {type(exc).__name__}: {exc}")]
        if problems:
            for problem in problems:
                log.error("reload refused, the previous configuration stays: %s", problem)
            self.metrics.reloads.labels("rejected").inc()
            self.notifier.ready(f"reload refused ({len(problems)} problem(s)); {self._status()}")
            return False
        for table, key in _RESTART_ONLY:
            old = getattr(getattr(self.config, table), key)
            new = getattr(getattr(config, table), key)
            if old != new:
                log.warning("reload: %s.%s changed; it takes effect at the next restart", table, key)
        # The restart-only keys keep their running values, so what the process reports is what it does.
        config = dataclasses.replace(
            config,
            backend=self.config.backend,
            leader_election=self.config.leader_election,
            webhook=self.config.webhook,
            daemon=dataclasses.replace(
                config.daemon,
                **{key: getattr(self.config.daemon, key) for table, key in _RESTART_ONLY if table == "daemon"},
            ),
        )
        self.config = config
        self.backend.config = config
        self.backend.plugins = plugins
        self.backend.settle_owners = config.daemon.owner_settle / 1000
        daemon = config.daemon
        self.scheduler.reconfigure(
            interval=config.scheduler.cycle_interval / 1000,
            actions=config.scheduler.actions,
            deadline=daemon.cycle_deadline / 1000,
            stale_after=daemon.stale_after / 1000,
            shutdown_timeout=daemon.shutdown_timeout / 1000,
        )
        set_level(self.log_level or daemon.log_level)
        self.metrics.reloads.labels("applied").inc()
        log.info("configuration reloaded from %s", self.config_path)
        self.notifier.ready(self._status())
        return True

    # -- the process ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        handled = []
        actions = {signal.SIGTERM: self.stop.set, signal.SIGINT: self.stop.set, signal.SIGHUP: self.reload}
        for signum, action in actions.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not the main thread
                loop.add_signal_handler(signum, action)
                handled.append(signum)
        try:
            yield
        finally:
            for signum in handled:
                loop.remove_signal_handler(signum)

    async def run(self) -> int:
        """Start, schedule until ``stop`` (SIGTERM), shut down cleanly; the exit code (0)."""
        with self._signals():
            await self.http.start()
            tasks: list[asyncio.Task[None]] = []
            try:
                if self.webhook is not None:
                    await self.webhook.start()
                if not await self._sync():
                    return 0
                if self.elector is not None:
                    tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
                scheduler = asyncio.create_task(self.scheduler.run(self.stop), name="scheduler")
                tasks.append(scheduler)
                tasks.append(asyncio.create_task(
                    feed_watchdog(self.notifier, clock=self.clock, progressing=self.scheduler.heartbeat.fresh),
                    name="watchdog",
                ))
                await first_of(self.clock, {"stop": self.stop.wait(), "scheduler": scheduler})
                self.notifier.stopping("stopping: finishing the cycle under way")
                log.info("stopping")
                stopping = self.clock.now()
                try:
                    await scheduler  # drains or abandons the cycle under way (loop.py)
                except Exception:
                    log.exception("the scheduler failed")
                    self.exit_code = 1
                await self._finish_owners(stopping)
                await self._step_down(tasks)
                log.info("stopped after %d cycles", self.scheduler.cycles)
                return self.exit_code
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await self.backend.stop()
                if self.webhook is not None:
                    await self.webhook.stop()
                await self.http.stop()
                self.notifier.close()

    async def _sync(self) -> bool:
        """Start the caches; True once synced, False if stopped first."""
        self.notifier.status("syncing caches")
        started = asyncio.create_task(self.backend.start(), name="informers-sync")
        try:
            if await first_of(self.clock, {"synced": started, "stop": self.stop.wait()}) != "synced":
                self.notifier.stopping("stopped before the caches were synced")
                return False
        finally:
            if not started.done():
                started.cancel()
                await asyncio.gather(started, return_exceptions=True)
        started.result()
        self.synced = True
        self.metrics.ready.set(1)
        log.info("caches synced%s", "; dry run: nothing is written" if self.dry_run else "")
        self.notifier.ready(self._status())
        return True

    async def _finish_owners(self, stopping: float) -> None:
        """Let the owners of the decisions written so far be driven to them, within what is
        left of ``shutdown_timeout``; what is not done by then the next leader finishes."""
        if self.elector is not None and not self.elector.leading:
            return
        left = stopping + self.config.daemon.shutdown_timeout / 1000 - self.clock.now()
        waited = await first_of(self.clock, {"idle": self.backend.owners.idle()}, timeout=max(0.0, left))
        if waited != "idle":
            log.warning("stopping with owners not yet in line with their Workloads; the next leader finishes them")

    async def _step_down(self, tasks: list[asyncio.Task[None]]) -> None:
        if self.elector is None:
            return
        campaign = next((t for t in tasks if t.get_name() == "leader-election"), None)
        if campaign is not None:
            campaign.cancel()
            await asyncio.gather(campaign, return_exceptions=True)
        await self.elector.release(timeout=min(5.0, self.elector.lease_duration))


def _count_decisions(
    metrics: Metrics,
    decisions: Decisions,
    previous: set[tuple[str, str, str]] | None = None,
    snapshot: Snapshot | None = None,
) -> set[tuple[str, str, str]]:
    """Count the admissions, growths and preemptions decided, leaving out those in
    ``previous`` (the last cycle's, for a dry run); returns this cycle's. ``snapshot``
    gives the admission waits, the pods a growth adds and the preemptors' queues."""
    current: set[tuple[str, str, str]] = set()
    workloads = snapshot.workloads if snapshot is not None else {}
    for admitted in decisions.admitted:
        if admitted.grown:
            # Running and grown in place: a growth, not an admission (no wait either).
            identity = ("grow", admitted.workload, admitted.queue)
            current.add(identity)
            if previous is None or identity not in previous:
                metrics.growths.labels(admitted.queue).inc()
                workload = workloads.get(admitted.workload)
                if workload is not None and workload.admission is not None:
                    before = sum(ps.count for ps in workload.admission.pod_sets)
                    after = sum(ps.count for ps in admitted.pod_sets)
                    metrics.grown_pods.labels(admitted.queue).inc(max(0, after - before))
            continue
        identity = ("admit", admitted.workload, admitted.queue)
        current.add(identity)
        if previous is None or identity not in previous:
            metrics.admissions.labels(admitted.queue).inc()
            workload = workloads.get(admitted.workload)
            if workload is not None and workload.admission is None:
                metrics.observe_admission(admitted.queue, workload.created, decisions.now)
    for preempted in decisions.preempted:
        identity = ("preempt", preempted.workload, preempted.preemptor)
        current.add(identity)
        if previous is None or identity not in previous:
            metrics.preemptions.labels(preempted.reason).inc()
            preemptor = workloads.get(preempted.preemptor)
            metrics.count_preemption(preemptor.queue if preemptor is not None else "", preempted.reason)
    return current


def _queue_of(snapshot: Snapshot) -> Callable[[str], str]:
    def queue(key: str) -> str:
        workload = snapshot.workloads.get(key)
        return workload.queue if workload is not None else ""

    return queue


async def run_daemon(
    config: Config,
    plugins: Plugins,
    *,
    dry_run: bool = False,
    kubeconfig: str | None = None,
    context: str | None = None,
    stop: asyncio.Event | None = None,
    config_path: str | Path | None = None,
    http_address: str | None = None,
    log_level: str | None = None,
    notifier: Notifier | None = None,
    shadow: str | None = None,
    shadow_grace: float = 0.0,
) -> int:
    """Connect to the cluster and run a :class:`Daemon` until SIGTERM/SIGINT (or ``stop``); 0."""
    kube = Kube.from_configuration(await load_configuration(kubeconfig=kubeconfig, context=context))
    try:
        daemon = Daemon(
            kube, config, plugins, config_path=config_path, dry_run=dry_run, http_address=http_address,
            log_level=log_level, notifier=notifier if notifier is not None else Notifier.from_environ(), stop=stop,
            shadow=shadow, shadow_grace=shadow_grace,
        )
        return await daemon.run()
    finally:
        await kube.close()
