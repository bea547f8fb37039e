"""Kinds with a ``suspend`` switch and a fixed list of pod templates, driven by their Workload.

Design note. JobSet, the Kubeflow and Ray kinds share one life: created suspended
(one that is not is suspended on first sight), one pod set per template, admitted
by writing the flavors' node selectors and tolerations into every template and
clearing ``suspend`` in one patch, preempted by setting ``suspend`` again (their
operators then delete the pods). A subclass says only where the switch and the
templates are (:meth:`Suspendable.shapes`, :meth:`Suspendable.templates`,
:meth:`Suspendable.templates_patch`, :attr:`Suspendable.suspend_path`) and when the
owner is done (:meth:`Suspendable.finished`).

=============================  ==========================================================
Workload                       owner
=============================  ==========================================================
no quota                       suspended; the Workload's pod sets follow its templates
                               (an edit while it waits is seen, point 5 of the issue)
admitted                       every template on its pod set's flavors, labelled with
                               the Workload's name, and ``suspend: false``, in one write
evicted                        suspended; once none of its pods is left, the Workload
                               gives its quota back
finished                       Workload ``Finished``: quota free
=============================  ==========================================================

Each template's own node selector and tolerations are saved, per pod set, in the
annotation ``preemptd.io/original-placement`` by the write that first places it,
and every later placement starts from them; while it is saved, the Workload's pod
sets are read from the saved placement, never from the last flavor's.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from preemptd.framework.model import Flavor

from ..client import WORKLOADS, Obj
from ..owners import (
    Cluster,
    PodSetShape,
    annotations_of,
    committed,
    ensure_workload,
    update_workload_spec,
    version_of,
)
from ..workloads import (
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    eviction_finished_patch,
    finished_patch,
    workload_name,
)
from . import Integration, InvalidOwner

__all__ = ["ORIGINAL_PLACEMENT_ANNOTATION", "Suspendable", "deep_merge", "pod_set_placement"]

ORIGINAL_PLACEMENT_ANNOTATION = "preemptd.io/original-placement"


def deep_merge(into: Obj, other: Mapping[str, Any]) -> Obj:
    """Two merge patches as one (``other`` wins where both set a leaf)."""
    merged = dict(into)
    for key, value in other.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def pod_set_placement(workload: Obj, flavors: Mapping[str, Flavor]) -> dict[str, tuple[dict[str, str], list[Obj]]]:
    """Per admitted pod set, the node selector and tolerations of its flavors."""
    admission = (workload.get("status") or {}).get("admission") or {}
    found: dict[str, tuple[dict[str, str], list[Obj]]] = {}
    for pod_set in admission.get("podSets") or []:
        if not isinstance(pod_set, dict):
            continue
        selector: dict[str, str] = {}
        tolerations: list[Obj] = []
        for name in sorted({str(f) for f in (pod_set.get("flavors") or {}).values()}):
            flavor = flavors.get(name)
            if flavor is None:
                continue
            selector.update(flavor.node_labels)
            for toleration in flavor.tolerations:
                entry: Obj = {"operator": toleration.operator}
                for key in ("key", "value", "effect"):
                    if getattr(toleration, key):
                        entry[key] = getattr(toleration, key)
                if entry not in tolerations:
                    tolerations.append(entry)
        found[str(pod_set.get("name"))] = (selector, tolerations)
    return found


def _spec_of(template: Any) -> dict[str, Any]:
    spec = template.get("spec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else {}


class Suspendable(Integration):
    """See the module docstring; subclasses fill in where things are."""

    suspend_path: ClassVar[tuple[str, ...]] = ("spec", "suspend")

    # -- what a subclass says ---------------------------------------------------------

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        """The pod sets with the templates as they are in the object (placed or not)."""
        raise NotImplementedError

    def templates(self, owner: Obj) -> dict[str, Obj]:
        """Pod set name -> its pod template in the object, in pod-set order."""
        raise NotImplementedError

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        """The merge patch (from the object's root) that writes these pod templates."""
        raise NotImplementedError

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        """``(reason, message)`` once the owner is done for good; None while it is not."""
        return None

    # -- the common part -------------------------------------------------------------

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        saved = _saved(owner)
        shapes = self.shapes(owner)
        if not saved:
            return shapes
        return [
            PodSetShape(s.name, _with_placement(s.template, *saved.get(s.name, _own(s.template))), s.count, s.min_count)
            for s in shapes
        ]

    def suspended(self, owner: Obj) -> bool:
        value: Any = owner
        for key in self.suspend_path:
            value = value.get(key) if isinstance(value, dict) else None
        return value is True

    def suspend_patch(self, owner: Obj, suspend: bool) -> Obj:
        value: Any = suspend
        for key in reversed(self.suspend_path):
            value = {key: value}
        return deep_merge({"metadata": {"resourceVersion": version_of(owner)}}, value)

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        held = Owner(self.resource, owner)
        try:
            shapes = self.pod_sets(owner)
        except InvalidOwner as exc:
            cluster.events.record(owner, "Warning", "InvalidOwner", f"no Workload created: {exc}")
            return True
        finished = self.finished(owner)
        if workload is None:
            if finished is not None:
                return True
            if not self.suspended(owner) and ORIGINAL_PLACEMENT_ANNOTATION not in annotations_of(owner):
                # Created running, not through preemptd: hold it until it is admitted.
                stopped = await cluster.writer.patch(self.resource, held.name, held.namespace, self.suspend_patch(owner, True))
                if stopped is None:
                    return False
                held = Owner(self.resource, stopped)
            return await ensure_workload(cluster, held, shapes, queue=self.queue(owner))
        name = str((workload.get("metadata") or {}).get("name", ""))
        if finished is not None:
            if condition_true(workload, "Finished"):
                return True
            patch = finished_patch(workload, finished[0], finished[1], cluster.now_ms())
            return await cluster.writer.patch(WORKLOADS, name, held.namespace, patch, subresource="status") is not None
        if committed(workload) == 0:
            if await update_workload_spec(cluster, held, workload, shapes, admitted=False) is None:
                return False
            return await self._stop(cluster, held) is not None
        if condition_true(workload, "Evicted"):
            if await self._stop(cluster, held) is None:
                return False
            if cluster.live_pods(f"{held.namespace}/{name}"):
                return False  # its operator is still stopping the pods
            patch = eviction_finished_patch(workload, cluster.now_ms())
            written = await cluster.writer.patch(WORKLOADS, name, held.namespace, patch, subresource="status")
            if written is None:
                return False
            cluster.events.record(written, "Normal", "EvictionFinished", "All pods stopped; queued again", routine=True)
            return True
        if self.suspended(owner):
            return await self._start(cluster, held, workload)
        return True

    async def _stop(self, cluster: Cluster, owner: Owner) -> Obj | None:
        if self.suspended(owner.obj):
            return owner.obj
        patch = self.suspend_patch(owner.obj, True)
        return await cluster.writer.patch(self.resource, owner.name, owner.namespace, patch)

    async def _start(self, cluster: Cluster, owner: Owner, workload: Obj) -> bool:
        """Every template on its pod set's flavors, labelled, and running: one write."""
        obj = owner.obj
        label = workload_name(owner.kind, owner.name)
        saved = _saved(obj)
        placements = pod_set_placement(workload, cluster.flavors())
        originals: dict[str, tuple[dict[str, Any], list[Any]]] = {}
        placed: dict[str, Obj] = {}
        for pod_set, template in self.templates(obj).items():
            selector, tolerations = originals[pod_set] = saved.get(pod_set, _own(template))
            flavor_selector, flavor_tolerations = placements.get(pod_set, ({}, []))
            wanted_tolerations = tolerations + [t for t in flavor_tolerations if t not in tolerations]
            new = _with_placement(template, {**selector, **flavor_selector}, wanted_tolerations)
            metadata = dict(new.get("metadata") or {})
            metadata["labels"] = {**(metadata.get("labels") or {}), WORKLOAD_LABEL: label}
            placed[pod_set] = {**new, "metadata": metadata}
        record = {k: {"nodeSelector": s, "tolerations": t} for k, (s, t) in sorted(originals.items())}
        patch = deep_merge(self.suspend_patch(obj, False), self.templates_patch(obj, placed))
        patch["metadata"]["annotations"] = {
            ORIGINAL_PLACEMENT_ANNOTATION: json.dumps(record, sort_keys=True, separators=(",", ":"))
        }
        return await cluster.writer.patch(self.resource, owner.name, owner.namespace, patch) is not None


def _own(template: Any) -> tuple[dict[str, Any], list[Any]]:
    spec = _spec_of(template)
    selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations")
    return (dict(selector) if isinstance(selector, dict) else {}), (list(tolerations) if isinstance(tolerations, list) else [])


def _with_placement(template: Any, selector: Mapping[str, Any], tolerations: list[Any]) -> Any:
    if not isinstance(template, dict):
        return template
    spec = {k: v for k, v in _spec_of(template).items() if k not in ("nodeSelector", "tolerations")}
    if selector:
        spec["nodeSelector"] = dict(selector)
    if tolerations:
        spec["tolerations"] = copy.deepcopy(tolerations)
    return {**template, "spec": spec}


def _saved(owner: Obj) -> dict[str, tuple[dict[str, Any], list[Any]]]:
    text = annotations_of(owner).get(ORIGINAL_PLACEMENT_ANNOTATION)
    if not isinstance(text, str):
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    found: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for name, entry in data.items() if isinstance(data, dict) else ():
        if isinstance(entry, dict):
            selector = entry.get("nodeSelector")
            tolerations = entry.get("tolerations")
            found[str(name)] = (
                dict(selector) if isinstance(selector, dict) else {},
                list(tolerations) if isinstance(tolerations, list) else [],
            )
    return found
