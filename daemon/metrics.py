"""What ``/metrics`` exports (Prometheus text format, prometheus-client).

Each daemon has its own :class:`~prometheus_client.CollectorRegistry`, so two
daemons in one test process do not share counters. Every name starts with
``preemptd_``; label values are bounded by what the cluster holds (queue,
plugin, action names), never by workload names.

The plugin counters are fed from each session's framework ``Registry``: a
session builds a fresh one, so its ``failures`` and ``vetoes`` are the
increments of that cycle.

Where a figure means what one of Kueue's means, it has Kueue's name with
``preemptd_`` for ``kueue_`` and ``queue`` for ``cluster_queue`` (a preemptd
Queue is a node of the queue tree, leaf or parent): the admission wait
histogram, the nominal quota and resource usage gauges, pending workloads and
preempted workloads by preempting queue. Quota gauges are in the resource's
own unit (cores for cpu, bytes for memory, devices for GPUs), as Kueue's are.
*Borrowed* and *lent* have no Kueue gauge: borrowed is usage above the node's
subtree quota; lent is the node's idle lendable quota that its siblings use
(shared among the idle siblings in proportion to their idle quota, as the
simulation report attributes it), for every node below a root.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Mapping

from preemptd.framework import FR, Accounting, QuotaNode
from preemptd.framework.decisions import Decisions, QueueShare
from preemptd.framework.quantity import MILLI_RESOURCES
from preemptd.framework.quota import QuotaTree
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from preemptd import __version__

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

_SESSION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_WRITE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STATES = ("admitted", "pending", "evicted")
WAIT_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0)
"""Admission waits, seconds: from a second to a day."""
QUOTA_LABELS = ("queue", "cohort", "flavor", "resource")


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
        self.build_info = Gauge(
            "preemptd_build_info", "Always 1; the labels say which preemptd and which Python run.",
            ["version", "python"], registry=r,
        )
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self.admission_wait = Histogram(
            "preemptd_admission_wait_time_seconds",
            "Seconds from a workload's creationTimestamp to its admission, per queue.",
            ["queue"], buckets=WAIT_BUCKETS, registry=r,
        )
        self.nominal_quota = Gauge(
            "preemptd_queue_nominal_quota", "A queue's nominal quota per flavor and resource (cohort: its parent).",
            QUOTA_LABELS, registry=r,
        )
        self.resource_usage = Gauge(
            "preemptd_queue_resource_usage",
            "A queue's usage per flavor and resource at the last cycle (its subtree's, for a parent).",
            QUOTA_LABELS, registry=r,
        )
        self.borrowed = Gauge(
            "preemptd_queue_resource_borrowed",
            "A queue's usage above its subtree quota per flavor and resource at the last cycle.",
            QUOTA_LABELS, registry=r,
        )
        self.lent = Gauge(
            "preemptd_queue_resource_lent",
            "A queue's idle lendable quota that its siblings use, per flavor and resource, at the last cycle.",
            QUOTA_LABELS, registry=r,
        )
        self.pending = Gauge(
            "preemptd_pending_workloads", "Pending workloads per queue and pending reason at the last cycle.",
            ["queue", "reason"], registry=r,
        )
        self.preempted = Counter(
            "preemptd_preempted_workloads",
            "Victims chosen, per queue of the preemptor and reason (InQueue, InCohortReclamation, ...).",
            ["preempting_queue", "reason"], registry=r,
        )
        # Growth in place (docs/elastic.md) is not an admission: counted apart.
        self.growths = Counter(
            "preemptd_elastic_growths",
            "Running workloads grown in place (an elastic workload growing back, a Deployment's "
            "replicas raised), per queue; not counted in preemptd_admissions_total.",
            ["queue"], registry=r,
        )
        self.grown_pods = Counter(
            "preemptd_elastic_grown_pods", "Pods (replicas) those growths added, per queue.", ["queue"], registry=r,
        )

        self.webhook_reviews = Counter(
            "preemptd_webhook_reviews",
            "Admission reviews answered by the webhook, per object kind and outcome "
            "(patched, unchanged, allowed-malformed).",
            ["kind", "outcome"], registry=r,
        )

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

    def observe_admission(self, queue: str, created: int, now: int) -> None:
        """A workload admitted at ``now`` (epoch ms) that was created at ``created``."""
        self.admission_wait.labels(queue).observe(max(0, now - created) / 1000)

    def observe_pending(self, decisions: Decisions, queue_of: Callable[[str], str]) -> None:
        """Replace the pending gauges with the session's pending workloads by queue and reason."""
        counts: dict[tuple[str, str], int] = {}
        for pending in decisions.pending:
            key = (queue_of(pending.workload), pending.reason)
            counts[key] = counts.get(key, 0) + 1
        self.pending.clear()
        for (queue, reason), count in sorted(counts.items()):
            self.pending.labels(queue, reason).set(count)

    def observe_quota(self, tree: QuotaTree, accounting: Accounting) -> None:
        """Replace the quota gauges with every queue's figures on ``accounting``."""
        for gauge in (self.nominal_quota, self.resource_usage, self.borrowed, self.lent):
            gauge.clear()
        lent = _lent(tree, accounting)
        for name, node in sorted(tree.nodes.items()):
            cohort = node.parent.name if node.parent is not None else ""
            for fr in sorted(set(node.nominal) | set(node.subtree)):
                labels = (name, cohort, fr[0], fr[1])
                used = accounting.used(node, fr)
                self.nominal_quota.labels(*labels).set(_unit(fr, node.nominal.get(fr, 0)))
                self.resource_usage.labels(*labels).set(_unit(fr, used))
                if node.parent is not None:
                    self.borrowed.labels(*labels).set(_unit(fr, max(0, used - node.subtree.get(fr, 0))))
                    self.lent.labels(*labels).set(_unit(fr, lent.get((node.index, fr), 0.0)))

    def count_preemption(self, preempting_queue: str, reason: str) -> None:
        self.preempted.labels(preempting_queue, reason).inc()

    def observe_plugins(self, failures: Mapping[str, int], vetoes: Mapping[str, int]) -> None:
        for plugin, count in failures.items():
            if count:
                self.plugin_errors.labels(plugin).inc(count)
        for plugin, count in vetoes.items():
            if count:
                self.plugin_vetoes.labels(plugin).inc(count)

    def count_webhook_review(self, kind: str, outcome: str) -> None:
        self.webhook_reviews.labels(kind, outcome).inc()

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.leader_transitions.labels("leader" if leading else "follower").inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _unit(fr: FR, amount: float) -> float:
    """An amount in the resource's own unit: cores for a milli-unit resource."""
    return amount / 1000 if fr[1] in MILLI_RESOURCES else amount


def _lent(tree: QuotaTree, accounting: Accounting) -> dict[tuple[int, FR], float]:
    """Per (node index, fr): its share of what its siblings borrow, in proportion to its
    idle lendable quota (``min(lendable, subtree − usage)``)."""
    out: dict[tuple[int, FR], float] = {}
    for parent in tree.nodes.values():
        children = parent.children
        if len(children) < 2:
            continue
        frs = sorted({fr for child in children for fr in child.subtree})
        for fr in frs:
            idle: list[tuple[QuotaNode, int]] = []
            borrowed = 0
            for child in children:
                used = accounting.used(child, fr)
                quota = child.subtree.get(fr, 0)
                borrowed += max(0, used - quota)
                lendable = child.lending_limit.get(fr, quota)
                idle.append((child, min(lendable, max(0, quota - used))))
            total = sum(amount for _, amount in idle)
            if borrowed and total:
                ratio = min(1.0, borrowed / total)
                for child, amount in idle:
                    if amount:
                        out[(child.index, fr)] = amount * ratio
    return out
