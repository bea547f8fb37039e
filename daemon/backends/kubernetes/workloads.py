"""The Workload objects the backend writes: their shape, names, conditions and status.

A Workload is the scheduler's record of one Job or Deployment (CONTRACT §1).
Its status is the source of truth for what the scheduler decided: every
commit writes the Workload first and only then changes the Job or Deployment,
so after a crash the owner is brought in line with its Workload, never the
other way round.

Conditions follow Kueue's names: ``QuotaReserved`` and ``Admitted`` (True
while quota is held), ``Evicted`` (True from the preemption until the quota
is given back, and kept as a record afterwards), ``Preempted`` (why, naming
the preemptor) and ``Finished``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from preemptd.framework.decisions import Admitted, Preempted
from preemptd.framework.model import WORKLOAD_LABEL, Flavor, Toleration
from preemptd.framework.objects.nodes import parse_pod
from preemptd.framework.quantity import format_quantity, format_timestamp

from .client import WORKLOADS, Obj, Resource
from .inventory import entry_of

__all__ = [
    "DESIRED_REPLICAS_ANNOTATION",
    "MIN_PARALLELISM_ANNOTATION",
    "ORIGINAL_PLACEMENT_ANNOTATION",
    "ORIGINAL_TEMPLATE_ANNOTATION",
    "QUEUE_LABEL",
    "SCALED_REPLICAS_ANNOTATION",
    "WORKLOAD_LABEL",
    "Owner",
    "admission_patch",
    "admitted_counts",
    "condition_true",
    "eviction_finished_patch",
    "eviction_patch",
    "finished_patch",
    "flavor_placement",
    "new_workload",
    "pending_patch",
    "pod_set_for",
    "shrink_patch",
    "with_status",
    "workload_name",
]

QUEUE_LABEL = "preemptd.io/queue-name"
MIN_PARALLELISM_ANNOTATION = "preemptd.io/min-parallelism"
DESIRED_REPLICAS_ANNOTATION = "preemptd.io/desired-replicas"
# The replicas preemptd last scaled a Deployment to: a spec.replicas that differs was written by
# someone else (an HPA through /scale, kubectl scale, a GitOps sync), and says the desired count.
SCALED_REPLICAS_ANNOTATION = "preemptd.io/scaled-replicas"
ORIGINAL_TEMPLATE_ANNOTATION = "preemptd.io/original-template"
ORIGINAL_PLACEMENT_ANNOTATION = "preemptd.io/original-placement"
POD_SET = "main"


class Owner:
    """The Job or Deployment a Workload stands for."""

    __slots__ = ("kind", "name", "namespace", "obj", "resource", "uid")

    def __init__(self, resource: Resource, obj: Obj) -> None:
        metadata = obj.get("metadata") or {}
        self.resource = resource
        self.kind = resource.kind
        self.obj = obj
        self.name = str(metadata.get("name", ""))
        self.namespace = str(metadata.get("namespace") or "default")
        self.uid = str(metadata.get("uid", ""))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload_key(self) -> str:
        return f"{self.namespace}/{workload_name(self.kind, self.name)}"

    def reference(self) -> Obj:
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def workload_name(kind: str, name: str) -> str:
    """``job-<name>`` / ``deployment-<name>``, short enough to be a label value (63).

    It is put on every pod as ``preemptd.io/workload``; long names are cut and
    given a hash of the full name so two long names never collide.
    """
    full = f"{kind.lower()}-{name}"
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:10]
    return f"{full[:52].rstrip('-.')}-{digest}"


def pod_set_for(template: Any, *, namespace: str, count: int, min_count: int | None) -> tuple[Obj | None, str]:
    """The podSet a pod template asks for, or None and why the template is unusable.

    The requests are what the template's pods will request (containers add up,
    init containers count by their largest), read by the one pod parser there is.
    """
    if not isinstance(template, dict):
        return None, "spec.template is missing"
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return None, "spec.template.spec is missing"
    entry = entry_of("Pod", {"metadata": {"name": "template", "namespace": namespace}, "spec": spec}, namespaced=True)
    assert entry is not None
    pod, problems = parse_pod(entry)
    if problems:
        return None, "; ".join(f"spec.template.{p.path}: {p.message}" for p in problems)
    pod_set: Obj = {
        "name": POD_SET,
        "count": count,
        "requests": {resource: format_quantity(amount, resource) for resource, amount in pod.requests.items()},
    }
    if min_count is not None and min_count < count:
        pod_set["minCount"] = min_count
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and selector:
        pod_set["nodeSelector"] = dict(selector)
    tolerations = spec.get("tolerations")
    if isinstance(tolerations, list) and tolerations:
        pod_set["tolerations"] = list(tolerations)
    return pod_set, ""


def new_workload(owner: Owner, *, queue: str, pod_set: Obj, priority: int | None, priority_class: str | None) -> Obj:
    spec: Obj = {
        "queueName": queue,
        "owner": {"apiVersion": owner.resource.api_version, "kind": owner.kind, "name": owner.name},
        "podSets": [pod_set],
    }
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {
            "name": workload_name(owner.kind, owner.name),
            "namespace": owner.namespace,
            "labels": {QUEUE_LABEL: queue},
            "ownerReferences": [owner.reference()],
        },
        "spec": spec,
    }


# --- reading -------------------------------------------------------------------------------


def condition_true(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True" for c in conditions)


def admitted_counts(workload: Obj) -> dict[str, int]:
    """podSet -> committed count; empty when no quota is reserved."""
    admission = (workload.get("status") or {}).get("admission")
    if not isinstance(admission, dict):
        return {}
    counts: dict[str, int] = {}
    for pod_set in admission.get("podSets") or []:
        if isinstance(pod_set, dict) and isinstance(pod_set.get("count"), int):
            counts[str(pod_set.get("name"))] = pod_set["count"]
    return counts


def flavor_placement(workload: Obj, flavors: Mapping[str, Flavor]) -> tuple[dict[str, str], list[Obj]]:
    """The node selector and tolerations that put the pods on their admitted flavors."""
    admission = (workload.get("status") or {}).get("admission") or {}
    names: set[str] = set()
    for pod_set in admission.get("podSets") or []:
        if isinstance(pod_set, dict):
            names.update(str(f) for f in (pod_set.get("flavors") or {}).values())
    selector: dict[str, str] = {}
    tolerations: list[Obj] = []
    for name in sorted(names):
        flavor = flavors.get(name)
        if flavor is None:
            continue
        selector.update(flavor.node_labels)
        tolerations.extend(_toleration(t) for t in flavor.tolerations)
    return selector, tolerations


def _toleration(toleration: Toleration) -> Obj:
    found: Obj = {"operator": toleration.operator}
    if toleration.key:
        found["key"] = toleration.key
    if toleration.value:
        found["value"] = toleration.value
    if toleration.effect:
        found["effect"] = toleration.effect
    return found


# --- status patches ------------------------------------------------------------------------
# Each takes the Workload as the session saw it and returns a merge patch of its status
# subresource carrying that resourceVersion: if anything changed since, the server answers
# 409 and the decision is made again on fresh state instead of overwriting.


def _condition(kind: str, status: bool, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }


def _with_conditions(workload: Obj, changes: Sequence[Obj]) -> list[Obj]:
    """The conditions list with ``changes`` applied; a condition keeps its transition time
    while its status does not change (Kubernetes' convention)."""
    current = [c for c in (workload.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in current}
    for change in changes:
        old = by_type.get(change["type"])
        if old is not None and old.get("status") == change["status"]:
            change = {**change, "lastTransitionTime": old.get("lastTransitionTime", change["lastTransitionTime"])}
        by_type[change["type"]] = change
    order = [c.get("type") for c in current] + [c["type"] for c in changes if c["type"] not in {x.get("type") for x in current}]
    return [by_type[kind] for kind in order]


def _status_patch(workload: Obj, status: Obj) -> Obj:
    version = (workload.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {"resourceVersion": version}, "status": status}


def admission_patch(workload: Obj, admitted: Admitted, now_ms: int) -> Obj:
    now = format_timestamp(now_ms)
    pod_sets = [ps.to_dict() for ps in admitted.pod_sets]
    status: Obj = {}
    admission = (workload.get("status") or {}).get("admission")
    owner = (workload.get("spec") or {}).get("owner") or {}
    in_place = admitted.grown or owner.get("kind") == "Deployment"
    if in_place and isinstance(admission, dict) and admission.get("podSets"):
        # Grown in place (a Deployment, or an elastic workload growing back, docs/elastic.md):
        # the run goes on, so its queue, flavors and admittedAt are kept (CONTRACT §3).
        counts = {ps["name"]: ps["count"] for ps in pod_sets}
        status["admission"] = {
            **admission,
            "podSets": [
                {**ps, "count": counts.get(ps.get("name"), ps.get("count"))} for ps in admission["podSets"]
            ],
        }
    else:
        status["admission"] = {"queue": admitted.queue, "podSets": pod_sets}
        status["admittedAt"] = now
    flavors = sorted({f for ps in pod_sets for f in ps["flavors"].values()})
    message = f"Quota reserved in Queue {admitted.queue}" + (" (borrowing)" if admitted.borrowing else "")
    status["conditions"] = _with_conditions(
        workload,
        [
            _condition("QuotaReserved", True, "QuotaReserved", message, now),
            _condition("Admitted", True, "Admitted", f"Admitted to flavor(s) {', '.join(flavors)}", now),
            _condition("Evicted", False, "Admitted", "", now),
            _condition("Preempted", False, "Admitted", "", now),
        ],
    )
    status["flavorScan"] = None
    status["state"] = "Admitted"
    status["admittedFlavors"] = ",".join(flavors)
    return _status_patch(workload, status)


def _preempted_message(preempted: Preempted) -> str:
    what = "all pods" if preempted.count is None else f"{preempted.count} pod(s)"
    if preempted.pods:
        what += f" ({', '.join(sorted(preempted.pods))})"
    return f"Preempted {what} to accommodate {preempted.preemptor} ({preempted.reason})"


def eviction_patch(workload: Obj, preempted: Preempted, now_ms: int) -> Obj:
    now = format_timestamp(now_ms)
    message = _preempted_message(preempted)
    conditions = _with_conditions(
        workload,
        [
            _condition("Evicted", True, "Preempted", message, now),
            _condition("Preempted", True, preempted.reason, message, now),
        ],
    )
    return _status_patch(workload, {"conditions": conditions, "state": "Evicting"})


def shrink_patch(workload: Obj, preempted: Preempted, now_ms: int) -> Obj:
    now = format_timestamp(now_ms)
    admission = dict((workload.get("status") or {}).get("admission") or {})
    pod_sets = [dict(ps) for ps in admission.get("podSets") or [] if isinstance(ps, dict)]
    if pod_sets:
        target = next((ps for ps in pod_sets if ps.get("name") == preempted.pod_set), None)
        if target is None:
            specs = (workload.get("spec") or {}).get("podSets") or []
            elastic = {s.get("name") for s in specs if isinstance(s, dict) and s.get("minCount") is not None}
            target = next((ps for ps in pod_sets if ps.get("name") in elastic), pod_sets[0])
        target["count"] = max(0, int(target.get("count", 0)) - (preempted.count or 0))
    admission["podSets"] = pod_sets
    message = _preempted_message(preempted)
    conditions = _with_conditions(workload, [_condition("Preempted", True, preempted.reason, message, now)])
    return _status_patch(workload, {"admission": admission, "conditions": conditions})


def with_status(workload: Obj, patch: Obj) -> Obj:
    """``workload`` as it reads once the status ``patch`` is written (a merge patch: a key set to
    None is removed); what a write that carries two patches at once computes the second on."""
    status = dict(workload.get("status") or {})
    for key, value in (patch.get("status") or {}).items():
        if value is None:
            status.pop(key, None)
        else:
            status[key] = value
    return {**workload, "status": status}


def eviction_finished_patch(workload: Obj, now_ms: int) -> Obj:
    """The victim is gone: its quota is free and it queues again."""
    now = format_timestamp(now_ms)
    conditions = _with_conditions(
        workload,
        [
            _condition("QuotaReserved", False, "Evicted", "The workload was evicted and is queued again", now),
            _condition("Admitted", False, "Evicted", "The workload was evicted and is queued again", now),
        ],
    )
    status = {"admission": None, "admittedAt": None, "conditions": conditions, "state": "Pending", "admittedFlavors": None}
    return _status_patch(workload, status)


def finished_patch(workload: Obj, reason: str, message: str, now_ms: int) -> Obj:
    now = format_timestamp(now_ms)
    conditions = _with_conditions(
        workload,
        [
            _condition("Finished", True, reason, message, now),
            _condition("QuotaReserved", False, "Finished", message, now),
            _condition("Admitted", False, "Finished", message, now),
        ],
    )
    status = {"admission": None, "conditions": conditions, "state": "Finished"}
    return _status_patch(workload, status)


def pending_patch(
    workload: Obj, reason: str, message: str, scan: Mapping[str, Mapping[str, int]] | None, now_ms: int
) -> Obj | None:
    """Why it waits (and where its flavor scan resumes), or None when the status says so already."""
    status = workload.get("status") or {}
    current = next(
        (c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "QuotaReserved"),
        None,
    )
    changes: Obj = {}
    admitted = bool(status.get("admission"))  # a Deployment waiting to grow keeps its conditions
    wanted = ("False", reason, message)
    if not admitted and (current is None or (current.get("status"), current.get("reason"), current.get("message")) != wanted):
        changes["conditions"] = _with_conditions(
            workload, [_condition("QuotaReserved", False, reason, message, format_timestamp(now_ms))]
        )
    if not admitted and status.get("state") != "Pending":
        changes["state"] = "Pending"
    if scan is not None:
        wanted_scan = {ps: dict(r) for ps, r in scan.items()} or None
        if (status.get("flavorScan") or None) != wanted_scan:
            changes["flavorScan"] = wanted_scan
    if not changes:
        return None
    return _status_patch(workload, changes)

