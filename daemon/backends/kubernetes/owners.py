"""What Jobs and Deployments share: their Workload's creation and spec, and placement.

Both kinds are synced the same way — ``sync(owner, workload)`` makes the owner
match its Workload and is safe to run any number of times — and both need a
Workload that says what they ask for. This module holds that common part; the
kind-specific rules live in ``jobs`` and ``deployments``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from preemptd.framework.model import (
    DELETION_COST_ANNOTATION,
    FORCE_DELETE_ANNOTATION,
    WORKLOAD_LABEL,
    Flavor,
)

from .client import WORKLOADS, Obj, Resource
from .commit import Writer
from .events import EventRecorder
from .workloads import (
    DESIRED_REPLICAS_ANNOTATION,
    ORIGINAL_PLACEMENT_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION,
    POD_SET,
    QUEUE_LABEL,
    SCALED_REPLICAS_ANNOTATION,
    Owner,
    admitted_counts,
    flavor_placement,
    new_workload,
    pod_set_for,
)

__all__ = [
    "Cluster",
    "Placement",
    "PodSetShape",
    "annotations_of",
    "committed",
    "ensure_workload",
    "map_patch",
    "owner_metadata",
    "placement_patch",
    "restore_patch",
    "single",
    "update_workload_spec",
    "user_template",
    "version_of",
    "workload_pod_sets",
]

log = logging.getLogger("preemptd.kubernetes.owners")


class Cluster(Protocol):
    """What an owner's sync needs from the backend."""

    @property
    def writer(self) -> Writer: ...

    @property
    def events(self) -> EventRecorder: ...

    def flavors(self) -> Mapping[str, Flavor]: ...

    def priority(self, class_name: str | None) -> int | None:
        """The value of a PriorityClass (no name: the cluster's default); None if unknown."""

    def now_ms(self) -> int: ...

    def live_pods(self, workload_key: str) -> list[Obj]:
        """The pods labelled for this Workload that have not finished (terminating ones too)."""

    def cached(self, resource: Resource, key: str) -> Obj | None:
        """An object of a kind an integration reads, from its watch cache (``namespace/name``,
        or ``name`` for a cluster-scoped kind); None when there is none."""


def annotations_of(obj: Obj) -> dict[str, Any]:
    found = (obj.get("metadata") or {}).get("annotations") or {}
    return found if isinstance(found, dict) else {}


def version_of(obj: Obj) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return None if version is None else str(version)


@dataclass(frozen=True, slots=True)
class PodSetShape:
    """One pod set an owner asks for: its name, its pods' template (as the user wrote
    it, without any flavor's directives), how many, and how few it may run with."""

    name: str
    template: Any  # {"metadata": ..., "spec": ...}; checked when the Workload is built
    count: int
    min_count: int | None = None


def workload_pod_sets(shapes: list[PodSetShape], namespace: str) -> tuple[list[Obj] | None, str]:
    """The Workload's podSets for ``shapes``, or None and why one of them is unusable."""
    pod_sets: list[Obj] = []
    for shape in shapes:
        pod_set, problem = pod_set_for(
            shape.template, namespace=namespace, count=shape.count, min_count=shape.min_count
        )
        if pod_set is None:
            where = "" if len(shapes) == 1 else f"pod set {shape.name}: "
            return None, where + problem
        pod_sets.append({**pod_set, "name": shape.name})
    if not pod_sets:
        return None, "no pod set"
    return pod_sets, ""


def single(owner: Obj, *, count: int, min_count: int | None) -> list[PodSetShape]:
    """The one pod set of a kind with one template (``spec.template``): Job, Deployment."""
    return [PodSetShape(POD_SET, user_template(owner), count, min_count)]


OWNER_KEYS_ANNOTATION = "preemptd.io/owner-metadata"
"""On a Workload: which of its labels and annotations are its owner's copies (JSON)."""

BOOKKEEPING_ANNOTATIONS = frozenset({
    DESIRED_REPLICAS_ANNOTATION,
    SCALED_REPLICAS_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION,
    ORIGINAL_PLACEMENT_ANNOTATION,
    OWNER_KEYS_ANNOTATION,
    FORCE_DELETE_ANNOTATION,
    DELETION_COST_ANNOTATION,
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
})
"""Annotations that are state about the object itself (preemptd's, kubectl's): never copied."""


def _strings(found: Any, leave_out: frozenset[str]) -> dict[str, str]:
    if not isinstance(found, dict):
        return {}
    return {str(k): v for k, v in found.items() if isinstance(v, str) and k not in leave_out}


