"""Objects (CONTRACT §1) -> the model: records, located problems, isolation, determinism."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.model import (
    Admission,
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    Node,
    Pod,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    PriorityClass,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Workload,
)
from preemptd.framework.objects import Inventory, Problem, parse_objects

FILE = "snap.yaml"
GROUP = "preemptd.io/v1alpha1"
GI = 2**30
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
T0_MS = 1_767_225_600_000

# --- builders -------------------------------------------------------------------------


def flavor(name: str = "a100", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": GROUP, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def resource(name: str, nominal: Any, **limits: Any) -> dict[str, Any]:
    return {"name": name, "nominalQuota": nominal, **limits}


def flavor_quotas(name: str, *resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "resources": list(resources)}


def group(covered: list[str], *flavors: dict[str, Any]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": list(flavors)}


def cpu_group(flavor_name: str = "a100", nominal: Any = "8", **limits: Any) -> dict[str, Any]:
    return group(["cpu"], flavor_quotas(flavor_name, resource("cpu", nominal, **limits)))


def queue(
    name: str, parent: str | None = None, *groups: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    body: dict[str, Any] = dict(spec)
    if parent is not None:
        body["parent"] = parent
    if groups:
        body["resourceGroups"] = list(groups)
    return {"apiVersion": GROUP, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def pod_set(name: str = "main", count: int = 1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "count": count, "requests": {"cpu": "1"}, **fields}


def workload(
    name: str,
    queue_name: str | None = "team-a",
    *,
    namespace: str = "ml",
    pod_sets: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"podSets": pod_sets if pod_sets is not None else [pod_set()], **spec}
    if queue_name is not None:
        body["queueName"] = queue_name
    obj: dict[str, Any] = {
        "apiVersion": GROUP,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, **(metadata or {})},
        "spec": body,
    }
    if status is not None:
        obj["status"] = status
    return obj


def pod(
    name: str, *, namespace: str = "ml", metadata: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **(metadata or {})},
        "spec": spec,
    }


def container(**requests: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests}}


def priority_class(name: str, value: Any, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def node(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, **fields}


def parse(*objects: Any, file: str = FILE) -> Inventory:
    return parse_objects([(file, obj) for obj in objects])


def basic(*objects: Any) -> Inventory:
    """A flavor ``a100`` and a root queue ``team-a`` with 8 cpus, plus ``objects``."""
    return parse(flavor(), queue("team-a", None, cpu_group()), *objects)


def problem(obj: str, path: str, message: str, file: str = FILE) -> Problem:
    return Problem(file, obj, path, message)


QUOTA_PATH = "spec.resourceGroups[0].flavors[0].resources[0]"

# --- records --------------------------------------------------------------------------


def test_contract_example_objects_become_model_records() -> None:
    """The objects of CONTRACT §1 parse into the model records they describe, without problems."""
    inventory = parse(
        flavor("a100", nodeLabels={"gpu.model": "a100"}),
        queue(
            "team-a",
            "research",
            group(
                ["cpu", "memory", "nvidia.com/gpu"],
                flavor_quotas(
                    "a100",
                    resource("nvidia.com/gpu", "8", borrowingLimit="8", lendingLimit="4"),
                    resource("cpu", "64"),
                    resource("memory", "512Gi"),
                ),
            ),
            preemption={
                "withinQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "BorrowingOverPreemption",
            },
            queueingStrategy="StrictFIFO",
            preemptMinRuntime="5m",
            reclaimMinRuntime="10m",
        ),
        workload(
            "train-1",
            metadata={"uid": "u-1", "creationTimestamp": T0},
            priority=100,
            owner={"apiVersion": "batch/v1", "kind": "Job", "name": "train-1"},
            pod_sets=[
                {
                    "name": "main",
                    "count": 4,
                    "minCount": 2,
                    "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                    "nodeSelector": {"gpu.model": "a100"},
                    "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                }
            ],
            status={
                "admission": {
                    "queue": "team-a",
                    "podSets": [
                        {
                            "name": "main",
                            "count": 4,
                            "flavors": {"cpu": "a100", "memory": "a100", "nvidia.com/gpu": "a100"},
                        }
                    ],
                },
                "admittedAt": "2026-01-01T00:05:00Z",
                "conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted"}],
                "flavorScan": {"main": {"nvidia.com/gpu": 1}},
            },
        ),
    )
    expected = Inventory(
        flavors={"a100": Flavor("a100", node_labels={"gpu.model": "a100"})},
        queues={
            "research": QueueSpec("research", parent=None, defined=False),
            "team-a": QueueSpec(
                name="team-a",
                parent="research",
                resource_groups=(
                    ResourceGroup(
                        covered=("cpu", "memory", "nvidia.com/gpu"),
                        flavors=(
                            FlavorQuotas(
                                "a100",
                                {
                                    "cpu": ResourceQuota(64_000),
                                    "memory": ResourceQuota(512 * GI),
                                    "nvidia.com/gpu": ResourceQuota(
                                        8, borrowing_limit=8, lending_limit=4
                                    ),
                                },
                            ),
                        ),
                    ),
                ),
                preemption=PreemptionPolicy("LowerPriority", "Any", "LowerPriority", 100),
                fungibility=FlavorFungibility(
                    "MayStopSearch", "TryNextFlavor", "BorrowingOverPreemption"
                ),
                queueing_strategy="StrictFIFO",
                preempt_min_runtime=300_000,
                reclaim_min_runtime=600_000,
                source=FILE,
            ),
        },
        workloads={
            "ml/train-1": Workload(
                namespace="ml",
                name="train-1",
                queue="team-a",
                pod_sets=(
                    PodSet(
                        name="main",
                        count=4,
                        requests={"cpu": 2000, "memory": 8 * GI, "nvidia.com/gpu": 1},
                        min_count=2,
                        node_selector={"gpu.model": "a100"},
                        tolerations=(Toleration("gpu", "Exists", "", "NoSchedule"),),
                    ),
                ),
                priority=100,
                created=T0_MS,
                uid="u-1",
                owner_kind="Job",
                owner_name="train-1",
                admission=Admission(
                    "team-a",
                    (
                        PodSetAdmission(
                            "main", 4, {"cpu": "a100", "memory": "a100", "nvidia.com/gpu": "a100"}
                        ),
                    ),
                ),
                admitted_at=T0_MS + 300_000,
                evicted=True,
                flavor_scan={"main": {"nvidia.com/gpu": 1}},
                source=FILE,
            )
        },
    )
    assert expected == inventory


def test_defaults_fill_what_a_minimal_workload_leaves_out() -> None:
    """A workload without namespace, priority, timestamps or status gets the documented defaults."""
    obj = workload("w", pod_sets=[{"name": "main", "requests": {"cpu": "500m"}}])
    del obj["metadata"]["namespace"]
    expected = {
        "default/w": Workload(
            namespace="default",
            name="w",
            queue="team-a",
            pod_sets=(PodSet("main", 1, {"cpu": 500}),),
            source=FILE,
        )
    }
    assert expected == basic(obj).workloads


def test_zero_requests_are_dropped() -> None:
    """A request of 0 is ignored (SEMANTICS §1), so it is not in the podSet's requests."""
    obj = workload("w", pod_sets=[pod_set(requests={"cpu": "1", "nvidia.com/gpu": 0})])
    expected = {"cpu": 1000}
    assert expected == basic(obj).workloads["ml/w"].pod_sets[0].requests


