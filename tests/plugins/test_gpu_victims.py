"""GPU deployment victims (SEMANTICS §6): the pod lifecycle classes of
``framework/pods.py`` and the ``gpu-victims`` plugin's victim key, eligibility and
last-replica scenario filter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import Pod, Workload
from preemptd.framework.objects import parse_objects
from preemptd.framework.pods import (
    CLASS_NAMES,
    FORCE_DELETING,
    NORMAL,
    SURPLUS,
    TERMINATING,
    Descending,
    classify,
)
from preemptd.framework.preemption import candidate_units
from preemptd.framework.quantity import parse_timestamp
from preemptd.framework.session import (
    CLASS_SAME_QUEUE,
    IN_QUEUE,
    Candidate,
    Registry,
    Scenario,
    Session,
    Taken,
    hookimpl,
)
from preemptd.framework.snapshot import Snapshot
from preemptd.plugins import gpu_victims

MINUTE = 60_000
T0 = parse_timestamp("2026-01-01T00:00:00Z")


# --- pods.classify ------------------------------------------------------------------------


def pod(
    name: str, minute: int = 0, *, cost: int = 0, deleting: bool = False, force: bool = False
) -> Pod:
    return Pod(
        "ml",
        name,
        {"nvidia.com/gpu": 1},
        node_name="n1",
        workload="ml/svc",
        created=T0 + minute * MINUTE,
        deleting=deleting,
        force_delete=force,
        deletion_cost=cost,
    )


def classes(pods: Sequence[Pod], committed: int) -> dict[str, str]:
    return {p.name: CLASS_NAMES[c] for p, c in classify(pods, committed)}


def test_live_pods_up_to_the_committed_count_are_normal() -> None:
    """With as many live pods as committed replicas, every pod is normal."""
    assert classes([pod("a", 1), pod("b", 2)], 2) == {"a": "normal", "b": "normal"}


def test_fewer_live_pods_than_committed_leaves_no_surplus() -> None:
    """Committed replicas without a pod yet do not make any pod surplus."""
    assert classes([pod("a", 1)], 3) == {"a": "normal"}


def test_surplus_is_the_lowest_deletion_cost_first() -> None:
    """The pod with the lowest pod-deletion-cost is surplus even when it is the oldest."""
    pods = [pod("old", 1, cost=-5), pod("mid", 2), pod("new", 3, cost=10)]
    assert classes(pods, 2) == {"old": "surplus", "mid": "normal", "new": "normal"}


def test_surplus_on_equal_cost_is_the_newest() -> None:
    """Among equal deletion costs the newest pods are surplus."""
    pods = [pod("a", 1), pod("b", 3), pod("c", 2)]
    assert classes(pods, 1) == {"a": "normal", "b": "surplus", "c": "surplus"}


def test_surplus_on_equal_cost_and_creation_is_the_higher_name() -> None:
    """Equal cost and creation time: the higher pod name is surplus."""
    pods = [pod("svc-a", 1), pod("svc-c", 1), pod("svc-b", 1)]
    assert classes(pods, 2) == {"svc-a": "normal", "svc-b": "normal", "svc-c": "surplus"}


def test_committed_zero_makes_every_live_pod_surplus() -> None:
    """A Deployment scaled to zero committed replicas has only surplus pods."""
    assert classes([pod("a", 1), pod("b", 2)], 0) == {"a": "surplus", "b": "surplus"}


def test_deleting_pods_are_terminating_or_force_deleting_and_not_live() -> None:
    """A deletionTimestamp makes a pod terminating (force-deleting with the annotation) and
    it does not count towards the committed replicas."""
    pods = [
        pod("a", 1),
        pod("b", 2),
        pod("t", 3, deleting=True),
        pod("f", 4, deleting=True, force=True),
    ]
    assert classes(pods, 2) == {
        "a": "normal",
        "b": "normal",
        "t": "terminating",
        "f": "force-deleting",
    }


def test_force_delete_annotation_without_deletion_timestamp_means_nothing() -> None:
    """The force-delete annotation alone leaves the pod live (normal or surplus by the usual rule)."""
    pods = [pod("a", 1), pod("b", 2, force=True)]
    assert classes(pods, 1) == {"a": "normal", "b": "surplus"}


def test_classify_lists_by_class_then_name_whatever_the_input_order() -> None:
    """The result is ordered by class, then namespace/name, for any input order."""
    pods = [
        pod("z", 5),
        pod("y", 4, deleting=True),
        pod("x", 3, deleting=True, force=True),
        pod("w", 1),
        pod("v", 2),
    ]
    expected = [
        ("x", FORCE_DELETING),
        ("y", TERMINATING),
        ("z", SURPLUS),
        ("v", NORMAL),
        ("w", NORMAL),
    ]
    assert [(p.name, c) for p, c in classify(pods, 2)] == expected
    assert [(p.name, c) for p, c in classify(list(reversed(pods)), 2)] == expected


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-3, 3), st.integers(0, 5), st.booleans(), st.booleans()),
        min_size=0,
        max_size=8,
    ),
    st.integers(0, 8),
)
def test_surplus_count_is_live_pods_beyond_committed(
    spec: list[tuple[int, int, bool, bool]], committed: int
) -> None:
    """Exactly max(0, live − committed) pods are surplus, and none of them outranks a normal
    pod in the ReplicaSet's removal order (lower cost, newer, higher name)."""
    pods = [
        pod(f"p{i}", minute, cost=cost, deleting=deleting, force=force)
        for i, (cost, minute, deleting, force) in enumerate(spec)
    ]
    result = classify(pods, committed)
    live = [p for p in pods if not p.deleting]
    surplus = [p for p, c in result if c == SURPLUS]
    normal = [p for p, c in result if c == NORMAL]
    assert len(result) == len(pods)
    assert len(surplus) == max(0, len(live) - committed)

    def removal(p: Pod) -> tuple[Any, ...]:
        return (p.deletion_cost, -p.created, Descending(p.name))

    assert all(removal(s) < removal(n) for s in surplus for n in normal)


