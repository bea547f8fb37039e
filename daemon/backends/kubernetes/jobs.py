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
no quota                       suspended (a Job placed before keeps that flavor's
                               directives, the user's saved beside them, until its
                               next admission)
admitted                       unsuspended, template on the flavors' nodes, parallelism =
                               the committed count (lowered when shrunk, raised again
                               when grown back, up to the user's own parallelism)
evicted                        suspended, parallelism restored, in one write (see
                               :func:`_stop`); once no pod runs any more, the next
                               session's commit gives its quota back (``commit``, point
                               9). The template keeps the last flavor's directives
                               until the next admission
Job complete or failed         Workload ``Finished``: quota free
=============================  ==========================================================

The Job API allows a pod template's scheduling directives to change only while
the Job is suspended and has never started (judged on the Job as it was before
the write), so a running Job is never suspended and re-placed in one write. A
preempted Job is only suspended; its directives change when it is admitted
again, already suspended: ``status.startTime`` cleared (if it ran), then one
patch with the new flavor's directives and ``suspend: false``. That is three
writes per preemption (Workload evicted, Job suspended, quota given back with
the reason it waits, by the next commit) and
at most three per admission (Workload admitted, ``startTime`` cleared for a Job
that ran elsewhere, Job resumed). Each step that is already done is skipped, so
a pass that stops half-way is finished by the next one.
"""

from __future__ import annotations

from .client import JOBS, WORKLOADS, Obj
from .integrations import Integration, Rule
from .owners import (
    Cluster,
    Placement,
    PodSetShape,
    annotations_of,
    committed,
    ensure_workload,
    placement_patch,
    restore_patch,
    single,
    update_workload_spec,
    version_of,
)
from .workloads import (
    MIN_PARALLELISM_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION,
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    finished_patch,
    workload_name,
)

__all__ = ["JobIntegration", "job_shape", "sync_job"]


class JobIntegration(Integration):
    """``batch/v1`` Job: one pod set of ``parallelism`` pods (see the module docstring)."""

    name = "job"
    resource = JOBS

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        parallelism, minimum = job_shape(owner)
        return single(owner, count=parallelism, min_count=minimum)

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        return await sync_job(cluster, owner, workload)

    suspend_path = ("spec", "suspend")

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        """Suspended, no pod active nor alive (terminating pods still hold their room)."""
        if (owner.get("spec") or {}).get("suspend") is not True or (owner.get("status") or {}).get("active"):
            return False
        return not cluster.live_pods(workload_key)

    def rules(self) -> tuple[Rule, ...]:
        # status: a Job that ran loses its startTime before it is placed anew.
        return (*super().rules(), Rule("batch", ("jobs/status",), ("patch",)))


def job_shape(job: Obj) -> tuple[int, int | None]:
    """``(parallelism, minCount)`` of a Job; an unreadable annotation is no minimum."""
    spec = job.get("spec") or {}
    parallelism = spec.get("parallelism")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 1:
        parallelism = 1
    saved = Placement.of(job).extra.get("parallelism")
    if not spec.get("suspend") and isinstance(saved, int):
        # Running shrunk or partially admitted: the Job asked for the original. A suspended
        # Job has its own back (the suspension restores it), and its user may edit it.
        parallelism = saved
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


async def sync_job(cluster: Cluster, job: Obj, workload: Obj | None) -> bool:
    """Bring ``job`` in line with ``workload`` (creating it when missing); idempotent.

    True when the Job now is as the Workload wants it; False when another pass is
    needed later (a write was refused, or the pods of an evicted Job are still
    stopping). The caller retries a False with its own backoff.
    """
    owner = Owner(JOBS, job)
    spec = job.get("spec") or {}
    suspended = bool(spec.get("suspend"))
    parallelism, minimum = job_shape(job)
    finished = _finished(job)
    if workload is None:
        if finished is not None:
            return True
        if not suspended and ORIGINAL_TEMPLATE_ANNOTATION not in annotations_of(job):
            # Created running, not through preemptd: hold it until it is admitted.
            held = await cluster.writer.patch(JOBS, owner.name, owner.namespace, _suspend_patch(job))
            if held is None:
                return False
            owner = Owner(JOBS, held)
        return await ensure_workload(cluster, owner, single(owner.obj, count=parallelism, min_count=minimum))
    name = str((workload.get("metadata") or {}).get("name", ""))
    if finished is not None:
        if not condition_true(workload, "Finished"):
            reason, message = finished
            patch = finished_patch(workload, reason, message, cluster.now_ms())
            return await cluster.writer.patch(WORKLOADS, name, owner.namespace, patch, subresource="status") is not None
        return True
    count = committed(workload)
    if count == 0:
        shapes = single(owner.obj, count=parallelism, min_count=minimum)
        if await update_workload_spec(cluster, owner, workload, shapes, admitted=False) is None:
            return False
        return await _stop(cluster, owner) is not None
    if condition_true(workload, "Evicted"):
        stopped = await _stop(cluster, owner)
        if stopped is None:
            return False
        active = (stopped.get("status") or {}).get("active") or 0
        # Not yet while the Job controller is still stopping its pods; once stopped, its quota is
        # free, and the next commit writes so.
        return not active and not cluster.live_pods(f"{owner.namespace}/{name}")
    if suspended:
        return await _start(cluster, owner, workload, count)
    running = spec.get("parallelism")
    if isinstance(running, int) and running > count:
        shrink: Obj = {"metadata": {"resourceVersion": version_of(job)}, "spec": {"parallelism": count}}
        return await cluster.writer.patch(JOBS, owner.name, owner.namespace, shrink) is not None
    saved = Placement.of(job).extra.get("parallelism")
    if isinstance(running, int) and isinstance(saved, int) and running < count <= saved:
        # Grown back (docs/elastic.md): up to the committed count, never past its user's own.
        grow: Obj = {"metadata": {"resourceVersion": version_of(job)}, "spec": {"parallelism": count}}
        return await cluster.writer.patch(JOBS, owner.name, owner.namespace, grow) is not None
    return True


def _started(job: Obj) -> bool:
    return (job.get("status") or {}).get("startTime") is not None


async def _directives_mutable(cluster: Cluster, job: Obj) -> Obj | None:
    """The suspended ``job`` in a state whose scheduling directives may change; None if refused.

    The Job API lets the pod template's node selector, tolerations, node affinity,
    labels, annotations and scheduling gates change only while the Job is
    suspended and has never started (no ``status.startTime``). The Job controller
    sets ``startTime`` when the Job runs and keeps it when it is suspended, so a
    Job that ran has it cleared here, through /status, once it is suspended.
    """
    if not _started(job):
        return job
    name = str((job.get("metadata") or {}).get("name", ""))
    namespace = str((job.get("metadata") or {}).get("namespace", ""))
    patch: Obj = {"metadata": {"resourceVersion": version_of(job)}, "status": {"startTime": None}}
    return await cluster.writer.patch(JOBS, name, namespace, patch, subresource="status")


async def _start(cluster: Cluster, owner: Owner, workload: Obj, count: int) -> bool:
    job = owner.obj
    original = Placement.of(job)
    # Suspended, the Job's parallelism is its user's (perhaps edited while it waited).
    original.extra["parallelism"] = (job.get("spec") or {}).get("parallelism")
    label = workload_name(owner.kind, owner.name)
    template: Obj = {}
    template_metadata = (((job.get("spec") or {}).get("template") or {}).get("metadata") or {})
    if (template_metadata.get("labels") or {}).get(WORKLOAD_LABEL) != label:
        template["metadata"] = {"labels": {WORKLOAD_LABEL: label}}
    template_spec = placement_patch(job, workload, cluster.flavors(), original)
    if template_spec is not None:
        template["spec"] = template_spec
    if template:
        mutable = await _directives_mutable(cluster, job)
        if mutable is None:
            return False
        job = mutable
    spec: Obj = {"suspend": False, "parallelism": count}
    if template:
        spec["template"] = template
    patch: Obj = {
        "metadata": {
            "resourceVersion": version_of(job),
            "annotations": {ORIGINAL_TEMPLATE_ANNOTATION: original.dumps()},
        },
        "spec": spec,
    }
    return await cluster.writer.patch(JOBS, owner.name, owner.namespace, patch) is not None


def _suspend_patch(job: Obj) -> Obj:
    return {"metadata": {"resourceVersion": version_of(job)}, "spec": {"suspend": True}}


async def _stop(cluster: Cluster, owner: Owner) -> Obj | None:
    """Suspend the Job, in one write; the Job as it ends, None if refused.

    The suspension carries the original parallelism (which may change at any
    time) but not the original template: the scheduling directives may change
    only once ``status.startTime`` is cleared, which costs a write of its own, and
    the pods are going anyway. They are given back when they are next needed:
    :func:`_start` writes the next flavor's directives, from the saved original,
    in the very patch that resumes the Job (``startTime`` cleared just before,
    if the Job ran). So the saved original stays in its annotation while the Job
    waits, and the Workload's pod set is read from it (``owners.user_template``),
    not from the last flavor's directives. A Job deleted or finished while it
    waits needs nothing back. Only a Job whose template holds nothing of a
    flavor drops the saved original here, in the same write.
    """
    job = owner.obj
    spec_now = job.get("spec") or {}
    saved = ORIGINAL_TEMPLATE_ANNOTATION in annotations_of(job)
    restore = Placement.of(job)
    # Already suspended, the parallelism is back and may since have been edited: kept.
    parallelism = restore.extra.get("parallelism") if saved and not spec_now.get("suspend") else None
    if not isinstance(parallelism, int) or parallelism == spec_now.get("parallelism"):
        parallelism = None
    patch = _suspend_patch(job)
    if spec_now.get("suspend"):
        del patch["spec"]["suspend"]
    if parallelism is not None:
        patch["spec"]["parallelism"] = parallelism
    if saved and restore_patch(job, restore) is None:
        patch["metadata"]["annotations"] = {ORIGINAL_TEMPLATE_ANNOTATION: None}
    if not patch["spec"] and "annotations" not in patch["metadata"]:
        return job
    if not patch["spec"]:
        del patch["spec"]
    return await cluster.writer.patch(JOBS, owner.name, owner.namespace, patch)
