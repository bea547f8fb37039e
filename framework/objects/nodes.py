"""ResourceFlavor, Node and Pod objects -> the model (private to :mod:`objects`)."""

from __future__ import annotations

from ..model import (
    DELETION_COST_ANNOTATION,
    FORCE_DELETE_ANNOTATION,
    WORKLOAD_LABEL,
    Flavor,
    Node,
    Pod,
)
from .fields import Entry, Fields, Problem, at_key, child

__all__ = ["parse_flavor", "parse_node", "parse_pod"]


def parse_flavor(entry: Entry) -> tuple[Flavor, list[Problem]]:
    fields = Fields(entry)
    spec = fields.section(entry.body, "spec", "")
    flavor = Flavor(
        name=entry.name,
        node_labels=fields.string_map(spec, "nodeLabels", "spec"),
        node_taints=fields.taints(spec, "nodeTaints", "spec"),
        tolerations=fields.tolerations(spec, "tolerations", "spec"),
    )
    return flavor, fields.problems


def parse_node(entry: Entry) -> tuple[Node, list[Problem]]:
    fields = Fields(entry)
    metadata = fields.section(entry.body, "metadata", "")
    spec = fields.section(entry.body, "spec", "")
    status = fields.section(entry.body, "status", "")
    node = Node(
        name=entry.name,
        labels=fields.string_map(metadata, "labels", "metadata"),
        allocatable=fields.resources(status, "allocatable", "status", drop_zero=False),
        unschedulable=fields.flag(spec, "unschedulable", "spec"),
        taints=fields.taints(spec, "taints", "spec"),
    )
    return node, fields.problems


def parse_pod(entry: Entry) -> tuple[Pod, list[Problem]]:
    fields = Fields(entry)
    namespace = entry.namespace or "default"
    metadata = fields.section(entry.body, "metadata", "")
    spec = fields.section(entry.body, "spec", "")
    status = fields.section(entry.body, "status", "")
    labels = fields.string_map(metadata, "labels", "metadata")
    annotations = fields.string_map(metadata, "annotations", "metadata")

    deletion_cost = 0
    if DELETION_COST_ANNOTATION in annotations:
        path = at_key("metadata.annotations", DELETION_COST_ANNOTATION)
        deletion_cost = fields.integer_text(annotations[DELETION_COST_ANNOTATION], path) or 0
    workload_name = labels.get(WORKLOAD_LABEL)
    node_name = fields.text(spec, "nodeName", "spec") or None
    phase = fields.text(status, "phase", "status") or ("Running" if node_name else "Pending")

    pod = Pod(
        namespace=namespace,
        name=entry.name,
        requests=_pod_requests(fields, spec),
        node_name=node_name,
        workload=f"{namespace}/{workload_name}" if workload_name else None,
        priority=fields.integer(spec, "priority", "spec"),
        created=fields.timestamp(metadata, "creationTimestamp", "metadata") or 0,
        # Only presence counts: a pod being deleted holds its room until it is gone.
        deleting=metadata.get("deletionTimestamp") is not None,
        force_delete=annotations.get(FORCE_DELETE_ANNOTATION) == "true",
        deletion_cost=deletion_cost,
        phase=phase,
        labels=labels,
        source=entry.file,
    )
    return pod, fields.problems


def _pod_requests(fields: Fields, spec: dict[str, object]) -> dict[str, int]:
    """The pod's effective requests, as the kube-scheduler computes them.

    Containers run together, so their requests add up; init containers run one
    at a time before them, so only the largest counts, per resource.
    """
    total: dict[str, int] = {}
    for path, container in fields.records(spec, "containers", "spec"):
        resources = fields.section(container, "resources", path)
        requests = fields.resources(resources, "requests", child(path, "resources"), drop_zero=True)
        for resource, amount in requests.items():
            total[resource] = total.get(resource, 0) + amount
    for path, container in fields.records(spec, "initContainers", "spec"):
        resources = fields.section(container, "resources", path)
        requests = fields.resources(resources, "requests", child(path, "resources"), drop_zero=True)
        for resource, amount in requests.items():
            total[resource] = max(total.get(resource, 0), amount)
    return dict(sorted(total.items()))
