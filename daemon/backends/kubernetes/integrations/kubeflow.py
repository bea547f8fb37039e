"""``kubeflow.org/v1`` PyTorchJob: one pod set per replica type, held by ``runPolicy.suspend``.

``spec.pytorchReplicaSpecs`` maps a replica type (``Master``, ``Worker``) to its
``replicas`` (default 1) and pod ``template``; each type is a pod set named in
lower case, the master first. ``spec.runPolicy.suspend`` holds the job (the
training operator deletes its pods while it is set). It is done when its
``Succeeded`` or ``Failed`` condition is True.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import Obj, Resource
from ..owners import PodSetShape
from . import InvalidOwner
from .suspendable import Suspendable

__all__ = ["PYTORCHJOBS", "PyTorchJobIntegration"]

PYTORCHJOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", namespaced=True)


class PyTorchJobIntegration(Suspendable):
    name = "pytorchjob"
    resource = PYTORCHJOBS
    optional = True
    suspend_path = ("spec", "runPolicy", "suspend")

    def _specs(self, owner: Obj) -> list[tuple[str, Obj]]:
        found = (owner.get("spec") or {}).get("pytorchReplicaSpecs")
        if not isinstance(found, dict) or not found:
            raise InvalidOwner("spec.pytorchReplicaSpecs", "expected a map of replica types")
        order = sorted(found, key=lambda kind: (kind != "Master", kind))
        specs = []
        for kind in order:
            entry = found[kind]
            if not isinstance(entry, dict):
                raise InvalidOwner(f"spec.pytorchReplicaSpecs.{kind}", "expected a replica spec")
            specs.append((kind, entry))
        return specs

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        shapes = []
        for kind, entry in self._specs(owner):
            replicas: Any = entry.get("replicas", 1)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 1:
                raise InvalidOwner(f"spec.pytorchReplicaSpecs.{kind}.replicas", f"expected a positive integer, got {replicas!r}")
            shapes.append(PodSetShape(kind.lower(), entry.get("template"), replicas))
        return shapes

    def templates(self, owner: Obj) -> dict[str, Obj]:
        return {kind.lower(): entry.get("template") or {} for kind, entry in self._specs(owner)}

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        specs = {kind: {"template": templates[kind.lower()]} for kind, _ in self._specs(owner) if kind.lower() in templates}
        return {"spec": {"pytorchReplicaSpecs": specs}}

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        for condition in (owner.get("status") or {}).get("conditions") or []:
            if not isinstance(condition, dict) or condition.get("status") != "True":
                continue
            if condition.get("type") in ("Succeeded", "Failed"):
                kind = str(condition["type"])
                return kind, str(condition.get("message") or f"PyTorchJob {kind.lower()}")
        return None
