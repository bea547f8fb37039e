"""Kueue's CRDs (``kueue.x-k8s.io``) for the test API server, and Kueue-shaped objects.

The schemas follow Kueue's API types for the fields preemptd reads, per version
(v1beta1: ``ClusterQueue.spec.cohort``, ``Workload.spec.priorityClassName`` +
``priorityClassSource``, ``Cohort.spec.parent``; v1beta2: ``cohortName``,
``priorityClassRef``, ``parentName``). Like Kueue's, they are structural; a pod
template keeps its fields unchecked (``x-kubernetes-preserve-unknown-fields``),
where Kueue embeds the whole core PodTemplateSpec schema. The test server serves
a CRD's storage version only, so a cluster "serving v1beta1" installs CRDs whose
storage version is v1beta1.
"""

from __future__ import annotations

from typing import Any

from .apiserver import ApiServer

Obj = dict[str, Any]

GROUP = "kueue.x-k8s.io"

_STRING: Obj = {"type": "string"}
_NAME: Obj = {"type": "string", "maxLength": 253}
_REF: Obj = {"type": "string", "maxLength": 253, "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"}
_QUANTITY: Obj = {"x-kubernetes-int-or-string": True}
_STRING_MAP: Obj = {"type": "object", "additionalProperties": {"type": "string"}}
_SELECTOR: Obj = {
    "type": "object",
    "properties": {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {"key": _STRING, "operator": _STRING, "values": {"type": "array", "items": _STRING}},
            },
        },
    },
}
_TOLERATIONS: Obj = {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
_STOP = {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"]}
_CONDITIONS: Obj = {
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": _STRING, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": _STRING, "message": {"type": "string", "maxLength": 32768},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer"},
        },
    },
}
_RESOURCE_GROUPS: Obj = {
    "type": "array",
    "maxItems": 16,
    "items": {
        "type": "object",
        "required": ["coveredResources", "flavors"],
        "properties": {
            "coveredResources": {"type": "array", "maxItems": 64, "items": _STRING},
            "flavors": {
                "type": "array",
                "maxItems": 64,
                "items": {
                    "type": "object",
                    "required": ["name", "resources"],
                    "properties": {
                        "name": _REF,
                        "resources": {
                            "type": "array",
                            "maxItems": 64,
                            "items": {
                                "type": "object",
                                "required": ["name", "nominalQuota"],
                                "properties": {
                                    "name": _STRING, "nominalQuota": _QUANTITY,
                                    "borrowingLimit": _QUANTITY, "lendingLimit": _QUANTITY,
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}
_FAIR_SHARING: Obj = {"type": "object", "properties": {"weight": _QUANTITY}}
_PREEMPTION: Obj = {
    "type": "object",
    "properties": {
        "withinClusterQueue": {"type": "string", "enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]},
        "reclaimWithinCohort": {"type": "string", "enum": ["Never", "LowerPriority", "Any"]},
        "borrowWithinCohort": {
            "type": "object",
            "properties": {
                "policy": {"type": "string", "enum": ["Never", "LowerPriority"]},
                "maxPriorityThreshold": {"type": "integer"},
            },
        },
    },
}


def _fungibility(version: str) -> Obj:
    can = ["MayStopSearch", "TryNextFlavor"]
    return {
        "type": "object",
        "properties": {
            "whenCanBorrow": {"type": "string", "enum": [*can, "Borrow"] if version == "v1beta1" else can},
            "whenCanPreempt": {"type": "string", "enum": [*can, "Preempt"] if version == "v1beta1" else can},
            "preference": {"type": "string", "enum": ["BorrowingOverPreemption", "PreemptionOverBorrowing"]},
        },
    }


def _cluster_queue(version: str) -> Obj:
    spec: Obj = {
        "resourceGroups": _RESOURCE_GROUPS,
        "queueingStrategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"]},
        "namespaceSelector": _SELECTOR,
        "flavorFungibility": _fungibility(version),
        "preemption": _PREEMPTION,
        "stopPolicy": _STOP,
        "fairSharing": _FAIR_SHARING,
        "admissionChecks": {"type": "array", "items": _STRING},
    }
    spec["cohort" if version == "v1beta1" else "cohortName"] = _REF
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}, "status": status}}


def _cohort(version: str) -> Obj:
    spec = {"parentName" if version == "v1beta2" else "parent": _REF, "resourceGroups": _RESOURCE_GROUPS,
            "fairSharing": _FAIR_SHARING}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}, "status": status}}


def _local_queue(version: str) -> Obj:
    spec = {"clusterQueue": _REF, "stopPolicy": _STOP, "fairSharing": _FAIR_SHARING}
    status = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}, "status": status}}


