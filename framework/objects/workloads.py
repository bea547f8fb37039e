"""PriorityClass and Workload objects -> the model (private to :mod:`objects`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model import DEPLOYMENT, Admission, PodSet, PodSetAdmission, PriorityClass, Workload
from ..quantity import MAX_AMOUNT
from .fields import Catalog, Entry, Fields, Parsed, Problem, at_key, child, shown
from .local_queues import resolve_queue

__all__ = [
    "PRIORITY_CLASS_SOURCES",
    "WORKLOAD_PRIORITY_CLASS",
    "check_global_default",
    "parse_priority_class",
    "parse_workload",
    "parse_workload_priority_class",
]

WORKLOAD_PRIORITY_CLASS = "workload"
CORE_PRIORITY_CLASS = "core"

PRIORITY_CLASS_SOURCES = {
    "": CORE_PRIORITY_CLASS,
    "scheduling.k8s.io/priorityclass": CORE_PRIORITY_CLASS,
    "kueue.x-k8s.io/workloadpriorityclass": WORKLOAD_PRIORITY_CLASS,
    "preemptd.io/workloadpriorityclass": WORKLOAD_PRIORITY_CLASS,
}
"""``spec.priorityClassSource`` -> which kind ``spec.priorityClassName`` names. Kueue's
two spellings and ours; empty or absent is a core PriorityClass, as before the field."""


def parse_priority_class(entry: Entry) -> tuple[tuple[PriorityClass, bool], list[Problem]]:
    """The class, and whether it is the cluster's ``globalDefault``."""
    fields = Fields(entry)
    value = fields.integer(entry.body, "value", "", required=True)
    global_default = fields.flag(entry.body, "globalDefault", "")
    return (PriorityClass(entry.name, value or 0), global_default), fields.problems


def check_global_default(classes: Mapping[str, list[Parsed[tuple[PriorityClass, bool]]]]) -> None:
    """Kubernetes allows one ``globalDefault`` PriorityClass; with several, none is trusted."""
    defaults = [copy for copies in classes.values() for copy in copies if copy.value[1]]
    if len(defaults) < 2:
        return
    names = ", ".join(sorted(copy.entry.name for copy in defaults))
    for copy in defaults:
        copy.problems.append(
            Problem(
                copy.entry.file,
                copy.entry.label,
                "globalDefault",
                f"more than one PriorityClass is globalDefault ({names})",
            )
        )


def parse_workload_priority_class(entry: Entry) -> tuple[PriorityClass, list[Problem]]:
    """A WorkloadPriorityClass: a ``value`` (and a ``description``), no global default."""
    fields = Fields(entry)
    value = fields.integer(entry.body, "value", "", required=True)
    fields.text(entry.body, "description", "")
    return PriorityClass(entry.name, value or 0), fields.problems


def parse_workload(entry: Entry, catalog: Catalog) -> tuple[Workload, list[Problem]]:
    fields = Fields(entry)
    metadata = fields.section(entry.body, "metadata", "")
    spec = fields.section(entry.body, "spec", "")
    status = fields.section(entry.body, "status", "")
    namespace = entry.namespace or "default"
    queue_name = fields.text(spec, "queueName", "spec", required=True) or ""
    queue, local_queue, problem = resolve_queue(catalog, namespace, queue_name)
    if problem is not None:
        fields.report("spec.queueName", problem)
    owner_kind, owner_name = read_owner(fields, metadata, spec)
    pod_sets = _pod_sets(fields, spec)
    evicted = any(
        condition.get("type") == "Evicted" and condition.get("status") in ("True", True)
        for _, condition in fields.records(status, "conditions", "status")
    )
    workload = Workload(
        namespace=namespace,
        name=entry.name,
        queue=queue,
        pod_sets=pod_sets,
        priority=_priority(fields, spec, catalog),
        created=fields.timestamp(metadata, "creationTimestamp", "metadata") or 0,
        uid=fields.text(metadata, "uid", "metadata") or "",
        owner_kind=owner_kind,
        owner_name=owner_name,
        admission=_admission(
            fields, status, catalog, queue, pod_sets, deployment=owner_kind == DEPLOYMENT
        ),
        admitted_at=fields.timestamp(status, "admittedAt", "status"),
        evicted=evicted,
        flavor_scan=read_flavor_scan(fields, status),
        source=entry.file,
        local_queue=local_queue if queue_name else None,
        labels=fields.string_map(metadata, "labels", "metadata"),
        annotations=fields.string_map(metadata, "annotations", "metadata"),
    )
    return workload, fields.problems


