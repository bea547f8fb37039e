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
evicted                        suspended; once none of its pods is left, the next
                               commit gives its quota back (:meth:`Suspendable.stopped`)
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
    ORIGINAL_PLACEMENT_ANNOTATION,
    WORKLOAD_LABEL,
    Owner,
    admitted_counts,
    condition_true,
    finished_patch,
    workload_name,
)
from . import Integration, InvalidOwner

__all__ = ["ORIGINAL_PLACEMENT_ANNOTATION", "Suspendable", "deep_merge", "pod_set_placement"]



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

    def counts_patch(self, owner: Obj, counts: Mapping[str, int]) -> Obj | None:
        """For a kind with an elastic pod set: the merge patch that runs ``counts`` pods
        per pod set (those it names). None (the default): counts are never changed."""
        return None

    # -- the common part -------------------------------------------------------------

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        saved = _saved(owner)
        shapes = self.shapes(owner)
        if not saved:
            return shapes
        # Running shrunk, an elastic pod set asked for its user's count (saved); suspended,
        # the count is back in the object, where its user may edit it.
        counts = {} if self.suspended(owner) else _saved_counts(owner)
        return [
            PodSetShape(
                s.name,
                _with_placement(s.template, *saved.get(s.name, _own(s.template))),
                counts.get(s.name, s.count),
                s.min_count,
            )
            for s in shapes
        ]

    def suspended(self, owner: Obj) -> bool:
        value: Any = owner
        for key in self.suspend_path:
            value = value.get(key) if isinstance(value, dict) else None
        return value is True

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        return self.suspended(owner) and not cluster.live_pods(workload_key)

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
            # Not yet while its operator is still stopping the pods; once stopped, the next
            # commit gives its quota back.
            return not cluster.live_pods(f"{held.namespace}/{name}")
        if self.suspended(owner):
            return await self._start(cluster, held, workload)
        # Running: an elastic pod set shrunk by a preemption runs its admitted count, and
        # grown back (docs/elastic.md) runs it again, never more than its user's own count.
        admitted = admitted_counts(workload)
        running = {s.name: s.count for s in self.shapes(owner)}
        lower = {name: count for name, count in admitted.items() if count < running.get(name, count)}
        saved = _saved_counts(owner)
        higher = {
            name: count for name, count in admitted.items()
            if name in saved and running.get(name, count) < count <= saved[name]
        }
        shrink = self.counts_patch(owner, {**lower, **higher}) if lower or higher else None
        if shrink is None:
            return True
        record = _record(owner)
        for pod_set in lower:  # the user's count, unless an earlier shrink saved it already
            record.setdefault(pod_set, {}).setdefault("count", running[pod_set])
        metadata = {"resourceVersion": version_of(owner), "annotations": {ORIGINAL_PLACEMENT_ANNOTATION: _dumps(record)}}
        shrink = deep_merge({"metadata": metadata}, shrink)
        return await cluster.writer.patch(self.resource, held.name, held.namespace, shrink) is not None

    async def _stop(self, cluster: Cluster, owner: Owner) -> Obj | None:
        if self.suspended(owner.obj):
            return owner.obj
        patch = self.suspend_patch(owner.obj, True)
        # The user's counts come back with the suspension (an elastic pod set ran shrunk).
        restore = self.counts_patch(owner.obj, counts) if (counts := _saved_counts(owner.obj)) else None
        if restore is not None:
            patch = deep_merge(patch, restore)
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
        record: dict[str, Obj] = {k: {"nodeSelector": s, "tolerations": t} for k, (s, t) in sorted(originals.items())}
        templates = self.templates_patch(obj, placed)
        patch = deep_merge(self.suspend_patch(obj, False), templates)
        # Suspended, the object holds its user's counts; an elastic pod set admitted with fewer
        # runs those, and its user's count is saved to come back with the next suspension.
        wanted = {s.name: s.count for s in self.shapes(obj)}
        admitted = admitted_counts(workload)
        lower = {name: count for name, count in admitted.items() if count < wanted.get(name, count)}
        # Counted on the object as placed: a list both patches rewrite is written once, whole.
        counts = self.counts_patch(deep_merge(obj, templates), lower) if lower else None
        if counts is not None:
            patch = deep_merge(patch, counts)
            for name in lower:
                record.setdefault(name, {})["count"] = wanted[name]
        patch["metadata"]["annotations"] = {ORIGINAL_PLACEMENT_ANNOTATION: _dumps(record)}
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


def _record(owner: Obj) -> dict[str, Obj]:
    text = annotations_of(owner).get(ORIGINAL_PLACEMENT_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    return {str(k): dict(v) for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _dumps(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def _saved_counts(owner: Obj) -> dict[str, int]:
    """Per elastic pod set admitted with fewer pods, its user's count (saved at admission)."""
    text = annotations_of(owner).get(ORIGINAL_PLACEMENT_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        data = None
    found: dict[str, int] = {}
    for name, entry in data.items() if isinstance(data, dict) else ():
        count = entry.get("count") if isinstance(entry, dict) else None
        if isinstance(count, int) and not isinstance(count, bool):
            found[str(name)] = count
    return found


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
