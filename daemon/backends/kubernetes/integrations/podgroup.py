"""Plain pods grouped into a gang: one Workload for all of them, admitted all or nothing.

A pod joins a group with the label ``preemptd.io/pod-group: <group>`` (and the
queue label); the annotation ``preemptd.io/pod-group-total-count`` says how many
pods the group has, and every pod of the group says the same. Each pod is created
held by the scheduling gate ``preemptd.io/admission`` (a pod cannot be gated after
its creation; a grouped pod without the gate is a Warning, and its group is not
managed).

* **The owner** is the group, not one object: its key is ``namespace/group``, its
  Workload ``podgroup-<group>`` (owner kind ``PodGroup``), created once all
  ``total-count`` pods exist, with one pod set of that many pods shaped like the
  first pod by name. Its requests and priority class are what every pod should
  have; pods that differ are the user's mistake and run as they are.
* **Admitted**: every pod gets the flavor's node selector and tolerations (the API
  lets a gated pod gain them) and loses the gate, in one write per pod.
* **Evicted**: pods cannot be suspended, so they are deleted; once none runs the
  next commit gives the Workload's quota back (:meth:`PodGroupIntegration.stopped`). A group with no pod left has no Workload either
  (whoever created the pods creates the group again, and it queues anew).
* **Finished**: every pod of the group ended (``Succeeded``; ``Failed`` if any failed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import PODS, WORKLOADS, Obj, Resource
from ..owners import Cluster, PodSetShape, committed, ensure_workload, update_workload_spec
from ..workloads import (
    QUEUE_LABEL,
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    finished_patch,
    workload_name,
)
from . import Integration, InvalidOwner, Rule
from .suspendable import pod_set_placement

__all__ = [
    "ADMISSION_GATE", "GROUP_LABEL", "POD_GROUPS", "TOTAL_COUNT_ANNOTATION", "PodGroupIntegration", "gate_patch",
]

GROUP_LABEL = "preemptd.io/pod-group"
TOTAL_COUNT_ANNOTATION = "preemptd.io/pod-group-total-count"
ADMISSION_GATE = "preemptd.io/admission"
POD_GROUPS = Resource("", "v1", "pods", "PodGroup", namespaced=True)
"""The pods of groups, watched in full (their templates matter), apart from the scheduler's
trimmed cache of every pod; ``PodGroup`` is the owner kind its Workloads name."""

_DONE = ("Succeeded", "Failed")


def _gates(pod: Obj) -> list[Any]:
    gates = (pod.get("spec") or {}).get("schedulingGates")
    return gates if isinstance(gates, list) else []


def _gated(pod: Obj) -> bool:
    return any(isinstance(g, dict) and g.get("name") == ADMISSION_GATE for g in _gates(pod))


def gate_patch(pod: Obj) -> list[Obj]:
    """The JSON patch that adds the admission gate to a grouped pod created without it,
    beside any gate of its own (for the admission webhook); empty when it has it."""
    if _gated(pod):
        return []
    if (pod.get("spec") or {}).get("schedulingGates") is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ADMISSION_GATE}]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": ADMISSION_GATE}}]


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _live(pod: Obj) -> bool:
    return _phase(pod) not in _DONE and not (pod.get("metadata") or {}).get("deletionTimestamp")


class PodGroupIntegration(Integration):
    name = "pod-group"
    resource = POD_GROUPS
    label_selector = f"{QUEUE_LABEL},{GROUP_LABEL}"

    def __init__(self) -> None:
        self._groups: dict[str, set[str]] = {}  # namespace/group -> its pods' keys

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """Index the pods by group, so that an owner is read from its own pods alone."""
        for pod, add in ((old, False), (new, True)):
            if pod is None:
                continue
            group = self.owner_key(pod)
            metadata = pod.get("metadata") or {}
            key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '')}"
            if add:
                self._groups.setdefault(group, set()).add(key)
            elif (keys := self._groups.get(group)) is not None:
                keys.discard(key)
                if not keys:  # forgotten with its last pod
                    del self._groups[group]

    def event_target(self, owner: Obj) -> Obj | None:
        pods: list[Obj] = owner.get("pods") or []
        return pods[0] if pods else None

    def owner_key(self, obj: Obj) -> str:
        metadata = obj.get("metadata") or {}
        group = (metadata.get("labels") or {}).get(GROUP_LABEL, "")
        return f"{metadata.get('namespace') or 'default'}/{group}"

    def owner(self, store: Mapping[str, Obj], key: str) -> Obj | None:
        """The group as one object: ``pods`` are its pods by name (none: the group is gone)."""
        namespace, _, group = key.partition("/")
        # From the index (``observe``); a pod relabelled out of the group since is left out.
        found = (store.get(k) for k in self._groups.get(key, ()))
        pods = sorted(
            (p for p in found if p is not None and self.owner_key(p) == key),
            key=lambda p: str((p.get("metadata") or {}).get("name", "")),
        )
        first = (pods[0].get("metadata") or {}) if pods else {}
        # The group's labels and annotations are its first pod's (its Workload carries them).
        labels = {**(first.get("labels") or {}), QUEUE_LABEL: (first.get("labels") or {}).get(QUEUE_LABEL, "")}
        metadata = {"name": group, "namespace": namespace, "labels": labels,
                    "annotations": dict(first.get("annotations") or {})}
        return {"apiVersion": "v1", "kind": "PodGroup", "metadata": metadata, "pods": pods}

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        pods: list[Obj] = owner.get("pods") or []
        totals = set()
        for pod in pods:
            name = (pod.get("metadata") or {}).get("name")
            text = ((pod.get("metadata") or {}).get("annotations") or {}).get(TOTAL_COUNT_ANNOTATION)
            if not isinstance(text, str) or not text.strip().isdigit() or int(text) < 1:
                raise InvalidOwner(
                    f"Pod {name}: metadata.annotations[{TOTAL_COUNT_ANNOTATION}]",
                    f"expected the group's pod count, got {text!r}",
                )
            totals.add(int(text))
        if len(totals) > 1:
            counts = ", ".join(map(str, sorted(totals)))
            raise InvalidOwner(f"metadata.annotations[{TOTAL_COUNT_ANNOTATION}]", f"the pods disagree: {counts}")
        first = pods[0] if pods else {}
        spec = {k: v for k, v in (first.get("spec") or {}).items() if k not in ("nodeName", "schedulingGates")}
        template = {"metadata": {"labels": dict((first.get("metadata") or {}).get("labels") or {})}, "spec": spec}
        return [PodSetShape("main", template, totals.pop() if totals else 0)]

    def rules(self) -> tuple[Rule, ...]:
        return (Rule("", ("pods",), ("delete", "get", "list", "patch", "watch")),)

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        pods: list[Obj] = owner.get("pods") or []
        return not any(_live(p) for p in pods) and not cluster.live_pods(workload_key)

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        pods: list[Obj] = owner.get("pods") or []
        group = Owner(self.resource, owner)
        if not pods:
            # The group is gone (deleted by its user, or its pods by an eviction): so is its
            # Workload, and with it any quota it held.
            if workload is None:
                return True
            name = str((workload.get("metadata") or {}).get("name", ""))
            return await cluster.writer.delete(WORKLOADS, name, group.namespace)
        try:
            shapes = self.pod_sets(owner)
        except InvalidOwner as exc:
            cluster.events.record(pods[0], "Warning", "InvalidPodGroup", f"no Workload created: {exc}")
            return True
        total = shapes[0].count
        live = [p for p in pods if _live(p)]
        if workload is None:
            if len(live) < total:
                return True  # the group is not complete yet
            ungated = [p for p in live if not _gated(p)]
            if ungated:
                message = f"pod group {group.name}: not held by the scheduling gate {ADMISSION_GATE}; not managed"
                cluster.events.record(ungated[0], "Warning", "UngatedPod", message)
                return True
            return await ensure_workload(cluster, group, shapes, queue=self.queue(owner), owned=False, about=pods[0])
        name = str((workload.get("metadata") or {}).get("name", ""))
        ended = [p for p in pods if _phase(p) in _DONE]
        if len(ended) >= total and not condition_true(workload, "Evicted"):
            if condition_true(workload, "Finished"):
                return True
            failed = any(_phase(p) == "Failed" for p in ended)
            reason, message = ("Failed", "a pod of the group failed") if failed else ("Succeeded", "every pod succeeded")
            patch = finished_patch(workload, reason, message, cluster.now_ms())
            return await cluster.writer.patch(WORKLOADS, name, group.namespace, patch, subresource="status") is not None
        if committed(workload) == 0:
            return await update_workload_spec(cluster, group, workload, shapes, admitted=False) is not None
        if condition_true(workload, "Evicted"):
            deleted = [await cluster.writer.delete(PODS, _name(p), group.namespace) for p in live]
            # Not yet while their kubelets are still stopping them; then the next commit gives
            # the quota back.
            return all(deleted) and not cluster.live_pods(f"{group.namespace}/{name}")
        selector, tolerations = pod_set_placement(workload, cluster.flavors()).get("main", ({}, []))
        label = workload_name(group.kind, group.name)
        released = True
        for pod in live:
            if _gated(pod):
                released = await self._release(cluster, pod, label, selector, tolerations) and released
        return released

    async def _release(
        self, cluster: Cluster, pod: Obj, label: str, selector: Mapping[str, str], tolerations: list[Obj]
    ) -> bool:
        """One write: the flavor's directives in, the gate out, the Workload's label on."""
        spec = pod.get("spec") or {}
        found = spec.get("tolerations")
        own: list[Any] = found if isinstance(found, list) else []
        gates = [g for g in _gates(pod) if not (isinstance(g, dict) and g.get("name") == ADMISSION_GATE)]
        patch_spec: Obj = {"schedulingGates": gates or None}
        if selector:
            patch_spec["nodeSelector"] = dict(selector)
        added = [t for t in tolerations if t not in own]
        if added:
            patch_spec["tolerations"] = [*own, *added]
        metadata = pod.get("metadata") or {}
        patch: Obj = {
            "metadata": {"resourceVersion": metadata.get("resourceVersion"), "labels": {WORKLOAD_LABEL: label}},
            "spec": patch_spec,
        }
        return await cluster.writer.patch(PODS, _name(pod), str(metadata.get("namespace")), patch) is not None


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))