# --- pods.Descending ----------------------------------------------------------------------


def test_descending_sorts_names_in_reverse_lexical_order() -> None:
    """Higher names first; on a shared prefix the longer name is the higher one."""
    names = ["ml/a", "ml/ab", "ml/b", "ml", "", "ns/a", "ml/a-10", "ml/a-9"]
    assert sorted(names, key=Descending) == sorted(names, reverse=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=6)))
def test_descending_matches_reverse_sort_for_any_strings(names: list[str]) -> None:
    """For any strings, sorting by ``Descending`` is sorting in reverse."""
    assert sorted(names, key=Descending) == sorted(names, reverse=True)


# --- the plugin ---------------------------------------------------------------------------


def _deployment(
    name: str, priority: int, committed: int, *, owner: str = "Deployment"
) -> dict[str, Any]:
    kind = {"Deployment": "apps/v1", "Job": "batch/v1"}[owner]
    return {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "queueName": "q",
            "priority": priority,
            "owner": {"apiVersion": kind, "kind": owner, "name": name},
            "podSets": [
                {"name": "main", "count": max(committed, 1), "requests": {"nvidia.com/gpu": "1"}}
            ],
        },
        **(
            {
                "status": {
                    "admission": {
                        "queue": "q",
                        "podSets": [
                            {
                                "name": "main",
                                "count": committed,
                                "flavors": {"nvidia.com/gpu": "gpu"},
                            }
                        ],
                    },
                    "admittedAt": "2026-01-01T00:00:00Z",
                }
            }
            if committed
            else {}
        ),
    }


def _pod(name: str, workload: str, minute: int, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {"preemptd.io/workload": workload},
            "creationTimestamp": f"2026-01-01T00:{minute:02d}:00Z",
            **metadata,
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
    }


_BASE: list[dict[str, Any]] = [
    {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeLabels": {"pool": "gpu"}},
    },
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"pool": "gpu"}},
        "status": {"allocatable": {"nvidia.com/gpu": "16"}},
    },
    {
        "apiVersion": "preemptd.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {
            "preemption": {"withinQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "gpu",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}],
                        }
                    ],
                }
            ],
        },
    },
]