def test_owner_falls_back_to_the_controlling_owner_reference() -> None:
    """Without spec.owner the controlling ownerReference (else the first) names the owner."""
    refs = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "controller": True},
    ]
    parsed = basic(workload("w", metadata={"ownerReferences": refs})).workloads["ml/w"]
    expected = ("Deployment", "llm")
    assert expected == (parsed.owner_kind, parsed.owner_name)


def test_priority_class_name_resolves_to_its_value() -> None:
    """spec.priorityClassName takes the value of the PriorityClass of that name."""
    inventory = basic(priority_class("high", 1000), workload("w", priorityClassName="high"))
    expected = (1000, {"high": PriorityClass("high", 1000)})
    assert expected == (
        inventory.workloads["ml/w"].priority,
        inventory.priority_classes,
    )


def test_spec_priority_wins_over_priority_class_name() -> None:
    """An explicit spec.priority is used as is, whatever the class says."""
    inventory = basic(
        priority_class("high", 1000), workload("w", priority=5, priorityClassName="high")
    )
    expected = 5
    assert expected == inventory.workloads["ml/w"].priority


def test_global_default_priority_class_applies_to_workloads_without_priority() -> None:
    """As in Kubernetes and Kueue, a globalDefault PriorityClass sets the default priority."""
    inventory = basic(priority_class("normal", 50, globalDefault=True), workload("w"))
    expected = 50
    assert expected == inventory.workloads["ml/w"].priority


def test_evicted_condition_marks_the_workload_evicted_only_when_true() -> None:
    """Only an Evicted condition with status "True" means the eviction was issued."""
    inventory = basic(
        workload("on", status={"conditions": [{"type": "Evicted", "status": "True"}]}),
        workload("off", status={"conditions": [{"type": "Evicted", "status": "False"}]}),
    )
    expected = (True, False)
    assert expected == (
        inventory.workloads["ml/on"].evicted,
        inventory.workloads["ml/off"].evicted,
    )


