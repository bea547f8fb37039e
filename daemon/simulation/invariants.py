"""What must hold after every simulated session, and the violations found.

* **Quota**: an admission may not push any queue of its path over what SEMANTICS §1
  allows — a root over its subtree quota, or a queue with a ``borrowingLimit`` over
  ``subtree + borrowingLimit`` on some flavor-resource. Only admissions add usage,
  so checking their paths covers the whole tree.
* **Min-runtime**: no whole victim is preempted before the min-runtime the
  ``min-runtime`` plugin resolves for the pair of queues — computed with the
  plugin's own resolution functions, configured defaults and method. Not checked
  when the plugin is disabled.
* **Preemptors**: a workload that sessions keep ``PendingPreemption`` is, in the first
  session after its victims are all gone, admitted — or it chooses victims again,
  which it may do at most ``MAX_CHOICES`` times in all (a min-runtime window that
  ended may let it take more, for its full count) — unless another workload took room
  in its queue tree after it chose (admitted, preempted for, or reserved quota as a
  preemptor without victims; anywhere in the cluster when nodes are simulated), which
  may rightly have taken the room. A session that leaves it pending for another reason
  while its victims are still leaving ends the wait (a lender back within its nominal
  offers nothing to reclaim).

A violation is recorded with its details, never raised, so one report shows them all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from preemptd.framework.decisions import Admitted, Decisions
from preemptd.framework.quantity import format_timestamp
from preemptd.framework.quota import QuotaNode
from preemptd.framework.session import Registry
from preemptd.plugins.min_runtime import resolve as min_runtime

from .cluster import ClusterModel

__all__ = ["LISTED", "Invariants"]

LISTED = 20
"""Violations listed in full per invariant; the count covers the rest."""
MAX_CHOICES = 3
"""Victim sets a preemptor may choose, each after the last one left, before it must be in."""
_NOT_RESERVING = frozenset({"NoFit", "WaitingForQuota", "PendingPreemption", "Inadmissible"})
"""Pending reasons of workloads that reserved no quota; every other reason is a
preemptor that found no victims."""


@dataclass(slots=True)
class _Wait:
    """A preemptor waiting for its victims to go."""

    victims: frozenset[str]
    since: int
    root: str
    excused: bool = False
    choices: int = 1  # victim sets chosen in this wait


class Invariants:
    def __init__(
        self,
        cluster: ClusterModel,
        registry: Registry,
        *,
        start: int,
        queue_of: Callable[[str], str | None],
        leaving: Callable[[str], bool],
        reason_of: Callable[[str], str],
    ) -> None:
        self.cluster = cluster
        self.start = start
        self.queue_of = queue_of  # a workload's queue (spec.queueName); None: not simulated
        self.leaving = leaving  # evicted (or, for "pod:ns/name", the pod) and not gone yet
        self.reason_of = reason_of  # the last pending reason a session gave it
        self.min_runtime: min_runtime.Config | None = None
        if min_runtime.NAME in registry.names:
            config = registry.configs.get(min_runtime.NAME)
            self.min_runtime = config if isinstance(config, min_runtime.Config) else min_runtime.Config()
        self.quota: list[dict[str, Any]] = []
        self.runtime: list[dict[str, Any]] = []
        self.stalls: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()
        self.waits: dict[str, _Wait] = {}
        self.ready: list[str] = []

    def windows(self) -> list[int]:
        """Every min-runtime length a session could apply: when one ends after an
        admission, a protected victim becomes preemptible and a session must run."""
        if self.min_runtime is None:
            return []
        found = {self.min_runtime.default_preempt_min_runtime_ms, self.min_runtime.default_reclaim_min_runtime_ms}
        for node in self.cluster.tree.nodes.values():
            found |= {node.spec.preempt_min_runtime or 0, node.spec.reclaim_min_runtime or 0}
        return sorted(w for w in found if w > 0)

    def count(self) -> int:
        return sum(self.counts.values())

    def _record(self, kind: str, bucket: list[dict[str, Any]], entry: dict[str, Any]) -> None:
        self.counts[kind] += 1
        if len(bucket) < LISTED:
            bucket.append(entry)

    # -- around each commit -----------------------------------------------------------------

    def before_commit(self, t: int, decisions: Decisions) -> None:
        """Checks on the cluster as the session saw it (``t``: ms after the start)."""
        self.ready = [
            key
            for key, wait in self.waits.items()
            if wait.since < t and not any(self.leaving(v) for v in wait.victims)
        ]
        if self.min_runtime is None:
            return
        now = self.start + t
        for preempted in decisions.preempted:
            if preempted.count is not None:
                continue  # single pods of an elastic workload may go at any time
            victim = self.cluster.workloads[preempted.workload]
            victim_leaf = self.cluster.leaf_of(preempted.workload)
            queue = self.queue_of(preempted.preemptor)
            if victim.evicted or victim.admitted_at is None or victim_leaf is None or queue is None:
                continue
            resolution = self._resolve(self.cluster.leaves.get(queue), victim_leaf)
            if resolution.ms > 0 and now < victim.admitted_at + resolution.ms:
                self._record("minRuntime", self.runtime, {
                    "at": format_timestamp(now),
                    "victim": preempted.workload,
                    "preemptor": preempted.preemptor,
                    "reason": preempted.reason,
                    "ranSeconds": (now - victim.admitted_at) / 1000,
                    "minRuntime": resolution.describe(),
                })

    def _resolve(self, preemptor_leaf: QuotaNode | None, victim_leaf: QuotaNode) -> min_runtime.Resolution:
        config = self.min_runtime
        assert config is not None
        if preemptor_leaf is victim_leaf:
            return min_runtime.resolve_preempt(victim_leaf, config.default_preempt_min_runtime_ms)
        return min_runtime.resolve_reclaim(
            preemptor_leaf, victim_leaf, config.default_reclaim_min_runtime_ms, config.reclaim_resolve_method
        )

    def after_commit(self, t: int, decisions: Decisions, admitted: Sequence[Admitted]) -> None:
        """Checks on the cluster with the session's decisions committed."""
        now = self.start + t
        for entry in admitted:
            self._check_quota(now, entry.workload, self.cluster.leaves[entry.queue])
        active: dict[str, set[str]] = {}  # root -> workloads that took room in its tree
        for entry in admitted:
            self._moved(active, entry.workload, reserving=False)
        for preempted in decisions.preempted:
            self._moved(active, preempted.preemptor, reserving=False)
        for pending in decisions.pending:
            if pending.reason not in _NOT_RESERVING:
                self._moved(active, pending.workload, reserving=True)
        shared_nodes = self.cluster.placements is not None
        everyone = set().union(*active.values()) if active else set()
        for key, wait in self.waits.items():
            movers = everyone if shared_nodes else active.get(wait.root, set())
            if wait.since < t and movers - {key}:
                wait.excused = True
        admitted_keys = {entry.workload for entry in admitted}
        relying = {
            p.workload: frozenset(v for v in p.waiting_for if v.startswith("pod:") or self.queue_of(v) is not None)
            for p in decisions.pending
            if p.reason == "PendingPreemption"
        }
        for key in self.ready:
            wait = self.waits.pop(key)
            if key in admitted_keys or wait.excused:
                continue
            if key in relying and wait.choices < MAX_CHOICES:
                # It chose victims again (say a min-runtime window ended, and now its full
                # count can go in): the wait goes on, for a bounded number of choices.
                self.waits[key] = _Wait(relying[key], t, wait.root, choices=wait.choices + 1)
                continue
            self._record("stall", self.stalls, {
                "at": format_timestamp(now),
                "preemptor": key,
                "victims": sorted(wait.victims),
                "waitingSince": format_timestamp(self.start + wait.since),
                "choices": wait.choices,
                "reason": self.reason_of(key),
            })
        for key in [k for k in self.waits if k not in relying]:
            del self.waits[key]
        for key, victims in relying.items():
            current = self.waits.get(key)
            if current is None:
                leaf = self.cluster.leaves.get(self.queue_of(key) or "")
                self.waits[key] = _Wait(victims, t, leaf.root.name if leaf is not None else "")
            elif current.victims != victims:
                current.victims = victims  # more (or other) victims while it waits: same wait

    def _moved(self, active: dict[str, set[str]], key: str, *, reserving: bool) -> None:
        """Note that ``key`` took room in its tree this session. A preemptor without victims
        reserves quota unless its queue reclaims from Any (SEMANTICS §2.4)."""
        leaf = self.cluster.leaves.get(self.queue_of(key) or "")
        if leaf is None or (reserving and leaf.spec.preemption.reclaim_within_cohort == "Any"):
            return
        active.setdefault(leaf.root.name, set()).add(key)

    def _check_quota(self, now: int, key: str, leaf: QuotaNode) -> None:
        accounting = self.cluster.accounting
        usage = self.cluster.usage.get(key, {})
        for node in leaf.path():
            for fr in usage:
                used = accounting.used(node, fr)
                limit = node.subtree.get(fr, 0)
                if node.parent is not None:
                    extra = node.borrowing_limit.get(fr)
                    if extra is None:
                        continue
                    limit += extra
                if used > limit:
                    self._record("quota", self.quota, {
                        "at": format_timestamp(now),
                        "admitted": key,
                        "queue": node.name,
                        "flavor": fr[0],
                        "resource": fr[1],
                        "usage": used,
                        "limit": limit,
                    })

    def figures(self) -> dict[str, Any]:
        return {
            "quotaExceeded": {"count": self.counts["quota"], "listed": self.quota},
            "minRuntimeViolations": {
                "checked": self.min_runtime is not None,
                "count": self.counts["minRuntime"],
                "listed": self.runtime,
            },
            "preemptorStalls": {"count": self.counts["stall"], "listed": self.stalls},
            "unplacedWorkloads": self.cluster.unplaced,
        }
