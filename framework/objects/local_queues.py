"""LocalQueues, Namespaces and namespace selectors (private to :mod:`objects`).

Which leaf Queue a Workload's ``spec.queueName`` reaches, and whether its namespace
may use it:

* ``spec.queueName`` names the LocalQueue of that name in the workload's namespace,
  whose ``spec.queue`` names the leaf Queue. Only when the namespace has no LocalQueue
  of that name does the name stand for a Queue itself, so snapshots written before
  LocalQueues existed read as they always did. An invalid LocalQueue is not skipped
  over to a Queue of the same name: its workloads wait, with the reason.
* A Queue's ``spec.namespaceSelector`` (a Kubernetes label selector over Namespace
  labels) says which namespaces may use it, however the workload reached it. Without
  one, every namespace may. A namespace that has no Namespace object in the snapshot
  has only the label every Namespace carries, ``kubernetes.io/metadata.name``. A
  workload refused is pending ``Inadmissible`` with the reason; it is not an error of
  the object (it is valid, and may be admitted once its namespace is relabelled). An
  admitted workload is not evicted when its namespace stops matching.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..model import (
    NAMESPACE_NAME_LABEL,
    FrozenDict,
    LabelRequirement,
    LabelSelector,
    LocalQueue,
    QueueSpec,
    SelectorOperator,
    Workload,
)
from .fields import Catalog, Entry, Fields, Problem, child, shown

__all__ = [
    "namespace_problem",
    "namespace_refusal",
    "parse_label_selector",
    "parse_local_queue",
    "parse_namespace",
    "queue_problem",
    "resolve_queue",
]


_OPERATORS: dict[str, SelectorOperator] = {
    "In": "In",
    "NotIn": "NotIn",
    "Exists": "Exists",
    "DoesNotExist": "DoesNotExist",
}


def parse_label_selector(
    fields: Fields, obj: Mapping[str, Any], key: str, at: str
) -> LabelSelector | None:
    """A Kubernetes label selector, or None when the field is absent.

    Kubernetes' own rules: ``In`` and ``NotIn`` need at least one value, ``Exists`` and
    ``DoesNotExist`` none; an empty selector (``{}``) selects everything.
    """
    if obj.get(key) is None:
        return None
    path = child(at, key)
    section = fields.section(obj, key, at)
    match_labels = fields.string_map(section, "matchLabels", path)
    requirements: list[LabelRequirement] = []
    for item_at, item in fields.records(section, "matchExpressions", path):
        label = fields.text(item, "key", item_at, required=True)
        operator = fields.choice(item, "operator", item_at, _OPERATORS)
        if item.get("operator") is None:
            fields.report(child(item_at, "operator"), "required field is missing")
        values: list[str] = []
        for value_at, value in fields.items(item, "values", item_at):
            if isinstance(value, str):
                values.append(value)
            else:
                fields.report(value_at, f"expected a string (quote it), got {shown(value)}")
        if operator in ("In", "NotIn") and not values:
            fields.report(child(item_at, "values"), f"operator {operator} needs at least one value")
        elif operator in ("Exists", "DoesNotExist") and values:
            fields.report(child(item_at, "values"), f"operator {operator} takes no values")
        if label is not None and operator is not None:
            requirements.append(LabelRequirement(label, operator, tuple(sorted(set(values)))))
    return LabelSelector(match_labels, tuple(requirements))


def namespace_problem(queue: QueueSpec, namespace: str, labels: Mapping[str, str]) -> str | None:
    """Why a workload of ``namespace`` may not use ``queue`` (its namespaceSelector), or None."""
    if queue.admits_namespace(labels):
        return None
    return (
        f"namespace {namespace!r} is not selected by the namespaceSelector of queue "
        f"{queue.name!r}"
    )


def parse_local_queue(entry: Entry) -> tuple[LocalQueue, list[Problem]]:
    """A LocalQueue: ``spec.queue`` names the leaf Queue its namespace's workloads go to."""
    fields = Fields(entry)
    spec = fields.section(entry.body, "spec", "")
    queue = fields.text(spec, "queue", "spec", required=True) or ""
    return LocalQueue(entry.namespace or "default", entry.name, queue, entry.file), fields.problems


def parse_namespace(entry: Entry) -> tuple[Mapping[str, str], list[Problem]]:
    """A Namespace's labels, with the one the API server always sets (its own name)."""
    fields = Fields(entry)
    metadata = fields.section(entry.body, "metadata", "")
    labels = fields.string_map(metadata, "labels", "metadata")
    labels[NAMESPACE_NAME_LABEL] = entry.name
    return FrozenDict(sorted(labels.items())), fields.problems


def resolve_queue(catalog: Catalog, namespace: str, name: str) -> tuple[str, str | None, str | None]:
    """``spec.queueName`` -> (the leaf Queue, the LocalQueue it went through, a problem).

    A LocalQueue of that name in the workload's namespace wins; only without one does
    the name stand for a Queue itself (so files written before LocalQueues keep working).
    """
    key = f"{namespace}/{name}"
    local = catalog.local_queues.get(key)
    if local is not None:
        return local.queue, name, None
    if key in catalog.invalid_local_queues:
        return "", name, f"LocalQueue {key!r} is invalid"
    return name, None, None


def queue_problem(
    tree_problem: Callable[[str], str | None], entry: Entry, workload: Workload
) -> Problem | None:
    """Why the workload's queue cannot hold it, as a problem at its ``spec.queueName``."""
    queue = workload.queue
    problem = tree_problem(queue) if queue else None
    if problem is None:
        return None
    if workload.local_queue is not None:
        problem = f"LocalQueue {workload.namespace + '/' + workload.local_queue!r}: {problem}"
    return Problem(entry.file, entry.label, "spec.queueName", problem)


def namespace_refusal(
    queues: Mapping[str, QueueSpec], catalog: Catalog, workload: Workload
) -> str | None:
    """Why a pending workload may not use its queue from its namespace, or None.

    Only pending workloads are held to the queue's namespaceSelector: one already
    admitted keeps running when its namespace's labels change, as under Kueue.
    """
    if workload.admission is not None:
        return None
    queue = queues.get(workload.queue)
    if queue is None:
        return None
    if queue.namespace_selector is not None and workload.namespace in catalog.invalid_namespaces:
        # Its labels are unknown: neither admitted nor refused on a guess.
        return (
            f"Namespace {workload.namespace!r} is invalid, so the namespaceSelector of queue "
            f"{queue.name!r} cannot be checked"
        )
    problem = namespace_problem(queue, workload.namespace, catalog.namespace_labels(workload.namespace))
    if problem is not None and workload.local_queue is not None:
        problem += f" (through LocalQueue {workload.namespace + '/' + workload.local_queue!r})"
    return problem