def test_deployment_committed_count_may_exceed_the_desired_count() -> None:
    """A Deployment's admitted count is its committed count and may be above spec count."""
    obj = workload(
        "llm",
        owner={"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
        pod_sets=[pod_set(count=2)],
        status={
            "admission": {
                "queue": "team-a",
                "podSets": [{"name": "main", "count": 3, "flavors": {"cpu": "a100"}}],
            }
        },
    )
    admission = basic(obj).workloads["ml/llm"].admission
    expected = Admission("team-a", (PodSetAdmission("main", 3, {"cpu": "a100"}),))
    assert expected == admission


def test_flavor_node_and_priority_class_objects_become_records() -> None:
    """ResourceFlavor, Node and PriorityClass objects become Flavor, Node and PriorityClass records."""
    inventory = parse(
        flavor(
            "spot",
            nodeLabels={"pool": "spot"},
            nodeTaints=[{"key": "spot", "value": "yes", "effect": "NoSchedule"}],
            tolerations=[{"key": "spot", "operator": "Equal", "value": "yes"}],
        ),
        node(
            "n1",
            metadata={"name": "n1", "labels": {"pool": "spot"}},
            spec={"unschedulable": True, "taints": [{"key": "spot", "effect": "NoExecute"}]},
            status={
                "allocatable": {
                    "cpu": "3900m",
                    "memory": "15Gi",
                    "nvidia.com/gpu": "8",
                    "pods": 110,
                }
            },
        ),
        priority_class("high", 1000),
    )
    expected = Inventory(
        flavors={
            "spot": Flavor(
                "spot",
                node_labels={"pool": "spot"},
                node_taints=(Taint("spot", "yes", "NoSchedule"),),
                tolerations=(Toleration("spot", "Equal", "yes", ""),),
            )
        },
        nodes={
            "n1": Node(
                "n1",
                labels={"pool": "spot"},
                allocatable={"cpu": 3900, "memory": 15 * GI, "nvidia.com/gpu": 8, "pods": 110},
                unschedulable=True,
                taints=(Taint("spot", "", "NoExecute"),),
            )
        },
        priority_classes={"high": PriorityClass("high", 1000)},
    )
    assert expected == inventory


def test_pod_record_reads_labels_annotations_and_lifecycle() -> None:
    """A Pod's workload label, deletion, force-delete and deletion-cost annotations are read."""
    obj = pod(
        "llm-1",
        metadata={
            "labels": {"preemptd.io/workload": "llm"},
            "annotations": {
                "preemptd.io/force-delete": "true",
                "controller.kubernetes.io/pod-deletion-cost": "-2147483648",
            },
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-01T00:01:00Z",
        },
        nodeName="n1",
        priority=7,
        containers=[container(cpu="1")],
    )
    obj["status"] = {"phase": "Running"}
    expected = {
        "ml/llm-1": Pod(
            namespace="ml",
            name="llm-1",
            requests={"cpu": 1000},
            node_name="n1",
            workload="ml/llm",
            priority=7,
            created=T0_MS,
            deleting=True,
            force_delete=True,
            deletion_cost=-2147483648,
            phase="Running",
            labels={"preemptd.io/workload": "llm"},
            source=FILE,
        )
    }
    assert expected == parse(obj).pods


def test_pod_requests_take_the_larger_of_containers_sum_and_largest_init_container() -> None:
    """Pod requests are per resource max(sum over containers, max over init containers)."""
    obj = pod(
        "p",
        containers=[container(cpu="1", memory="1Gi"), container(cpu="500m", memory="1Gi")],
        initContainers=[
            container(cpu="2"),
            container(cpu="1", memory="1Gi", **{"nvidia.com/gpu": "1"}),
        ],
    )
    expected = {"cpu": 2000, "memory": 2 * GI, "nvidia.com/gpu": 1}
    assert expected == parse(obj).pods["ml/p"].requests


@pytest.mark.parametrize(
    ("node_name", "phase", "expected"),
    [(None, None, "Pending"), ("n1", None, "Running"), ("n1", "Succeeded", "Succeeded")],
)
def test_pod_phase_defaults_from_binding(
    node_name: str | None, phase: str | None, expected: str
) -> None:
    """Without status.phase a bound pod is Running and an unbound one Pending."""
    obj = pod("p")
    if node_name is not None:
        obj["spec"]["nodeName"] = node_name
    if phase is not None:
        obj["status"] = {"phase": phase}
    assert expected == parse(obj).pods["ml/p"].phase


# --- aliases --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "spelled", "field", "expected"),
    [
        ("preemption", {"withinClusterQueue": "LowerPriority"}, "within_queue", "LowerPriority"),
        (
            "preemption",
            {"withinCohort": "ReclaimFromLowerPriority"},
            "reclaim_within_cohort",
            "LowerPriority",
        ),
        ("preemption", {"withinCohort": "ReclaimFromAny"}, "reclaim_within_cohort", "Any"),
        ("preemption", {"withinCohort": "ReclaimAny"}, "reclaim_within_cohort", "Any"),
        ("preemption", {"withinCohort": "Never"}, "reclaim_within_cohort", "Never"),
        ("flavorFungibility", {"whenCanBorrow": "Borrow"}, "when_can_borrow", "MayStopSearch"),
        ("flavorFungibility", {"whenCanPreempt": "Preempt"}, "when_can_preempt", "MayStopSearch"),
    ],
)
def test_seed_spellings_are_aliases(
    section: str, spelled: dict[str, str], field: str, expected: str
) -> None:
    """The seeds' spellings listed in CONTRACT §1 mean the canonical values."""
    inventory = parse(flavor(), queue("q", "cohort", cpu_group(), **{section: spelled}))
    parsed = inventory.queues["q"]
    record = parsed.preemption if section == "preemption" else parsed.fungibility
    assert ([], expected) == (inventory.problems, getattr(record, field))


def test_contradicting_alias_is_a_problem() -> None:
    """An alias that says something else than the canonical field is an error, not a silent pick."""
    obj = queue(
        "q",
        None,
        cpu_group(),
        preemption={"withinQueue": "Never", "withinClusterQueue": "LowerPriority"},
    )
    expected = [
        problem(
            "Queue/q",
            "spec.preemption.withinClusterQueue",
            "withinClusterQueue 'LowerPriority' contradicts withinQueue 'Never'",
        )
    ]
    assert expected == parse(flavor(), obj).problems


def test_unknown_enum_value_is_a_problem() -> None:
    """A policy value that is neither canonical nor an alias is an error naming the choices."""
    obj = queue("q", None, cpu_group(), preemption={"withinQueue": "Always"})
    expected = [
        problem(
            "Queue/q",
            "spec.preemption.withinQueue",
            "unknown value 'Always'; expected one of LowerOrNewerEqualPriority, LowerPriority, Never",
        )
    ]
    assert expected == parse(flavor(), obj).problems


# --- the queue tree -------------------------------------------------------------------


def test_named_but_undefined_parent_is_an_implicit_cohort() -> None:
    """A parent that no Queue defines is added as an implicit cohort with defined=False."""
    inventory = parse(flavor(), queue("a", "pool", cpu_group()), queue("b", "pool", cpu_group()))
    expected = (["a", "b", "pool"], QueueSpec("pool", parent=None, defined=False))
    assert expected == (
        list(inventory.queues),
        inventory.queues["pool"],
    )


def test_parent_cycle_is_a_problem_on_every_queue_in_it() -> None:
    """Queues whose parent chain loops are each reported, with the loop spelled from themselves."""
    inventory = parse(
        flavor(),
        queue("a", "b", cpu_group()),
        queue("b", "c"),
        queue("c", "a"),
        queue("leaf", "c", cpu_group()),
    )
    expected_problems = [
        problem("Queue/a", "spec.parent", "the parent chain is a cycle: a -> b -> c -> a"),
        problem("Queue/b", "spec.parent", "the parent chain is a cycle: b -> c -> a -> b"),
        problem("Queue/c", "spec.parent", "the parent chain is a cycle: c -> a -> b -> c"),
    ]
    expected: tuple[list[Problem], dict[str, QueueSpec], set[str]] = (
        expected_problems,
        {},
        {"a", "b", "c", "leaf"},
    )
    assert expected == (
        inventory.problems,
        inventory.queues,
        inventory.excluded_queues,
    )


