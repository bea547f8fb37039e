"""LocalQueues, namespace selectors, WorkloadPriorityClasses and Workload labels.

Which leaf Queue a Workload's ``spec.queueName`` reaches (the LocalQueue of its namespace
first, a Queue of that name only without one), whether its namespace may use that queue
(the Queue's ``namespaceSelector``), which class its priority comes from
(``spec.priorityClassSource``), the labels a plugin can read on it, and where each
waiting workload stands in its queues (``positionInQueue``, ``positionInLocalQueue``).
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework import hookimpl
from preemptd.framework.model import LabelRequirement, LabelSelector
from preemptd.framework.objects import Inventory, parse_objects
from preemptd.framework.testing import decide, open_session
from preemptd.plugins import cohort_reclaim, flavor_fungibility, gpu_victims, min_runtime, priority

GROUP = "preemptd.io/v1alpha1"
FILE = "snap.yaml"
NOW = "2026-01-01T12:00:00Z"
BUILT_IN = [
    ("priority", priority, None),
    ("cohort-reclaim", cohort_reclaim, None),
    ("flavor-fungibility", flavor_fungibility, flavor_fungibility.Config()),
    ("min-runtime", min_runtime, min_runtime.Config()),
    ("gpu-victims", gpu_victims, None),
]

# --- builders -------------------------------------------------------------------------


def flavor(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": name}}


def queue(name: str, cpu: str = "4", *, parent: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}
        ],
        **spec,
    }
    if parent is not None:
        body["parent"] = parent
    return {"apiVersion": GROUP, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def local_queue(namespace: str, name: str, target: str | None) -> dict[str, Any]:
    spec = {} if target is None else {"queue": target}
    return {"apiVersion": GROUP, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def workload(
    namespace: str,
    name: str,
    queue_name: str,
    *,
    cpu: str = "1",
    created: str = "2026-01-01T00:00:00Z",
    admitted_to: str | None = None,
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": GROUP,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created, **(metadata or {})},
        "spec": {"queueName": queue_name, "podSets": [{"name": "main", "count": 1, "requests": {"cpu": cpu}}], **spec},
    }
    if admitted_to is not None:
        obj["status"] = {
            "admission": {"queue": admitted_to, "podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "default"}}]},
            "admittedAt": "2026-01-01T00:00:00Z",
        }
    return obj


def workload_class(name: str, value: int, kind: str = "WorkloadPriorityClass") -> dict[str, Any]:
    api = GROUP if kind == "WorkloadPriorityClass" else "scheduling.k8s.io/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "value": value}


def parse(*objects: dict[str, Any]) -> Inventory:
    return parse_objects((FILE, obj) for obj in objects)


def problems(inventory: Inventory) -> list[str]:
    return [str(problem) for problem in inventory.problems]


# --- LocalQueues ------------------------------------------------------------------------


def test_queue_name_names_the_local_queue_of_the_workloads_namespace() -> None:
    """``spec.queueName: train`` in ``ml`` reaches the Queue the LocalQueue ``ml/train`` names."""
    found = parse(flavor(), queue("gpu"), local_queue("ml", "train", "gpu"), workload("ml", "a", "train"))
    assert [] == problems(found)
    a = found.workloads["ml/a"]
    assert ("gpu", "train") == (a.queue, a.local_queue)


def test_a_local_queue_shadows_a_queue_of_the_same_name_in_its_namespace_only() -> None:
    """``team-a`` in ``ml`` is the LocalQueue (to ``other``); in ``web``, with no LocalQueue of
    that name, it is still the Queue ``team-a``, as before LocalQueues."""
    found = parse(
        flavor(),
        queue("team-a"),
        queue("other"),
        local_queue("ml", "team-a", "other"),
        workload("ml", "a", "team-a"),
        workload("web", "b", "team-a"),
    )
    assert [] == problems(found)
    assert ("other", "team-a") == (found.workloads["ml/a"].queue, found.workloads["ml/a"].local_queue)
    assert ("team-a", None) == (found.workloads["web/b"].queue, found.workloads["web/b"].local_queue)


def test_a_snapshot_without_local_queues_reads_and_decides_as_before() -> None:
    """No LocalQueue: queueName is the Queue, and no pending entry has a LocalQueue position."""
    objects = [flavor(), queue("solo", "1"), workload("ml", "big", "solo", cpu="2")]
    inventory = parse(*objects)
    assert (None, "solo") == (inventory.workloads["ml/big"].local_queue, inventory.workloads["ml/big"].queue)
    (pending,) = decide(open_session(objects, BUILT_IN, NOW)).to_dict()["pending"]
    assert {"workload", "reason", "message", "waitingFor", "positionInQueue"} == set(pending)


def test_admission_without_its_queue_is_charged_to_the_local_queues_queue() -> None:
    """An admitted workload whose ``status.admission`` does not name a queue holds the quota
    of the Queue its LocalQueue leads to, not of a Queue named like the LocalQueue."""
    admitted = workload("ml", "a", "train", admitted_to="gpu")
    del admitted["status"]["admission"]["queue"]
    found = parse(flavor(), queue("gpu"), queue("train"), local_queue("ml", "train", "gpu"), admitted)
    admission = found.workloads["ml/a"].admission
    assert admission is not None and "gpu" == admission.queue


def test_a_local_queue_to_an_unknown_queue_leaves_its_workloads_inadmissible_saying_so() -> None:
    found = parse(flavor(), queue("gpu"), local_queue("ml", "train", "gpo"), workload("ml", "a", "train"))
    assert "ml/a" not in found.workloads
    expected = "Workload/ml/a: spec.queueName: LocalQueue 'ml/train': unknown queue 'gpo'"
    assert expected == found.inadmissible["ml/a"]
    assert [f"{FILE}: {expected}"] == problems(found)


def test_a_local_queue_to_a_parent_queue_is_not_a_place_for_workloads() -> None:
    found = parse(flavor(), queue("org"), queue("gpu", parent="org"), local_queue("ml", "train", "org"),
                  workload("ml", "a", "train"))
    assert "LocalQueue 'ml/train': queue 'org' is not a leaf queue" in found.inadmissible["ml/a"]


def test_an_invalid_local_queue_is_reported_and_never_falls_back_to_a_queue_of_its_name() -> None:
    """A LocalQueue without ``spec.queue`` is a located problem; its workloads wait with the
    reason instead of landing on the Queue ``train`` that it shadows."""
    found = parse(flavor(), queue("train"), local_queue("ml", "train", None), workload("ml", "a", "train"))
    assert f"{FILE}: LocalQueue/ml/train: spec.queue: required field is missing" in problems(found)
    assert "Workload/ml/a: spec.queueName: LocalQueue 'ml/train' is invalid" == found.inadmissible["ml/a"]
    assert {} == found.local_queues


def test_two_copies_of_a_local_queue_invalidate_both() -> None:
    found = parse(flavor(), queue("gpu"), local_queue("ml", "train", "gpu"), local_queue("ml", "train", "gpu"),
                  workload("ml", "a", "train"))
    assert "ml/a" in found.inadmissible
    assert any("LocalQueue 'ml/train' is defined 2 times" in problem for problem in problems(found))


# --- namespace selectors ----------------------------------------------------------------


def gated(selector: dict[str, Any] | None, *objects: dict[str, Any], ns: str = "ml") -> Inventory:
    spec = {} if selector is None else {"namespaceSelector": selector}
    return parse(flavor(), queue("gpu", **spec), *objects, workload(ns, "a", "gpu"))


SELECTOR_CASES = [
    # (selector, namespace labels, admitted to the queue)
    ({"matchLabels": {"team": "ml"}}, {"team": "ml"}, True),
    ({"matchLabels": {"team": "ml"}}, {"team": "web"}, False),
    ({"matchLabels": {"team": "ml"}}, {}, False),
    ({"matchLabels": {"team": "ml", "tier": "gold"}}, {"team": "ml"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "research"]}]}, {"team": "research"}, True),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml", "research"]}]}, {"team": "web"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]}, {}, False),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["web"]}]}, {"team": "ml"}, True),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["web"]}]}, {"team": "web"}, False),
    ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["web"]}]}, {}, True),
    ({"matchExpressions": [{"key": "gpu-users", "operator": "Exists"}]}, {"gpu-users": ""}, True),
    ({"matchExpressions": [{"key": "gpu-users", "operator": "Exists"}]}, {"team": "ml"}, False),
    ({"matchExpressions": [{"key": "frozen", "operator": "DoesNotExist"}]}, {"team": "ml"}, True),
    ({"matchExpressions": [{"key": "frozen", "operator": "DoesNotExist"}]}, {"frozen": "yes"}, False),
    (
        {"matchLabels": {"team": "ml"}, "matchExpressions": [{"key": "frozen", "operator": "DoesNotExist"}]},
        {"team": "ml", "frozen": "yes"},
        False,
    ),
    ({}, {"team": "web"}, True),
    (None, {"team": "web"}, True),
]


@pytest.mark.parametrize(("selector", "labels", "admitted"), SELECTOR_CASES)
def test_namespace_selector_operators_follow_kubernetes(
    selector: dict[str, Any] | None, labels: dict[str, str], admitted: bool
) -> None:
    """matchLabels and each matchExpressions operator select Namespaces as Kubernetes does;
    ``{}`` and no selector at all let every namespace in."""
    found = gated(selector, namespace("ml", **labels))
    assert [] == problems(found)
    assert admitted == ("ml/a" in found.workloads)
    if not admitted:
        assert "namespace 'ml' is not selected by the namespaceSelector of queue 'gpu'" == found.inadmissible["ml/a"]


def test_a_namespace_without_an_object_has_only_its_name_label() -> None:
    """``kubernetes.io/metadata.name`` is on every Namespace; a snapshot without the
    Namespace object still selects on it, and on nothing else."""
    by_name = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml"]}]}
    assert "ml/a" in gated(by_name).workloads
    assert "web/a" in gated(by_name, ns="web").inadmissible
    assert "ml/a" in gated({"matchLabels": {"team": "ml"}}).inadmissible


def test_an_invalid_namespace_is_reported_and_its_workloads_wait_where_a_selector_asks() -> None:
    """A Namespace whose labels cannot be read is a located problem; a queue with a selector
    neither admits nor refuses its workloads on a guess, a queue without one takes them."""
    broken = namespace("ml")
    broken["metadata"]["labels"] = {"team": 5}
    found = gated({"matchLabels": {"team": "ml"}}, broken)
    assert [f"{FILE}: Namespace/ml: metadata.labels[team]: expected a string (quote it), got 5"] == problems(found)
    assert (
        "Namespace 'ml' is invalid, so the namespaceSelector of queue 'gpu' cannot be checked"
        == found.inadmissible["ml/a"]
    )
    assert "ml/a" in gated(None, broken).workloads


def test_the_selector_applies_through_a_local_queue_and_says_so() -> None:
    found = parse(
        flavor(),
        queue("gpu", namespaceSelector={"matchLabels": {"team": "ml"}}),
        namespace("ml", team="ml"),
        namespace("web", team="web"),
        local_queue("ml", "train", "gpu"),
        local_queue("web", "train", "gpu"),
        workload("ml", "a", "train"),
        workload("web", "b", "train"),
    )
    assert ["ml/a"] == list(found.workloads)
    assert (
        "namespace 'web' is not selected by the namespaceSelector of queue 'gpu' (through LocalQueue 'web/train')"
        == found.inadmissible["web/b"]
    )


def test_a_refused_workload_is_pending_inadmissible_and_the_rest_is_scheduled() -> None:
    objects = [
        flavor(),
        queue("gpu", namespaceSelector={"matchLabels": {"team": "ml"}}),
        namespace("ml", team="ml"),
        namespace("web", team="web"),
        workload("ml", "a", "gpu"),
        workload("web", "b", "gpu"),
    ]
    decisions = decide(open_session(objects, BUILT_IN, NOW)).to_dict()
    assert ["ml/a"] == [a["workload"] for a in decisions["admitted"]]
    assert [("web/b", "Inadmissible", None)] == [
        (p["workload"], p["reason"], p["positionInQueue"]) for p in decisions["pending"]
    ]
    assert "namespaceSelector of queue 'gpu'" in decisions["pending"][0]["message"]


def test_an_admitted_workload_keeps_its_quota_when_its_namespace_no_longer_matches() -> None:
    """The selector gates admission; it evicts nothing (Kueue checks it when admitting)."""
    found = gated({"matchLabels": {"team": "ml"}}, namespace("ml", team="web"))
    assert "ml/a" in found.inadmissible
    admitted = parse(flavor(), queue("gpu", namespaceSelector={"matchLabels": {"team": "ml"}}),
                     namespace("ml", team="web"), workload("ml", "a", "gpu", admitted_to="gpu"))
    assert "ml/a" in admitted.workloads


@pytest.mark.parametrize(
    ("selector", "path", "message"),
    [
        ({"matchExpressions": [{"key": "team", "operator": "Like", "values": ["m"]}]},
         "spec.namespaceSelector.matchExpressions[0].operator", "unknown value 'Like'"),
        ({"matchExpressions": [{"key": "team", "operator": "In"}]},
         "spec.namespaceSelector.matchExpressions[0].values", "operator In needs at least one value"),
        ({"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["x"]}]},
         "spec.namespaceSelector.matchExpressions[0].values", "operator Exists takes no values"),
        ({"matchExpressions": [{"operator": "Exists"}]},
         "spec.namespaceSelector.matchExpressions[0].key", "required field is missing"),
        ({"matchExpressions": [{"key": "team"}]},
         "spec.namespaceSelector.matchExpressions[0].operator", "required field is missing"),
        ({"matchLabels": {"team": 5}}, "spec.namespaceSelector.matchLabels[team]", "expected a string"),
        ("team=ml", "spec.namespaceSelector", "expected a mapping"),
    ],
)
def test_a_malformed_selector_is_a_located_problem_that_takes_the_queue_out(
    selector: Any, path: str, message: str
) -> None:
    found = gated(selector, namespace("ml", team="ml"))
    assert any(problem.startswith(f"{FILE}: Queue/gpu: {path}: {message}") for problem in problems(found)), problems(found)
    assert "queue tree of 'gpu' is invalid" in found.inadmissible["ml/a"]


def test_the_nothing_selector_selects_no_namespace() -> None:
    """What a selector that must match nothing (Kueue's ClusterQueue without one) is made of."""
    assert not LabelSelector(nothing=True).matches({"kubernetes.io/metadata.name": "ml"})
    assert LabelSelector().matches({})
    assert not LabelSelector(match_expressions=(LabelRequirement("a", "In", ("x",)),)).matches({})


# --- WorkloadPriorityClass --------------------------------------------------------------


def priority_of(*objects: dict[str, Any], **spec: Any) -> tuple[int | None, list[str]]:
    found = parse(*objects, flavor(), queue("gpu"), workload("ml", "a", "gpu", **spec))
    value = found.workloads["ml/a"].priority if "ml/a" in found.workloads else None
    return value, problems(found)


BOTH = (workload_class("high", 500), workload_class("high", 100, kind="PriorityClass"))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("preemptd.io/workloadpriorityclass", 500),
        ("kueue.x-k8s.io/workloadpriorityclass", 500),
        ("scheduling.k8s.io/priorityclass", 100),
        ("", 100),
        (None, 100),
    ],
)
def test_priority_class_source_chooses_the_kind_priority_class_name_names(source: str | None, expected: int) -> None:
    """A WorkloadPriorityClass and a PriorityClass both called ``high``: the source decides
    which one's value the workload gets; without one it is the PriorityClass, as before."""
    spec: dict[str, Any] = {"priorityClassName": "high"}
    if source is not None:
        spec["priorityClassSource"] = source
    assert (expected, []) == priority_of(*BOTH, **spec)