def owner_metadata(owner: Obj, queue: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of the owner's Workload: the owner's own (so a policy that
    reads a workload's labels, such as "never preempt what is labelled X", sees what the
    user put on the Job), without the bookkeeping of :data:`BOOKKEEPING_ANNOTATIONS` and
    the Workload label of pods, and with the queue label saying the Workload's queue.
    Their keys are recorded in :data:`OWNER_KEYS_ANNOTATION`, so that a key the owner
    loses is removed from the Workload, while one set on the Workload by someone else is
    left alone."""
    metadata = owner.get("metadata") or {}
    labels = _strings(metadata.get("labels"), frozenset({WORKLOAD_LABEL}))
    annotations = _strings(metadata.get("annotations"), BOOKKEEPING_ANNOTATIONS)
    record = _keys_record(labels, annotations)
    labels[QUEUE_LABEL] = queue
    if record is not None:
        annotations[OWNER_KEYS_ANNOTATION] = record
    return labels, annotations


def _keys_record(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    found = {name: sorted(keys) for name, keys in (("annotations", annotations), ("labels", labels)) if keys}
    return json.dumps(found, sort_keys=True, separators=(",", ":")) if found else None


def _recorded(workload: Obj, field: str) -> set[str]:
    text = annotations_of(workload).get(OWNER_KEYS_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    keys = data.get(field) if isinstance(data, dict) else None
    return {str(k) for k in keys} if isinstance(keys, list) else set()


def _metadata_patch(workload: Obj, owner: Obj) -> Obj:
    """The merge patch of metadata that brings the owner's labels and annotations to its
    Workload again (empty when they are there): the owner's keys set, the keys it had
    (:data:`OWNER_KEYS_ANNOTATION`) and no longer has removed, any other key kept."""
    metadata = workload.get("metadata") or {}
    queue = str((workload.get("spec") or {}).get("queueName", ""))
    patch: Obj = {}
    for field, wanted in zip(("labels", "annotations"), owner_metadata(owner, queue), strict=True):
        found = metadata.get(field)
        current: dict[str, Any] = found if isinstance(found, dict) else {}
        changes: Obj = {k: v for k, v in wanted.items() if current.get(k) != v}
        gone = _recorded(workload, field) | ({OWNER_KEYS_ANNOTATION} if field == "annotations" else set())
        changes.update({k: None for k in sorted(gone) if k in current and k not in wanted})
        if changes:
            patch[field] = changes
    return patch


async def ensure_workload(
    cluster: Cluster, owner: Owner, shapes: list[PodSetShape], *, queue: str | None = None, owned: bool = True,
    about: Obj | None = None,
) -> bool:
    """Create the owner's Workload; an unusable pod template is a Warning on the owner instead.
    The Events are about ``about`` when the owner is not one object (a pod group's first pod).

    True when done (created, or nothing to create until the owner changes); False
    when the create was refused and must be tried again.
    """
    pod_sets, problem = workload_pod_sets(shapes, owner.namespace)
    if pod_sets is None:
        cluster.events.record(owner.obj if about is None else about, "Warning", "InvalidPodTemplate", f"no Workload created: {problem}")
        return True
    if queue is None:
        queue = str(((owner.obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL, ""))
    class_name = _priority_class(shapes)
    body = new_workload(
        owner, queue=queue, pod_set=pod_sets[0], priority=cluster.priority(class_name), priority_class=class_name
    )
    body["spec"]["podSets"] = pod_sets
    labels, annotations = owner_metadata(owner.obj, queue)
    body["metadata"]["labels"] = labels
    if annotations:
        body["metadata"]["annotations"] = annotations
    if not owned:  # no one object to be owned by (a group of pods): deleted by its integration
        del body["metadata"]["ownerReferences"]
    created = await cluster.writer.create(WORKLOADS, body, owner.namespace)
    if created is not None:
        message = f"Created Workload {owner.namespace}/{body['metadata']['name']} in Queue {queue}"
        cluster.events.record(owner.obj if about is None else about, "Normal", "CreatedWorkload", message, routine=True)
    return created is not None


def _priority_class(shapes: list[PodSetShape]) -> str | None:
    """The first pod set's ``priorityClassName`` (Kueue reads the same one)."""
    template = shapes[0].template if shapes else None
    spec = template.get("spec") if isinstance(template, dict) else None
    name = spec.get("priorityClassName") if isinstance(spec, dict) else None
    return name if isinstance(name, str) and name else None


async def update_workload_spec(
    cluster: Cluster, owner: Owner, workload: Obj, shapes: list[PodSetShape], *, admitted: bool
) -> Obj | None:
    """Keep the Workload's spec in line with its owner.

    While nothing is admitted, everything follows the owner (its templates may have
    been edited while it waited: requests, counts, placement, priority class). Once
    admitted only the counts follow (a Deployment's desired replicas): the shape of
    what runs does not change under it. While it waits its labels and annotations
    follow the owner's too (:func:`owner_metadata`), in the same write. Returns the
    Workload as it now is; None when the write was refused.
    """
    current = workload.get("spec") or {}
    pod_sets = current.get("podSets") or []
    changes: Obj = {}
    metadata: Obj = {}
    if admitted:
        counts: dict[Any, int] = {shape.name: shape.count for shape in shapes}
        wanted = [
            {**ps, "count": counts.get(ps.get("name"), ps.get("count"))} if isinstance(ps, dict) else ps
            for ps in pod_sets
        ]
        if wanted != pod_sets:
            changes["podSets"] = wanted
    else:
        fresh, _ = workload_pod_sets(shapes, owner.namespace)
        if fresh is not None and pod_sets != fresh:
            changes["podSets"] = fresh
        class_name = _priority_class(shapes)
        priority = cluster.priority(class_name)
        if priority is not None and current.get("priority") != priority:
            changes["priority"] = priority
        if class_name != current.get("priorityClassName"):
            changes["priorityClassName"] = class_name
        metadata = _metadata_patch(workload, owner.obj)
    if not changes and not metadata:
        return workload
    name = (workload.get("metadata") or {}).get("name", "")
    patch: Obj = {"metadata": {**metadata, "resourceVersion": version_of(workload)}}
    if changes:
        patch["spec"] = changes
    return await cluster.writer.patch(WORKLOADS, str(name), owner.namespace, patch)


def map_patch(current: Any, wanted: Mapping[str, Any]) -> Obj | None:
    """The merge patch that turns the map ``current`` into ``wanted`` (None: remove it)."""
    if not wanted:
        return None
    patch: Obj = dict(wanted)
    for key in current if isinstance(current, dict) else ():
        if key not in wanted:
            patch[key] = None
    return patch


class Placement:
    """Where the owner's pods ran before preemptd placed them, kept in an annotation.

    Admission adds the flavors' node selector and tolerations to the pod template;
    the original is saved first, so that the next admission (on another flavor,
    after a preemption) places the pods from exactly what the user wrote, and so
    that the Workload asks for it meanwhile (:func:`user_template`).
    """

    __slots__ = ("extra", "node_selector", "tolerations")

    def __init__(self, node_selector: Mapping[str, Any], tolerations: list[Any], extra: Mapping[str, Any]) -> None:
        self.node_selector = dict(node_selector)
        self.tolerations = list(tolerations)
        self.extra = dict(extra)  # kind-specific: a Job's parallelism

    @classmethod
    def of(cls, owner: Obj, **extra: Any) -> Placement:
        """The saved original if there is one, else the template as it is now."""
        saved = annotations_of(owner).get(ORIGINAL_TEMPLATE_ANNOTATION)
        if isinstance(saved, str):
            try:
                data = json.loads(saved)
            except ValueError:
                data = None
            if isinstance(data, dict):
                return cls(data.get("nodeSelector") or {}, data.get("tolerations") or [], data.get("extra") or {})
        template_spec = _template_spec(owner)
        return cls(template_spec.get("nodeSelector") or {}, template_spec.get("tolerations") or [], extra)

    def dumps(self) -> str:
        data = {"nodeSelector": self.node_selector, "tolerations": self.tolerations, "extra": self.extra}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def user_template(owner: Obj) -> Any:
    """The owner's pod template as its user wrote it: what its Workload's pod set asks for.

    While the original placement is saved (an owner placed on a flavor and not yet
    placed again, such as a preempted Job that stays on its last flavor's nodes
    until it is admitted anew), the template's node selector and tolerations are
    the flavor's, not the user's; the saved ones stand in for them, so the
    Workload never asks for the nodes of a flavor it no longer holds.
    """
    template = (owner.get("spec") or {}).get("template")
    if ORIGINAL_TEMPLATE_ANNOTATION not in annotations_of(owner) or not isinstance(template, dict):
        return template
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return template
    original = Placement.of(owner)
    spec = {k: v for k, v in spec.items() if k not in ("nodeSelector", "tolerations")}
    if original.node_selector:
        spec["nodeSelector"] = dict(original.node_selector)
    if original.tolerations:
        spec["tolerations"] = list(original.tolerations)
    return {**template, "spec": spec}


def _template_spec(owner: Obj) -> dict[str, Any]:
    template = (owner.get("spec") or {}).get("template") or {}
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


def placement_patch(owner: Obj, workload: Obj, flavors: Mapping[str, Flavor], original: Placement) -> Obj | None:
    """The template patch that puts the pods on the Workload's flavors; None when they are there."""
    selector, tolerations = flavor_placement(workload, flavors)
    wanted_selector = {**original.node_selector, **selector}
    wanted_tolerations = original.tolerations + [t for t in tolerations if t not in original.tolerations]
    return _template_patch(owner, wanted_selector, wanted_tolerations)


def restore_patch(owner: Obj, original: Placement) -> Obj | None:
    """The template patch that gives back the user's own node selector and tolerations."""
    return _template_patch(owner, original.node_selector, original.tolerations)


def _template_patch(owner: Obj, selector: Mapping[str, Any], tolerations: list[Any]) -> Obj | None:
    spec = _template_spec(owner)
    patch: Obj = {}
    if (spec.get("nodeSelector") or {}) != selector:
        patch["nodeSelector"] = map_patch(spec.get("nodeSelector"), selector)
    if (spec.get("tolerations") or []) != tolerations:
        patch["tolerations"] = tolerations or None
    return patch or None


def committed(workload: Obj | None) -> int:
    """The Workload's committed pod count (0 when no quota is held)."""
    return sum(admitted_counts(workload).values()) if workload is not None else 0