def open_session(objects: list[dict[str, Any]], *plugins: tuple[str, object]) -> Session:
    inventory = parse_objects([("test.yaml", o) for o in _BASE + objects])
    assert not inventory.problems, inventory.problems
    registry = Registry([("gpu-victims", gpu_victims, None), *((n, p, None) for n, p in plugins)])
    session = Session(Snapshot.build(inventory, now=T0 + 60 * MINUTE), registry)
    session.open()
    return session


def units(session: Session, name: str) -> dict[str, Candidate]:
    """A workload's victim units by pod name (or by workload key for a whole Job)."""
    workload = session.snapshot.workloads[f"ml/{name}"]
    leaf = session.snapshot.tree.leaves["q"]
    found = candidate_units(session, workload, leaf, reason=IN_QUEUE, group=CLASS_SAME_QUEUE)
    return {(u.pods[0].name if u.pods else u.key): u for u in found}


def order_key(session: Session, preemptor: str) -> Callable[[Candidate], Sequence[object]]:
    key = gpu_victims.victim_order(
        session=session, preemptor=session.snapshot.workloads[f"ml/{preemptor}"]
    )
    assert key is not None
    return key


def accepts(session: Session, preemptor: str, victims: list[Candidate]) -> bool:
    workload = session.snapshot.workloads[f"ml/{preemptor}"]
    filters = gpu_victims.get_accumulated_scenario_filters(
        session=session, action="preempt", preemptor=workload
    )
    scenario = Scenario(session, workload, victims, "preempt")
    return all(check(scenario) for check in filters)


STALE = {"deletionTimestamp": "2026-01-01T00:50:00Z"}
FORCED = {
    "deletionTimestamp": "2026-01-01T00:50:00Z",
    "annotations": {"preemptd.io/force-delete": "true"},
}


@pytest.fixture
def cluster() -> Session:
    """high (Deployment, 100) wants a replica; low (10, committed 2, 4 pods: one surplus,
    one terminating, one force-deleting), mid (50, committed 2), eq (100, committed 2),
    job (a Job, 10) run in the same queue."""
    return open_session(
        [
            _deployment("high", 100, 0),
            _deployment("low", 10, 2),
            _deployment("mid", 50, 2),
            _deployment("eq", 100, 2),
            _deployment("job", 10, 1, owner="Job"),
            _pod("low-1", "low", 1),
            _pod("low-2", "low", 2),
            _pod("low-3", "low", 3),
            _pod("low-4", "low", 4, **STALE),
            _pod("low-5", "low", 5, **FORCED),
            _pod("mid-1", "mid", 6),
            _pod("mid-2", "mid", 7),
            _pod("eq-1", "eq", 8),
            _pod("eq-2", "eq", 9),
            _pod("job-0", "job", 10),
        ]
    )


def test_deployment_units_carry_their_pod_class(cluster: Session) -> None:
    """A Deployment gives one unit per bound pod, of the pod's lifecycle class."""
    low = units(cluster, "low")
    assert {name: CLASS_NAMES[u.pod_class] for name, u in low.items()} == {
        "low-1": "normal",
        "low-2": "normal",
        "low-3": "surplus",
        "low-4": "terminating",
        "low-5": "force-deleting",
    }


def test_victim_key_class_then_priority_then_newer_then_higher_name(cluster: Session) -> None:
    """Victims sort by class, then pod priority, then newest, then higher name."""
    key = order_key(cluster, "high")
    pool = {**units(cluster, "low"), **units(cluster, "mid")}
    ranked = sorted(pool.values(), key=key)
    assert [u.pods[0].name for u in ranked] == [
        "low-5",
        "low-4",
        "low-3",
        "low-2",
        "low-1",
        "mid-2",
        "mid-1",
    ]


def test_victim_key_ranks_a_job_by_priority_and_admission_time(cluster: Session) -> None:
    """A Job is a normal unit ranked by its priority and its admittedAt as creation time."""
    key = order_key(cluster, "high")
    job = units(cluster, "job")["ml/job"]
    low = units(cluster, "low")
    assert job.pod_class == NORMAL and job.count is None
    # Same priority 10; low-1 was created at 00:01, after the Job's admission at 00:00.
    assert sorted([job, low["low-1"], low["low-3"]], key=key) == [low["low-3"], low["low-1"], job]


