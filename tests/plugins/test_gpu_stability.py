"""Stability of GPU deployment victims across sessions (SEMANTICS §6 "Stability").

Random clusters of 8-GPU nodes full of lower-priority Deployments (a few pods already
surplus or on their way out), and one or two higher-priority Deployments that want a
replica. Each session runs on the previous session's output as ``--apply`` writes it
(``apply_decisions``), with the cluster's part of the lifecycle done after it:

* a Deployment with fewer live pods than committed replicas gets new pods, placed best
  fit the way the session placed them (never into free room a pending preemptor counts
  on besides its victims);
* a pod that was surplus when a session started is deleted by its ReplicaSet after it
  (it gets a ``deletionTimestamp``);
* a terminating pod a session force-deletes gets the force-delete annotation (that is
  what ``apply_decisions`` writes);
* a pod that was force-deleting when a session started is gone after it.

So a pod scaled down in session 1 is surplus in session 2, terminating in session 3,
force-deleting in session 4 and gone in session 5. The property holds the first
preemptor in processing order (higher priority, then older) to SEMANTICS' stability
promise: later sessions rely only on pods the preemptors relied on in session 1, scale
nothing down for it, and admit it once its victims are gone. A lower preemptor is not
held to it: room its victims already freed is plain free room in the next session, and
the first preemptor (or its best-fit placement once admitted) may take it, which sends
the lower one after new victims — SEMANTICS §6 does not keep that room for it, and the
design's lifecycle says freed room goes to the highest-priority Deployment in the next
cycle.

Neither property starts from a cluster with force-deleting pods. One that no preemptor
relies on leaves on its own, and a node whose set counted it may then need one victim
fewer and win the node choice: the preemptor relies on a new pod (at most a force
delete, as the new pod is on its way out as well). SEMANTICS §6 ranks nodes by their
victims as they are now and keeps no memory of earlier choices, so that is what it says.

When every preemptor wants one replica of the same size, the lower one loses nothing by
that: the set the higher one leaves frees room for a replica of its size too, so the
preemptors may trade sets between sessions but none needs a pod outside the union of
session 1's sets. The second property holds every preemptor to that union.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.daemon.backends.files import apply_decisions
from preemptd.daemon.config import Config
from preemptd.daemon.plugins import resolve_plugins
from preemptd.framework.decisions import Decisions
from preemptd.framework.objects import parse_objects
from preemptd.framework.quantity import format_timestamp, parse_timestamp
from preemptd.framework.run import run_session
from preemptd.framework.snapshot import Snapshot

GPU = "nvidia.com/gpu"
COST = "controller.kubernetes.io/pod-deletion-cost"
FORCE = "preemptd.io/force-delete"
T0 = parse_timestamp("2026-01-01T00:00:00Z")
MINUTE = 60_000
SESSIONS = 8

Doc = dict[str, Any]


# --- objects ------------------------------------------------------------------------------


def _stamp(minute: int) -> str:
    return format_timestamp(T0 + minute * MINUTE)


def _workload(
    name: str, priority: int, gpus: int, desired: int, committed: int, minute: int
) -> Doc:
    doc: Doc = {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": _stamp(minute)},
        "spec": {
            "queueName": "q",
            "priority": priority,
            "owner": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "podSets": [{"name": "main", "count": desired, "requests": {GPU: str(gpus)}}],
        },
    }
    if committed:
        doc["status"] = {
            "admission": {
                "queue": "q",
                "podSets": [{"name": "main", "count": committed, "flavors": {GPU: "gpu"}}],
            },
            "admittedAt": _stamp(0),
        }
    return doc


def _pod(name: str, workload: str, node: str, gpus: int, minute: int, stage: str) -> Doc:
    metadata: Doc = {
        "name": name,
        "namespace": "ml",
        "labels": {"preemptd.io/workload": workload},
        "creationTimestamp": _stamp(minute),
    }
    if stage in ("terminating", "force-deleting"):
        metadata["deletionTimestamp"] = _stamp(25)
    if stage == "force-deleting":
        metadata["annotations"] = {FORCE: "true"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {GPU: str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


def cluster(
    seed: int, preemptors: int, *, size: int | None = None, force_deleting: bool = True
) -> list[Doc]:
    """Nodes of 8 GPUs filled with pods of 2–4 Deployments (priority 10–40) placed
    consistently (a node never holds more than its GPUs), a few of them already surplus
    or on their way out, and ``preemptors`` Deployments of priority 60–100 that want
    one replica each. ``size`` gives every preemptor replica that many GPUs (else each
    draws its own); without ``force_deleting``, pods drawn as force-deleting are
    only terminating. Neither changes the random draws, so a seed keeps its layout."""
    rnd = random.Random(seed)
    docs: list[Doc] = [
        {
            "apiVersion": "preemptd.io/v1alpha1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {"nodeLabels": {"pool": "gpu"}},
        },
        {
            "apiVersion": "preemptd.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {
                "preemption": {"withinQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": "1000"}]}
                        ],
                    }
                ],
            },
        },
    ]
    nodes = [f"n{i + 1}" for i in range(rnd.randint(2, 4))]
    for node in nodes:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node, "labels": {"pool": "gpu"}},
                "status": {"allocatable": {GPU: "8"}},
            }
        )
    victims = [
        (f"d{i}", rnd.choice([10, 20, 30, 40]), rnd.choice([1, 2, 4]))
        for i in range(rnd.randint(2, 4))
    ]
    live: dict[str, int] = {name: 0 for name, _, _ in victims}
    pods: list[Doc] = []
    for node in nodes:
        free = 8 - rnd.choice([0, 0, 0, 1, 2])
        while True:
            fitting = [v for v in victims if v[2] <= free]
            if not fitting:
                break
            name, _, gpus = rnd.choice(fitting)
            index = (
                sum(1 for p in pods if p["metadata"]["labels"]["preemptd.io/workload"] == name) + 1
            )
            # A Deployment's first pod is live; later ones are now and then on their way out.
            stage = (
                "normal"
                if index == 1
                else rnd.choices(["normal", "terminating", "force-deleting"], [12, 1, 1])[0]
            )
            if stage == "force-deleting" and not force_deleting:
                stage = "terminating"
            pods.append(_pod(f"{name}-{index}", name, node, gpus, rnd.randint(1, 20), stage))
            if stage == "normal":
                live[name] += 1
            free -= gpus
    for name, priority, gpus in victims:
        if not live[name]:
            continue  # no pod placed: the Deployment is not part of this cluster
        # Now and then one live pod more than committed: a surplus pod.
        committed = max(0, live[name] - (1 if live[name] > 1 and rnd.random() < 0.25 else 0))
        docs.append(_workload(name, priority, gpus, committed, committed, 0))
    for i in range(preemptors):
        priority = rnd.choice([60, 80, 100])
        drawn = rnd.choice([1, 2, 4, 8])
        docs.append(_workload(f"p{i}", priority, size or drawn, 1, 0, 30 + i))
    return docs + pods


# --- the lifecycle ------------------------------------------------------------------------


def _pods(docs: Iterable[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] == "Pod"]


def _key(doc: Doc) -> str:
    return f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"


def _stage(pod: Doc) -> str:
    metadata = pod["metadata"]
    if metadata.get("deletionTimestamp") is None:
        return "live"
    return (
        "force-deleting" if metadata.get("annotations", {}).get(FORCE) == "true" else "terminating"
    )


def surplus(docs: list[Doc]) -> set[str]:
    """The live pods beyond each Deployment's committed count that its ReplicaSet removes:
    lowest pod-deletion-cost, then newest, then higher name."""
    committed = {
        d["metadata"]["name"]: d.get("status", {})
        .get("admission", {})
        .get("podSets", [{"count": 0}])[0]["count"]
        for d in docs
        if d["kind"] == "Workload"
    }
    by_workload: dict[str, list[Doc]] = {}
    for pod in _pods(docs):
        if _stage(pod) == "live":
            by_workload.setdefault(pod["metadata"]["labels"]["preemptd.io/workload"], []).append(
                pod
            )
    found: set[str] = set()
    for name, pods in by_workload.items():
        extra = len(pods) - committed.get(name, 0)
        if extra <= 0:
            continue
        # Sort by (cost, newest, higher name) in two stable passes: name descending first.
        pods.sort(key=lambda p: p["metadata"]["name"], reverse=True)
        pods.sort(
            key=lambda p: (
                int(p["metadata"].get("annotations", {}).get(COST, "0")),
                -parse_timestamp(p["metadata"]["creationTimestamp"]),
            )
        )
        found.update(_key(p) for p in pods[:extra])
    return found


def _gpus(pod: Doc) -> int:
    return int(pod["spec"]["containers"][0]["resources"]["requests"][GPU])


def _committed(workload: Doc) -> int:
    admission = workload.get("status", {}).get("admission")
    return int(admission["podSets"][0]["count"]) if admission else 0


def create_missing_pods(docs: list[Doc], decisions: Decisions, minute: int) -> list[Doc]:
    """The ReplicaSets' part: a Deployment with fewer live pods than committed replicas
    gets new pods, placed like the session placed them — best fit (least free GPUs, then
    node name), higher priority first, never into the free room a pending preemptor's
    replica counts on besides its victims (the session reserved that room for it)."""
    free = {
        d["metadata"]["name"]: int(d["status"]["allocatable"][GPU])
        for d in docs
        if d["kind"] == "Node"
    }
    by_key = {_key(p): p for p in _pods(docs)}
    for pod in by_key.values():
        free[pod["spec"]["nodeName"]] -= _gpus(pod)
    workloads = {_key(d): d for d in docs if d["kind"] == "Workload"}
    for pending in decisions.pending:
        pods = [
            by_key[w.removeprefix("pod:")]
            for w in pending.waiting_for
            if w.removeprefix("pod:") in by_key
        ]
        nodes = {p["spec"]["nodeName"] for p in pods}
        if pending.reason == "PendingPreemption" and len(nodes) == 1:
            request = int(workloads[pending.workload]["spec"]["podSets"][0]["requests"][GPU])
            free[nodes.pop()] -= max(0, request - sum(_gpus(p) for p in pods))
    live: dict[str, int] = {}
    for pod in by_key.values():
        if _stage(pod) == "live":
            name = pod["metadata"]["labels"]["preemptd.io/workload"]
            live[name] = live.get(name, 0) + 1
    created: list[Doc] = []
    for workload in sorted(
        workloads.values(), key=lambda w: (-w["spec"]["priority"], w["metadata"]["name"])
    ):
        name = workload["metadata"]["name"]
        gpus = int(workload["spec"]["podSets"][0]["requests"][GPU])
        for i in range(_committed(workload) - live.get(name, 0)):
            fitting = sorted((room, node) for node, room in free.items() if room >= gpus)
            if not fitting:
                break
            node = fitting[0][1]
            free[node] -= gpus
            created.append(_pod(f"{name}-s{minute}-{i}", name, node, gpus, minute, "normal"))
    return docs + created


def advance(before: list[Doc], after: list[Doc], decisions: Decisions, minute: int) -> list[Doc]:
    """``after`` (a session's applied output) with the cluster's part of the lifecycle done:
    new pods for committed replicas that have none, a deletionTimestamp for pods that were
    surplus when the session started, and pods that were force-deleting then are gone."""
    was_surplus = surplus(before)
    was_force_deleting = {_key(p) for p in _pods(before) if _stage(p) == "force-deleting"}
    after = create_missing_pods(after, decisions, minute)
    still_surplus = surplus(after)
    out: list[Doc] = []
    for doc in after:
        if doc["kind"] == "Pod":
            key = _key(doc)
            if key in was_force_deleting:
                continue
            if key in was_surplus and key in still_surplus:
                doc = copy.deepcopy(doc)
                doc["metadata"]["deletionTimestamp"] = _stamp(minute)
        out.append(doc)
    return out


def session(docs: list[Doc], minute: int) -> Decisions:
    inventory = parse_objects([("cluster.yaml", d) for d in docs])
    assert not inventory.problems, inventory.problems
    plugins, problems = resolve_plugins(Config())
    assert not problems
    return run_session(Snapshot.build(inventory, now=T0 + minute * MINUTE), plugins.registry())


def relied_on(decisions: Decisions, preemptors: set[str]) -> set[str]:
    """Every pod or workload the preemptors take or wait for in this session."""
    found: set[str] = set()
    for entry in decisions.preempted:
        if entry.preemptor in preemptors:
            found.update(entry.pods if entry.count is not None else [entry.workload])
    for action in decisions.pod_actions:
        if action.preemptor in preemptors:
            found.add(action.pod)
    for pending in decisions.pending:
        if pending.workload in preemptors:
            found.update(w.removeprefix("pod:") for w in pending.waiting_for)
    return found


def admitted_count(docs: list[Doc], key: str) -> int:
    for doc in docs:
        if doc["kind"] == "Workload" and _key(doc) == key:
            admission = doc.get("status", {}).get("admission")
            return admission["podSets"][0]["count"] if admission else 0
    raise AssertionError(key)


# --- the property -------------------------------------------------------------------------


def processing_order(docs: list[Doc], keys: set[str]) -> list[str]:
    """Preemptors as a session processes them: higher priority, then older."""
    workloads = {_key(d): d for d in docs if d["kind"] == "Workload"}
    return sorted(
        keys,
        key=lambda k: (
            -workloads[k]["spec"]["priority"],
            workloads[k]["metadata"]["creationTimestamp"],
            k,
        ),
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=1_000_000), st.integers(min_value=1, max_value=2))
def test_later_sessions_rely_only_on_the_first_sessions_victims(seed: int, preemptors: int) -> None:
    """Stepping sessions on their own applied output with the lifecycle advanced, the
    first preemptor (processed before every other one in every session) never relies on
    a pod outside the first session's set, scales nothing down after session 1, and is
    admitted once its victims are gone. No pod is force-deleting when session 1 runs:
    see the next test for why."""
    docs = cluster(seed, preemptors, force_deleting=False)
    first = session(docs, 60)
    waiting = {p.workload for p in first.pending if p.reason == "PendingPreemption"}
    victims = relied_on(first, waiting)
    assert bool(victims) == bool(waiting)
    if not waiting:
        return
    top = processing_order(docs, waiting)[0]
    history = [first]
    docs = advance(docs, apply_decisions(docs, first), first, 60)
    for step in range(1, SESSIONS):
        if admitted_count(docs, top) >= 1:
            break
        minute = 60 + step
        decisions = session(docs, minute)
        history.append(decisions)
        later = relied_on(decisions, {top})
        assert later <= victims, (step, sorted(later - victims), sorted(victims))
        assert not [e for e in decisions.preempted if e.preemptor == top], step
        docs = advance(docs, apply_decisions(docs, decisions), decisions, minute)
    assert admitted_count(docs, top) >= 1, [d.to_json() for d in history]


def preemptor_keys(docs: list[Doc]) -> set[str]:
    """The preemptor Deployments ``cluster`` adds (``p0``, ``p1``, …)."""
    return {
        _key(d) for d in docs if d["kind"] == "Workload" and d["metadata"]["name"].startswith("p")
    }


@settings(max_examples=30, deadline=None)
@given(
    st.integers(min_value=0, max_value=1_000_000),
    st.integers(min_value=2, max_value=3),
    st.sampled_from([1, 2, 4, 8]),
)
def test_preemptors_of_one_replica_size_rely_only_on_the_first_sessions_victims(
    seed: int, preemptors: int, size: int
) -> None:
    """Two or three preemptors that each want one replica of the same number of GPUs
    (any priorities), in a cluster where no pod is force-deleting when session 1 runs.
    Stepping sessions on their own applied output with the lifecycle advanced, no
    session after the first relies on a pod (scale-down, force-delete or wait) outside
    the union of the pods all preemptors relied on in session 1, none scales anything
    down, and every preemptor pending preemption in session 1 is admitted once its
    victims are gone. Which preemptor relies on which of those pods may change from one
    session to the next (a higher one moves onto room a lower one's victims freed, and
    the lower one takes the set it left); only the union is pinned.

    Pods already force-deleting are left out because one that no preemptor relies on
    leaves the cluster on its own two sessions in: a node whose victim set counted it
    then needs one victim fewer and can win the "fewer victims" comparison against the
    node chosen in session 1, whatever the preemptors' shapes. Preemptors of different
    sizes, or wanting several replicas, are not held to the union: the set a higher
    preemptor leaves need not fit a larger lower one, and replicas admitted in place or
    left without victims in session 1 are new demand later."""
    docs = cluster(seed, preemptors, size=size, force_deleting=False)
    keys = preemptor_keys(docs)
    first = session(docs, 60)
    waiting = {p.workload for p in first.pending if p.reason == "PendingPreemption"}
    victims = relied_on(first, keys)
    assert bool(victims) == bool(waiting)
    if not waiting:
        return
    history = [first]
    docs = advance(docs, apply_decisions(docs, first), first, 60)
    for step in range(1, SESSIONS):
        if all(admitted_count(docs, key) >= 1 for key in waiting):
            break
        minute = 60 + step
        decisions = session(docs, minute)
        history.append(decisions)
        later = relied_on(decisions, keys)
        assert later <= victims, (step, sorted(later - victims), sorted(victims))
        assert not [e for e in decisions.preempted if e.preemptor in keys], step
        docs = advance(docs, apply_decisions(docs, decisions), decisions, minute)
    assert all(admitted_count(docs, key) >= 1 for key in waiting), [d.to_json() for d in history]


def test_the_lifecycle_takes_a_scaled_down_pod_through_every_class() -> None:
    """The simulated lifecycle: scaled down (session 1), surplus, terminating, force-deleting, gone."""
    docs = [
        {
            "apiVersion": "preemptd.io/v1alpha1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {"nodeLabels": {"pool": "gpu"}},
        },
        {
            "apiVersion": "preemptd.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {
                "preemption": {"withinQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [
                            {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": "1000"}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"pool": "gpu"}},
            "status": {"allocatable": {GPU: "8"}},
        },
        _workload("low", 10, 4, 2, 2, 0),
        _workload("high", 100, 4, 1, 0, 30),
        _pod("low-1", "low", "n1", 4, 1, "normal"),
        _pod("low-2", "low", "n1", 4, 2, "normal"),
    ]
    seen = []
    for step in range(5):
        decisions = session(docs, 60 + step)
        stage = {_key(p): _stage(p) for p in _pods(docs)}.get("ml/low-2", "gone")
        if stage == "live":
            stage = "surplus" if "ml/low-2" in surplus(docs) else "normal"
        seen.append(
            (
                stage,
                sorted(relied_on(decisions, {"ml/high"})),
                [a.workload for a in decisions.admitted],
            )
        )
        docs = advance(docs, apply_decisions(docs, decisions), decisions, 60 + step)
    assert seen == [
        ("normal", ["ml/low-2"], []),
        ("surplus", ["ml/low-2"], []),
        ("terminating", ["ml/low-2"], []),
        ("force-deleting", ["ml/low-2"], []),
        ("gone", [], ["ml/high"]),
    ]