def test_queue_that_is_its_own_parent_is_a_cycle() -> None:
    """spec.parent naming the queue itself is a one-queue cycle."""
    expected = [problem("Queue/a", "spec.parent", "the parent chain is a cycle: a -> a")]
    assert expected == parse(flavor(), queue("a", "a", cpu_group())).problems


def test_invalid_queue_excludes_its_whole_tree_but_not_other_trees() -> None:
    """An invalid Queue takes every queue under its root out and its workloads become inadmissible."""
    inventory = parse(
        flavor(),
        queue("root"),
        queue("research", "root"),
        queue("team-a", "research", cpu_group(), preemptMinRuntime="soon"),
        queue("team-b", "research", cpu_group()),
        queue("other", None, cpu_group()),
        workload("w-b", "team-b"),
        workload("w-other", "other"),
    )
    reason = (
        "queue tree of 'root' is invalid: Queue/team-a: spec.preemptMinRuntime: "
        "malformed duration 'soon' (use units like 90s, 5m, 1h30m, 2d, 1w)"
    )
    assert (
        ["other"],
        {"research", "root", "team-a", "team-b"},
        {"ml/w-b": reason},
        ["ml/w-other"],
    ) == (
        list(inventory.queues),
        inventory.excluded_queues,
        inventory.inadmissible,
        list(inventory.workloads),
    )


def test_invalid_queue_excludes_the_implicit_cohort_of_its_tree() -> None:
    """The implicit cohort above an invalid Queue is part of its tree and is excluded with it."""
    inventory = parse(
        flavor(), queue("a", "pool", cpu_group(nominal="-1")), queue("b", "pool", cpu_group())
    )
    expected: tuple[dict[str, QueueSpec], set[str]] = ({}, {"a", "b", "pool"})
    assert expected == (inventory.queues, inventory.excluded_queues)


def test_workload_on_non_leaf_queue_is_a_problem_and_inadmissible() -> None:
    """Only leaf queues hold workloads; one on a parent queue is invalid."""
    inventory = parse(
        flavor(),
        queue("root", None, cpu_group()),
        queue("team-a", "root", cpu_group()),
        workload("w", "root"),
    )
    message = "queue 'root' is not a leaf queue; only leaf queues hold workloads"
    assert (
        [problem("Workload/ml/w", "spec.queueName", message)],
        {"ml/w": f"Workload/ml/w: spec.queueName: {message}"},
        {},
    ) == (inventory.problems, inventory.inadmissible, inventory.workloads)


def test_workload_on_implicit_cohort_is_on_a_non_leaf_queue() -> None:
    """An implicit cohort has children by definition, so a workload on it is invalid."""
    inventory = parse(flavor(), queue("team-a", "pool", cpu_group()), workload("w", "pool"))
    expected = [
        problem(
            "Workload/ml/w",
            "spec.queueName",
            "queue 'pool' is not a leaf queue; only leaf queues hold workloads",
        )
    ]
    assert expected == inventory.problems


def test_workload_on_unknown_queue_is_a_problem_and_inadmissible() -> None:
    """A workload naming a queue that does not exist is invalid and inadmissible."""
    inventory = basic(workload("w", "nope"))
    assert (
        [problem("Workload/ml/w", "spec.queueName", "unknown queue 'nope'")],
        {"ml/w": "Workload/ml/w: spec.queueName: unknown queue 'nope'"},
    ) == (inventory.problems, inventory.inadmissible)


# --- queue validation -----------------------------------------------------------------


def test_unknown_flavor_is_a_problem_on_the_queue() -> None:
    """A queue listing a flavor no ResourceFlavor defines is invalid."""
    inventory = parse(queue("q", None, cpu_group("h100")))
    expected = [
        problem(
            "Queue/q",
            "spec.resourceGroups[0].flavors[0].name",
            "unknown flavor 'h100': no ResourceFlavor of that name",
        )
    ]
    assert (expected, {"q"}) == (inventory.problems, inventory.excluded_queues)


def test_invalid_flavor_makes_queues_using_it_invalid() -> None:
    """A queue using a ResourceFlavor that is itself invalid is invalid too."""
    bad = flavor("a100", nodeLabels={"zone": 1})
    inventory = parse(bad, queue("q", None, cpu_group()))
    expected = [
        problem(
            "Queue/q", "spec.resourceGroups[0].flavors[0].name", "ResourceFlavor 'a100' is invalid"
        ),
        problem(
            "ResourceFlavor/a100", "spec.nodeLabels[zone]", "expected a string (quote it), got 1"
        ),
    ]
    assert expected == inventory.problems


def test_negative_quantity_is_a_problem() -> None:
    """A negative nominalQuota is reported at its exact path."""
    inventory = parse(flavor(), queue("q", None, cpu_group(nominal="-2")))
    expected = [problem("Queue/q", f"{QUOTA_PATH}.nominalQuota", "negative quantity '-2'")]
    assert expected == inventory.problems


def test_malformed_quantity_is_a_problem() -> None:
    """A quantity that is not Kubernetes notation is reported at its exact path."""
    inventory = parse(flavor(), queue("q", None, cpu_group(nominal="8 cores")))
    expected = [problem("Queue/q", f"{QUOTA_PATH}.nominalQuota", "malformed quantity '8 cores'")]
    assert expected == inventory.problems


