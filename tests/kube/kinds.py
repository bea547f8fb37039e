"""Builders and stand-in controllers for the owner kinds beyond Job and Deployment.

:class:`KindControllers` plays each kind's operator, one explicit ``step`` at a
time like ``cluster.Controllers``: while an owner runs it has, per pod template,
exactly the pods its spec asks for (created from that template, so the flavor
directives and labels written there are what they carry); a suspended or
scaled-down owner's pods are deleted (bound ones terminate until
``Controllers.finish_terminating``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .apiserver import ApiServer
from .cluster import QUEUE_LABEL, Controllers

Obj = dict[str, Any]

# kind -> (group, plural, what runs: owner -> {pod set name: (pod template, pods)})
Wanted = Callable[[Obj], dict[str, tuple[Obj, int]]]


def pod_template(requests: Mapping[str, str], priority_class_name: str | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": dict(requests)}}]}
    if priority_class_name:
        spec["priorityClassName"] = priority_class_name
    return {"metadata": {"labels": {"app": "test"}}, "spec": spec}


def jobset(name: str, queue_name: str, replicated: list[tuple[str, int, int, Obj]], *, suspend: bool = True) -> Obj:
    """``replicated``: (name, replicas, parallelism, pod template) per replicated Job."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {
                    "name": rj,
                    "replicas": replicas,
                    "template": {"spec": {"parallelism": parallelism, "completions": parallelism, "template": template}},
                }
                for rj, replicas, parallelism, template in replicated
            ],
        },
    }


def statefulset(name: str, queue_name: str, requests: Mapping[str, str], *, replicas: int = 1,
                priority_class_name: str | None = None) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(requests, priority_class_name),
        },
    }


def _jobset_pods(owner: Obj) -> dict[str, tuple[Obj, int]]:
    if owner["spec"].get("suspend"):
        return {}
    found = {}
    for rj in owner["spec"]["replicatedJobs"]:
        job_spec = rj["template"]["spec"]
        found[rj["name"]] = (job_spec["template"], rj.get("replicas", 1) * job_spec.get("parallelism", 1))
    return found


def _statefulset_pods(owner: Obj) -> dict[str, tuple[Obj, int]]:
    return {"main": (owner["spec"]["template"], int(owner["spec"].get("replicas", 1)))}