def test_an_explicit_priority_wins_over_any_class() -> None:
    assert (3, []) == priority_of(*BOTH, priority=3, priorityClassName="high",
                                  priorityClassSource="preemptd.io/workloadpriorityclass")


def test_a_workload_class_source_ignores_the_global_default_priority_class() -> None:
    """A named WorkloadPriorityClass gives the value even when a PriorityClass is globalDefault."""
    default = workload_class("everyone", 50, kind="PriorityClass") | {"globalDefault": True}
    assert (500, []) == priority_of(default, *BOTH, priorityClassName="high",
                                    priorityClassSource="preemptd.io/workloadpriorityclass")
    assert (50, []) == priority_of(default, *BOTH)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"priorityClassSource": "preemptd.io/workloadpriorityclass", "priorityClassName": "low"},
         "spec.priorityClassName: unknown WorkloadPriorityClass 'low'"),
        ({"priorityClassSource": "preemptd.io/workloadpriorityclass"},
         "spec.priorityClassName: priorityClassSource preemptd.io/workloadpriorityclass needs a "
         "WorkloadPriorityClass name"),
        ({"priorityClassSource": "example.com/class", "priorityClassName": "high"},
         "spec.priorityClassSource: unknown value 'example.com/class'"),
    ],
)
def test_a_bad_priority_class_reference_is_a_located_problem(spec: dict[str, Any], message: str) -> None:
    value, found = priority_of(*BOTH, **spec)
    assert value is None
    assert any(problem.startswith(f"{FILE}: Workload/ml/a: {message}") for problem in found), found


