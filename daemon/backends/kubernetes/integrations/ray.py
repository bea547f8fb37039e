"""``ray.io/v1`` RayJob and RayCluster: a head pod set and one per worker group.

A Ray cluster spec has a ``headGroupSpec`` (one pod, its ``template``) and
``workerGroupSpecs``: per group a ``groupName``, ``replicas`` (default 0) of
``numOfHosts`` pods each (default 1), ``minReplicas``/``maxReplicas`` and a pod
``template``. A group with no replica asks for nothing and is left out.
``spec.suspend`` holds both kinds: KubeRay deletes the cluster's pods while it is set.

* **RayCluster** (``spec`` is the cluster spec) runs until deleted. A worker group
  with ``minReplicas`` below its ``replicas`` is elastic: it may be admitted with,
  and shrunk down to, ``minReplicas`` replicas (its ``replicas`` lowered to the
  admitted count, its user's count back with the next suspension). As a Workload
  may have one elastic pod set only, the first such group is it.
* **RayJob** (``spec.rayClusterSpec``) is done when ``status.jobDeploymentStatus``
  is ``Complete`` or ``Failed``. Its submitter pod is not counted; a RayJob that
  runs on an existing cluster (``clusterSelector``) has no pods of its own and is
  not managed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import Obj, Resource
from ..owners import PodSetShape
from . import InvalidOwner
from .suspendable import Suspendable

__all__ = ["RAYCLUSTERS", "RAYJOBS", "RayClusterIntegration", "RayJobIntegration"]

RAYCLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster", namespaced=True)
RAYJOBS = Resource("ray.io", "v1", "rayjobs", "RayJob", namespaced=True)
HEAD = "head"


def _count(value: Any, where: str, default: int, least: int) -> int:
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InvalidOwner(where, f"expected an integer of at least {least}, got {value!r}")
    return value


class _Ray(Suspendable):
    """The cluster spec at ``cluster_path``; ``elastic`` worker groups or not."""

    cluster_path: tuple[str, ...] = ("spec",)
    elastic = False

    def _cluster(self, owner: Obj) -> Obj:
        value: Any = owner
        for key in self.cluster_path:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, dict) or not isinstance(value.get("headGroupSpec"), dict):
            where = ".".join(self.cluster_path)
            raise InvalidOwner(f"{where}.headGroupSpec", "a Ray cluster spec needs a head group")
        return value

    def _workers(self, owner: Obj) -> list[Obj]:
        groups = self._cluster(owner).get("workerGroupSpecs") or []
        where = ".".join(self.cluster_path)
        if not isinstance(groups, list):
            raise InvalidOwner(f"{where}.workerGroupSpecs", "expected a list")
        for index, group in enumerate(groups):
            name = group.get("groupName") if isinstance(group, dict) else None
            if not isinstance(name, str) or not name or name == HEAD:
                raise InvalidOwner(f"{where}.workerGroupSpecs[{index}].groupName", f"expected a name other than {HEAD!r}")
        return groups

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        where = ".".join(self.cluster_path)
        shapes = [PodSetShape(HEAD, self._cluster(owner)["headGroupSpec"].get("template"), 1)]
        elastic_taken = not self.elastic
        for index, group in enumerate(self._workers(owner)):
            at = f"{where}.workerGroupSpecs[{index}]"
            replicas = _count(group.get("replicas"), f"{at}.replicas", 0, 0)
            hosts = _count(group.get("numOfHosts"), f"{at}.numOfHosts", 1, 1)
            if replicas == 0:
                continue
            minimum = _count(group.get("minReplicas"), f"{at}.minReplicas", replicas, 0)
            min_count = None
            if not elastic_taken and minimum < replicas:
                min_count, elastic_taken = max(1, minimum) * hosts, True
            shapes.append(PodSetShape(group["groupName"], group.get("template"), replicas * hosts, min_count))
        return shapes

    def templates(self, owner: Obj) -> dict[str, Obj]:
        found = {HEAD: self._cluster(owner)["headGroupSpec"].get("template") or {}}
        for group in self._workers(owner):
            found[group["groupName"]] = group.get("template") or {}
        return found

    def _nested(self, cluster: Obj) -> Obj:
        patch: Obj = cluster
        for key in reversed(self.cluster_path):
            patch = {key: patch}
        return patch

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        cluster: Obj = {}
        if HEAD in templates:
            cluster["headGroupSpec"] = {"template": templates[HEAD]}
        groups = self._workers(owner)
        if any(g["groupName"] in templates for g in groups):
            cluster["workerGroupSpecs"] = [
                {**g, "template": templates.get(g["groupName"], g.get("template"))} for g in groups
            ]
        return self._nested(cluster)

    def counts_patch(self, owner: Obj, counts: Mapping[str, int]) -> Obj | None:
        if not self.elastic:
            return None
        groups = self._workers(owner)
        rewritten = []
        for group in groups:
            if group["groupName"] in counts:
                hosts: Any = group.get("numOfHosts")
                hosts = hosts if isinstance(hosts, int) and hosts > 0 else 1
                group = {**group, "replicas": counts[group["groupName"]] // hosts}
            rewritten.append(group)
        return self._nested({"workerGroupSpecs": rewritten})


class RayClusterIntegration(_Ray):
    name = "raycluster"
    resource = RAYCLUSTERS
    optional = True
    elastic = True


class RayJobIntegration(_Ray):
    name = "rayjob"
    resource = RAYJOBS
    optional = True
    cluster_path = ("spec", "rayClusterSpec")

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        status = str((owner.get("status") or {}).get("jobDeploymentStatus") or "")
        if status == "Complete":
            return "Succeeded", "RayJob complete"
        if status == "Failed":
            return "Failed", str((owner.get("status") or {}).get("message") or "RayJob failed")
        return None
