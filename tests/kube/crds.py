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