def test_victim_key_higher_name_breaks_a_creation_tie() -> None:
    """Same class, priority and creation time: the higher namespace/name is taken first."""
    session = open_session(
        [
            _deployment("high", 100, 0),
            _deployment("svc", 10, 3),
            _pod("svc-a", "svc", 1),
            _pod("svc-b", "svc", 1),
            _pod("svc-c", "svc", 1),
        ]
    )
    ranked = sorted(units(session, "svc").values(), key=order_key(session, "high"))
    assert [u.pods[0].name for u in ranked] == ["svc-c", "svc-b", "svc-a"]


def test_victim_key_is_only_for_deployment_preemptors(cluster: Session) -> None:
    """A Job preemptor keeps the ordinary §4 order: the plugin adds no key."""
    job = cluster.snapshot.workloads["ml/job"]
    assert gpu_victims.victim_order(session=cluster, preemptor=job) is None


class _Scores:
    """A placement_score plugin: mid's pods score low, everything else high."""

    @hookimpl
    def placement_score(
        self, session: Session, preemptor: Workload
    ) -> Callable[[Candidate], float]:
        return lambda c: 0.0 if c.key == "ml/mid" else 5.0


class _BrokenScores:
    @hookimpl
    def placement_score(
        self, session: Session, preemptor: Workload
    ) -> Callable[[Candidate], float]:
        def score(candidate: Candidate) -> float:
            raise RuntimeError("boom")

        return score


def test_placement_score_ranks_after_priority_and_before_creation() -> None:
    """The preemptor's score orders victims of equal class and priority, before creation time."""
    session = open_session(
        [
            _deployment("high", 100, 0),
            _deployment("mid", 50, 2),
            _deployment("other", 50, 2),
            _deployment("low", 10, 2),
            _pod("mid-1", "mid", 1),
            _pod("mid-2", "mid", 2),
            _pod("other-1", "other", 8),
            _pod("other-2", "other", 9),
            _pod("low-1", "low", 3),
            _pod("low-2", "low", 4),
        ],
        ("scores", _Scores()),
    )
    pool = {**units(session, "mid"), **units(session, "other"), **units(session, "low")}
    ranked = sorted(pool.values(), key=order_key(session, "high"))
    # low (priority 10) first despite its high score; among priority 50, mid (score 0)
    # before the newer pods of other (score 5).
    assert [u.pods[0].name for u in ranked] == [
        "low-2",
        "low-1",
        "mid-2",
        "mid-1",
        "other-2",
        "other-1",
    ]


def test_a_failing_placement_score_counts_as_zero_and_is_blamed_on_its_plugin() -> None:
    """A scorer that raises scores 0 (creation time decides) and is recorded as a failure of the plugin that returned it, not of gpu-victims."""
    session = open_session(
        [
            _deployment("high", 100, 0),
            _deployment("mid", 50, 2),
            _pod("mid-1", "mid", 1),
            _pod("mid-2", "mid", 2),
        ],
        ("broken", _BrokenScores()),
    )
    ranked = sorted(units(session, "mid").values(), key=order_key(session, "high"))
    assert [u.pods[0].name for u in ranked] == ["mid-2", "mid-1"]
    assert session.registry.failures["broken"] > 0
    assert session.registry.failures["gpu-victims"] == 0
    assert {(e.plugin, e.hook) for e in session.registry.errors} == {("broken", "placement_score")}


def test_equal_or_higher_priority_pods_are_never_victims_of_a_deployment(cluster: Session) -> None:
    """For a Deployment preemptor a pod of equal or higher priority is vetoed, a lower one is left to others."""
    high = cluster.snapshot.workloads["ml/high"]
    eq = units(cluster, "eq")["eq-1"]
    low = units(cluster, "low")["low-4"]
    assert (
        gpu_victims.is_preemptible(session=cluster, action="preempt", preemptor=high, preemptee=eq)
        is False
    )
    assert (
        gpu_victims.is_preemptible(session=cluster, action="preempt", preemptor=high, preemptee=low)
        is None
    )


