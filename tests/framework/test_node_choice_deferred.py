"""The node-by-node victim search builds Deployment pod units only where it looks
(SEMANTICS §6 "Node choice"), and that changes nothing it chooses.

A Deployment preemptor's search gets running Deployments as ``DeferredPods`` and builds
the units of the pods on the nodes whose bound comes up. These tests run the same search
with every unit built up front and require the same nodes, victims and free room taken,
replica by replica; and check that a search over many nodes builds few of them.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import (
    Admission,
    Flavor,
    FlavorQuotas,
    Node,
    Pod,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from preemptd.framework.objects import Inventory
from preemptd.framework.preemption.replicas import replica_victims
from preemptd.framework.session import Registry, Session
from preemptd.framework.snapshot import Snapshot
from preemptd.plugins import cohort_reclaim, gpu_victims, priority

GPU = "nvidia.com/gpu"
Outcome = tuple[list[tuple[str, list[tuple[object, ...]], dict[str, int]]], list[str]]


def cluster(seed: int, nodes: int, *, cohort: bool = False) -> Inventory:
    """8-GPU nodes filled with Deployment pods of random shape, priority and lifecycle
    stage, plus a few Jobs whose pods share the nodes (units built up front either way).
    With ``cohort``, the workloads are spread over the preemptor's queue ``q`` and a
    queue ``r`` of the same cohort that borrows (so its pods are reclaim candidates)."""
    rnd = random.Random(seed)
    inv = Inventory()
    inv.flavors["gpu"] = Flavor("gpu", {"pool": "gpu"})

    def gpus_quota(amount: int) -> tuple[ResourceGroup, ...]:
        return (ResourceGroup((GPU,), (FlavorQuotas("gpu", {GPU: ResourceQuota(amount)}),)),)

    if cohort:
        policy = PreemptionPolicy("LowerPriority", "Any")
        inv.queues["q"] = QueueSpec("q", "c", gpus_quota(nodes * 6), preemption=policy)
        inv.queues["r"] = QueueSpec("r", "c", gpus_quota(nodes * 2))
        inv.queues["c"] = QueueSpec("c", None, defined=False)
    else:
        inv.queues["q"] = QueueSpec("q", None, gpus_quota(nodes * 8), preemption=PreemptionPolicy("LowerPriority"))
    queues = ["q", "r"] if cohort else ["q"]
    for n in range(nodes):
        name = f"n{n:03d}"
        inv.nodes[name] = Node(name, {"pool": "gpu"}, {GPU: 8})
    free = {f"n{n:03d}": rnd.choice([8, 8, 8, 7, 6]) for n in range(nodes)}
    owners: list[tuple[str, int, bool]] = []  # name, gpus per pod, is a Deployment
    for d in range(max(2, nodes)):
        owners.append((f"d{d:02d}", 1 if d == 0 else rnd.choice([1, 1, 2, 4]), True))
    for j in range(2):
        owners.append((f"job{j}", rnd.choice([1, 2]), False))
    members: dict[str, list[Pod]] = {}
    count = 0
    for node, room in sorted(free.items()):
        while room > 0:
            name, gpus, deployment = rnd.choice(owners)
            if gpus > room:
                name, gpus, deployment = next(o for o in owners if o[1] == 1)
            stage = rnd.choice(["live"] * 6 + ["terminating", "force"]) if deployment else "live"
            pod = Pod(
                "ml",
                f"{name}-{count:04d}",
                {GPU: gpus},
                node_name=node,
                workload=f"ml/{name}",
                priority=rnd.choice([None, None, rnd.randrange(6)]),
                created=rnd.randrange(1000) * 1000,
                deleting=stage != "live",
                force_delete=stage == "force",
                deletion_cost=rnd.choice([0, 0, -5, 5]),
            )
            inv.pods[pod.key] = pod
            members.setdefault(name, []).append(pod)
            count += 1
            room -= gpus
    for name, gpus, deployment in owners:
        pods = members.get(name, [])
        if not pods:
            continue
        live = sum(1 for p in pods if not p.deleting)
        committed = max(1, live - rnd.choice([0, 0, 1]))
        queue = rnd.choice(queues)
        admission = Admission(queue, (PodSetAdmission("main", committed if deployment else len(pods), {GPU: "gpu"}),))
        inv.workloads[f"ml/{name}"] = Workload(
            "ml",
            name,
            queue,
            (PodSet("main", committed if deployment else len(pods), {GPU: gpus}),),
            priority=rnd.randrange(6),
            created=rnd.randrange(1000) * 1000,
            owner_kind="Deployment" if deployment else "Job",
            admission=admission,
            admitted_at=rnd.randrange(1000) * 1000,
        )
    return inv


def outcome(snapshot: Snapshot, preemptor: Workload, replicas: int, *, defer: bool) -> Outcome:
    registry = Registry(
        [("priority", priority, None), ("cohort-reclaim", cohort_reclaim, None), ("gpu-victims", gpu_victims, None)]
    )
    session = Session(snapshot, registry)
    session.open()
    leaf = snapshot.tree.leaves["q"]
    choices, vetoed, _ = replica_victims(
        session, preemptor, leaf, preemptor.pod_sets[0], "gpu", replicas, defer_pods=defer
    )
    return [(c.node, [v.unit for v in c.victims], c.from_free) for c in choices], sorted(vetoed)


def preemptor(gpus: int, replicas: int, prio: int) -> Workload:
    return Workload(
        "ml", "hi", "q", (PodSet("main", replicas, {GPU: gpus}),), priority=prio, created=5, owner_kind="Deployment"
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(3, 12),
    st.sampled_from([1, 2, 3, 4, 8]),
    st.integers(1, 3),
    st.integers(1, 7),
    st.booleans(),
)
def test_deferred_pods_choose_the_same_nodes_and_victims(
    seed: int, nodes: int, gpus: int, replicas: int, prio: int, cohort: bool
) -> None:
    """Whatever the cluster, in one queue or reclaiming from a borrowing queue of its
    cohort, building Deployment pod units node by node gives the same replicas, nodes,
    victims (in order) and free room taken as building them all first."""
    snapshot = Snapshot.build(cluster(seed, nodes, cohort=cohort), now=10**6)
    wanted = preemptor(gpus, replicas, prio)
    assert outcome(snapshot, wanted, replicas, defer=True) == outcome(snapshot, wanted, replicas, defer=False)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10**6), st.integers(90, 160), st.sampled_from([4, 8]), st.integers(1, 3))
def test_large_multi_gpu_searches_sharpen_every_node_at_once_to_the_same_choice(
    seed: int, nodes: int, gpus: int, replicas: int
) -> None:
    """With more than 64 nodes that each need several victims, the search bounds the
    remaining nodes all at once; the choice is still the one of the full search."""
    snapshot = Snapshot.build(cluster(seed, nodes), now=10**6)
    wanted = preemptor(gpus, replicas, 7)
    deferred = outcome(snapshot, wanted, replicas, defer=True)
    assert deferred == outcome(snapshot, wanted, replicas, defer=False)


def test_deferred_search_finds_victims_where_the_full_one_does() -> None:
    """A fixed cluster where the search succeeds: both ways pick the same, non-empty victims."""
    snapshot = Snapshot.build(cluster(7, 10), now=10**6)
    wanted = preemptor(2, 2, 7)
    deferred = outcome(snapshot, wanted, 2, defer=True)
    assert deferred[0], "the example must need victims"
    assert deferred == outcome(snapshot, wanted, 2, defer=False)


def test_a_one_gpu_search_builds_units_on_few_of_many_nodes() -> None:
    """Over 400 full nodes, a single-GPU replica whose best victim is the only
    priority-0 pod builds the units of a handful of nodes, not of every pod."""
    inv = Inventory()
    inv.flavors["gpu"] = Flavor("gpu", {"pool": "gpu"})
    group = ResourceGroup((GPU,), (FlavorQuotas("gpu", {GPU: ResourceQuota(400 * 8)}),))
    inv.queues["q"] = QueueSpec("q", None, (group,), preemption=PreemptionPolicy("LowerPriority"))
    for n in range(400):
        node = f"n{n:03d}"
        inv.nodes[node] = Node(node, {"pool": "gpu"}, {GPU: 8})
        name = f"d{n:03d}"
        pods = [Pod("ml", f"{name}-{i}", {GPU: 1}, node_name=node, workload=f"ml/{name}") for i in range(8)]
        for p in pods:
            inv.pods[p.key] = p
        inv.workloads[f"ml/{name}"] = Workload(
            "ml",
            name,
            "q",
            (PodSet("main", 8, {GPU: 1}),),
            priority=0 if n == 123 else 3,
            owner_kind="Deployment",
            admission=Admission("q", (PodSetAdmission("main", 8, {GPU: "gpu"}),)),
            admitted_at=0,
        )
    snapshot = Snapshot.build(inv, now=10**6)
    registry = Registry([("priority", priority, None), ("gpu-victims", gpu_victims, None)])
    session = Session(snapshot, registry)
    session.open()
    wanted = preemptor(1, 1, 7)
    choices, _, search = replica_victims(session, wanted, snapshot.tree.leaves["q"], wanted.pod_sets[0], "gpu", 1)
    assert [c.node for c in choices] == ["n123"]
    assert search is not None
    assert len(search.index.by_node) <= 2
