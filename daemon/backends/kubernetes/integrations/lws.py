"""``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet: groups of a leader and its workers, as replicas.

A LeaderWorkerSet runs ``spec.replicas`` groups (default 1); each group is one
leader and ``size - 1`` workers (``spec.leaderWorkerTemplate.size``, default 1),
the leader from ``leaderTemplate`` (the ``workerTemplate`` when there is none).
Its Workload has a ``leader`` pod set of ``replicas`` pods and a ``workers`` pod
set of ``replicas × (size - 1)`` (left out when ``size`` is 1).

It has no suspend switch: like a Deployment's, its ``spec.replicas`` is what is
admitted and what its user wants is kept in ``preemptd.io/desired-replicas`` (copied
there on first sight). A group is never split — a leader without its workers serves
nothing — so the LeaderWorkerSet is admitted and preempted whole: evicted, it is
scaled to zero groups, and it gives its quota back once none of its pods is left.
Admission writes the flavors' directives into both templates and scales it to its
groups in one write; the templates' own directives are saved (per pod set, as for
the suspendable kinds) and every later placement starts from them.
"""

from __future__ import annotations

import json
from typing import Any

from ..client import WORKLOADS, Obj, Resource
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
    DESIRED_REPLICAS_ANNOTATION,
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    workload_name,
)
from . import Integration, InvalidOwner
from .suspendable import (
    ORIGINAL_PLACEMENT_ANNOTATION,
    _own,
    _saved,
    _with_placement,
    pod_set_placement,
)

__all__ = ["LEADERWORKERSETS", "LeaderWorkerSetIntegration"]

LEADERWORKERSETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", namespaced=True)
LEADER, WORKERS = "leader", "workers"


def _lwt(owner: Obj) -> Obj:
    found = (owner.get("spec") or {}).get("leaderWorkerTemplate")
    if not isinstance(found, dict) or not isinstance(found.get("workerTemplate"), dict):
        raise InvalidOwner("spec.leaderWorkerTemplate.workerTemplate", "a LeaderWorkerSet needs a worker template")
    return found


def _size(owner: Obj) -> int:
    size: Any = _lwt(owner).get("size", 1)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise InvalidOwner("spec.leaderWorkerTemplate.size", f"expected a positive integer, got {size!r}")
    return size


def _desired(owner: Obj) -> int | None:
    text = annotations_of(owner).get(DESIRED_REPLICAS_ANNOTATION)
    return int(text) if isinstance(text, str) and text.strip().isdigit() else None


class LeaderWorkerSetIntegration(Integration):
    name = "leaderworkerset"
    resource = LEADERWORKERSETS
    optional = True

    def templates(self, owner: Obj) -> dict[str, Obj]:
        lwt = _lwt(owner)
        found = {LEADER: lwt.get("leaderTemplate") or lwt["workerTemplate"]}
        if _size(owner) > 1:
            found[WORKERS] = lwt["workerTemplate"]
        return found

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        groups = _desired(owner)
        if groups is None:
            replicas = (owner.get("spec") or {}).get("replicas", 1)
            groups = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
        saved = _saved(owner)
        if LEADER not in saved and WORKERS in saved:
            saved[LEADER] = saved[WORKERS]  # no leader template: the leader runs the workers'
        counts = {LEADER: groups, WORKERS: groups * (_size(owner) - 1)}
        return [
            PodSetShape(name, _with_placement(template, *saved.get(name, _own(template))), counts[name])
            for name, template in self.templates(owner).items()
        ]

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        held = Owner(self.resource, owner)
        if DESIRED_REPLICAS_ANNOTATION not in annotations_of(owner):
            replicas = (owner.get("spec") or {}).get("replicas", 1)
            patch: Obj = {
                "metadata": {"resourceVersion": version_of(owner),
                             "annotations": {DESIRED_REPLICAS_ANNOTATION: str(replicas)}},
                "spec": {"replicas": 0},
            }
            taken = await cluster.writer.patch(self.resource, held.name, held.namespace, patch)
            if taken is None:
                return False
            held = Owner(self.resource, taken)
        try:
            shapes = self.pod_sets(held.obj)
        except InvalidOwner as exc:
            cluster.events.record(owner, "Warning", "InvalidOwner", f"no Workload created: {exc}")
            return True
        groups = shapes[0].count
        if workload is None:
            created = groups == 0 or await ensure_workload(cluster, held, shapes, queue=self.queue(owner))
            return await self._scale(cluster, held, None, 0) and created
        name = str((workload.get("metadata") or {}).get("name", ""))
        if groups == 0:
            if await self._scale(cluster, held, None, 0):
                return await cluster.writer.delete(WORKLOADS, name, held.namespace)
            return False
        admitted = committed(workload) > 0
        updated = await update_workload_spec(cluster, held, workload, shapes, admitted=admitted)
        if updated is None:
            return False
        if condition_true(updated, "Evicted"):
            if not await self._scale(cluster, held, None, 0):
                return False
            if not admitted:
                return True
            # Not yet while its groups are still stopping; then the next commit gives its quota back.
            return not cluster.live_pods(f"{held.namespace}/{name}")
        if not admitted:
            return await self._scale(cluster, held, None, 0)
        leaders = next((ps.get("count") for ps in (updated.get("status") or {}).get("admission", {}).get("podSets") or []
                        if isinstance(ps, dict) and ps.get("name") == LEADER), 0)
        return await self._scale(cluster, held, updated, int(leaders or 0))

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        return (owner.get("spec") or {}).get("replicas") == 0 and not cluster.live_pods(workload_key)

    async def _scale(self, cluster: Cluster, owner: Owner, workload: Obj | None, groups: int) -> bool:
        """``groups`` groups; with an admitted ``workload``, both templates on its flavors."""
        obj = owner.obj
        spec: Obj = {}
        metadata: Obj = {"resourceVersion": version_of(obj)}
        if (obj.get("spec") or {}).get("replicas") != groups:
            spec["replicas"] = groups
        if workload is not None:
            label = workload_name(owner.kind, owner.name)
            saved = _saved(obj)
            placements = pod_set_placement(workload, cluster.flavors())
            lwt = _lwt(obj)
            record: dict[str, Obj] = {}
            changed: Obj = {}
            for pod_set, key in ((LEADER, "leaderTemplate"), (WORKERS, "workerTemplate")):
                template = lwt.get(key)
                if not isinstance(template, dict):
                    continue  # no leader template: the leader runs the workers'
                own = saved.get(pod_set, _own(template))
                record[pod_set] = {"nodeSelector": own[0], "tolerations": own[1]}
                selector, tolerations = placements.get(pod_set) or placements.get(LEADER, ({}, []))
                placed = _with_placement(template, {**own[0], **selector},
                                         own[1] + [t for t in tolerations if t not in own[1]])
                labels = {**((placed.get("metadata") or {}).get("labels") or {}), WORKLOAD_LABEL: label}
                placed = {**placed, "metadata": {**(placed.get("metadata") or {}), "labels": labels}}
                if placed != template:
                    changed[key] = placed
            if changed:
                spec["leaderWorkerTemplate"] = changed
                metadata["annotations"] = {
                    ORIGINAL_PLACEMENT_ANNOTATION: json.dumps(record, sort_keys=True, separators=(",", ":"))
                }
        if not spec:
            return True
        patch = {"metadata": metadata, "spec": spec}
        return await cluster.writer.patch(self.resource, owner.name, owner.namespace, patch) is not None
