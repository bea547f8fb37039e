"""Unknown fields of preemptd's own kinds (a private part of :mod:`objects`).

preemptd's own kinds have a closed set of fields (config/kubernetes/10-crds.yaml): a field
that is not among them is a typo (``preemtion:``, ``borowingLimit:``) whose value would be
ignored in silence, so it is found and reported, as ``kubectl apply --validate=strict``
does. Whether it is an error or a warning is the caller's choice (``validate`` and
``--strict``: an error; ``cycle``: a warning); the object itself is read as before, the
unknown field ignored. A schema maps each known key to the schema of its value (applied
to a mapping, or to each mapping of a list), or to ``None`` when whatever is below is not
preemptd's to check: maps of names (labels, requests, flavors), Kubernetes' own shapes
(conditions, metadata below its first level) and what preemptd writes itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from .fields import Entry, Problem, at_index, child, shown

__all__ = ["OBJECT_META", "SCHEMAS", "TOLERATION", "Schema", "unknown_fields"]

Schema = Mapping[str, Any]  # key -> Schema | None

OBJECT_META: Schema = dict.fromkeys(
    (
        "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
        "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
        "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
    )
)
"""Every field of Kubernetes' ObjectMeta: the API server sets most of them."""

TOLERATION: Schema = dict.fromkeys(("key", "operator", "value", "effect", "tolerationSeconds"))
_TAINT: Schema = dict.fromkeys(("key", "value", "effect", "timeAdded"))

SCHEMAS: Mapping[str, Schema] = {
    "ResourceFlavor": {
        "apiVersion": None,
        "kind": None,
        "metadata": OBJECT_META,
        "spec": {"nodeLabels": None, "nodeTaints": _TAINT, "tolerations": TOLERATION},
        "status": None,
    },
    "Queue": {
        "apiVersion": None,
        "kind": None,
        "metadata": OBJECT_META,
        "spec": {
            "parent": None,
            "resourceGroups": {
                "coveredResources": None,
                "flavors": {
                    "name": None,
                    "resources": dict.fromkeys(
                        ("name", "nominalQuota", "borrowingLimit", "lendingLimit")
                    ),
                },
            },
            "preemption": {
                "withinQueue": None,
                "withinClusterQueue": None,
                "reclaimWithinCohort": None,
                "withinCohort": None,
                "borrowWithinCohort": {"policy": None, "maxPriorityThreshold": None},
            },
            "flavorFungibility": dict.fromkeys(("whenCanBorrow", "whenCanPreempt", "preference")),
            "queueingStrategy": None,
            "preemptMinRuntime": None,
            "reclaimMinRuntime": None,
            "fairSharing": {"weight": None},
            "namespaceSelector": {
                "matchLabels": None,
                "matchExpressions": dict.fromkeys(("key", "operator", "values")),
            },
        },
        "status": None,  # written by preemptd (kubectl get queues)
    },
    "LocalQueue": {
        "apiVersion": None,
        "kind": None,
        "metadata": OBJECT_META,
        "spec": {"queue": None},
        "status": None,
    },
    "WorkloadPriorityClass": {
        "apiVersion": None,
        "kind": None,
        "metadata": OBJECT_META,
        "value": None,
        "description": None,
    },
    "Workload": {
        "apiVersion": None,
        "kind": None,
        "metadata": OBJECT_META,
        "spec": {
            "queueName": None,
            "priority": None,
            "priorityClassName": None,
            "priorityClassSource": None,
            "owner": dict.fromkeys(("apiVersion", "kind", "name", "uid")),
            "podSets": {
                "name": None,
                "count": None,
                "minCount": None,
                "requests": None,
                "nodeSelector": None,
                "tolerations": TOLERATION,
            },
        },
        "status": {
            "admission": {
                "queue": None,
                "podSets": dict.fromkeys(("name", "count", "flavors")),
            },
            "admittedAt": None,
            "admittedFlavors": None,
            "state": None,
            "conditions": None,
            "flavorScan": None,
        },
    },
}
"""The known fields of each of preemptd's own kinds (the CRDs' schemas)."""


def unknown_fields(entry: Entry) -> list[Problem]:
    """Every field of ``entry`` that its kind does not have, one problem each.

    Values of the wrong type are left alone: the kind's reader reports those.
    """
    schema = SCHEMAS.get(entry.kind)
    if schema is None:
        return []
    found: list[Problem] = []
    _unknown(entry, entry.body, schema, "", found)
    return found


def _unknown(entry: Entry, value: Any, schema: Schema, at: str, found: list[Problem]) -> None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            _unknown(entry, item, schema, at_index(at, index), found)
        return
    if not isinstance(value, Mapping):
        return
    for key, below in value.items():
        if key in schema:
            inner = schema[key]
            if inner is not None and below is not None:
                _unknown(entry, below, inner, child(at, key), found)
            continue
        name = key if isinstance(key, str) else shown(key)
        close = difflib.get_close_matches(name, [str(known) for known in schema], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        found.append(Problem(entry.file, entry.label, child(at, name), f"unknown field{hint}"))