def pytorchjob(name: str, queue_name: str, replicas: dict[str, tuple[int, Obj]], *, suspend: bool = True) -> Obj:
    """``replicas``: replica type -> (replicas, pod template)."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {
            "runPolicy": {"suspend": suspend},
            "pytorchReplicaSpecs": {
                kind: {"replicas": count, "restartPolicy": "OnFailure", "template": template}
                for kind, (count, template) in replicas.items()
            },
        },
    }


def ray_cluster_spec(head: Obj, workers: list[tuple[str, int, Obj]], *, min_replicas: int | None = None) -> Obj:
    """``workers``: (group name, replicas, pod template); ``min_replicas`` for every group."""
    groups = []
    for group, replicas, template in workers:
        entry: Obj = {"groupName": group, "replicas": replicas, "rayStartParams": {}, "template": template}
        if min_replicas is not None:
            entry |= {"minReplicas": min_replicas, "maxReplicas": replicas}
        groups.append(entry)
    return {"headGroupSpec": {"rayStartParams": {}, "template": head}, "workerGroupSpecs": groups}


def raycluster(name: str, queue_name: str, spec: Obj, *, suspend: bool = True) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {**spec, "suspend": suspend},
    }


def rayjob(name: str, queue_name: str, spec: Obj, *, suspend: bool = True) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {"entrypoint": "python train.py", "rayClusterSpec": spec, "suspend": suspend},
    }


def _pytorch_pods(owner: Obj) -> dict[str, tuple[Obj, int]]:
    if owner["spec"].get("runPolicy", {}).get("suspend"):
        return {}
    return {k.lower(): (v["template"], v.get("replicas", 1)) for k, v in owner["spec"]["pytorchReplicaSpecs"].items()}


def _ray_pods(cluster: Obj, suspended: bool) -> dict[str, tuple[Obj, int]]:
    if suspended:
        return {}
    found = {"head": (cluster["headGroupSpec"]["template"], 1)}
    for group in cluster.get("workerGroupSpecs") or []:
        found[group["groupName"]] = (group["template"], group.get("replicas", 0) * group.get("numOfHosts", 1))
    return found


def leaderworkerset(name: str, queue_name: str, leader: Obj | None, worker: Obj, *, size: int, replicas: int) -> Obj:
    lwt: Obj = {"workerTemplate": worker, "size": size}
    if leader is not None:
        lwt["leaderTemplate"] = leader
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt},
    }


def _lws_pods(owner: Obj) -> dict[str, tuple[Obj, int]]:
    lwt = owner["spec"]["leaderWorkerTemplate"]
    groups = int(owner["spec"].get("replicas", 1))
    found = {"leader": (lwt.get("leaderTemplate") or lwt["workerTemplate"], groups)}
    if lwt.get("size", 1) > 1:
        found["workers"] = (lwt["workerTemplate"], groups * (lwt["size"] - 1))
    return found


ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def cluster_training_runtime(name: str, jobs: list[tuple[str, str | None, int, Obj]], *, num_nodes: int = 1) -> Obj:
    """``jobs``: (replicated Job name, ancestor label or None, parallelism, pod template)."""
    replicated = []
    for job_name, ancestor, parallelism, template in jobs:
        job_template: Obj = {"spec": {"parallelism": parallelism, "template": template}}
        if ancestor:
            job_template["metadata"] = {"labels": {ANCESTOR: ancestor}}
        replicated.append({"name": job_name, "replicas": 1, "template": job_template})
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": {"numNodes": num_nodes, "torch": {}}, "template": {"spec": {"replicatedJobs": replicated}}},
    }


def trainjob(name: str, queue_name: str, runtime: str, *, num_nodes: int | None = None,
             resources_per_node: Obj | None = None, suspend: bool = True) -> Obj:
    trainer: Obj = {}
    if num_nodes is not None:
        trainer["numNodes"] = num_nodes
    if resources_per_node is not None:
        trainer["resourcesPerNode"] = resources_per_node
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "default", "labels": {QUEUE_LABEL: queue_name}},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": trainer, "suspend": suspend},
    }


def trainjob_templates(owner: Obj, runtime: Obj) -> dict[str, tuple[Obj, int]]:
    """What the trainer runs: the runtime's templates with the TrainJob's settings and every
    runtime patch over them (node selector, tolerations, labels)."""
    patches: dict[str, Obj] = {}
    for patch in owner["spec"].get("runtimePatches") or []:
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            patches[job["name"]] = job["template"]["spec"]["template"]
    trainer = owner["spec"].get("trainer") or {}
    found = {}
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        template = job["template"]["spec"]["template"]
        count = job["template"]["spec"].get("parallelism", 1)
        if (job["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR) == "trainer":
            count = trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1))
        patch = patches.get(job["name"], {})
        spec = {**template["spec"], **(patch.get("spec") or {})}
        labels = {**(template.get("metadata") or {}).get("labels", {}), **(patch.get("metadata") or {}).get("labels", {})}
        found[job["name"]] = ({"metadata": {"labels": labels}, "spec": spec}, count)
    return found


KINDS: dict[str, tuple[str, str, Wanted]] = {
    "JobSet": ("jobset.x-k8s.io", "jobsets", _jobset_pods),
    "StatefulSet": ("apps", "statefulsets", _statefulset_pods),
    "PyTorchJob": ("kubeflow.org", "pytorchjobs", _pytorch_pods),
    "RayCluster": ("ray.io", "rayclusters", lambda o: _ray_pods(o["spec"], bool(o["spec"].get("suspend")))),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "leaderworkersets", _lws_pods),
    "TrainJob": ("trainer.kubeflow.org", "trainjobs", lambda o: {}),  # see KindControllers._trainjob
    "RayJob": ("ray.io", "rayjobs", lambda o: _ray_pods(o["spec"]["rayClusterSpec"], bool(o["spec"].get("suspend")))),
}


class KindControllers:
    """See the module docstring."""

    def __init__(self, server: ApiServer, base: Controllers) -> None:
        self.server = server
        self.base = base

    def step(self) -> None:
        for kind, (group, plural, wanted) in KINDS.items():
            if (group, plural) not in self.server.kinds:
                continue
            for owner in self.server.list(group, plural):
                self._owner(kind, owner, self._trainjob(owner) if kind == "TrainJob" else wanted(owner))

    def _trainjob(self, owner: Obj) -> dict[str, tuple[Obj, int]]:
        if owner["spec"].get("suspend"):
            return {}
        runtime = self.server.get("trainer.kubeflow.org", "clustertrainingruntimes", owner["spec"]["runtimeRef"]["name"])
        assert runtime is not None
        return trainjob_templates(owner, runtime)

    def pods(self, owner: Obj, pod_set: str | None = None) -> list[Obj]:
        """The owner's live pods (of one pod set), by name."""
        pods = self.base.pods_of(owner)
        if pod_set is not None:
            pods = [p for p in pods if p["metadata"]["annotations"].get("test/pod-set") == pod_set]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def _owner(self, kind: str, owner: Obj, wanted: dict[str, tuple[Obj, int]]) -> None:
        pods = self.base.pods_of(owner)
        by_set: dict[str, list[Obj]] = {}
        for pod in pods:
            by_set.setdefault(pod["metadata"]["annotations"]["test/pod-set"], []).append(pod)
        for pod_set, existing in by_set.items():
            keep = wanted.get(pod_set, ({}, 0))[1]
            # The highest ordinal goes first, as a StatefulSet's controller does.
            for pod in sorted(existing, key=lambda p: p["metadata"]["name"])[keep:]:
                self.base._delete(pod)
        for pod_set, (template, count) in wanted.items():
            names = {p["metadata"]["name"] for p in [*pods, *self.base.pods_of(owner, terminating=True)]}
            for ordinal in range(count):
                name = f"{owner['metadata']['name']}-{pod_set}-{ordinal}"
                if name not in names:
                    self._create(owner, pod_set, name, template)

    def _create(self, owner: Obj, pod_set: str, name: str, template: Obj) -> None:
        metadata = owner["metadata"]
        pod: Obj = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": metadata["namespace"],
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                "annotations": {"test/pod-set": pod_set},
                "ownerReferences": [
                    {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": metadata["name"],
                     "uid": metadata["uid"], "controller": True}
                ],
            },
            "spec": dict(template["spec"]),
            "status": {"phase": "Running"},
        }
        chosen = self.base._schedule(pod)
        if chosen is not None:
            pod["spec"]["nodeName"] = chosen
        else:
            pod["status"]["phase"] = "Pending"
        self.server.put("", "pods", pod)
