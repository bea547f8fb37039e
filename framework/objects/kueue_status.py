"""Kueue's status written back into a Kueue Workload (``cycle --apply``; see :mod:`.kueue`).

What Kueue itself would write for a decision, so that the objects a session's
decisions are committed to can be fed to the next session in Kueue's format.
Nothing here does I/O; the files backend calls it for each Kueue Workload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..decisions import Admitted, Pending, Preempted
from ..quantity import format_quantity
from .fields import Fields
from .kueue_workloads import GROUP, pod_set_requests

__all__ = [
    "PREEMPTION_REASONS",
    "commit_admitted",
    "commit_pending",
    "commit_preempted",
    "is_kueue_workload",
]

# preemptd's victim reasons -> the reason of Kueue's Preempted condition, and the end of
# Kueue's eviction message.
PREEMPTION_REASONS: dict[str, tuple[str, str]] = {
    "InQueue": ("InClusterQueue", "prioritization in the ClusterQueue"),
    "InCohortReclamation": ("InCohortReclamation", "reclamation within the cohort"),
    "InCohortReclaimWhileBorrowing": (
        "InCohortReclaimWhileBorrowing",
        "reclamation within the cohort while borrowing",
    ),
    "InCohortFairSharing": ("InCohortFairSharing", "Fair Sharing within the cohort"),
}


def is_kueue_workload(obj: Mapping[str, Any]) -> bool:
    """Whether a document is a Kueue Workload (what ``--apply`` writes Kueue's status into)."""
    api_version = obj.get("apiVersion")
    return (
        obj.get("kind") == "Workload"
        and isinstance(api_version, str)
        and api_version.rpartition("/")[0] == GROUP
    )


def _requests_by_pod_set(obj: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """Per-pod requests of each pod set of a Kueue Workload document (problems dropped:
    the object was read for the session already)."""
    fields = Fields.of_file("")
    spec = obj.get("spec")
    found: dict[str, dict[str, int]] = {}
    for path, pod_set in fields.records(spec if isinstance(spec, Mapping) else {}, "podSets", "spec"):
        name = pod_set.get("name") if isinstance(pod_set.get("name"), str) else "main"
        found[name or "main"] = pod_set_requests(fields, pod_set, path)
    return found


def _usage(requests: Mapping[str, int], count: int, flavors: Mapping[str, str]) -> dict[str, str]:
    return {
        resource: format_quantity(requests.get(resource, 0) * count, resource)
        for resource in sorted(flavors)
        if requests.get(resource)
    }


def _set_condition(status: dict[str, Any], condition: dict[str, Any]) -> None:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for index, existing in enumerate(conditions):
        if isinstance(existing, dict) and existing.get("type") == condition["type"]:
            conditions[index] = condition
            return
    conditions.append(condition)


def _status(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    return status


def commit_admitted(obj: dict[str, Any], admitted: Admitted, now: str) -> None:
    """Write an admission into a Kueue Workload as Kueue would: ``status.admission``
    (``clusterQueue``, ``podSetAssignments`` with flavors, resourceUsage and count) and
    the ``QuotaReserved`` and ``Admitted`` conditions; an old eviction is cleared."""
    requests = _requests_by_pod_set(obj)
    status = _status(obj)
    status["admission"] = {
        "clusterQueue": admitted.queue,
        "podSetAssignments": [
            {
                "name": ps.name,
                "flavors": dict(sorted(ps.flavors.items())),
                "resourceUsage": _usage(requests.get(ps.name, {}), ps.count, ps.flavors),
                "count": ps.count,
            }
            for ps in admitted.pod_sets
        ],
    }
    conditions = status.get("conditions")
    if isinstance(conditions, list):
        status["conditions"] = [
            c for c in conditions if not (isinstance(c, dict) and c.get("type") in ("Evicted", "Preempted"))
        ]
    _set_condition(
        status,
        {
            "type": "QuotaReserved",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "QuotaReserved",
            "message": f"Quota reserved in ClusterQueue {admitted.queue}",
        },
    )
    _set_condition(
        status,
        {
            "type": "Admitted",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "Admitted",
            "message": "The workload is admitted",
        },
    )


def commit_pending(obj: dict[str, Any], pending: Pending, now: str) -> None:
    """Write why a workload without an admission waits, as Kueue does: ``QuotaReserved``
    ``False`` with reason ``Inadmissible`` or ``Pending`` and the session's message. The
    time of the condition moves only when its status changes."""
    status = _status(obj)
    if status.get("admission") is not None:
        return  # it holds quota (a leaving workload): nothing pending to write
    since = now
    for existing in status.get("conditions") or ():
        if (
            isinstance(existing, dict)
            and (existing.get("type"), existing.get("status")) == ("QuotaReserved", "False")
            and isinstance(existing.get("lastTransitionTime"), str)
        ):
            since = existing["lastTransitionTime"]
    reason = "Inadmissible" if pending.reason == "Inadmissible" else "Pending"
    message = f"{pending.reason}: {pending.message}" if pending.message else pending.reason
    _set_condition(
        status,
        {"type": "QuotaReserved", "status": "False", "lastTransitionTime": since, "reason": reason, "message": message},
    )


def commit_preempted(obj: dict[str, Any], preempted: Preempted, now: str) -> None:
    """Write a victim into a Kueue Workload: a whole one gets ``Evicted`` (reason
    ``Preempted``) and ``Preempted`` (``InClusterQueue``, ``InCohortReclamation``, ...)
    and keeps its quota until it is gone, as preemptd's own Workloads do; a shrunk one
    has its assignment's count and resourceUsage lowered."""
    status = _status(obj)
    if preempted.count is not None:
        admission = status.get("admission")
        assignments = admission.get("podSetAssignments") if isinstance(admission, dict) else None
        if not isinstance(assignments, list) or not assignments:
            return  # nothing committed to lower; the object is not what the session saw
        target = _shrunk(obj, [a for a in assignments if isinstance(a, dict)], preempted.pod_set)
        if target is None:
            return
        name = target.get("name") or "main"
        count = max(0, int(target.get("count", 0)) - preempted.count)
        target["count"] = count
        flavors: Any = target.get("flavors")
        flavors = flavors if isinstance(flavors, dict) else {}
        target["resourceUsage"] = _usage(_requests_by_pod_set(obj).get(name, {}), count, flavors)
        return
    reason, because = PREEMPTION_REASONS.get(preempted.reason, (preempted.reason, preempted.reason))
    message = f"Preempted to accommodate a workload ({preempted.preemptor}) due to {because}"
    _set_condition(
        status,
        {"type": "Evicted", "status": "True", "lastTransitionTime": now, "reason": "Preempted", "message": message},
    )
    _set_condition(
        status,
        {"type": "Preempted", "status": "True", "lastTransitionTime": now, "reason": reason, "message": message},
    )


def _shrunk(obj: Mapping[str, Any], assignments: list[dict[str, Any]], named: str | None) -> dict[str, Any] | None:
    """The assignment named by the decision, else the first elastic one, else the first."""
    by_name = {a.get("name") or "main": a for a in assignments}
    if named is not None and named in by_name:
        return by_name[named]
    spec = obj.get("spec")
    pod_sets = spec.get("podSets") if isinstance(spec, Mapping) else None
    for pod_set in pod_sets if isinstance(pod_sets, list) else ():
        if isinstance(pod_set, Mapping) and pod_set.get("minCount") is not None:
            name = pod_set.get("name") or "main"
            if name in by_name:
                return by_name[name]
    return assignments[0] if assignments else None
