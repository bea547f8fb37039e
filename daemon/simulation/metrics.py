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

What changes only at sessions is read from each session's decisions after its
commit (:meth:`Recorder.session`): pending workloads per queue, preemptions, and
every queue's weighted share (SEMANTICS §7.1). With the fair-sharing plugin the
shares are the decisions' own ``shares`` (§7.6); without it they are computed
the same way on the committed usage, so that a ``--compare`` of the two sets the
same figures side by side. A leaf is *below its fair share* while it has a
pending workload and some node on its path to the root — the leaf or a parent
under the root — has a sibling with a strictly higher share: the comparison
that rule b of the head order (§7.2) makes at each level of the tree.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from preemptd.framework.decisions import Decisions
from preemptd.framework.quantity import format_timestamp
from preemptd.framework.quota import Accounting, QuotaNode, QuotaTree
from preemptd.plugins.fair_sharing.shares import Shares, reported

__all__ = ["Recorder", "leaf_changes", "percentile", "resource_unit"]

HOUR_MS = 3_600_000
BUCKETS = 96
"""Points of the utilization curves (15 minutes each over a day)."""
THRASH_LISTED = 10
SHARE_CAP = 1_000_000
"""An infinite share (a queue of weight 0 that borrows) counts as this much in means
and curves; it still sorts above every finite share."""
WAIT_BOUNDS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400)
"""Upper bounds (seconds, inclusive) of the wait histogram's buckets; one more bucket
holds the longer waits."""


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


class _Curve:
    """A step function of time, averaged over each bucket of the report's time axis."""

    __slots__ = ("buckets", "since", "size", "value")

    def __init__(self, size: int, count: int) -> None:
        self.size = size
        self.buckets = [0.0] * count
        self.value = 0.0
        self.since = 0

    def set(self, t: int, value: float) -> None:
        since = self.since
        old = self.value
        size = self.size
        buckets = self.buckets
        while since < t and old:
            index = since // size
            end = min(t, (index + 1) * size)
            buckets[index] += old * (end - since)
            since = end
        self.value = value
        self.since = t

    def means(self, end: int, count: int, digits: int) -> list[float]:
        """Each bucket's mean up to ``end`` (the last bucket may be shorter)."""
        self.set(end, self.value)
        size = self.size
        return [
            round(self.buckets[i] / span, digits) if (span := min(size, end - i * size)) > 0 else 0.0
            for i in range(count)
        ]


class _Leaf:
    __slots__ = (
        "admissions",
        "below",
        "borrowed",
        "curve_pending",
        "curve_used",
        "evicted",
        "grown",
        "lendable",
        "lent",
        "lost",
        "lost_runtime",
        "node",
        "nominal",
        "pending",
        "pods_grown",
        "preemptor_of",
        "shrunk",
        "usage",
        "used",
        "waits",
    )

    def __init__(self, node: QuotaNode, resource: str, size: int, count: int) -> None:
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
        self.grown = 0  # growths in place (docs/elastic.md), not admissions
        self.pods_grown = 0
        self.preemptor_of = 0
        self.lost = 0  # resource-ms of work lost by evictions
        self.lost_runtime = 0  # ms of run time lost by evictions
        self.pending = 0  # workloads pending at the last session
        self.below = _Step()  # 1 while below its fair share
        self.curve_used = _Curve(size, count)
        self.curve_pending = _Curve(size, count)


