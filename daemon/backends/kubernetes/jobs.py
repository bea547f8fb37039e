"""``batch/v1`` Jobs labelled ``preemptd.io/queue-name``: the Job side of a Workload.

A Job is created suspended (one that is not is suspended on first sight, as
Kueue's webhook would) and gets a Workload: one podSet of ``parallelism`` pods
asking for what its pod template requests, ``minCount`` from the annotation
``preemptd.io/min-parallelism`` when that is lower (an elastic Job), priority
from the template's ``priorityClassName``.

:func:`sync` then makes the Job follow its Workload, whatever happened before:

=============================  ==========================================================
Workload                       Job
=============================  ==========================================================
no quota                       suspended, with the user's template
admitted                       unsuspended, template on the flavors' nodes, parallelism =
                               the committed count (lowered again when shrunk)
evicted                        suspended, template and parallelism restored; once no pod
                               runs any more, the Workload gives its quota back
Job complete or failed         Workload ``Finished``: quota free
=============================  ==========================================================
"""

from __future__ import annotations

from typing import Any

from .client import JOBS, WORKLOADS, Obj
from .owners import (
    Cluster,
    Placement,
    annotations_of,
    committed,
    ensure_workload,
    placement_patch,
    restore_patch,
    update_workload_spec,
    version_of,
)
from .workloads import (
    MIN_PARALLELISM_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION,
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    eviction_finished_patch,
    finished_patch,
    workload_name,
)

__all__ = ["job_shape", "sync_job"]


def job_shape(job: Obj) -> tuple[int, int | None]:
    """``(parallelism, minCount)`` of a Job; an unreadable annotation is no minimum."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
        parallelism = 1
    if (saved := Placement.of(job).extra.get("parallelism")) is not None and isinstance(saved, int):
        parallelism = saved  # shrunk or partially admitted: the Job asked for the original
    text = annotations_of(job).get(MIN_PARALLELISM_ANNOTATION)
    minimum: int | None = None
    if isinstance(text, str) and text.strip().isdigit():
        value = int(text)
        if 1 <= value < parallelism:
            minimum = value
    return parallelism, minimum


def _finished(job: Obj) -> tuple[str, str] | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if not isinstance(condition, dict) or condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "Failed"):
            reason = "Succeeded" if condition["type"] == "Complete" else "Failed"
            return reason, str(condition.get("message") or f"Job {condition['type'].lower()}")
    return None


async def sync_job(cluster: Cluster, job: Obj, workload: Obj | None) -> None:
    """Bring ``job`` in line with ``workload`` (creating it when missing); idempotent."""
    owner = Owner(JOBS, job)
    spec = job.get("spec") or {}
    suspended = bool(spec.get("suspend"))
    parallelism, minimum = job_shape(job)
    finished = _finished(job)
    if workload is None:
        if finished is not None:
            return
        if not suspended and ORIGINAL_TEMPLATE_ANNOTATION not in annotations_of(job):
            # Created running, not through preemptd: hold it until it is admitted.
            await _suspend(cluster, owner, restore=None)
        await ensure_workload(cluster, owner, count=parallelism, min_count=minimum)
        return
    name = str((workload.get("metadata") or {}).get("name", ""))
    if finished is not None:
        if not condition_true(workload, "Finished"):
            reason, message = finished
            patch = finished_patch(workload, reason, message, cluster.now_ms())
            await cluster.writer.patch(WORKLOADS, name, owner.namespace, patch, subresource="status")
        return
    count = committed(workload)
    if count == 0:
        if await update_workload_spec(cluster, owner, workload, count=parallelism, min_count=minimum, admitted=False) is None:
            return
        if not suspended:
            await _suspend(cluster, owner, restore=Placement.of(job))
        return
    if condition_true(workload, "Evicted"):
        if not suspended:
            await _suspend(cluster, owner, restore=Placement.of(job))
            return
        active = (job.get("status") or {}).get("active") or 0
        if not active and not cluster.live_pods(f"{owner.namespace}/{name}"):
            patch = eviction_finished_patch(workload, cluster.now_ms())
            written = await cluster.writer.patch(WORKLOADS, name, owner.namespace, patch, subresource="status")
            if written is not None:
                cluster.events.record(written, "Normal", "EvictionFinished", "All pods stopped; queued again")
        return
    if suspended:
        await _start(cluster, owner, workload, count)
    elif isinstance(spec.get("parallelism"), int) and spec["parallelism"] > count:
        shrink: Obj = {"metadata": {"resourceVersion": version_of(job)}, "spec": {"parallelism": count}}
        await cluster.writer.patch(JOBS, owner.name, owner.namespace, shrink)


async def _start(cluster: Cluster, owner: Owner, workload: Obj, count: int) -> None:
    job = owner.obj
    original = Placement.of(job, parallelism=(job.get("spec") or {}).get("parallelism"))
    template: Obj = {"metadata": {"labels": {WORKLOAD_LABEL: workload_name(owner.kind, owner.name)}}}
    template_spec = placement_patch(job, workload, cluster.flavors(), original)
    if template_spec is not None:
        template["spec"] = template_spec
    patch: Obj = {
        "metadata": {
            "resourceVersion": version_of(job),
            "annotations": {ORIGINAL_TEMPLATE_ANNOTATION: original.dumps()},
        },
        "spec": {"suspend": False, "parallelism": count, "template": template},
    }
    await cluster.writer.patch(JOBS, owner.name, owner.namespace, patch)


async def _suspend(cluster: Cluster, owner: Owner, *, restore: Placement | None) -> None:
    job = owner.obj
    spec: dict[str, Any] = {"suspend": True}
    metadata: Obj = {"resourceVersion": version_of(job)}
    if restore is not None and ORIGINAL_TEMPLATE_ANNOTATION in annotations_of(job):
        template_spec = restore_patch(job, restore)
        if template_spec is not None:
            spec["template"] = {"spec": template_spec}
        parallelism = restore.extra.get("parallelism")
        if isinstance(parallelism, int):
            spec["parallelism"] = parallelism
        metadata["annotations"] = {ORIGINAL_TEMPLATE_ANNOTATION: None}
    await cluster.writer.patch(JOBS, owner.name, owner.namespace, {"metadata": metadata, "spec": spec})