def test_path_names_the_group_flavor_and_resource_index() -> None:
    """The field path counts resource groups, flavors and resources from 0 as listed."""
    queue_obj = queue(
        "q",
        None,
        cpu_group(),
        group(
            ["memory", "nvidia.com/gpu"],
            flavor_quotas("a100", resource("memory", "1Gi"), resource("nvidia.com/gpu", "1")),
            flavor_quotas("spot", resource("memory", "1Gi"), resource("nvidia.com/gpu", "x")),
        ),
    )
    inventory = parse(flavor(), flavor("spot"), queue_obj)
    expected = [
        problem(
            "Queue/q",
            "spec.resourceGroups[1].flavors[0].name",
            "flavor 'a100' is listed twice (first at spec.resourceGroups[0].flavors[0])",
        ),
        problem(
            "Queue/q",
            "spec.resourceGroups[1].flavors[1].resources[1].nominalQuota",
            "malformed quantity 'x'",
        ),
    ]
    assert expected == inventory.problems


def test_malformed_duration_is_a_problem() -> None:
    """A min-runtime that is not a Go duration is reported on the Queue."""
    inventory = parse(flavor(), queue("q", None, cpu_group(), reclaimMinRuntime="5 minutes"))
    expected = [
        problem(
            "Queue/q",
            "spec.reclaimMinRuntime",
            "malformed duration '5 minutes' (use units like 90s, 5m, 1h30m, 2d, 1w)",
        )
    ]
    assert expected == inventory.problems


def test_negative_duration_is_a_problem() -> None:
    """A negative min-runtime is an error, never silently zero."""
    inventory = parse(flavor(), queue("q", None, cpu_group(), preemptMinRuntime="-5m"))
    assert [
        problem("Queue/q", "spec.preemptMinRuntime", "negative duration '-5m'")
    ] == inventory.problems


@pytest.mark.parametrize("bare", [600, "600"])
def test_bare_number_duration_is_a_problem(bare: object) -> None:
    """A duration without a unit is ambiguous and rejected, whether YAML read it as int or string."""
    inventory = parse(flavor(), queue("q", None, cpu_group(), preemptMinRuntime=bare))
    expected_message = {
        600: "expected a duration string with a unit such as '90s', got 600",
        "600": "malformed duration '600' (use units like 90s, 5m, 1h30m, 2d, 1w)",
    }[bare]
    expected = [problem("Queue/q", "spec.preemptMinRuntime", expected_message)]
    assert expected == inventory.problems


def test_borrowing_limit_without_parent_is_a_problem() -> None:
    """borrowingLimit on a queue without a parent is an error (SEMANTICS §4 Validation)."""
    inventory = parse(flavor(), queue("q", None, cpu_group(borrowingLimit="2")))
    expected = [
        problem(
            "Queue/q",
            f"{QUOTA_PATH}.borrowingLimit",
            "borrowingLimit needs spec.parent: a queue without a parent has nobody to borrow from",
        )
    ]
    assert expected == inventory.problems


def test_borrowing_limit_with_parent_is_kept() -> None:
    """With a parent, borrowingLimit and lendingLimit are read into the quota."""
    inventory = parse(flavor(), queue("q", "pool", cpu_group(borrowingLimit="2", lendingLimit="1")))
    quota = inventory.queues["q"].resource_groups[0].flavors[0].resources["cpu"]
    expected = ResourceQuota(8000, borrowing_limit=2000, lending_limit=1000)
    assert expected == quota


def test_lending_limit_above_nominal_is_a_problem() -> None:
    """lendingLimit may not exceed nominalQuota: nobody can lend more than they have."""
    inventory = parse(flavor(), queue("q", "pool", cpu_group(nominal="2", lendingLimit="3")))
    expected = [
        problem("Queue/q", f"{QUOTA_PATH}.lendingLimit", "lendingLimit 3 exceeds nominalQuota 2")
    ]
    assert expected == inventory.problems


def test_borrow_within_cohort_without_reclaim_is_a_problem() -> None:
    """borrowWithinCohort other than Never needs reclaimWithinCohort other than Never."""
    obj = queue(
        "q", "pool", cpu_group(), preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}
    )
    expected = [
        problem(
            "Queue/q",
            "spec.preemption.borrowWithinCohort.policy",
            "borrowWithinCohort.policy LowerPriority needs reclaimWithinCohort other than Never",
        )
    ]
    assert expected == parse(flavor(), obj).problems


@pytest.mark.parametrize(
    ("when_can_borrow", "when_can_preempt", "valid"),
    [
        ("TryNextFlavor", "TryNextFlavor", True),
        ("MayStopSearch", "TryNextFlavor", False),
        ("TryNextFlavor", "MayStopSearch", False),
        (None, "TryNextFlavor", False),  # whenCanBorrow defaults to MayStopSearch
    ],
)
def test_preemption_over_borrowing_needs_both_policies_try_next_flavor(
    when_can_borrow: str | None, when_can_preempt: str, valid: bool
) -> None:
    """preference PreemptionOverBorrowing is allowed only with both policies TryNextFlavor."""
    fungibility = {"whenCanPreempt": when_can_preempt, "preference": "PreemptionOverBorrowing"}
    if when_can_borrow is not None:
        fungibility["whenCanBorrow"] = when_can_borrow
    obj = queue("q", None, cpu_group(), flavorFungibility=fungibility)
    expected = (
        []
        if valid
        else [
            problem(
                "Queue/q",
                "spec.flavorFungibility.preference",
                "PreemptionOverBorrowing needs whenCanBorrow and whenCanPreempt both TryNextFlavor",
            )
        ]
    )
    assert expected == parse(flavor(), obj).problems


def test_flavor_resources_must_be_exactly_the_covered_resources() -> None:
    """A flavor must give a quota for each covered resource and no other, in any order."""
    obj = queue(
        "q",
        None,
        group(
            ["cpu", "memory"],
            flavor_quotas("a100", resource("memory", "1Gi"), resource("cpu", "1")),
            flavor_quotas("spot", resource("cpu", "1"), resource("nvidia.com/gpu", "1")),
        ),
    )
    expected = [
        problem(
            "Queue/q",
            "spec.resourceGroups[0].flavors[1].resources",
            "must give a quota for exactly the group's coveredResources; missing memory; "
            "not in coveredResources: nvidia.com/gpu",
        )
    ]
    assert expected == parse(flavor(), flavor("spot"), obj).problems


