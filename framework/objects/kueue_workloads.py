"""Kueue Workloads -> the model (private to :mod:`objects`; see :mod:`.kueue`).

The lookups a Kueue Workload needs (its LocalQueue, WorkloadPriorityClasses,
Namespaces and the admission rules of ClusterQueues) are read first by
:class:`~.kueue.KueueObjects`, which is a :class:`Lookups`; a Workload is read
against them here, with located errors like every other object. The version rules
both modules use (which versions are served, which fields each version spells its own
way) are here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model import Admission, LabelSelector, PodSet, PodSetAdmission, Workload
from .fields import Catalog, Entry, Fields, Problem, at_key, child, shown
from .workloads import read_flavor_scan, read_owner

__all__ = [
    "GROUP",
    "KINDS",
    "NAMESPACE_NAME_LABEL",
    "ONLY_KUEUE",
    "STOP_POLICIES",
    "Lookups",
    "QueueRules",
    "finished",
    "other_version",
    "pod_set_requests",
    "read_version",
]

GROUP = "kueue.x-k8s.io"

# kind -> (namespaced, served versions)
KINDS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "ClusterQueue": (False, ("v1beta1", "v1beta2")),
    "Cohort": (False, ("v1alpha1", "v1beta1", "v1beta2")),
    "LocalQueue": (True, ("v1beta1", "v1beta2")),
    "ResourceFlavor": (False, ("v1beta1", "v1beta2")),
    "Workload": (True, ("v1beta1", "v1beta2")),
    "WorkloadPriorityClass": (False, ("v1beta1", "v1beta2")),
}
# Kinds only Kueue has: taken as Kueue's even without an apiVersion.
ONLY_KUEUE = ("ClusterQueue", "Cohort", "LocalQueue", "WorkloadPriorityClass")


# Fields of one version that the other spells differently: (kind, version) -> field -> hint.
_OTHER_VERSION: dict[tuple[str, str], dict[str, str]] = {
    ("ClusterQueue", "v1beta1"): {"cohortName": "cohort"},
    ("ClusterQueue", "v1beta2"): {"cohort": "cohortName"},
    ("Cohort", "v1alpha1"): {"parentName": "parent"},
    ("Cohort", "v1beta1"): {"parent": "parentName"},
    ("Cohort", "v1beta2"): {"parent": "parentName"},
    ("Workload", "v1beta1"): {"priorityClassRef": "priorityClassName and priorityClassSource"},
    ("Workload", "v1beta2"): {
        "priorityClassName": "priorityClassRef",
        "priorityClassSource": "priorityClassRef",
    },
}

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every Namespace: its own name."""

StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
STOP_POLICIES: dict[str, StopPolicy] = {"None": "None", "Hold": "Hold", "HoldAndDrain": "HoldAndDrain"}
_CLASS_SOURCES = {
    "": "",
    "kueue.x-k8s.io/workloadpriorityclass": GROUP,
    "scheduling.k8s.io/priorityclass": "scheduling.k8s.io",
}
_CLASS_KINDS = {GROUP: "WorkloadPriorityClass", "scheduling.k8s.io": "PriorityClass"}
_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(slots=True)
class LocalQueueRef:
    cluster_queue: str
    stop: StopPolicy


@dataclass(slots=True)
class QueueRules:
    """What a ClusterQueue says about admission that QueueSpec has no field for."""

    selector: LabelSelector  # Kueue: a missing one selects nothing
    stop: StopPolicy


def read_version(fields: Fields, entry: Entry) -> str:
    """The object's version of Kueue's API; an unserved one is reported."""
    api_version = entry.body.get("apiVersion")
    served = KINDS[entry.kind][1]
    if api_version is None:
        return served[-1]
    version = str(api_version).rpartition("/")[2]
    if version not in served:
        fields.report(
            "apiVersion",
            f"{entry.kind} is not served as {api_version!r}; "
            f"expected {' or '.join(f'{GROUP}/{v}' for v in served)}",
        )
        return served[-1]
    return version


