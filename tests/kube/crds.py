"""CustomResourceDefinitions of the owner kinds preemptd integrates, for the test API server.

Written from each project's API types (the fields and their types; pod and Job
templates are kept whole, as ``x-kubernetes-preserve-unknown-fields``, since the
test server does not validate core types inside custom resources). Each is
registered with :func:`install`, exactly as ``kubectl apply`` of the operator's CRD
would, so that a kind is absent until its test installs it.
"""

from __future__ import annotations

from typing import Any

from .apiserver import ApiServer

Obj = dict[str, Any]

KEPT: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
CONDITIONS: Obj = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    },
}


def crd(group: str, version: str, kind: str, plural: str, spec: Obj, status: Obj) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status,
                            },
                        }
                    },
                }
            ],
        },
    }


# jobset.x-k8s.io/v1alpha2 JobSet: spec.replicatedJobs[] {name, replicas (default 1),
# template: a batch/v1 JobTemplateSpec}, spec.suspend; status.conditions (Completed,
# Failed, Suspended, StartupPolicy*), status.terminalState, status.replicatedJobsStatus.
JOBSET = crd(
    "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets",
    spec={
        "type": "object",
        "properties": {
            "replicatedJobs": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name", "template"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "replicas": {"type": "integer", "minimum": 0},
                        "groupName": {"type": "string"},
                        "dependsOn": {"type": "array", "items": KEPT},
                        "template": KEPT,
                    },
                },
            },
            "suspend": {"type": "boolean"},
            "managedBy": {"type": "string"},
            "network": KEPT,
            "successPolicy": KEPT,
            "failurePolicy": KEPT,
            "startupPolicy": KEPT,
            "coordinator": KEPT,
            "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": CONDITIONS,
            "restarts": {"type": "integer"},
            "restartsCountTowardsMax": {"type": "integer"},
            "terminalState": {"type": "string"},
            "replicatedJobsStatus": {"type": "array", "items": KEPT},
        },
    },
)


def install(server: ApiServer, *definitions: Obj) -> None:
    for definition in definitions:
        server.put("apiextensions.k8s.io", "customresourcedefinitions", definition)


# kubeflow.org/v1 PyTorchJob: spec.pytorchReplicaSpecs {Master|Worker: {replicas (default 1),
# restartPolicy, template}}, spec.runPolicy {suspend, cleanPodPolicy, backoffLimit, ...},
# spec.elasticPolicy, spec.nprocPerNode; status.conditions (Created, Running, Restarting,
# Succeeded, Suspended, Failed), status.replicaStatuses.
PYTORCHJOB = crd(
    "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs",
    spec={
        "type": "object",
        "required": ["pytorchReplicaSpecs"],
        "properties": {
            "pytorchReplicaSpecs": {
                "type": "object",
                "additionalProperties": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "restartPolicy": {"type": "string"},
                        "template": KEPT,
                    },
                },
            },
            "runPolicy": {
                "type": "object",
                "properties": {
                    "suspend": {"type": "boolean"},
                    "cleanPodPolicy": {"type": "string"},
                    "backoffLimit": {"type": "integer"},
                    "activeDeadlineSeconds": {"type": "integer"},
                    "ttlSecondsAfterFinished": {"type": "integer"},
                    "managedBy": {"type": "string"},
                    "schedulingPolicy": KEPT,
                },
            },
            "elasticPolicy": KEPT,
            "nprocPerNode": {"x-kubernetes-int-or-string": True},
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": CONDITIONS,
            "replicaStatuses": KEPT,
            "startTime": {"type": "string", "format": "date-time"},
            "completionTime": {"type": "string", "format": "date-time"},
            "lastReconcileTime": {"type": "string", "format": "date-time"},
        },
    },
)

# ray.io/v1 RayClusterSpec: headGroupSpec {rayStartParams, template, serviceType},
# workerGroupSpecs[] {groupName, replicas, minReplicas, maxReplicas, numOfHosts,
# rayStartParams, template, scaleStrategy, suspend}, rayVersion, suspend,
# enableInTreeAutoscaling, autoscalerOptions.
RAY_CLUSTER_SPEC: Obj = {
    "type": "object",
    "properties": {
        "headGroupSpec": {
            "type": "object",
            "required": ["template"],
            "properties": {
                "rayStartParams": {"type": "object", "additionalProperties": {"type": "string"}},
                "serviceType": {"type": "string"},
                "template": KEPT,
            },
        },
        "workerGroupSpecs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["groupName", "template"],
                "properties": {
                    "groupName": {"type": "string"},
                    "replicas": {"type": "integer"},
                    "minReplicas": {"type": "integer"},
                    "maxReplicas": {"type": "integer"},
                    "numOfHosts": {"type": "integer"},
                    "suspend": {"type": "boolean"},
                    "rayStartParams": {"type": "object", "additionalProperties": {"type": "string"}},
                    "scaleStrategy": KEPT,
                    "template": KEPT,
                },
            },
        },
        "rayVersion": {"type": "string"},
        "suspend": {"type": "boolean"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "autoscalerOptions": KEPT,
    },
}

