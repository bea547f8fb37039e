"""Deterministic synthetic clusters, as CONTRACT §1 object dicts.

A cluster is built the way it could have come about. Quota is handed out to
leaf queues in proportion to a random weight per queue, so that the nominal
quotas of each flavor add up to (at most) the capacity of its nodes. Workloads
then arrive in a random order; each one meant to run is admitted on the first
flavor of its queue where both the quota and the nodes have room, and its pods
are bound to those nodes. Whatever does not fit stays pending, together with
the workloads generated as pending in the first place. The quota check below
is SEMANTICS §1 written out independently of the framework, and node room is
SEMANTICS §6's (allocatable minus the requests of bound pods), so the admitted
state is always one the scheduler could itself have produced.

    python -m benchmarks.generate --size M --seed 1 --out /tmp/m.yaml
    python -m benchmarks.generate --shape saturated --out /tmp/saturated.json
    preemptd cycle --timings --now 2026-01-01T00:00:00Z /tmp/saturated.json

Shapes (PERFORMANCE.md): ``typical-M`` and ``typical-L`` (the sizes below), ``saturated``
(every queue at exactly its nominal, no borrowing possible, 77 % pending), ``contended``
(many heads want GPUs of one full flavor) and ``large`` (L's cluster), plus the growth
series ``grow-queues-N`` and ``grow-deep-N``.

The output format follows the file name: ``.json`` writes one JSON list (fast
to read back), anything else a YAML stream.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from preemptd.framework.quantity import format_timestamp, parse_timestamp

__all__ = [
    "CONTENDED",
    "GROWTH_SERIES",
    "NOW",
    "NOW_MS",
    "SHAPES",
    "SIZES",
    "Size",
    "describe",
    "generate",
    "generate_saturated",
    "generate_shape",
    "generate_spec",
    "growth_spec",
    "main",
    "shape_maker",
]

NOW = "2026-01-01T00:00:00Z"
NOW_MS = parse_timestamp(NOW)
"""The instant the generated snapshot describes; use it as the session's ``now``."""

API = "preemptd.io/v1alpha1"
GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU)
FLAVOR_LABEL = "preemptd.io/gpu-model"
WORKLOAD_LABEL = "preemptd.io/workload"
# (flavor, share of the nodes). Every node is a GPU node of one flavor.
FLAVORS = (("a100", 0.6), ("h100", 0.4))
# Per node: cpu in milli-cores, memory in GiB, whole GPUs.
NODE_CPU = 128_000
NODE_MEMORY_GI = 1024
NODE_GPUS = 8
PRIORITY_CLASSES = (("low", 0), ("normal", 100), ("high", 1000))
_MINUTE = 60_000
_DAY = 24 * 60 * _MINUTE


@dataclass(frozen=True, slots=True)
class Shape:
    """A kind of workload: one podSet ``main`` of ``count`` equal pods (plus a launcher)."""

    name: str
    weight: float
    gpus: int
    cpu: tuple[int, ...]  # milli-cores per pod, one is picked
    memory_gi: tuple[int, ...]
    count: tuple[int, int]  # inclusive range
    launcher: bool = False  # an extra podSet ``launcher`` of one small pod


@dataclass(frozen=True, slots=True)
class Size:
    nodes: int
    workloads: int
    queues: int
    leaves_per_cohort: int
    cohorts_per_group: int  # 0: cohorts are roots; else cohorts are defined Queues under orgs
    shapes: tuple[Shape, ...]
    pending_share: float = 0.2
    """Workloads generated pending; a few more end up pending because they did not fit."""
    same_flavor_order: bool = False
    """Every queue lists the flavors in the same order (else 30 % reverse it)."""
    pending_shapes: tuple[Shape, ...] | None = None
    """The shapes of the workloads generated pending (default: ``shapes``)."""