def test_an_invalid_workload_priority_class_is_reported_and_so_is_its_user() -> None:
    broken = {"apiVersion": GROUP, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": "lots"}
    value, found = priority_of(broken, priorityClassName="high", priorityClassSource="preemptd.io/workloadpriorityclass")
    assert value is None
    assert f"{FILE}: WorkloadPriorityClass/high: value: expected an integer, got 'lots'" in found
    assert f"{FILE}: Workload/ml/a: spec.priorityClassName: WorkloadPriorityClass 'high' is invalid" in found


# --- labels and annotations ---------------------------------------------------------------


def test_a_workload_carries_its_labels_and_annotations() -> None:
    found = parse(flavor(), queue("gpu"), workload(
        "ml", "a", "gpu", metadata={"labels": {"team": "ml"}, "annotations": {"owner": "ana"}}))
    a = found.workloads["ml/a"]
    assert ({"team": "ml"}, {"owner": "ana"}) == (dict(a.labels), dict(a.annotations))


def test_workloads_without_labels_share_one_empty_mapping() -> None:
    """No per-workload cost for the many Workloads that carry none."""
    found = parse(flavor(), queue("gpu"), workload("ml", "a", "gpu"), workload("ml", "b", "gpu"))
    a, b = found.workloads["ml/a"], found.workloads["ml/b"]
    assert a.labels is b.labels is a.annotations
    with pytest.raises(TypeError):
        a.labels["x"] = "y"  # type: ignore[index]


NEVER_PREEMPT = "example.com/never-preempt"


class NeverPreemptLabelled:
    """A plugin: a workload labelled ``example.com/never-preempt: "true"`` is never a victim."""

    @hookimpl
    def is_preemptible(self, session: Any, action: str, preemptor: Any, preemptee: Any) -> bool | None:
        return False if preemptee.workload.labels.get(NEVER_PREEMPT) == "true" else None


def test_a_plugin_can_protect_workloads_by_label() -> None:
    """High-priority ``new`` needs one of the two running low-priority workloads' room: the
    labelled one is skipped, the other is preempted; with both labelled, none is."""
    def objects(*protected: str) -> list[dict[str, Any]]:
        running = [
            workload("ml", name, "gpu", cpu="2", admitted_to="gpu", priority=0,
                     created=f"2026-01-01T00:0{i}:00Z",
                     metadata={"labels": {NEVER_PREEMPT: "true"}} if name in protected else None)
            for i, name in enumerate(("old", "young"))
        ]
        return [flavor(), queue("gpu", preemption={"withinQueue": "LowerPriority"}), *running,
                workload("ml", "new", "gpu", cpu="2", priority=10, created="2026-01-01T01:00:00Z")]

    plugins = [*BUILT_IN, ("never-preempt", NeverPreemptLabelled(), None)]
    without = decide(open_session(objects(), plugins, NOW)).to_dict()["preempted"]
    assert 1 == len(without)
    victim = without[0]["workload"]
    spared = "ml/old" if victim == "ml/young" else "ml/young"
    with_label = decide(open_session(objects(victim.split("/")[1]), plugins, NOW)).to_dict()["preempted"]
    assert [spared] == [p["workload"] for p in with_label]
    assert [] == decide(open_session(objects("old", "young"), plugins, NOW)).to_dict()["preempted"]


# --- queue positions ----------------------------------------------------------------------


def full_queue_objects() -> list[dict[str, Any]]:
    """Queue ``gpu`` (1 cpu) is full with ``ml/running``, and nothing may be preempted; queue
    ``cpu`` (1 cpu) is empty. Five workloads wait for ``gpu`` (one cpu each), reaching it
    through three LocalQueues or directly, and two ask ``cpu``."""
    return [
        flavor(),
        queue("gpu", "1"),
        queue("cpu", "1"),
        local_queue("ml", "train", "gpu"),
        local_queue("ml", "other", "gpu"),
        local_queue("web", "train", "gpu"),
        workload("ml", "running", "gpu", admitted_to="gpu", priority=100),
        workload("ml", "a", "train", priority=0, created="2026-01-01T00:01:00Z"),
        workload("ml", "b", "train", priority=10, created="2026-01-01T00:03:00Z"),
        workload("web", "c", "train", priority=0, created="2026-01-01T00:00:00Z"),
        workload("web", "d", "gpu", priority=10, created="2026-01-01T00:02:00Z"),
        workload("ml", "e", "other", priority=5, created="2026-01-01T00:00:00Z"),
        workload("ml", "f", "cpu", priority=0, created="2026-01-01T00:00:00Z"),
        workload("ml", "g", "cpu", priority=0, created="2026-01-01T00:05:00Z", cpu="2"),
    ]


def positions(decisions: dict[str, Any]) -> dict[str, tuple[int | None, int | None]]:
    return {p["workload"]: (p["positionInQueue"], p.get("positionInLocalQueue")) for p in decisions["pending"]}


def test_positions_follow_priority_then_age_in_each_queue_and_local_queue() -> None:
    """By hand (SEMANTICS §2.1: higher priority, then older, then the tie-break key):
    ``gpu`` takes d (10, 00:02), b (10, 00:03), e (5), c (0, 00:00), a (0, 00:01).
    LocalQueue ``ml/train`` holds b then a; ``ml/other`` e; ``web/train`` c; d came
    directly and has no LocalQueue position. In ``cpu``, f is admitted and leaves the
    queue; g (2 cpu of 1) waits alone."""
    decisions = decide(open_session(full_queue_objects(), BUILT_IN, NOW)).to_dict()
    assert ["ml/f"] == [a["workload"] for a in decisions["admitted"]]
    assert {
        "web/d": (1, None),
        "ml/b": (2, 1),
        "ml/e": (3, 1),
        "web/c": (4, 1),
        "ml/a": (5, 2),
        "ml/g": (1, None),
    } == positions(decisions)
    assert "positionInLocalQueue" not in next(p for p in decisions["pending"] if p["workload"] == "web/d")


def test_positions_come_from_the_sessions_own_order() -> None:
    """With a plugin that orders by name, backwards (and no priority plugin), the positions
    are that order, whatever the priorities say: ``gpu`` takes e, d, c, b, a; in ``cpu``,
    g (too big) is the head and waits, f is admitted after it."""

    class BackwardsByName:
        @hookimpl
        def workload_order(self, session: Any) -> Any:
            return lambda w: tuple(-ord(char) for char in w.name)

    decisions = decide(open_session(full_queue_objects(), [("backwards", BackwardsByName(), None)], NOW)).to_dict()
    assert ["ml/f"] == [a["workload"] for a in decisions["admitted"]]
    assert {
        "ml/e": (1, 1),
        "web/d": (2, None),
        "web/c": (3, 1),
        "ml/b": (4, 1),
        "ml/a": (5, 2),
        "ml/g": (1, None),
    } == positions(decisions)


def test_a_preempting_workload_keeps_its_place_at_the_front() -> None:
    """A workload that preempted for itself is still pending (PendingPreemption) and first."""
    objects = [
        flavor(),
        queue("gpu", "1", preemption={"withinQueue": "LowerPriority"}),
        workload("ml", "low", "gpu", admitted_to="gpu", priority=0),
        workload("ml", "high", "gpu", priority=10, created="2026-01-01T00:05:00Z"),
        workload("ml", "later", "gpu", priority=5, created="2026-01-01T00:01:00Z"),
    ]
    decisions = decide(open_session(objects, BUILT_IN, NOW)).to_dict()
    assert ["ml/low"] == [p["workload"] for p in decisions["preempted"]]
    assert {"ml/high": (1, None), "ml/later": (2, None)} == positions(decisions)


def test_the_decision_json_with_positions_is_byte_identical_across_runs() -> None:
    first = decide(open_session(full_queue_objects(), BUILT_IN, NOW)).to_json()
    again = decide(open_session(list(reversed(full_queue_objects())), BUILT_IN, NOW)).to_json()
    assert first == again