RAYCLUSTER = crd(
    "ray.io", "v1", "RayCluster", "rayclusters",
    spec=RAY_CLUSTER_SPEC,
    status={"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"state": {"type": "string"}, "conditions": CONDITIONS}},
)

# ray.io/v1 RayJob: spec.entrypoint, spec.rayClusterSpec, spec.clusterSelector, spec.suspend,
# spec.shutdownAfterJobFinishes, spec.submissionMode, spec.submitterPodTemplate;
# status.jobDeploymentStatus (Initializing, Running, Complete, Failed, Suspending,
# Suspended, ...), status.jobStatus, status.message.
RAYJOB = crd(
    "ray.io", "v1", "RayJob", "rayjobs",
    spec={
        "type": "object",
        "properties": {
            "entrypoint": {"type": "string"},
            "rayClusterSpec": RAY_CLUSTER_SPEC,
            "clusterSelector": {"type": "object", "additionalProperties": {"type": "string"}},
            "suspend": {"type": "boolean"},
            "shutdownAfterJobFinishes": {"type": "boolean"},
            "submissionMode": {"type": "string"},
            "submitterPodTemplate": KEPT,
            "ttlSecondsAfterFinished": {"type": "integer"},
        },
    },
    status={
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "jobDeploymentStatus": {"type": "string"},
            "jobStatus": {"type": "string"},
            "message": {"type": "string"},
        },
    },
)

# leaderworkerset.x-k8s.io/v1 LeaderWorkerSet: spec.replicas (groups), spec.leaderWorkerTemplate
# {leaderTemplate, workerTemplate, size (pods per group, leader included), restartPolicy,
# subGroupPolicy}, spec.rolloutStrategy, spec.startupPolicy, spec.networkConfig;
# status.conditions (Available, Progressing, UpdateInProgress), readyReplicas, replicas.
LEADERWORKERSET = crd(
    "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets",
    spec={
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "leaderWorkerTemplate": {
                "type": "object",
                "required": ["workerTemplate"],
                "properties": {
                    "leaderTemplate": KEPT,
                    "workerTemplate": KEPT,
                    "size": {"type": "integer"},
                    "restartPolicy": {"type": "string"},
                    "subGroupPolicy": KEPT,
                },
            },
            "rolloutStrategy": KEPT,
            "startupPolicy": {"type": "string"},
            "networkConfig": KEPT,
        },
    },
    status={
        "type": "object",
        "properties": {
            "conditions": CONDITIONS,
            "readyReplicas": {"type": "integer"},
            "updatedReplicas": {"type": "integer"},
            "replicas": {"type": "integer"},
            "hpaPodSelector": {"type": "string"},
        },
    },
)

# trainer.kubeflow.org/v1alpha1 TrainJob: spec.runtimeRef {name, apiGroup, kind
# (ClusterTrainingRuntime by default, or TrainingRuntime)}, spec.initializer, spec.trainer
# {image, command, args, env, numNodes, resourcesPerNode, numProcPerNode},
# spec.runtimePatches[] {manager (the list's key), time, trainingRuntimeSpec {template
# {metadata, spec {replicatedJobs[] {name, template {metadata, spec {template {metadata,
# spec}}}}}}}}, spec.suspend, spec.activeDeadlineSeconds, spec.managedBy;
# status.conditions (Suspended, Complete, Failed), status.jobsStatus.
TRAINJOB = crd(
    "trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs",
    spec={
        "type": "object",
        "properties": {
            "runtimeRef": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "apiGroup": {"type": "string"}, "kind": {"type": "string"}},
            },
            "initializer": KEPT,
            "trainer": {
                "type": "object",
                "properties": {
                    "image": {"type": "string"},
                    "command": {"type": "array", "items": {"type": "string"}},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "env": {"type": "array", "items": KEPT},
                    "numNodes": {"type": "integer"},
                    "resourcesPerNode": KEPT,
                    "numProcPerNode": {"type": "integer"},
                },
            },
            "runtimePatches": {
                "type": "array",
                "maxItems": 16,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["manager"],
                "items": {
                    "type": "object",
                    "required": ["manager"],
                    "properties": {
                        "manager": {"type": "string", "minLength": 1},
                        "time": {"type": "string", "format": "date-time"},
                        "trainingRuntimeSpec": KEPT,
                    },
                },
            },
            "suspend": {"type": "boolean"},
            "activeDeadlineSeconds": {"type": "integer"},
            "managedBy": {"type": "string"},
        },
    },
    status={"type": "object", "properties": {"conditions": CONDITIONS, "jobsStatus": {"type": "array", "items": KEPT}}},
)

# TrainingRuntime / ClusterTrainingRuntime: spec.mlPolicy {numNodes, torch, mpi, ...},
# spec.podGroupPolicy, spec.template {metadata, spec: a JobSet spec}.
RUNTIME_SPEC: Obj = {
    "type": "object",
    "properties": {"mlPolicy": KEPT, "podGroupPolicy": KEPT, "template": KEPT},
}


def _runtime(kind: str, plural: str, scope: str) -> Obj:
    definition = crd("trainer.kubeflow.org", "v1alpha1", kind, plural, spec=RUNTIME_SPEC, status={"type": "object"})
    definition["spec"]["scope"] = scope
    del definition["spec"]["versions"][0]["subresources"]
    return definition


CLUSTER_TRAINING_RUNTIME = _runtime("ClusterTrainingRuntime", "clustertrainingruntimes", "Cluster")
TRAINING_RUNTIME = _runtime("TrainingRuntime", "trainingruntimes", "Namespaced")