# S and M carry about 7.5 admitted workloads per node, L about 3.75 with wider
# CPU jobs (~140,000 pods in all); both keep GPUs around 70 % allocated.
_DENSE = (
    Shape("cpu-batch", 0.63, 0, (1000, 2000), (4, 8), (3, 13)),
    Shape("gpu-1", 0.32, 1, (8000,), (64,), (1, 3)),
    Shape("gpu-4", 0.03, 4, (32_000,), (256,), (1, 1), launcher=True),
    Shape("gpu-8", 0.02, 8, (64_000,), (512,), (1, 1), launcher=True),
)
_WIDE = (
    Shape("cpu-batch", 0.60, 0, (1000, 2000), (4, 8), (5, 20)),
    Shape("gpu-1", 0.32, 1, (8000,), (64,), (1, 6)),
    Shape("gpu-4", 0.04, 4, (32_000,), (256,), (1, 2), launcher=True),
    Shape("gpu-8", 0.04, 8, (64_000,), (512,), (1, 1), launcher=True),
)
_GPU_HEADS = (
    Shape("gpu-1", 0.5, 1, (8000,), (64,), (1, 4)),
    Shape("gpu-4", 0.3, 4, (32_000,), (256,), (1, 2), launcher=True),
    Shape("gpu-8", 0.2, 8, (64_000,), (512,), (1, 1), launcher=True),
)
SIZES: dict[str, Size] = {
    "S": Size(nodes=100, workloads=1_000, queues=10, leaves_per_cohort=5, cohorts_per_group=0, shapes=_DENSE),
    "M": Size(nodes=1_000, workloads=10_000, queues=100, leaves_per_cohort=10, cohorts_per_group=0, shapes=_DENSE),
    "L": Size(nodes=4_000, workloads=20_000, queues=1_000, leaves_per_cohort=10, cohorts_per_group=10, shapes=_WIDE),
}
CONTENDED = Size(
    nodes=1_000,
    workloads=5_000,
    queues=250,
    leaves_per_cohort=25,
    cohorts_per_group=0,
    shapes=_WIDE,
    pending_share=0.35,
    same_flavor_order=True,
    pending_shapes=_GPU_HEADS,
)
"""1,000 nodes, 250 queues in 10 cohorts, 5,000 workloads with pods. Every queue lists the
flavors in the same order, so admitted work fills the first flavor, and the pending
workloads (35 %) are GPU jobs: most queues' heads want GPUs of that one full flavor."""

FR = tuple[str, str]


class _QuotaNode:
    """One node of the queue tree with SEMANTICS §1's accounting, per (flavor, resource)."""

    __slots__ = ("borrowing", "lending", "name", "nominal", "parent", "subtree", "usage")

    def __init__(self, name: str, parent: _QuotaNode | None) -> None:
        self.name = name
        self.parent = parent
        self.nominal: dict[FR, int] = {}
        self.borrowing: dict[FR, int] = {}
        self.lending: dict[FR, int] = {}
        self.subtree: dict[FR, int] = {}
        self.usage: dict[FR, int] = {}

    def reserve(self, fr: FR) -> int:
        """The local reserve: the part of the nominal that is not lent."""
        lending = self.lending.get(fr)
        return 0 if lending is None else max(0, self.nominal.get(fr, 0) - lending)

    def available(self, fr: FR) -> int:
        usage = self.usage.get(fr, 0)
        if self.parent is None:
            return max(0, self.subtree.get(fr, 0) - usage)
        reserve = self.reserve(fr)
        from_parent = self.parent.available(fr)
        limit = self.borrowing.get(fr)
        if limit is not None:
            stored = self.subtree.get(fr, 0) - reserve
            used = max(0, usage - reserve)
            from_parent = min(from_parent, stored - used + limit)
        return max(0, max(0, reserve - usage) + from_parent)

    def add(self, fr: FR, amount: int) -> None:
        node: _QuotaNode | None = self
        while node is not None and amount > 0:
            usage = node.usage.get(fr, 0)
            headroom = max(0, node.reserve(fr) - usage)
            node.usage[fr] = usage + amount
            amount = max(0, amount - headroom)
            node = node.parent


def _subtree_quotas(nodes: Sequence[_QuotaNode], frs: Iterable[FR]) -> None:
    """Fill ``subtree`` bottom-up; ``nodes`` lists children before their parents."""
    frs = tuple(frs)
    for node in nodes:
        for fr in frs:
            node.subtree[fr] = node.subtree.get(fr, 0) + node.nominal.get(fr, 0)
            if node.parent is not None:
                lent = node.subtree[fr] - node.reserve(fr)
                node.parent.subtree[fr] = node.parent.subtree.get(fr, 0) + lent