def test_resource_covered_by_two_groups_is_a_problem() -> None:
    """Each resource belongs to at most one resource group of a queue."""
    obj = queue("q", None, cpu_group(), group(["cpu"], flavor_quotas("spot", resource("cpu", "1"))))
    expected = [
        problem(
            "Queue/q",
            "spec.resourceGroups[1].coveredResources[0]",
            "resource 'cpu' is already covered by spec.resourceGroups[0]",
        )
    ]
    assert expected == parse(flavor(), flavor("spot"), obj).problems


def test_every_problem_of_an_object_is_reported_in_one_pass() -> None:
    """Validation does not stop at the first problem of an object."""
    obj = queue(
        "q",
        None,
        cpu_group("h100", nominal="-1", borrowingLimit="x"),
        queueingStrategy="LIFO",
        reclaimMinRuntime=30,
    )
    expected = [  # sorted by path
        problem(
            "Queue/q",
            "spec.queueingStrategy",
            "unknown value 'LIFO'; expected one of BestEffortFIFO, StrictFIFO",
        ),
        problem(
            "Queue/q",
            "spec.reclaimMinRuntime",
            "expected a duration string with a unit such as '90s', got 30",
        ),
        problem(
            "Queue/q",
            "spec.resourceGroups[0].flavors[0].name",
            "unknown flavor 'h100': no ResourceFlavor of that name",
        ),
        problem("Queue/q", f"{QUOTA_PATH}.borrowingLimit", "malformed quantity 'x'"),
        problem("Queue/q", f"{QUOTA_PATH}.nominalQuota", "negative quantity '-1'"),
    ]
    assert expected == parse(obj).problems


# --- duplicates -----------------------------------------------------------------------


def test_duplicate_queue_names_invalidate_every_copy_and_their_tree() -> None:
    """Two Queues with one name are both reported and their tree is excluded, whatever the order."""
    inventory = parse_objects(
        [
            ("a.yaml", flavor()),
            ("a.yaml", queue("q", "pool", cpu_group())),
            ("b.yaml", queue("q", "pool", cpu_group(nominal="4"))),
            ("a.yaml", queue("sibling", "pool", cpu_group())),
            ("a.yaml", workload("w", "sibling")),
        ]
    )
    message = "Queue 'q' is defined 2 times (in a.yaml, b.yaml); every copy is ignored"
    assert (
        [
            problem("Queue/q", "metadata.name", message, file="a.yaml"),
            problem("Queue/q", "metadata.name", message, file="b.yaml"),
        ],
        {"pool", "q", "sibling"},
        {
            "ml/w": f"queue tree of 'pool' is invalid: Queue/q: metadata.name: {message} (and 1 more problems)"
        },
    ) == (inventory.problems, inventory.excluded_queues, inventory.inadmissible)


def test_duplicate_workloads_are_both_invalid_and_inadmissible() -> None:
    """Two Workloads with one namespace/name are both dropped and the key is inadmissible."""
    inventory = parse(
        flavor(), queue("team-a", None, cpu_group()), workload("w"), workload("w", priority=3)
    )
    message = "Workload 'ml/w' is defined 2 times (in snap.yaml, snap.yaml); every copy is ignored"
    assert (
        [problem("Workload/ml/w", "metadata.name", message)] * 2,
        {"ml/w": "; ".join([f"Workload/ml/w: metadata.name: {message}"] * 2)},
        {},
    ) == (inventory.problems, inventory.inadmissible, inventory.workloads)


def test_same_name_in_other_namespace_or_kind_is_not_a_duplicate() -> None:
    """Duplicates are per kind and key: ml/w and prod/w, or a Pod and a Workload, coexist."""
    inventory = basic(workload("w"), workload("w", namespace="prod"), pod("w"))
    expected: tuple[list[Problem], list[str], list[str]] = ([], ["ml/w", "prod/w"], ["ml/w"])
    assert expected == (
        inventory.problems,
        list(inventory.workloads),
        list(inventory.pods),
    )


# --- workload validation --------------------------------------------------------------


def test_unknown_priority_class_is_a_problem_and_inadmissible() -> None:
    """A priorityClassName without a PriorityClass object is an error on the workload."""
    inventory = basic(workload("w", priorityClassName="urgent"))
    expected = [
        problem("Workload/ml/w", "spec.priorityClassName", "unknown PriorityClass 'urgent'")
    ]
    assert (
        expected,
        {"ml/w": "Workload/ml/w: spec.priorityClassName: unknown PriorityClass 'urgent'"},
    ) == (
        inventory.problems,
        inventory.inadmissible,
    )


def test_missing_queue_name_is_a_problem() -> None:
    """spec.queueName is required."""
    inventory = basic(workload("w", None))
    assert [
        problem("Workload/ml/w", "spec.queueName", "required field is missing")
    ] == inventory.problems


def test_pod_set_counts_and_names_are_checked() -> None:
    """count ≥ 1, 1 ≤ minCount ≤ count, unique podSet names and at most one podSet with
    minCount, each reported at its path."""
    obj = workload(
        "w",
        pod_sets=[
            pod_set("main", count=0),
            pod_set("main", count=2, minCount=3),
            pod_set("aux", count=2, minCount=0),
        ],
    )
    expected = [
        problem("Workload/ml/w", "spec.podSets[0].count", "must be at least 1, got 0"),
        problem("Workload/ml/w", "spec.podSets[1].minCount", "must not exceed count 2, got 3"),
        problem(
            "Workload/ml/w",
            "spec.podSets[1].name",
            "duplicate podSet name 'main' (first at spec.podSets[0])",
        ),
        problem(
            "Workload/ml/w",
            "spec.podSets[2].minCount",
            "at most one podSet may have minCount (spec.podSets[1] has it already)",
        ),
        problem("Workload/ml/w", "spec.podSets[2].minCount", "must be at least 1, got 0"),
    ]
    assert expected == basic(obj).problems