def other_version(fields: Fields, entry: Entry, version: str, obj: Mapping[str, Any], at: str) -> None:
    for name, spelling in _OTHER_VERSION.get((entry.kind, version), {}).items():
        if obj.get(name) is not None:
            fields.report(
                child(at, name),
                f"not a field of {GROUP}/{version} {entry.kind}; this version spells it {spelling}",
            )


@dataclass(slots=True)
class Lookups:
    """What Kueue's Workloads look up, by key; :class:`~.kueue.KueueObjects` fills it."""

    local_queues: dict[str, LocalQueueRef] = field(default_factory=dict)  # "ns/name"
    invalid_local_queues: set[str] = field(default_factory=set)
    classes: dict[str, int] = field(default_factory=dict)  # WorkloadPriorityClass -> value
    invalid_classes: set[str] = field(default_factory=set)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> labels
    rules: dict[str, QueueRules] = field(default_factory=dict)  # ClusterQueue -> rules
    held: dict[str, str] = field(default_factory=dict)  # workload key -> why it waits

    def read_workload(self, entry: Entry, catalog: Catalog) -> tuple[Workload, list[Problem]]:
        fields = Fields(entry)
        version = read_version(fields, entry)
        namespace = entry.namespace or "default"
        metadata = fields.section(entry.body, "metadata", "")
        spec = fields.section(entry.body, "spec", "")
        status = fields.section(entry.body, "status", "")
        other_version(fields, entry, version, spec, "spec")
        local = fields.text(spec, "queueName", "spec", required=True)
        local_queue = self._local_queue_of(fields, namespace, local)
        queue = local_queue.cluster_queue if local_queue is not None else ""
        owner_kind, owner_name = read_owner(fields, metadata, {})
        pod_sets = _pod_sets(fields, spec)
        conditions = _conditions(fields, status)
        reserved = status.get("admission") is not None and conditions.get("QuotaReserved", ("",))[0] != "False"
        admission = _admission(fields, status, catalog, pod_sets) if reserved else None
        active = spec.get("active")
        if active is not None and not isinstance(active, bool):
            fields.report("spec.active", f"expected true or false, got {shown(active)}")
            active = True
        held = self._held(namespace, queue, local_queue, active is not False)
        admitted = conditions.get("Admitted") if _true(conditions.get("Admitted")) else None
        since = admitted or (conditions.get("QuotaReserved") if reserved else None)
        admitted_at = None
        if since is not None and since[1]:
            admitted_at = fields.timestamp({"lastTransitionTime": since[1]}, "lastTransitionTime", "status.conditions")
        workload = Workload(
            namespace=namespace,
            name=entry.name,
            queue=queue,
            pod_sets=pod_sets,
            priority=self._priority(fields, spec, version, catalog),
            created=fields.timestamp(metadata, "creationTimestamp", "metadata") or 0,
            uid=fields.text(metadata, "uid", "metadata") or "",
            owner_kind=owner_kind,
            owner_name=owner_name,
            admission=admission,
            admitted_at=admitted_at,
            # Kueue drains what is deactivated or on a queue stopped with HoldAndDrain.
            evicted=_true(conditions.get("Evicted"))
            or (admission is not None and held is not None and held[1]),
            flavor_scan=read_flavor_scan(fields, status),
            source=entry.file,
            local_queue=local if local_queue is not None else None,
        )
        if held is not None and admission is None:
            self.held[workload.key] = held[0]
        return workload, fields.problems

    def _local_queue_of(self, fields: Fields, namespace: str, name: str | None) -> LocalQueueRef | None:
        if not name:
            return None
        key = f"{namespace}/{name}"
        if key in self.local_queues:
            return self.local_queues[key]
        if key in self.invalid_local_queues:
            fields.report("spec.queueName", f"LocalQueue {key!r} is invalid")
        else:
            fields.report("spec.queueName", f"no LocalQueue {name!r} in namespace {namespace!r}")
        return None

    def _held(
        self, namespace: str, queue: str, local: LocalQueueRef | None, active: bool
    ) -> tuple[str, bool] | None:
        """Why Kueue would not admit the workload now, and whether it drains it if admitted."""
        if not active:
            return "the workload is deactivated (spec.active is false)", True
        if local is not None and local.stop != "None":
            return f"LocalQueue is stopped (stopPolicy {local.stop})", local.stop == "HoldAndDrain"
        rules = self.rules.get(queue)
        if rules is None:
            return None
        if rules.stop != "None":
            return f"ClusterQueue {queue!r} is stopped (stopPolicy {rules.stop})", rules.stop == "HoldAndDrain"
        labels = self.namespaces.get(namespace, {NAMESPACE_NAME_LABEL: namespace})
        if rules.selector.nothing:
            return (
                f"namespace {namespace!r} does not match the namespaceSelector of ClusterQueue "
                f"{queue!r} (it has none, which admits no namespace)",
                False,
            )
        if not rules.selector.matches(labels):
            return (
                f"namespace {namespace!r} does not match the namespaceSelector of ClusterQueue {queue!r}",
                False,
            )
        return None

    def _priority(self, fields: Fields, spec: Mapping[str, Any], version: str, catalog: Catalog) -> int:
        if spec.get("priority") is not None:
            value = fields.integer(spec, "priority", "spec")
            return value or 0
        if version == "v1beta1":
            name = fields.text(spec, "priorityClassName", "spec")
            at = "spec.priorityClassName"
            group = fields.choice(spec, "priorityClassSource", "spec", _CLASS_SOURCES) or ""
        else:
            ref = fields.section(spec, "priorityClassRef", "spec")
            at = "spec.priorityClassRef.name"
            name = fields.text(ref, "name", "spec.priorityClassRef")
            group = fields.choice(ref, "group", "spec.priorityClassRef", {g: g for g in _CLASS_KINDS}) or ""
            kind = fields.text(ref, "kind", "spec.priorityClassRef")
            if name and group and kind is not None and kind != _CLASS_KINDS[group]:
                fields.report(
                    "spec.priorityClassRef.kind", f"must be {_CLASS_KINDS[group]} for group {group}, got {kind!r}"
                )
        if not name:
            return catalog.default_priority
        if group == GROUP:
            if name in self.classes:
                return self.classes[name]
            known = "is invalid" if name in self.invalid_classes else "does not exist"
            fields.report(at, f"WorkloadPriorityClass {name!r} {known}")
            return 0
        if name in catalog.priority_classes:
            return catalog.priority_classes[name].value
        known = "is invalid" if name in catalog.invalid_priority_classes else "does not exist"
        fields.report(at, f"PriorityClass {name!r} {known}")
        return 0