class _Pool:
    """The nodes of one flavor and their free room, for first-fit placement."""

    __slots__ = ("cpu", "gpus", "memory", "names")

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.cpu = [NODE_CPU] * len(names)
        self.memory = [NODE_MEMORY_GI] * len(names)
        self.gpus = [NODE_GPUS] * len(names)

    def place(self, rng: random.Random, pods: Sequence[tuple[int, int, int]]) -> list[int] | None:
        """Bind each pod (cpu, memory, gpus) to a node, or bind none of them."""
        size = len(self.names)
        chosen: list[int] = []
        for cpu, memory, gpus in pods:
            start = rng.randrange(size)
            # Big GPU pods look at every node; small ones a window, which is plenty.
            window = size if gpus >= 4 else min(size, 64)
            for step in range(window):
                node = (start + step) % size
                if self.gpus[node] >= gpus and self.cpu[node] >= cpu and self.memory[node] >= memory:
                    self.gpus[node] -= gpus
                    self.cpu[node] -= cpu
                    self.memory[node] -= memory
                    chosen.append(node)
                    break
            else:
                for node, (c, m, g) in zip(chosen, pods, strict=False):
                    self.gpus[node] += g
                    self.cpu[node] += c
                    self.memory[node] += m
                return None
        return chosen


def _cpu(milli: int) -> str:
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def _requests(cpu: int, memory_gi: int, gpus: int) -> dict[str, str]:
    requests = {"cpu": _cpu(cpu), "memory": f"{memory_gi}Gi"}
    if gpus:
        requests[GPU] = str(gpus)
    return requests


def _uid(rng: random.Random) -> str:
    text = f"{rng.getrandbits(128):032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _quantity(resource: str, amount: int) -> str:
    if resource == "cpu":
        return _cpu(amount)
    if resource == "memory":
        return f"{amount}Gi"
    return str(amount)


def generate(size: str, seed: int) -> list[dict[str, Any]]:
    """The objects of one synthetic cluster; the same (size, seed) gives the same list."""
    return generate_spec(SIZES[size], f"preemptd-benchmark/{size}/{seed}")


