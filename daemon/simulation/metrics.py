"""What a simulation measures, integrated over simulated time.

Usage only changes at instants (an admission, a shrink, a workload leaving),
so every figure is a step function and is integrated exactly: each series
keeps its value and the instant it took it, and adds ``value × elapsed`` when
it changes. A change costs O(1) per series touched, whatever the cluster's
size, except *lent*, which is recomputed over the leaves of one root.

Figures are for one resource (the report's: a GPU resource when quotas have
one, else cpu), in resource-milliseconds internally and resource-hours out.

*Lent* has no owner in Kueue's arithmetic: a borrower takes from the cohort,
not from a queue. It is attributed here per flavor in proportion to each
leaf's idle lendable quota (``min(lendable, nominal − usage)``): at any instant
a root's leaves lend ``min(borrowed, idle)`` in all, shared by their idle.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from preemptd.framework.quantity import format_timestamp
from preemptd.framework.quota import QuotaNode, QuotaTree

__all__ = ["Recorder", "leaf_changes", "percentile", "resource_unit"]

HOUR_MS = 3_600_000
BUCKETS = 96
"""Points of the utilization curves (15 minutes each over a day)."""
THRASH_LISTED = 10


def resource_unit(resource: str) -> tuple[float, str]:
    """The divisor from the model's integers to display units, and the unit's name."""
    if resource == "cpu":
        return 1000.0, "cpu"
    if resource == "memory":
        return float(2**30), "GiB"
    return 1.0, "GPU" if resource.endswith("/gpu") else resource


def percentile(values: list[int], p: int) -> int:
    """Nearest-rank percentile of sorted ``values`` (0 for none)."""
    if not values:
        return 0
    rank = -(-p * len(values) // 100)
    return values[max(0, rank - 1)]


class _Step:
    """A step function of time and its integral so far."""

    __slots__ = ("integral", "since", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.since = 0
        self.integral = 0.0

    def set(self, t: int, value: float) -> None:
        self.integral += self.value * (t - self.since)
        self.value = value
        self.since = t


class _Leaf:
    __slots__ = (
        "admissions",
        "borrowed",
        "evicted",
        "lendable",
        "lent",
        "lost",
        "lost_runtime",
        "node",
        "nominal",
        "preemptor_of",
        "shrunk",
        "usage",
        "used",
        "waits",
    )

    def __init__(self, node: QuotaNode, resource: str) -> None:
        self.node = node
        self.nominal: dict[str, int] = {}
        self.lendable: dict[str, int] = {}
        for (flavor, res), amount in node.nominal.items():
            if res == resource:
                self.nominal[flavor] = amount
                self.lendable[flavor] = node.lending_limit.get((flavor, res), amount)
        self.usage: dict[str, int] = {}
        self.used = _Step()
        self.borrowed = _Step()
        self.lent = _Step()
        self.waits: list[int] = []
        self.admissions = 0
        self.evicted = 0
        self.shrunk = 0
        self.preemptor_of = 0
        self.lost = 0  # resource-ms of work lost by evictions
        self.lost_runtime = 0  # ms of run time lost by evictions


class Recorder:
    """Collects the figures of one simulation run."""

    def __init__(
        self, tree: QuotaTree, *, resource: str, capacity: Mapping[str, int], start: int, duration: int
    ) -> None:
        self.resource = resource
        self.start = start
        self.duration = duration
        self.bucket = max(1, -(-duration // BUCKETS))
        self.leaves = {name: _Leaf(node, resource) for name, node in sorted(tree.leaves.items())}
        self.by_root: dict[str, list[_Leaf]] = {}
        for leaf in self.leaves.values():
            self.by_root.setdefault(leaf.node.root.name, []).append(leaf)
        flavors = sorted({f for leaf in self.leaves.values() for f in leaf.nominal} | set(capacity))
        self.capacity = {f: capacity.get(f, 0) for f in flavors}
        self.flavor_usage = {f: 0 for f in flavors}
        self.flavor_since = {f: 0 for f in flavors}
        self.bucket_count = -(-duration // self.bucket)
        self.flavor_buckets = {f: [0.0] * self.bucket_count for f in flavors}
        self.dirty: set[str] = set()  # roots whose lent shares changed at ``dirty_at``
        self.dirty_at: int | None = None
        self.reasons: Counter[str] = Counter()
        self.preemptions: Counter[str] = Counter()  # per workload, evictions and shrinks
        self.lost: Counter[str] = Counter()  # per workload, resource-ms
        self.evictions = 0
        self.shrinks = 0
        self.sessions = 0
        self.admissions = 0

    def stop(self, t: int) -> None:
        """The run ends at ``t`` instead (a stopped simulation): the figures cover [0, t]."""
        self.duration = t
        self.bucket_count = -(-t // self.bucket)
        for buckets in self.flavor_buckets.values():
            del buckets[self.bucket_count :]

    # -- events -------------------------------------------------------------------------------

    def usage(self, t: int, queue: str, changes: Mapping[str, int]) -> None:
        """Leaf ``queue``'s usage of the resource changed by ``changes`` (flavor → delta) at ``t``."""
        leaf = self.leaves.get(queue)
        if leaf is None or not changes:
            return
        t = min(t, self.duration)
        # Lent is recomputed over a whole root: once per instant, not once per change.
        if self.dirty_at is not None and self.dirty_at != t:
            self._flush()
        for flavor, delta in changes.items():
            leaf.usage[flavor] = leaf.usage.get(flavor, 0) + delta
            if flavor in self.flavor_usage:
                self._flavor(t, flavor, self.flavor_usage[flavor] + delta)
        leaf.used.set(t, sum(leaf.usage.values()))
        leaf.borrowed.set(t, sum(max(0, u - leaf.nominal.get(f, 0)) for f, u in leaf.usage.items()))
        self.dirty_at = t
        self.dirty.add(leaf.node.root.name)

    def _flush(self) -> None:
        if self.dirty_at is not None:
            for root in sorted(self.dirty):
                self._lent(self.dirty_at, self.by_root[root])
        self.dirty.clear()
        self.dirty_at = None

    def _flavor(self, t: int, flavor: str, value: int) -> None:
        since = self.flavor_since[flavor]
        old = self.flavor_usage[flavor]
        buckets = self.flavor_buckets[flavor]
        size = self.bucket
        while since < t and old:
            index = since // size
            end = min(t, (index + 1) * size)
            buckets[index] += old * (end - since)
            since = end
        self.flavor_usage[flavor] = value
        self.flavor_since[flavor] = t

    def _lent(self, t: int, leaves: list[_Leaf]) -> None:
        if len(leaves) < 2:
            return
        shares = [0.0] * len(leaves)
        flavors = {f for leaf in leaves for f in leaf.nominal}
        for flavor in sorted(flavors):
            borrowed = 0
            idle = []
            for leaf in leaves:
                used = leaf.usage.get(flavor, 0)
                nominal = leaf.nominal.get(flavor, 0)
                borrowed += max(0, used - nominal)
                idle.append(min(leaf.lendable.get(flavor, 0), max(0, nominal - used)))
            total = sum(idle)
            if borrowed and total:
                ratio = min(1.0, borrowed / total)
                for i, amount in enumerate(idle):
                    shares[i] += amount * ratio
        for leaf, share in zip(leaves, shares, strict=True):
            if share != leaf.lent.value:
                leaf.lent.set(t, share)

    def admitted(self, queue: str, wait: int) -> None:
        self.admissions += 1
        leaf = self.leaves.get(queue)
        if leaf is not None:
            leaf.admissions += 1
            leaf.waits.append(wait)

    def preempted(
        self, *, victim: str, victim_queue: str, preemptor_queue: str, reason: str, whole: bool, lost: int, ran: int
    ) -> None:
        self.reasons[reason] += 1
        self.preemptions[victim] += 1
        leaf = self.leaves.get(victim_queue)
        if whole:
            self.evictions += 1
            self.lost[victim] += lost
            if leaf is not None:
                leaf.evicted += 1
                leaf.lost += lost
                leaf.lost_runtime += ran
        else:
            self.shrinks += 1
            if leaf is not None:
                leaf.shrunk += 1
        preemptor = self.leaves.get(preemptor_queue)
        if preemptor is not None:
            preemptor.preemptor_of += 1

    # -- the figures ----------------------------------------------------------------------------

    def figures(
        self,
        *,
        pending: Mapping[str, list[int]],
        pending_reasons: Mapping[str, int],
        vetoes: Mapping[str, int],
        failures: Mapping[str, int],
        invariants: Mapping[str, Any],
        counters: Mapping[str, int],
    ) -> dict[str, Any]:
        """The run's figures as JSON-ready data (``pending``: per queue, the waits of the
        workloads still pending at the end)."""
        end = self.duration
        self._flush()
        for flavor in self.flavor_usage:
            self._flavor(end, flavor, self.flavor_usage[flavor])
        for leaf in self.leaves.values():
            for step in (leaf.used, leaf.borrowed, leaf.lent):
                step.set(end, step.value)
        divisor, _ = resource_unit(self.resource)

        def hours(amount: float) -> float:
            return round(amount / divisor / HOUR_MS, 3)

        queues: dict[str, Any] = {}
        for name, leaf in self.leaves.items():
            waits = sorted(leaf.waits)
            still = sorted(pending.get(name, ()))
            queues[name] = {
                "admissions": leaf.admissions,
                "waitSeconds": {
                    "p50": percentile(waits, 50) / 1000,
                    "p95": percentile(waits, 95) / 1000,
                    "max": (waits[-1] if waits else 0) / 1000,
                },
                "pendingAtEnd": len(still),
                "longestPendingSeconds": (still[-1] if still else 0) / 1000,
                "usedHours": hours(leaf.used.integral),
                "nominalHours": hours(sum(leaf.nominal.values()) * end),
                "borrowedHours": hours(leaf.borrowed.integral),
                "lentHours": hours(leaf.lent.integral),
                "evicted": leaf.evicted,
                "shrunk": leaf.shrunk,
                "preemptorOf": leaf.preemptor_of,
                "workLostHours": hours(leaf.lost),
                "runLostHours": round(leaf.lost_runtime / HOUR_MS, 3),
            }
        flavors: dict[str, Any] = {}
        for flavor, buckets in self.flavor_buckets.items():
            capacity = self.capacity[flavor]
            spans = [min(self.bucket, end - i * self.bucket) for i in range(len(buckets))]
            curve = [round(v / (capacity * s), 4) if capacity and s else 0.0 for v, s in zip(buckets, spans, strict=True)]
            mean = sum(buckets) / (capacity * end) if capacity and end else 0.0
            flavors[flavor] = {
                "capacity": round(capacity / divisor, 3),
                "meanUtilization": round(mean, 4),
                "peakUtilization": max(curve, default=0.0),
                "utilization": curve,
            }
        thrashed = sorted((k for k, n in self.preemptions.items() if n > 1), key=lambda k: (-self.preemptions[k], k))
        return {
            **counters,
            "admissions": self.admissions,
            "preemptions": {
                "total": self.evictions + self.shrinks,
                "evictions": self.evictions,
                "shrinks": self.shrinks,
                "byReason": dict(sorted(self.reasons.items())),
            },
            "vetoes": dict(sorted(vetoes.items())),
            "pluginFailures": dict(sorted(failures.items())),
            "pendingAtEnd": dict(sorted(pending_reasons.items())),
            "thrash": {
                "workloads": len(thrashed),
                "workLostHours": hours(sum(self.lost.values())),
                "top": [
                    {"workload": k, "preemptions": self.preemptions[k], "workLostHours": hours(self.lost[k])}
                    for k in thrashed[:THRASH_LISTED]
                ],
            },
            "queues": queues,
            "flavors": flavors,
            "bucketSeconds": self.bucket / 1000,
            "bucketStarts": [format_timestamp(self.start + i * self.bucket) for i in range(self.bucket_count)],
            "invariants": dict(invariants),
        }


def leaf_changes(usage: Mapping[tuple[str, str], int], resource: str, sign: int) -> dict[str, int]:
    """The per-flavor delta of ``resource`` when ``usage`` is added (1) or removed (-1)."""
    return {flavor: sign * amount for (flavor, res), amount in usage.items() if res == resource}

