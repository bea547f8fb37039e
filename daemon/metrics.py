"""What ``/metrics`` exports (Prometheus text format, prometheus-client).

Each daemon has its own :class:`~prometheus_client.CollectorRegistry`, so two
daemons in one test process do not share counters. Every name starts with
``preemptd_``; label values are bounded by what the cluster holds (queue,
plugin, action names), never by workload names.

The plugin counters are fed from each session's framework ``Registry``: a
session builds a fresh one, so its ``failures`` and ``vetoes`` are the
increments of that cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from preemptd.framework.decisions import QueueShare
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_SESSION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STATES = ("admitted", "pending", "evicted")


class Metrics:
    """The daemon's instruments, one registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.session_seconds = Histogram(
            "preemptd_session_duration_seconds",
            "Seconds per session phase: each action by name, and 'session' for open to close.",
            ["action"], buckets=_SESSION_BUCKETS, registry=r,
        )
        self.cycle_seconds = Histogram(
            "preemptd_cycle_duration_seconds",
            "Seconds per cycle: snapshot, session and commit.",
            buckets=_SESSION_BUCKETS, registry=r,
        )
        self.cycles = Counter(
            "preemptd_cycles", "Cycles by outcome: ok, failed (an error), abandoned (deadline, lost lease, shutdown).",
            ["outcome"], registry=r,
        )
        self.sessions_discarded = Counter(
            "preemptd_sessions_discarded",
            "Sessions that ended after their cycle was abandoned; their decisions were not committed.",
            registry=r,
        )
        self.owner_retries = Counter(
            "preemptd_owner_sync_retries",
            "Owner syncs (Job, Deployment) that did not bring the owner in line with its Workload "
            "and were scheduled again after a backoff.",
            registry=r,
        )
        self.workloads = Gauge(
            "preemptd_workloads", "Workloads per queue and state (admitted, pending, evicted) at the last cycle.",
            ["queue", "state"], registry=r,
        )
        self.weighted_share = Gauge(
            "preemptd_queue_weighted_share",
            "Each queue's weighted share at the last cycle, as status.fairSharing.weightedShare "
            "(only while the fair-sharing plugin is enabled).",
            ["queue"], registry=r,
        )
        self.admissions = Counter("preemptd_admissions", "Workloads admitted by a session.", ["queue"], registry=r)
        self.preemptions = Counter(
            "preemptd_preemptions", "Victims chosen by a session, by reason.", ["reason"], registry=r,
        )
        self.plugin_errors = Counter(
            "preemptd_plugin_errors", "Hook calls that raised, by plugin.", ["plugin"], registry=r,
        )
        self.plugin_vetoes = Counter(
            "preemptd_plugin_vetoes", "Victims a plugin refused (is_preemptible, scenario filters).", ["plugin"],
            registry=r,
        )
        self.write_seconds = Histogram(
            "preemptd_api_write_duration_seconds", "Seconds per write to the API server.",
            ["verb", "resource"], buckets=_WRITE_BUCKETS, registry=r,
        )
        self.write_errors = Counter(
            "preemptd_api_write_errors", "Writes the API server refused or never answered (code 0).",
            ["verb", "resource", "code"], registry=r,
        )
        self.leader = Gauge("preemptd_leader", "1 while this replica leads (commits), else 0.", registry=r)
        self.leader_transitions = Counter(
            "preemptd_leader_transitions", "Times this replica became leader or stepped down.", ["to"], registry=r,
        )
        self.stale = Gauge(
            "preemptd_cache_stale", "1 while a watch has been down too long: sessions run without preemption.",
            registry=r,
        )
        self.ready = Gauge("preemptd_ready", "1 once the caches are synced.", registry=r)
        self.reloads = Counter(
            "preemptd_config_reloads", "SIGHUP reloads by result: applied or rejected.", ["result"], registry=r,
        )
        self.dry_run = Gauge("preemptd_dry_run", "1 when decisions are only logged, never written.", registry=r)

    # -- feeds ------------------------------------------------------------------------------

    def observe_write(self, verb: str, resource: str, seconds: float, status: int | None) -> None:
        self.write_seconds.labels(verb, resource).observe(seconds)
        if status is not None:
            self.write_errors.labels(verb, resource, str(status)).inc()

    def observe_session(self, timings: Mapping[str, float], actions: Iterable[str]) -> None:
        for action in (*actions, "session"):
            if action in timings:
                self.session_seconds.labels(action).observe(timings[action])

    def observe_queues(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the per-queue gauges (a deleted queue's series goes away)."""
        self.workloads.clear()
        for queue, states in counts.items():
            for state in STATES:
                self.workloads.labels(queue, state).set(states.get(state, 0))

    def observe_shares(self, shares: Iterable[QueueShare] | None) -> None:
        """Replace the share gauges with the last session's (none without fair sharing)."""
        self.weighted_share.clear()
        for share in shares or ():
            self.weighted_share.labels(share.queue).set(share.weighted_share)

    def observe_plugins(self, failures: Mapping[str, int], vetoes: Mapping[str, int]) -> None:
        for plugin, count in failures.items():
            if count:
                self.plugin_errors.labels(plugin).inc(count)
        for plugin, count in vetoes.items():
            if count:
                self.plugin_vetoes.labels(plugin).inc(count)

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.leader_transitions.labels("leader" if leading else "follower").inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