def generate_spec(spec: Size, key: str) -> list[dict[str, Any]]:
    """The objects of the cluster ``spec`` describes, drawn from the random stream ``key``."""
    rng = random.Random(key)
    objects: list[dict[str, Any]] = []

    for name, _share in FLAVORS:
        objects.append(
            {
                "apiVersion": API,
                "kind": "ResourceFlavor",
                "metadata": {"name": name},
                "spec": {"nodeLabels": {FLAVOR_LABEL: name}},
            }
        )
    for name, value in PRIORITY_CLASSES:
        objects.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )

    # Nodes, split between the flavors.
    pools: dict[str, _Pool] = {}
    capacity: dict[FR, int] = {}
    node_objects: list[dict[str, Any]] = []
    assigned = 0
    for index, (flavor, share) in enumerate(FLAVORS):
        count = spec.nodes - assigned if index == len(FLAVORS) - 1 else round(spec.nodes * share)
        assigned += count
        names = [f"node-{flavor}-{i:05d}" for i in range(count)]
        pools[flavor] = _Pool(names)
        capacity[(flavor, "cpu")] = count * NODE_CPU
        capacity[(flavor, "memory")] = count * NODE_MEMORY_GI
        capacity[(flavor, GPU)] = count * NODE_GPUS
        for name in names:
            node_objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {FLAVOR_LABEL: flavor, "kubernetes.io/hostname": name},
                    },
                    "status": {
                        "allocatable": {
                            "cpu": _cpu(NODE_CPU),
                            "memory": f"{NODE_MEMORY_GI}Gi",
                            GPU: str(NODE_GPUS),
                        }
                    },
                }
            )

    # The queue tree: leaves in cohorts; for L the cohorts are defined Queues
    # grouped under implicit orgs, which makes a three-level tree.
    cohorts = -(-spec.queues // spec.leaves_per_cohort)
    tree: list[_QuotaNode] = []  # children before parents
    org_nodes: dict[str, _QuotaNode] = {}
    cohort_nodes: list[_QuotaNode] = []
    queue_objects: list[dict[str, Any]] = []
    for c in range(cohorts):
        cohort_name = f"cohort-{c:03d}"
        org: _QuotaNode | None = None
        if spec.cohorts_per_group:
            org_name = f"org-{c // spec.cohorts_per_group:02d}"
            org = org_nodes.setdefault(org_name, _QuotaNode(org_name, None))
            queue_objects.append(
                {
                    "apiVersion": API,
                    "kind": "Queue",
                    "metadata": {"name": cohort_name},
                    "spec": {"parent": org_name},
                }
            )
        cohort_nodes.append(_QuotaNode(cohort_name, org))

    frs = [(flavor, resource) for flavor, _ in FLAVORS for resource in RESOURCES]
    weights = [rng.uniform(0.5, 1.5) for _ in range(spec.queues)]
    total_weight = sum(weights)
    leaves: list[_QuotaNode] = []
    leaf_flavors: list[list[str]] = []
    for q in range(spec.queues):
        name = f"q-{q:04d}"
        leaf = _QuotaNode(name, cohort_nodes[q // spec.leaves_per_cohort])
        limits = rng.random()
        for fr in frs:
            flavor, resource = fr
            unit = 1000 if resource == "cpu" else 1
            nominal = int(capacity[fr] * weights[q] / total_weight) // unit * unit
            leaf.nominal[fr] = nominal
            if limits < 0.15:
                leaf.borrowing[fr] = nominal // 2 // unit * unit
            elif limits < 0.30:
                leaf.lending[fr] = nominal // 2 // unit * unit
        order = [flavor for flavor, _ in FLAVORS]
        if rng.random() < 0.3 and not spec.same_flavor_order:
            order.reverse()
        leaves.append(leaf)
        leaf_flavors.append(order)
        queue_objects.append(_queue_object(rng, leaf, order))
    tree.extend(leaves)
    tree.extend(cohort_nodes)
    tree.extend(org_nodes.values())
    _subtree_quotas(tree, frs)

    # Workloads: each queue receives work in proportion to its quota.
    shapes = spec.shapes
    shape_weights = [shape.weight for shape in shapes]
    workload_objects: list[dict[str, Any]] = []
    pod_objects: list[dict[str, Any]] = []
    for w in range(spec.workloads):
        q = rng.choices(range(spec.queues), weights=weights)[0]
        leaf = leaves[q]
        shape = rng.choices(shapes, weights=shape_weights)[0]
        count = rng.randint(*shape.count)
        cpu = rng.choice(shape.cpu)
        memory = rng.choice(shape.memory_gi)
        # Drawn here (not before the shape) so that M and L stay the clusters they were.
        meant_to_run = rng.random() >= spec.pending_share
        if not meant_to_run and spec.pending_shapes is not None:
            pending = spec.pending_shapes
            shape = rng.choices(pending, weights=[p.weight for p in pending])[0]
            count = rng.randint(*shape.count)
            cpu = rng.choice(shape.cpu)
            memory = rng.choice(shape.memory_gi)
        pod_sets: list[tuple[str, int, int, int, int]] = []  # name, count, cpu, memory, gpus
        if shape.launcher:
            pod_sets.append(("launcher", 1, 2000, 8, 0))
        pod_sets.append(("main", count, cpu, memory, shape.gpus))
        namespace = f"ns-{leaf.name}"
        name = f"{shape.name}-{w:06d}"
        if meant_to_run:
            created = NOW_MS - rng.randrange(_MINUTE * 60, 7 * _DAY)
        else:
            created = NOW_MS - rng.randrange(1000, 2 * _DAY)
        workload: dict[str, Any] = {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": _uid(rng),
                "creationTimestamp": format_timestamp(created),
            },
            "spec": {
                "queueName": leaf.name,
                "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": name},
                "podSets": [
                    {"name": ps, "count": n, "requests": _requests(c, m, g)}
                    for ps, n, c, m, g in pod_sets
                ],
            },
        }
        priority_class, priority = rng.choice(PRIORITY_CLASSES)
        if rng.random() < 0.5:
            workload["spec"]["priorityClassName"] = priority_class
        else:
            workload["spec"]["priority"] = priority
        workload_objects.append(workload)
        if not meant_to_run:
            continue
        for flavor in leaf_flavors[q]:
            placed = _admit(rng, leaf, pools[flavor], flavor, pod_sets)
            if placed is None:
                continue
            admitted_at = created + rng.randrange(0, 30 * _MINUTE)
            workload["status"] = {
                "admission": {
                    "queue": leaf.name,
                    "podSets": [
                        {
                            "name": ps,
                            "count": n,
                            "flavors": {r: flavor for r in RESOURCES if r != GPU or g},
                        }
                        for ps, n, _c, _m, g in pod_sets
                    ],
                },
                "admittedAt": format_timestamp(admitted_at),
            }
            pod_created = format_timestamp(admitted_at + 5000)
            pool = pools[flavor]
            nodes = iter(placed)
            for ps, n, c, m, g in pod_sets:
                requests = _requests(c, m, g)
                for k in range(n):
                    pod_objects.append(
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {
                                "name": f"{name}-{ps}-{k}",
                                "namespace": namespace,
                                "labels": {WORKLOAD_LABEL: name},
                                "creationTimestamp": pod_created,
                            },
                            "spec": {
                                "nodeName": pool.names[next(nodes)],
                                "priority": priority,
                                "containers": [
                                    {"name": "main", "resources": {"requests": dict(requests)}}
                                ],
                            },
                            "status": {"phase": "Running"},
                        }
                    )
            break

    objects.extend(queue_objects)
    objects.extend(node_objects)
    objects.extend(workload_objects)
    objects.extend(pod_objects)
    return objects