def test_pod_priority_overrides_the_workload_priority() -> None:
    """A pod's spec.priority, not its workload's, decides eligibility."""
    session = open_session(
        [
            _deployment("high", 100, 0),
            _deployment("svc", 10, 2),
            {
                **_pod("svc-1", "svc", 1),
                "spec": {**_pod("svc-1", "svc", 1)["spec"], "priority": 100},
            },
            _pod("svc-2", "svc", 2),
        ]
    )
    high = session.snapshot.workloads["ml/high"]
    svc = units(session, "svc")
    assert (svc["svc-1"].priority, svc["svc-2"].priority) == (100, 10)
    assert (
        gpu_victims.is_preemptible(
            session=session, action="preempt", preemptor=high, preemptee=svc["svc-1"]
        )
        is False
    )
    assert (
        gpu_victims.is_preemptible(
            session=session, action="preempt", preemptor=high, preemptee=svc["svc-2"]
        )
        is None
    )


def test_priority_veto_is_only_for_deployment_preemptors(cluster: Session) -> None:
    """A Job preemptor is not held to the equal-priority rule by this plugin."""
    job = cluster.snapshot.workloads["ml/job"]
    mid = units(cluster, "mid")["mid-1"]
    assert (
        gpu_victims.is_preemptible(session=cluster, action="preempt", preemptor=job, preemptee=mid)
        is None
    )


def test_filter_keeps_a_deployments_last_committed_replica(cluster: Session) -> None:
    """Taking one of two committed replicas is accepted; taking both is not."""
    low = units(cluster, "low")
    assert accepts(cluster, "high", [low["low-1"]])
    assert accepts(cluster, "high", [low["low-2"]])
    assert not accepts(cluster, "high", [low["low-1"], low["low-2"]])


def test_filter_leaves_surplus_terminating_and_force_deleting_pods_eligible(
    cluster: Session,
) -> None:
    """Pods on their way out are not committed replicas: taking all of them and one normal pod is fine."""
    low = units(cluster, "low")
    assert accepts(cluster, "high", [low["low-3"], low["low-4"], low["low-5"], low["low-1"]])


def test_filter_counts_replicas_taken_earlier_in_the_session(cluster: Session) -> None:
    """A replica an earlier preemptor took this session counts against the last-replica rule."""
    low = units(cluster, "low")
    cluster.taken["ml/low"] = Taken(pods=1, pod_names=["ml/low-2"], preemptor="ml/other")
    assert not accepts(cluster, "high", [low["low-1"]])


def test_filter_ignores_jobs(cluster: Session) -> None:
    """A whole Job is not a Deployment replica: the filter does not restrict it."""
    job = units(cluster, "job")["ml/job"]
    assert accepts(cluster, "high", [job])


def test_filter_applies_to_job_preemptors_too(cluster: Session) -> None:
    """No preemption — whoever the preemptor — takes a Deployment's last committed replica."""
    low = units(cluster, "low")
    assert not accepts(cluster, "job", [low["low-1"], low["low-2"]])


def test_no_last_replica_filter_in_a_session_without_deployments() -> None:
    """Victims are units of the snapshot's workloads: with no Deployment among them the
    last-replica rule has nothing to restrict, so the search runs without the filter."""
    session = open_session(
        [
            _deployment("job", 10, 1, owner="Job"),
            _deployment("other", 100, 0, owner="Job"),
            _pod("job-0", "job", 1),
        ]
    )
    workload = session.snapshot.workloads["ml/other"]
    filters = gpu_victims.get_accumulated_scenario_filters(
        session=session, action="preempt", preemptor=workload
    )
    assert filters == []


def test_last_replica_filter_kept_while_the_snapshot_holds_a_deployment(cluster: Session) -> None:
    workload = cluster.snapshot.workloads["ml/job"]
    filters = gpu_victims.get_accumulated_scenario_filters(
        session=cluster, action="preempt", preemptor=workload
    )
    assert len(filters) == 1