def _true(condition: tuple[str, str] | None) -> bool:
    return condition is not None and condition[0] == "True"


def finished(body: Mapping[str, Any]) -> bool:
    status = body.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Finished" and c.get("status") == "True"
        for c in conditions
    )


def _conditions(fields: Fields, status: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Condition type -> (status, lastTransitionTime) for the types read here."""
    found: dict[str, tuple[str, str]] = {}
    for path, condition in fields.records(status, "conditions", "status"):
        kind = condition.get("type")
        if kind not in ("QuotaReserved", "Admitted", "Evicted", "Finished"):
            continue
        value = fields.choice(condition, "status", path, {"True": "True", "False": "False", "Unknown": "Unknown"})
        since = fields.text(condition, "lastTransitionTime", path) or ""
        found[kind] = (value or "Unknown", since)
    return found


def pod_set_requests(fields: Fields, pod_set: Mapping[str, Any], at: str) -> dict[str, int]:
    """One pod's requests in a pod set's template (see the module docstring)."""
    template = fields.section(pod_set, "template", at)
    spec_at = child(child(at, "template"), "spec")
    spec = fields.section(template, "spec", child(at, "template"))
    total: dict[str, int] = {}
    for path, container in fields.records(spec, "containers", spec_at):
        for resource, amount in _container_requests(fields, container, path).items():
            total[resource] = total.get(resource, 0) + amount
    for path, container in fields.records(spec, "initContainers", spec_at):
        for resource, amount in _container_requests(fields, container, path).items():
            total[resource] = max(total.get(resource, 0), amount)
    for resource, amount in fields.resources(spec, "overhead", spec_at, drop_zero=True).items():
        total[resource] = total.get(resource, 0) + amount
    return dict(sorted(total.items()))


def _container_requests(fields: Fields, container: Mapping[str, Any], at: str) -> dict[str, int]:
    resources_at = child(at, "resources")
    resources = fields.section(container, "resources", at)
    limits = fields.resources(resources, "limits", resources_at, drop_zero=False)
    requests = fields.resources(resources, "requests", resources_at, drop_zero=False)
    merged = {**limits, **requests}  # an unset request defaults to its limit
    return {resource: amount for resource, amount in merged.items() if amount}


def _pod_sets(fields: Fields, spec: Mapping[str, Any]) -> tuple[PodSet, ...]:
    pod_sets: list[PodSet] = []
    seen: dict[str, str] = {}
    for path, pod_set in fields.records(spec, "podSets", "spec", non_empty=True):
        name = fields.text(pod_set, "name", path) or "main"
        if name in seen:
            fields.report(child(path, "name"), f"duplicate podSet name {name!r} (first at {seen[name]})")
        seen.setdefault(name, path)
        count = fields.integer(pod_set, "count", path, minimum=0)
        count = 1 if count is None else count
        min_count = fields.integer(pod_set, "minCount", path, minimum=1)
        if min_count is not None and min_count > count:
            fields.report(child(path, "minCount"), f"must not exceed count {count}, got {min_count}")
        requests = pod_set_requests(fields, pod_set, path)
        template = fields.section(pod_set, "template", path)
        spec_at = child(child(path, "template"), "spec")
        pod_spec = fields.section(template, "spec", child(path, "template"))
        if count == 0:
            continue  # nothing to admit (Kueue allows a pod set of no pods)
        pod_sets.append(
            PodSet(
                name=name,
                count=count,
                requests=requests,
                min_count=min_count,
                node_selector=fields.string_map(pod_spec, "nodeSelector", spec_at),
                tolerations=fields.tolerations(pod_spec, "tolerations", spec_at),
            )
        )
    if seen and not pod_sets:
        fields.report("spec.podSets", "every podSet has count 0: nothing to admit")
    return tuple(pod_sets)


def _admission(
    fields: Fields, status: Mapping[str, Any], catalog: Catalog, pod_sets: tuple[PodSet, ...]
) -> Admission | None:
    at = "status.admission"
    admission = fields.section(status, "admission", "status")
    queue = fields.text(admission, "clusterQueue", at, required=True) or ""
    by_name = {pod_set.name: pod_set for pod_set in pod_sets}
    assigned: list[PodSetAdmission] = []
    seen: set[str] = set()
    for path, entry in fields.records(admission, "podSetAssignments", at, non_empty=True):
        name = fields.text(entry, "name", path) or "main"
        spec_pod_set = by_name.get(name)
        if name in seen:
            fields.report(child(path, "name"), f"podSet {name!r} is assigned twice")
        seen.add(name)
        count = fields.integer(entry, "count", path, minimum=0)
        if spec_pod_set is None:
            if count:
                fields.report(child(path, "name"), f"no podSet {name!r} with pods in spec.podSets")
            continue
        if count is None:
            count = spec_pod_set.count
        elif count > spec_pod_set.count:
            fields.report(child(path, "count"), f"must not exceed spec count {spec_pod_set.count}, got {count}")
        flavors = fields.string_map(entry, "flavors", path)
        for resource, flavor in flavors.items():
            problem = catalog.flavor_problem(flavor)
            if problem is not None:
                fields.report(at_key(child(path, "flavors"), resource), problem)
        missing = sorted(spec_pod_set.requests.keys() - flavors.keys())
        if missing:
            fields.report(child(path, "flavors"), f"no flavor for requested resource(s) {', '.join(missing)}")
        if count:
            assigned.append(PodSetAdmission(name, count, flavors))
    if not assigned:
        return None
    return Admission(queue, tuple(assigned))