def _queue_object(rng: random.Random, leaf: _QuotaNode, order: list[str]) -> dict[str, Any]:
    flavors = []
    for flavor in order:
        resources = []
        for resource in RESOURCES:
            fr = (flavor, resource)
            entry = {"name": resource, "nominalQuota": _quantity(resource, leaf.nominal[fr])}
            if fr in leaf.borrowing:
                entry["borrowingLimit"] = _quantity(resource, leaf.borrowing[fr])
            if fr in leaf.lending:
                entry["lendingLimit"] = _quantity(resource, leaf.lending[fr])
            resources.append(entry)
        flavors.append({"name": flavor, "resources": resources})
    assert leaf.parent is not None  # every generated leaf sits in a cohort
    spec: dict[str, Any] = {
        "parent": leaf.parent.name,
        "resourceGroups": [{"coveredResources": list(RESOURCES), "flavors": flavors}],
    }
    # Policies only matter to a session that runs preempt; they make the
    # snapshot a realistic one for a full session as well.
    preemption: dict[str, Any] = {}
    if rng.random() < 0.4:
        preemption["withinQueue"] = "LowerPriority"
    reclaim = rng.random()
    if reclaim < 0.3:
        preemption["reclaimWithinCohort"] = "LowerPriority"
    elif reclaim < 0.5:
        preemption["reclaimWithinCohort"] = "Any"
        if rng.random() < 0.5:
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": 100}
    if preemption:
        spec["preemption"] = preemption
    if rng.random() < 0.1:
        spec["queueingStrategy"] = "StrictFIFO"
    return {"apiVersion": API, "kind": "Queue", "metadata": {"name": leaf.name}, "spec": spec}


def _admit(
    rng: random.Random,
    leaf: _QuotaNode,
    pool: _Pool,
    flavor: str,
    pod_sets: Sequence[tuple[str, int, int, int, int]],
) -> list[int] | None:
    """Admit on ``flavor`` if quota and nodes allow; returns the node of each pod."""
    demand = {"cpu": 0, "memory": 0, GPU: 0}
    pods: list[tuple[int, int, int]] = []
    for _ps, n, c, m, g in pod_sets:
        demand["cpu"] += n * c
        demand["memory"] += n * m
        demand[GPU] += n * g
        pods.extend([(c, m, g)] * n)
    for resource, amount in demand.items():
        if amount and amount > leaf.available((flavor, resource)):
            return None
    placed = pool.place(rng, pods)
    if placed is None:
        return None
    for resource, amount in demand.items():
        if amount:
            leaf.add((flavor, resource), amount)
    return placed


# --- the saturated shape -------------------------------------------------------------------

SATURATED_GPUS = ((1, 0.5), (2, 0.3), (4, 0.2))
"""GPUs per pod of a saturated workload, with weights; each divides a node's 8."""