def test_second_pod_set_with_min_count_is_a_problem() -> None:
    """At most one podSet of a workload may have minCount (Kueue's webhook rule): the
    second one is reported at its own minCount, naming where the first one is."""
    obj = workload(
        "w",
        pod_sets=[
            pod_set("driver", count=1),
            pod_set("workers", count=4, minCount=2),
            pod_set("ps", count=2, minCount=1),
        ],
    )
    inventory = basic(obj)
    assert [
        problem(
            "Workload/ml/w",
            "spec.podSets[2].minCount",
            "at most one podSet may have minCount (spec.podSets[1] has it already)",
        )
    ] == inventory.problems
    assert "ml/w" not in inventory.workloads


def test_negative_request_is_a_problem_at_its_resource() -> None:
    """A request is located by podSet index and resource name."""
    obj = workload("w", pod_sets=[pod_set(requests={"nvidia.com/gpu": "-1"})])
    expected = [
        problem(
            "Workload/ml/w", "spec.podSets[0].requests[nvidia.com/gpu]", "negative quantity '-1'"
        )
    ]
    assert expected == basic(obj).problems


def test_admission_is_checked_against_spec_and_flavors() -> None:
    """Admitted podSets must exist, fit their spec count, and use defined flavors for every request."""
    obj = workload(
        "w",
        pod_sets=[pod_set("main", count=2, requests={"cpu": "1", "memory": "1Gi"})],
        status={
            "admission": {
                "queue": "team-a",
                "podSets": [
                    {"name": "main", "count": 3, "flavors": {"cpu": "h100"}},
                    {"name": "ghost", "count": 1, "flavors": {}},
                ],
            }
        },
    )
    at = "status.admission.podSets"
    expected = [
        problem("Workload/ml/w", f"{at}[0].count", "must not exceed spec count 2, got 3"),
        problem("Workload/ml/w", f"{at}[0].flavors", "no flavor for requested resource(s) memory"),
        problem(
            "Workload/ml/w",
            f"{at}[0].flavors[cpu]",
            "unknown flavor 'h100': no ResourceFlavor of that name",
        ),
        problem("Workload/ml/w", f"{at}[1].name", "no podSet 'ghost' in spec.podSets"),
    ]
    assert expected == basic(obj).problems


def test_admission_queue_is_kept_as_admitted() -> None:
    """status.admission.queue is read as is, and defaults to spec.queueName when left out."""
    admitted = {"podSets": [{"name": "main", "count": 1, "flavors": {"cpu": "a100"}}]}
    inventory = basic(
        workload("moved", status={"admission": {"queue": "other", **admitted}}),
        workload("plain", status={"admission": admitted}),
    )
    pod_sets = (PodSetAdmission("main", 1, {"cpu": "a100"}),)
    expected: tuple[list[Problem], Admission, Admission] = (
        [],
        Admission("other", pod_sets),
        Admission("team-a", pod_sets),
    )
    assert expected == (
        inventory.problems,
        inventory.workloads["ml/moved"].admission,
        inventory.workloads["ml/plain"].admission,
    )


def test_malformed_timestamp_is_a_problem() -> None:
    """creationTimestamp must be RFC 3339."""
    obj = workload("w", metadata={"creationTimestamp": "yesterday"})
    expected = [
        problem(
            "Workload/ml/w",
            "metadata.creationTimestamp",
            "malformed timestamp 'yesterday' (expected RFC 3339)",
        )
    ]
    assert expected == basic(obj).problems


def test_malformed_deletion_cost_is_a_problem_on_the_pod() -> None:
    """The pod-deletion-cost annotation must be an integer."""
    obj = pod(
        "p", metadata={"annotations": {"controller.kubernetes.io/pod-deletion-cost": "cheap"}}
    )
    inventory = parse(obj)
    expected = [
        problem(
            "Pod/ml/p",
            "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]",
            "expected an integer, got 'cheap'",
        )
    ]
    assert (expected, {}) == (inventory.problems, inventory.pods)


# --- documents ------------------------------------------------------------------------


def test_lists_are_flattened() -> None:
    """kind: List, any *List kind and a JSON array contribute their items, nested ones too."""
    inventory = parse(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [flavor(), {"kind": "QueueList", "items": [queue("q", None, cpu_group())]}],
        },
        {"apiVersion": "v1", "kind": "PodList", "items": [pod("p")]},
        [pod("r"), {"kind": "List", "items": [pod("s")]}],
    )
    expected: tuple[list[Problem], list[str], list[str], list[str]] = (
        [],
        ["a100"],
        ["q"],
        ["ml/p", "ml/r", "ml/s"],
    )
    assert expected == (
        inventory.problems,
        list(inventory.flavors),
        list(inventory.queues),
        list(inventory.pods),
    )


def test_malformed_documents_are_problems_located_in_their_list() -> None:
    """A non-object, or an object without kind or name, is a problem; list items say where."""
    inventory = parse(
        "just a string",
        {"metadata": {"name": "x"}},
        {"kind": "List", "items": [flavor(), {"kind": "Queue", "metadata": {}}, 7]},
        [flavor("spot"), {"kind": "Node"}],
    )
    expected = [
        problem("", "", "expected an object (a mapping), got str"),
        problem("", "items[2]", "expected an object (a mapping), got int"),
        problem("", "kind", "required field is missing"),
        problem("Node", "[1].metadata.name", "required field is missing"),
        problem("Queue", "items[1].metadata.name", "required field is missing"),
    ]
    assert (expected, ["a100", "spot"]) == (inventory.problems, list(inventory.flavors))


def test_empty_yaml_documents_are_ignored() -> None:
    """An empty document (None, as PyYAML gives it after a trailing ---) is not a problem."""
    expected = Inventory()
    assert expected == parse(None)