def _resource_flavor(version: str) -> Obj:
    spec = {
        "nodeLabels": _STRING_MAP, "nodeTaints": _TOLERATIONS, "tolerations": _TOLERATIONS,
        "topologyName": _STRING,
    }
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}}}


def _workload_priority_class(version: str) -> Obj:
    return {"type": "object", "required": ["value"], "properties": {"value": {"type": "integer"}, "description": _STRING}}


def _workload(version: str) -> Obj:
    pod_set = {
        "type": "object",
        "required": ["template"],
        "properties": {
            "name": {"type": "string", "maxLength": 63},
            "count": {"type": "integer", "minimum": 0},
            "minCount": {"type": "integer", "minimum": 1},
            "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    spec: Obj = {
        "podSets": {"type": "array", "minItems": 1, "maxItems": 8, "items": pod_set,
                    "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        "queueName": _NAME,
        "priority": {"type": "integer"},
        "active": {"type": "boolean"},
        "maximumExecutionTimeSeconds": {"type": "integer", "minimum": 1},
    }
    if version == "v1beta1":
        spec["priorityClassName"] = _NAME
        spec["priorityClassSource"] = {
            "type": "string", "enum": ["kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""],
        }
    else:
        spec["priorityClassRef"] = {
            "type": "object",
            "required": ["group", "kind", "name"],
            "properties": {
                "group": {"type": "string", "enum": ["kueue.x-k8s.io", "scheduling.k8s.io"]},
                "kind": {"type": "string", "enum": ["WorkloadPriorityClass", "PriorityClass"]},
                "name": _NAME,
            },
        }
    assignment = {
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": _STRING, "flavors": _STRING_MAP, "resourceUsage": {"type": "object", "additionalProperties": _QUANTITY},
            "count": {"type": "integer", "minimum": 0},
        },
    }
    status = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "admission": {
                "type": "object",
                "required": ["clusterQueue", "podSetAssignments"],
                "properties": {
                    "clusterQueue": _REF,
                    "podSetAssignments": {"type": "array", "maxItems": 8, "items": assignment},
                },
            },
            "conditions": _CONDITIONS,
        },
    }
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}, "status": status}}


# kind -> (plural, scope, schema per version, versions Kueue serves it in)
_KINDS = {
    "ResourceFlavor": ("resourceflavors", "Cluster", _resource_flavor, ("v1beta1", "v1beta2")),
    "ClusterQueue": ("clusterqueues", "Cluster", _cluster_queue, ("v1beta1", "v1beta2")),
    "Cohort": ("cohorts", "Cluster", _cohort, ("v1alpha1", "v1beta1", "v1beta2")),
    "LocalQueue": ("localqueues", "Namespaced", _local_queue, ("v1beta1", "v1beta2")),
    "Workload": ("workloads", "Namespaced", _workload, ("v1beta1", "v1beta2")),
    "WorkloadPriorityClass": ("workloadpriorityclasses", "Cluster", _workload_priority_class, ("v1beta1", "v1beta2")),
}


def kueue_crds(storage: str = "v1beta2", *, kinds: tuple[str, ...] = tuple(_KINDS)) -> list[Obj]:
    """Kueue's CRDs, serving every version each kind has up to ``storage``, stored in ``storage``."""
    order = ("v1alpha1", "v1beta1", "v1beta2")
    crds = []
    for kind in kinds:
        plural, scope, schema, versions = _KINDS[kind]
        served = [v for v in versions if order.index(v) <= order.index(storage)]
        crds.append({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
                "scope": scope,
                "versions": [
                    {
                        "name": version, "served": True, "storage": version == storage,
                        "schema": {"openAPIV3Schema": schema(version)},
                        "subresources": {} if kind in ("ResourceFlavor", "WorkloadPriorityClass") else {"status": {}},
                    }
                    for version in served
                ],
            },
        })
    return crds


def install_kueue(server: ApiServer, storage: str = "v1beta2", *, kinds: tuple[str, ...] = tuple(_KINDS)) -> None:
    for crd in kueue_crds(storage, kinds=kinds):
        server.put("apiextensions.k8s.io", "customresourcedefinitions", crd)