def _priority(fields: Fields, spec: Mapping[str, Any], catalog: Catalog) -> int:
    source = fields.choice(spec, "priorityClassSource", "spec", PRIORITY_CLASS_SOURCES)
    if spec.get("priority") is not None:
        return fields.integer(spec, "priority", "spec") or 0
    class_name = fields.text(spec, "priorityClassName", "spec")
    if source == WORKLOAD_PRIORITY_CLASS:
        return _workload_class_priority(fields, spec, catalog, class_name)
    if not class_name:
        return catalog.default_priority
    if class_name in catalog.priority_classes:
        return catalog.priority_classes[class_name].value
    if class_name in catalog.invalid_priority_classes:
        fields.report("spec.priorityClassName", f"PriorityClass {class_name!r} is invalid")
    else:
        fields.report("spec.priorityClassName", f"unknown PriorityClass {class_name!r}")
    return 0


def _workload_class_priority(
    fields: Fields, spec: Mapping[str, Any], catalog: Catalog, class_name: str | None
) -> int:
    if not class_name:
        fields.report(
            "spec.priorityClassName",
            f"priorityClassSource {spec['priorityClassSource']} needs a WorkloadPriorityClass name",
        )
        return 0
    if class_name in catalog.workload_priority_classes:
        return catalog.workload_priority_classes[class_name].value
    if class_name in catalog.invalid_workload_priority_classes:
        fields.report("spec.priorityClassName", f"WorkloadPriorityClass {class_name!r} is invalid")
    else:
        fields.report("spec.priorityClassName", f"unknown WorkloadPriorityClass {class_name!r}")
    return 0


def read_owner(
    fields: Fields, metadata: Mapping[str, Any], spec: Mapping[str, Any]
) -> tuple[str | None, str | None]:
    if spec.get("owner") is not None:
        owner = fields.section(spec, "owner", "spec")
        at = "spec.owner"
    else:
        references = fields.records(metadata, "ownerReferences", "metadata")
        if not references:
            return None, None
        # The controlling owner is the one that manages the workload; else the first.
        at, owner = next(
            ((path, ref) for path, ref in references if ref.get("controller") is True),
            references[0],
        )
    return (
        fields.text(owner, "kind", at, required=True),
        fields.text(owner, "name", at, required=True),
    )


def _pod_sets(fields: Fields, spec: Mapping[str, Any]) -> tuple[PodSet, ...]:
    pod_sets: list[PodSet] = []
    seen: dict[str, str] = {}
    elastic_at = ""  # the podSet with minCount: at most one may have it (Kueue's rule)
    for path, pod_set in fields.records(spec, "podSets", "spec", non_empty=True):
        name = fields.text(pod_set, "name", path, required=True)
        if name is not None:
            if name in seen:
                fields.report(
                    child(path, "name"), f"duplicate podSet name {name!r} (first at {seen[name]})"
                )
            else:
                seen[name] = path
        count = fields.integer(pod_set, "count", path, minimum=1)
        if count is None:
            count = 1
        min_count = fields.integer(pod_set, "minCount", path, minimum=1)
        if min_count is not None and min_count > count:
            fields.report(
                child(path, "minCount"), f"must not exceed count {count}, got {min_count}"
            )
        if pod_set.get("minCount") is not None:
            if elastic_at:
                fields.report(
                    child(path, "minCount"),
                    f"at most one podSet may have minCount ({elastic_at} has it already)",
                )
            else:
                elastic_at = path
        pod_sets.append(
            PodSet(
                name=name or "",
                count=count,
                requests=fields.resources(pod_set, "requests", path, drop_zero=True),
                min_count=min_count,
                node_selector=fields.string_map(pod_set, "nodeSelector", path),
                tolerations=fields.tolerations(pod_set, "tolerations", path),
            )
        )
    return tuple(pod_sets)