class Recorder:
    """Collects the figures of one simulation run."""

    def __init__(
        self, tree: QuotaTree, *, resource: str, capacity: Mapping[str, int], start: int, duration: int
    ) -> None:
        self.resource = resource
        self.start = start
        self.duration = duration
        self.bucket = max(1, -(-duration // BUCKETS))
        self.bucket_count = -(-duration // self.bucket)
        count = self.bucket_count
        self.tree = tree
        self.leaves = {name: _Leaf(node, resource, self.bucket, count) for name, node in sorted(tree.leaves.items())}
        self.by_root: dict[str, list[_Leaf]] = {}
        # Per by_root list (by id): what _lent reads of its leaves, per flavor.
        self.lent_plans: dict[int, list[tuple[str, list[tuple[dict[str, int], int, int]]]]] = {}
        for leaf in self.leaves.values():
            self.by_root.setdefault(leaf.node.root.name, []).append(leaf)
        flavors = sorted({f for leaf in self.leaves.values() for f in leaf.nominal} | set(capacity))
        self.capacity = {f: capacity.get(f, 0) for f in flavors}
        self.flavor_usage = {f: 0 for f in flavors}
        self.flavor_since = {f: 0 for f in flavors}
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
        self.growths = 0
        self.pods_grown = 0
        # Shares: every node below a root (a root's share is always 0), by name.
        self.nodes = {name: node for name, node in sorted(tree.nodes.items()) if node.parent is not None}
        self.parent_of = {name: node.parent.name for name, node in self.nodes.items() if node.parent is not None}
        self.share_curves = {name: _Curve(self.bucket, count) for name in self.nodes}
        self.share_means = {name: _Step() for name in self.nodes}
        self.share_source = ""  # "decisions" or "computed" once a session has been seen
        # Per node, its usage of each of its flavor-resources and its share, when last computed.
        self.known_shares: dict[str, tuple[tuple[int, ...], int]] = {}
        self.shares_stale = True  # usage changed since the shares were last computed
        self.preemption_buckets = [0] * count
        self.active: set[str] = set()  # leaves that ever had a pending workload or borrowed
        self.waiting: set[str] = set()  # leaves with a pending workload at the last session
        self.below: set[str] = set()  # leaves below their fair share since the last session
        self.highest: dict[str, float] = {}  # per parent, the highest share of its children

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
        leaf.curve_used.set(t, leaf.used.value)
        leaf.borrowed.set(t, sum(max(0, u - leaf.nominal.get(f, 0)) for f, u in leaf.usage.items()))
        if leaf.borrowed.value:
            self.active.add(leaf.node.name)
        self.shares_stale = True
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
        plan = self.lent_plans.get(id(leaves))
        if plan is None:
            # Per flavor of the root's leaves, in order: each leaf's usage map, nominal and
            # lendable quota of that flavor (fixed for the run).
            plan = self.lent_plans[id(leaves)] = [
                (flavor, [(leaf.usage, leaf.nominal.get(flavor, 0), leaf.lendable.get(flavor, 0)) for leaf in leaves])
                for flavor in sorted({f for leaf in leaves for f in leaf.nominal})
            ]
        for flavor, rows in plan:
            borrowed = 0
            idle = []
            for usage, nominal, lendable in rows:
                used = usage.get(flavor, 0)
                # borrowed += max(0, used - nominal); idle: min(lendable, max(0, nominal - used))
                if used > nominal:
                    borrowed += used - nominal
                    idle.append(lendable if lendable < 0 else 0)
                else:
                    spare = nominal - used
                    idle.append(lendable if lendable < spare else spare)
            total = sum(idle)
            if borrowed and total:
                ratio = min(1.0, borrowed / total)
                for i, amount in enumerate(idle):
                    shares[i] += amount * ratio
        for leaf, share in zip(leaves, shares, strict=True):
            if share != leaf.lent.value:
                leaf.lent.set(t, share)

    def session(self, t: int, decisions: Decisions, queue_of: Callable[[str], str], accounting: Accounting) -> None:
        """What session ``t`` left once committed: pending workloads per queue
        (``queue_of``: workload key → queue), its preemptions, and the shares on the
        committed ``accounting``. Work per session: its pending list, plus the tree's
        nodes when the shares changed."""
        t = min(t, self.duration)
        if decisions.preempted and t < self.duration:
            self.preemption_buckets[t // self.bucket] += len(decisions.preempted)
        counts: Counter[str] = Counter(queue_of(p.workload) for p in decisions.pending)
        waiting = self.waiting
        for name in waiting | counts.keys():
            leaf = self.leaves.get(name)
            if leaf is None:
                continue
            pending = counts.get(name, 0)
            if pending != leaf.pending:
                leaf.pending = pending
                leaf.curve_pending.set(t, pending)
            if pending:
                waiting.add(name)
                self.active.add(name)
            else:
                waiting.discard(name)
        if not self.nodes:
            return
        if decisions.shares is not None:
            self.share_source = "decisions"
            shares = {s.queue: s.weighted_share for s in decisions.shares}
        elif self.shares_stale or not self.share_source:
            self.share_source = "computed"
            shares = self._shares(accounting)
        else:
            shares = None  # nothing changed since the last session
        self.shares_stale = False
        if shares is not None:
            highest = self.highest
            highest.clear()
            for name, parent in self.parent_of.items():
                value = min(shares.get(name, 0), SHARE_CAP)
                self.share_curves[name].set(t, value)
                self.share_means[name].set(t, value)
                if value > highest.get(parent, 0):
                    highest[parent] = value
        # Only a leaf with a pending workload, or one below until now, can change.
        for name in waiting | self.below:
            leaf = self.leaves[name]
            below = 1.0 if leaf.pending and self._outranked(leaf.node) else 0.0
            if below != leaf.below.value:
                leaf.below.set(t, below)
                if below:
                    self.below.add(name)
                else:
                    self.below.discard(name)

    def _shares(self, accounting: Accounting) -> dict[str, int]:
        """Every node's reported share on ``accounting``. A node that borrows nothing (no
        usage above its subtree quota) has share 0 without the exact arithmetic; one that
        borrows what it borrowed when last worked out has the share it had then."""
        found = Shares(accounting)
        usage = accounting.usage
        known = self.known_shares
        shares: dict[str, int] = {}
        for name, node in self.nodes.items():
            used = usage[node.index]
            subtree = node.subtree
            frs = node.frs
            for fr in frs:
                if used.get(fr, 0) > subtree.get(fr, 0):
                    # A share depends only on the node's usage (the rest is fixed for the
                    # run): worked out again only when that changed.
                    amounts = tuple([used.get(f, 0) for f in frs])
                    last = known.get(name)
                    if last is not None and last[0] == amounts:
                        shares[name] = last[1]
                    else:
                        value = shares[name] = reported(found.share(node))
                        known[name] = (amounts, value)
                    break
            else:
                shares[name] = 0
        return shares

    def _outranked(self, node: QuotaNode) -> bool:
        """Some node on ``node``'s path below the root has a sibling with a higher share:
        the highest share among its parent's children is above its own."""
        curves = self.share_curves
        highest = self.highest
        current = node
        while current.parent is not None:
            if highest.get(current.parent.name, 0) > curves[current.name].value:
                return True
            current = current.parent
        return False

    def admitted(self, queue: str, wait: int) -> None:
        self.admissions += 1
        leaf = self.leaves.get(queue)
        if leaf is not None:
            leaf.admissions += 1
            leaf.waits.append(wait)

    def grown(self, queue: str, pods: int) -> None:
        """A running workload of ``queue`` grown in place by ``pods`` (not an admission)."""
        self.growths += 1
        self.pods_grown += pods
        leaf = self.leaves.get(queue)
        if leaf is not None:
            leaf.grown += 1
            leaf.pods_grown += pods

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
            for step in (leaf.used, leaf.borrowed, leaf.lent, leaf.below):
                step.set(end, step.value)
        for step in self.share_means.values():
            step.set(end, step.value)
        divisor, _ = resource_unit(self.resource)
        count = self.bucket_count

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
                "nominal": round(sum(leaf.nominal.values()) / divisor, 3),
                "nominalHours": hours(sum(leaf.nominal.values()) * end),
                "borrowedHours": hours(leaf.borrowed.integral),
                "lentHours": hours(leaf.lent.integral),
                "evicted": leaf.evicted,
                "shrunk": leaf.shrunk,
                "grown": leaf.grown,
                "podsGrown": leaf.pods_grown,
                "preemptorOf": leaf.preemptor_of,
                "workLostHours": hours(leaf.lost),
                "runLostHours": round(leaf.lost_runtime / HOUR_MS, 3),
                "belowFairShareSeconds": round(leaf.below.integral / 1000, 3),
                "pendingOverTime": leaf.curve_pending.means(end, count, 2),
                "usedOverTime": [round(v / divisor, 3) for v in leaf.curve_used.means(end, count, 3)],
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
            "growths": {"total": self.growths, "pods": self.pods_grown},
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
            "fairness": self._fairness(end),
            "preemptionsOverTime": self.preemption_buckets[:count],
            "waitHistogram": self._waits(),
            "flavors": flavors,
            "bucketSeconds": self.bucket / 1000,
            "bucketStarts": [format_timestamp(self.start + i * self.bucket) for i in range(self.bucket_count)],
            "invariants": dict(invariants),
        }

    def _fairness(self, end: int) -> dict[str, Any]:
        """Shares over time and the fairness summary (see the module's note)."""
        means = {name: round(step.integral / end, 3) if end else 0.0 for name, step in self.share_means.items()}
        shares = {
            name: {"mean": means[name], "overTime": self.share_curves[name].means(end, self.bucket_count, 1)}
            for name in self.nodes
        }
        compared = sorted(
            (means[name], name) for name in self.active if name in self.nodes
        )
        summary: dict[str, Any] = {"queues": [name for _, name in compared], "ratio": None}
        if len(compared) >= 2:
            (low, low_name), (high, high_name) = compared[0], compared[-1]
            summary.update(lowest=low_name, highest=high_name)
            # Equal means are a ratio of 1; a queue with demand that never borrowed
            # beside one that did is an unbounded ratio (null).
            summary["ratio"] = 1.0 if high == low else round(high / low, 3) if low else None
        return {
            "source": self.share_source,
            "maxMinShareRatio": summary,
            "shares": shares,
        }

    def _waits(self) -> dict[str, Any]:
        counts = [0] * (len(WAIT_BOUNDS) + 1)
        bounds = [bound * 1000 for bound in WAIT_BOUNDS]
        for leaf in self.leaves.values():
            for wait in leaf.waits:
                counts[bisect_left(bounds, wait)] += 1
        return {"boundsSeconds": list(WAIT_BOUNDS), "counts": counts}


def leaf_changes(usage: Mapping[tuple[str, str], int], resource: str, sign: int) -> dict[str, int]:
    """The per-flavor delta of ``resource`` when ``usage`` is added (1) or removed (-1)."""
    return {flavor: sign * amount for (flavor, res), amount in usage.items() if res == resource}

