"""``trainer.kubeflow.org/v1alpha1`` TrainJob: the pod sets of its training runtime, held by ``spec.suspend``.

A TrainJob names a runtime (``spec.runtimeRef``: a ClusterTrainingRuntime by
default, or a TrainingRuntime of its namespace) whose ``spec.template`` is a JobSet
template; the trainer builds the JobSet from it. So its pod sets are the runtime's
replicated Jobs, read from the watch cache of the runtimes: ``parallelism`` pods each
(default 1), except the trainer's (labelled
``trainer.kubeflow.org/trainjob-ancestor-step: trainer``), which runs
``spec.trainer.numNodes`` pods (else the runtime's ``mlPolicy.numNodes``, else 1)
whose container ``node`` gets ``spec.trainer.resourcesPerNode`` over its own.

Its own object holds no pod template: placement goes through
``spec.runtimePatches``, a list keyed by ``manager``, in an entry of preemptd's own
(``preemptd.io/manager``) naming, per replicated Job, the node selector,
tolerations and Workload label of its pods; every other manager's entry is kept.
A TrainJob whose runtime is not there yet gets a Warning and waits for it (a
runtime's change syncs every TrainJob again). It is done when its ``Complete`` or
``Failed`` condition is True.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..client import Obj, Resource
from ..owners import Cluster, PodSetShape
from ..workloads import WORKLOAD_LABEL
from . import InvalidOwner
from .suspendable import Suspendable

__all__ = ["CLUSTER_TRAINING_RUNTIMES", "TRAINING_RUNTIMES", "TRAINJOBS", "TrainJobIntegration"]

TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", namespaced=True)
CLUSTER_TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", namespaced=True)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
MANAGER = "preemptd.io/manager"
_RUNTIME = "preemptd.io/runtime"  # where sync hands the resolved runtime spec to the readers below


def _positive(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidOwner(where, f"expected a positive integer, got {value!r}")
    return value


class TrainJobIntegration(Suspendable):
    name = "trainjob"
    resource = TRAINJOBS
    optional = True
    reads = (CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES)

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        ref = (owner.get("spec") or {}).get("runtimeRef") or {}
        name = ref.get("name") if isinstance(ref, dict) else None
        kind = ref.get("kind", "ClusterTrainingRuntime") if isinstance(ref, dict) else None
        namespace = (owner.get("metadata") or {}).get("namespace") or "default"
        runtime = None
        if isinstance(name, str) and kind == "ClusterTrainingRuntime":
            runtime = cluster.cached(CLUSTER_TRAINING_RUNTIMES, name)
        elif isinstance(name, str) and kind == "TrainingRuntime":
            runtime = cluster.cached(TRAINING_RUNTIMES, f"{namespace}/{name}")
        if runtime is None:
            message = f"no Workload created: spec.runtimeRef: {kind} {name!r} not found"
            cluster.events.record(owner, "Warning", "RuntimeNotFound", message)
            return True  # a runtime's arrival syncs it again
        return await super().sync(cluster, {**owner, _RUNTIME: runtime.get("spec") or {}}, workload)

    def _jobs(self, owner: Obj) -> list[Obj]:
        runtime = owner.get(_RUNTIME) or {}
        jobs = ((runtime.get("template") or {}).get("spec") or {}).get("replicatedJobs")
        if not isinstance(jobs, list) or not jobs:
            raise InvalidOwner("spec.runtimeRef", "the runtime's spec.template.spec.replicatedJobs is empty")
        for index, job in enumerate(jobs):
            if not isinstance(job, dict) or not isinstance(job.get("name"), str) or not job["name"]:
                raise InvalidOwner("spec.runtimeRef", f"the runtime's replicatedJobs[{index}] has no name")
        return jobs

    def _trainer(self, job: Obj) -> bool:
        labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
        return isinstance(labels, dict) and labels.get(ANCESTOR_LABEL) == "trainer"

    def templates(self, owner: Obj) -> dict[str, Obj]:
        """The pod templates the trainer builds: the runtime's, the trainer's resources over its node's."""
        trainer = (owner.get("spec") or {}).get("trainer") or {}
        resources = trainer.get("resourcesPerNode") if isinstance(trainer, dict) else None
        found = {}
        for job in self._jobs(owner):
            template = (((job.get("template") or {}).get("spec") or {}).get("template")) or {}
            if self._trainer(job) and isinstance(resources, dict):
                spec = dict(template.get("spec") or {})
                spec["containers"] = [
                    _with_resources(c, resources) if isinstance(c, dict) and c.get("name") == "node" else c
                    for c in spec.get("containers") or []
                ]
                template = {**template, "spec": spec}
            found[job["name"]] = template
        return found

    def shapes(self, owner: Obj) -> list[PodSetShape]:
        runtime = owner.get(_RUNTIME) or {}
        trainer = (owner.get("spec") or {}).get("trainer") or {}
        templates = self.templates(owner)
        shapes = []
        for job in self._jobs(owner):
            if self._trainer(job):
                nodes = trainer.get("numNodes") if isinstance(trainer, dict) else None
                if nodes is None:
                    nodes = (runtime.get("mlPolicy") or {}).get("numNodes", 1)
                count = _positive(nodes, "spec.trainer.numNodes")
            else:
                parallelism = (((job.get("template") or {}).get("spec") or {}).get("parallelism", 1))
                count = _positive(parallelism, f"spec.runtimeRef: replicatedJobs {job['name']} parallelism")
            shapes.append(PodSetShape(job["name"], templates[job["name"]], count))
        return shapes

    def templates_patch(self, owner: Obj, templates: Mapping[str, Obj]) -> Obj:
        jobs = []
        for name, template in templates.items():
            spec = template.get("spec") or {}
            pod: Obj = {"metadata": {"labels": {WORKLOAD_LABEL: ((template.get("metadata") or {}).get("labels")
                                                                 or {}).get(WORKLOAD_LABEL)}}, "spec": {}}
            for key in ("nodeSelector", "tolerations"):
                if spec.get(key):
                    pod["spec"][key] = spec[key]
            jobs.append({"name": name, "template": {"spec": {"template": pod}}})
        ours = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        others = [p for p in (owner.get("spec") or {}).get("runtimePatches") or []
                  if not (isinstance(p, dict) and p.get("manager") == MANAGER)]
        return {"spec": {"runtimePatches": [*others, ours]}}

    def finished(self, owner: Obj) -> tuple[str, str] | None:
        for condition in (owner.get("status") or {}).get("conditions") or []:
            if not isinstance(condition, dict) or condition.get("status") != "True":
                continue
            if condition.get("type") in ("Complete", "Failed"):
                reason = "Succeeded" if condition["type"] == "Complete" else "Failed"
                return reason, str(condition.get("message") or f"TrainJob {condition['type'].lower()}")
        return None


def _with_resources(container: Obj, resources: Mapping[str, Any]) -> Obj:
    own = container.get("resources") or {}
    merged = {key: {**(own.get(key) or {}), **(resources.get(key) or {})} for key in ("requests", "limits")
              if own.get(key) or resources.get(key)}
    return {**container, "resources": merged}