def _admission(
    fields: Fields,
    status: Mapping[str, Any],
    catalog: Catalog,
    queue: str,
    pod_sets: tuple[PodSet, ...],
    *,
    deployment: bool,
) -> Admission | None:
    if status.get("admission") is None:
        return None
    at = "status.admission"
    admission = fields.section(status, "admission", "status")
    # May differ from spec.queueName: quota stays charged where it was reserved, as
    # Kueue keeps the admission's ClusterQueue (the snapshot reads it from here).
    admitted_queue = fields.text(admission, "queue", at) or queue
    by_name = {pod_set.name: pod_set for pod_set in pod_sets}
    seen: set[str] = set()
    assigned: list[PodSetAdmission] = []
    for path, entry in fields.records(admission, "podSets", at, non_empty=True):
        name = fields.text(entry, "name", path, required=True)
        spec_pod_set = by_name.get(name) if name is not None else None
        if name is not None and spec_pod_set is None:
            fields.report(child(path, "name"), f"no podSet {name!r} in spec.podSets")
        elif name is not None and name in seen:
            fields.report(child(path, "name"), f"podSet {name!r} is admitted twice")
        seen.add(name or "")
        count = fields.integer(entry, "count", path, minimum=1)
        if count is None:
            count = spec_pod_set.count if spec_pod_set is not None else 1
        elif spec_pod_set is not None and count > spec_pod_set.count and not deployment:
            # A Deployment's committed count may differ from its desired one (CONTRACT §1).
            fields.report(
                child(path, "count"),
                f"must not exceed spec count {spec_pod_set.count}, got {count}",
            )
        flavors = _admitted_flavors(fields, entry, path, catalog)
        if spec_pod_set is not None:
            missing = sorted(spec_pod_set.requests.keys() - flavors.keys())
            if missing:
                fields.report(
                    child(path, "flavors"),
                    f"no flavor for requested resource(s) {', '.join(missing)}",
                )
        assigned.append(PodSetAdmission(name or "", count, flavors))
    return Admission(admitted_queue, tuple(assigned))


def _admitted_flavors(
    fields: Fields, entry: Mapping[str, Any], at: str, catalog: Catalog
) -> dict[str, str]:
    flavors = fields.string_map(entry, "flavors", at)
    for resource, flavor in flavors.items():
        problem = catalog.flavor_problem(flavor)
        if problem is not None:
            fields.report(at_key(child(at, "flavors"), resource), problem)
    return flavors


def read_flavor_scan(fields: Fields, status: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    at = "status.flavorScan"
    scan: dict[str, dict[str, int]] = {}
    entries = fields.section(status, "flavorScan", "status").items()
    for pod_set, resources in sorted(entries, key=lambda entry: str(entry[0])):
        pod_set_at = at_key(at, str(pod_set))
        if not isinstance(resources, dict):
            fields.report(pod_set_at, f"expected a mapping, got {shown(resources)}")
            continue
        indexes: dict[str, int] = {}
        for resource, index in sorted(resources.items(), key=lambda entry: str(entry[0])):
            # -1 means the whole flavor list was scanned (SEMANTICS §3).
            if isinstance(index, int) and not isinstance(index, bool) and -1 <= index <= MAX_AMOUNT:
                indexes[str(resource)] = index
            else:
                fields.report(
                    at_key(pod_set_at, str(resource)),
                    f"expected a flavor index (an integer, -1 or more), got {shown(index)}",
                )
        scan[str(pod_set)] = indexes
    return scan