def generate_saturated(
    seed: int, *, queues: int = 100, workloads: int = 10_000, pending_share: float = 0.77
) -> list[dict[str, Any]]:
    """Every queue at exactly its nominal quota, in full cohorts: nothing can be borrowed.

    Queues come in cohorts of 10; a cohort uses one flavor (alternating). Each queue gets
    ``workloads / queues`` workloads of one podSet (1–2 pods of 1, 2 or 4 GPUs, with 8
    cores and 64Gi per GPU), with priorities drawn uniformly from 0–999 inside the queue;
    ``1 - pending_share`` of them are admitted and the queue's nominal quota of every
    resource is set to exactly what they use. Their pods are packed, largest first, onto
    just enough nodes of the flavor, so the nodes are full too (all but the last of each
    flavor). In-queue preemption is allowed (``LowerPriority``) and so is reclaim (``Any``),
    which can never find a borrower.
    """
    rng = random.Random(f"preemptd-benchmark/saturated/{queues}/{workloads}/{seed}")
    per_queue = workloads // queues
    admitted_per_queue = round(per_queue * (1 - pending_share))
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": {FLAVOR_LABEL: name}},
        }
        for name, _share in FLAVORS
    ]
    queue_objects: list[dict[str, Any]] = []
    workload_objects: list[dict[str, Any]] = []
    # Per flavor: (gpus per pod, namespace, workload name, pod set, pod index, priority, admitted_at).
    bound: dict[str, list[tuple[int, str, str, int, int, int]]] = {f: [] for f, _ in FLAVORS}
    sizes = [g for g, _ in SATURATED_GPUS]
    size_weights = [w for _, w in SATURATED_GPUS]
    for q in range(queues):
        name = f"q-{q:04d}"
        flavor = FLAVORS[(q // 10) % len(FLAVORS)][0]
        namespace = f"ns-{name}"
        admitted = set(rng.sample(range(per_queue), admitted_per_queue))
        used_gpus = 0
        for w in range(per_queue):
            gpus = rng.choices(sizes, weights=size_weights)[0]
            count = rng.randint(1, 2)
            priority = rng.randrange(1000)
            created = NOW_MS - rng.randrange(_MINUTE * 60, 7 * _DAY)
            wname = f"w-{q:04d}-{w:05d}"
            workload: dict[str, Any] = {
                "apiVersion": API,
                "kind": "Workload",
                "metadata": {
                    "name": wname,
                    "namespace": namespace,
                    "uid": _uid(rng),
                    "creationTimestamp": format_timestamp(created),
                },
                "spec": {
                    "queueName": name,
                    "priority": priority,
                    "owner": {"apiVersion": "batch/v1", "kind": "Job", "name": wname},
                    "podSets": [
                        {"name": "main", "count": count, "requests": _requests(gpus * 8000, gpus * 64, gpus)}
                    ],
                },
            }
            if w in admitted:
                admitted_at = created + rng.randrange(0, 30 * _MINUTE)
                workload["status"] = {
                    "admission": {
                        "queue": name,
                        "podSets": [
                            {"name": "main", "count": count, "flavors": {r: flavor for r in RESOURCES}}
                        ],
                    },
                    "admittedAt": format_timestamp(admitted_at),
                }
                used_gpus += gpus * count
                for k in range(count):
                    bound[flavor].append((gpus, namespace, wname, k, priority, admitted_at))
            workload_objects.append(workload)
        nominal = {"cpu": _cpu(used_gpus * 8000), "memory": f"{used_gpus * 64}Gi", GPU: str(used_gpus)}
        queue_objects.append(
            {
                "apiVersion": API,
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": {
                    "parent": f"cohort-{q // 10:03d}",
                    "resourceGroups": [
                        {
                            "coveredResources": list(RESOURCES),
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": r, "nominalQuota": nominal[r]} for r in RESOURCES
                                    ],
                                }
                            ],
                        }
                    ],
                    "preemption": {"withinQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                },
            }
        )
    node_objects: list[dict[str, Any]] = []
    pod_objects: list[dict[str, Any]] = []
    for flavor, _share in FLAVORS:
        # Largest first: with sizes that divide a node, first fit leaves no holes.
        pods = sorted(bound[flavor], key=lambda pod: -pod[0])
        free: list[int] = []
        for gpus, namespace, wname, k, priority, admitted_at in pods:
            node = next((n for n in range(max(0, len(free) - 1), len(free)) if free[n] >= gpus), None)
            if node is None:
                free.append(NODE_GPUS)
                node = len(free) - 1
            free[node] -= gpus
            pod_objects.append(
                _pod_object(
                    f"{wname}-main-{k}",
                    namespace,
                    wname,
                    f"node-{flavor}-{node:05d}",
                    priority,
                    _requests(gpus * 8000, gpus * 64, gpus),
                    format_timestamp(admitted_at + 5000),
                )
            )
        node_objects.extend(_node_object(f"node-{flavor}-{n:05d}", flavor) for n in range(len(free)))
    return objects + queue_objects + node_objects + workload_objects + pod_objects


def _node_object(name: str, flavor: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {FLAVOR_LABEL: flavor, "kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": _cpu(NODE_CPU), "memory": f"{NODE_MEMORY_GI}Gi", GPU: str(NODE_GPUS)}
        },
    }