def test_unknown_kinds_are_skipped_with_a_warning() -> None:
    """Kinds preemptd does not use, or our kind names in another API group, are warnings."""
    inventory = parse(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llm", "namespace": "serve"},
        },
        {
            "apiVersion": "jobs.example.com/v1",
            "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ml"},
        },
    )
    expected = [
        problem(
            "Deployment/serve/llm",
            "kind",
            "unknown kind 'Deployment' (apiVersion 'apps/v1'); skipped",
        ),
        problem(
            "Workload/ml/w",
            "apiVersion",
            "unknown kind 'Workload' (apiVersion 'jobs.example.com/v1'); skipped",
        ),
    ]
    assert (expected, [], {}) == (inventory.warnings, inventory.problems, inventory.workloads)


def test_unknown_fields_are_ignored() -> None:
    """Fields preemptd does not know, like kubectl's managedFields, change nothing."""
    plain = basic(workload("w"))
    noisy_workload = workload(
        "w", metadata={"managedFields": [{"manager": "kubectl"}]}, suspend=True
    )
    noisy_workload["status"] = {"requeueState": {"count": 2}}
    assert plain == basic(noisy_workload)


def test_problems_print_file_object_path_and_message() -> None:
    """A Problem reads as one stderr line: file, object, field path, message."""
    expected = "snap.yaml: Queue/q: spec.parent: the parent chain is a cycle: q -> q"
    assert expected == str(parse(queue("q", "q")).problems[0])


# --- determinism ----------------------------------------------------------------------


def _snapshot_with_everything() -> list[tuple[str, Any]]:
    """Valid and invalid objects of every kind, duplicates and a cycle included."""
    return [
        ("flavors.yaml", flavor("a100", nodeLabels={"gpu": "a100"})),
        ("flavors.yaml", flavor("spot")),
        ("flavors.yaml", flavor("spot")),
        ("queues.yaml", queue("root", None, cpu_group())),
        ("queues.yaml", queue("team-a", "root", cpu_group())),
        ("queues.yaml", queue("team-b", "root", cpu_group(borrowingLimit="1"))),
        ("queues.yaml", queue("team-c", "pool", cpu_group("spot"))),
        ("queues.yaml", queue("team-d", "pool", cpu_group())),
        ("queues.yaml", queue("x", "y")),
        ("queues.yaml", queue("y", "x")),
        ("more.yaml", queue("lone", None, cpu_group())),
        ("queues.yaml", queue("lone", None, cpu_group())),
        ("classes.yaml", priority_class("high", 100)),
        ("work.yaml", workload("a", "team-a", priorityClassName="high")),
        ("work.yaml", workload("b", "team-b")),
        ("work.yaml", workload("c", "team-d")),
        ("work.yaml", workload("d", "root")),
        ("work.yaml", workload("e", "nowhere")),
        ("work.yaml", workload("f", "team-a", priority=1)),
        ("work.yaml", workload("f", "team-a", priority=2)),
        ("work.yaml", workload("g", "lone")),
        ("pods.yaml", pod("p1", containers=[container(cpu="1")])),
        ("pods.yaml", pod("p2", nodeName="n1")),
        ("nodes.yaml", node("n1", status={"allocatable": {"cpu": "4"}})),
        ("nodes.yaml", node("n2", status={"allocatable": {"cpu": "-4"}})),
        ("other.yaml", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
        ("other.yaml", {"kind": "Secret", "metadata": {"name": "s"}}),
        ("other.yaml", 42),
        ("more.yaml", {"kind": "Queue", "metadata": {}}),
        ("nodes.yaml", "not an object"),
    ]


def test_input_documents_are_not_modified() -> None:
    """Parsing reads the objects and never writes to them (the loader writes them back)."""
    documents = _snapshot_with_everything()
    expected = copy.deepcopy(documents)
    parse_objects(documents)
    assert expected == documents


def _shape(inventory: Inventory) -> tuple[Any, ...]:
    """Everything observable, including dict insertion order."""
    return (
        inventory,
        [
            list(d)
            for d in (inventory.flavors, inventory.queues, inventory.workloads, inventory.nodes)
        ],
        [list(d) for d in (inventory.pods, inventory.priority_classes, inventory.inadmissible)],
        sorted(inventory.excluded_queues),
    )


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(range(len(_snapshot_with_everything()))))
def test_document_order_does_not_change_the_inventory(order: list[int]) -> None:
    """Shuffling the documents gives an equal inventory, dict order and problem order included."""
    documents = _snapshot_with_everything()
    expected = _shape(parse_objects(copy.deepcopy(documents)))
    shuffled = [copy.deepcopy(documents[i]) for i in order]
    assert expected == _shape(parse_objects(shuffled))


def test_the_determinism_snapshot_exercises_isolation() -> None:
    """The snapshot shuffled above really mixes valid and isolated objects of every kind."""
    inventory = parse_objects(_snapshot_with_everything())
    pool_reason = (
        "queue tree of 'pool' is invalid: Queue/team-c: spec.resourceGroups[0].flavors[0].name: "
        "ResourceFlavor 'spot' is invalid"
    )
    assert (
        ["a100"],
        ["root", "team-a", "team-b"],
        {"lone", "pool", "team-c", "team-d", "x", "y"},
        ["ml/a", "ml/b"],
        ["ml/c", "ml/d", "ml/e", "ml/f", "ml/g"],
        pool_reason,
        (["ml/p1", "ml/p2"], ["n1"], ["high"]),
        ["Deployment/d", "Secret/s"],
        100,
    ) == (
        list(inventory.flavors),
        list(inventory.queues),
        inventory.excluded_queues,
        list(inventory.workloads),
        list(inventory.inadmissible),
        inventory.inadmissible["ml/c"],
        (list(inventory.pods), list(inventory.nodes), list(inventory.priority_classes)),
        [warning.object for warning in inventory.warnings],
        inventory.workloads["ml/a"].priority,
    )
