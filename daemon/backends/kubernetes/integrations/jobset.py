"""``jobset.x-k8s.io/v1alpha2`` JobSet: one pod set per replicated Job, suspended while it waits.

A replicated Job runs ``replicas`` Jobs (default 1) of ``parallelism`` pods each
(default 1), so its pod set counts ``replicas × parallelism`` pods of the Job
template's pod template. ``spec.suspend`` holds every child Job; clearing it
starts them, and the JobSet controller gives the pod templates of the
``replicatedJobs`` to the Jobs it creates, so placement is written there. The
JobSet is done when its ``Completed`` or ``Failed`` condition is True (the
controller also writes ``status.terminalState``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import Obj, Resource
from ..owners import PodSetShape
from . import InvalidOwner
from .suspendable import Suspendable

__all__ = ["JOBSETS", "JobSetIntegration"]

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)


def _count(value: Any, where: str) -> int:
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidOwner(where, f"expected a positive integer, got {value!r}")
    return value


class JobSetIntegration(Suspendable):
    name = "jobset"
    resource = JOBSETS
    optional = True

    def _replicated_jobs(self, owner: Obj) -> list[Obj]:
        found = (owner.get("spec") or {}).get("replicatedJobs")
        if not isinstance(found, list) or not found:
            raise InvalidOwner("spec.replicatedJobs", "expected a non-empty list")
        for index, entry in enumerate(found):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise InvalidOwner(f"spec.replicatedJobs[{index}].name", "a replicated Job needs a name")
        return found

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        shapes = []
        for index, entry in enumerate(self._replicated_jobs(owner)):
            where = f"spec.replicatedJobs[{index}]"
            job_spec = (entry.get("template") or {}).get("spec") or {}
            replicas = _count(entry.get("replicas"), f"{where}.replicas")
            parallelism = _count(job_spec.get("parallelism"), f"{where}.template.spec.parallelism")
            shapes.append(PodSetShape(entry["name"], job_spec.get("template"), replicas * parallelism))
        return shapes

    def templates(self, owner: Obj) -> dict[str, Obj]:
        return {
            entry["name"]: ((entry.get("template") or {}).get("spec") or {}).get("template") or {}
            for entry in self._replicated_jobs(owner)
        }

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        entries = []
        for entry in self._replicated_jobs(owner):
            template = dict(entry.get("template") or {})
            job_spec = dict(template.get("spec") or {})
            if entry["name"] in templates:
                job_spec["template"] = templates[entry["name"]]
            entries.append({**entry, "template": {**template, "spec": job_spec}})
        return {"spec": {"replicatedJobs": entries}}

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        for condition in (owner.get("status") or {}).get("conditions") or []:
            if not isinstance(condition, dict) or condition.get("status") != "True":
                continue
            if condition.get("type") in ("Completed", "Failed"):
                reason = "Succeeded" if condition["type"] == "Completed" else "Failed"
                return reason, str(condition.get("message") or f"JobSet {condition['type'].lower()}")
        return None