def _pod_object(
    name: str,
    namespace: str,
    workload: str,
    node: str,
    priority: int,
    requests: dict[str, str],
    created: str,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {WORKLOAD_LABEL: workload},
            "creationTimestamp": created,
        },
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "main", "resources": {"requests": dict(requests)}}],
        },
        "status": {"phase": "Running"},
    }


# --- the shapes by name -----------------------------------------------------------------------

SHAPES = ("typical-M", "typical-L", "saturated", "contended", "large")
"""The shapes of PERFORMANCE.md. ``large`` is the cluster of ``typical-L`` (4,000 nodes of 8
GPUs, 1,000 queues, 20,000 workloads, ~140,000 pods): the same objects, named for the
figures that matter at that size (load, whole process, memory)."""
GROWTH_SERIES = ("queues", "deep")
"""``grow-queues-N``: N workloads in N/100 queues; ``grow-deep-N``: N workloads in 100 queues.
Both have N/10 nodes, and M's kinds of workload: at N = 10,000 both are M."""


def growth_spec(series: str, workloads: int) -> Size:
    if series not in GROWTH_SERIES:
        raise ValueError(f"unknown growth series {series!r} (choose from {', '.join(GROWTH_SERIES)})")
    queues = max(10, workloads // 100) if series == "queues" else 100
    return Size(
        nodes=max(10, workloads // 10),
        workloads=workloads,
        queues=queues,
        leaves_per_cohort=10,
        cohorts_per_group=0,
        shapes=_DENSE,
    )


def generate_shape(name: str, seed: int) -> list[dict[str, Any]]:
    """The objects of a shape by name: one of ``SHAPES``, a size of ``SIZES``, or
    ``grow-<series>-<workloads>``; the same (name, seed) gives the same list."""
    return shape_maker(name)(seed)


def shape_maker(name: str) -> Callable[[int], list[dict[str, Any]]]:
    """What ``generate_shape(name, seed)`` calls; ValueError for a name that is no shape."""
    size = name[len("typical-") :] if name.startswith("typical-") else name
    if size in SIZES:
        return lambda seed: generate(size, seed)
    if name == "large":
        return lambda seed: generate("L", seed)
    if name == "saturated":
        return generate_saturated
    if name == "contended":
        return lambda seed: generate_spec(CONTENDED, f"preemptd-benchmark/contended/{seed}")
    if name.startswith("grow-"):
        series, _, count = name[len("grow-") :].partition("-")
        if series in GROWTH_SERIES and count.isdigit() and int(count) > 0:
            spec = growth_spec(series, int(count))
            return lambda seed: generate_spec(spec, f"preemptd-benchmark/{name}/{seed}")
    known = [*SHAPES, *SIZES, "grow-queues-N", "grow-deep-N"]
    raise ValueError(f"unknown shape {name!r} (choose from {', '.join(known)})")


def describe(objects: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Counts by kind, plus admitted and pending workloads."""
    counts: Counter[str] = Counter()
    for obj in objects:
        kind = obj["kind"]
        counts[kind] += 1
        if kind == "Workload":
            counts["admitted" if "status" in obj else "pending"] += 1
    return dict(sorted(counts.items()))


def write(objects: list[dict[str, Any]], path: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        if path.endswith(".json"):
            json.dump(objects, out, separators=(",", ":"))
            out.write("\n")
            return
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        yaml.dump_all(objects, out, Dumper=dumper, sort_keys=False, explicit_start=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), help="a typical cluster (default S)")
    parser.add_argument(
        "--shape", help=f"{', '.join(SHAPES)}, or grow-queues-N / grow-deep-N (N workloads)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="FILE.yaml or FILE.json ('-' for YAML on stdout)")
    args = parser.parse_args(argv)
    if args.size and args.shape:
        parser.error("--size and --shape are alternatives")
    name = args.shape or args.size or "S"
    try:
        make = shape_maker(name)
    except ValueError as exc:
        parser.error(str(exc))
    objects = make(args.seed)
    if args.out == "-":
        import yaml

        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        yaml.dump_all(objects, sys.stdout, Dumper=dumper, sort_keys=False, explicit_start=True)
    else:
        write(objects, args.out)
    summary = ", ".join(f"{kind} {count}" for kind, count in describe(objects).items())
    print(f"{name} seed {args.seed}: {summary}; now {NOW}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
