"""``apps/v1`` Deployments labelled ``preemptd.io/queue-name``: GPU services as Workloads.

preemptd owns a labelled Deployment's ``spec.replicas``: it is the committed
count of its Workload (CONTRACT §1). What the user or an autoscaler wants is
the annotation ``preemptd.io/desired-replicas``; on first sight the daemon
copies ``spec.replicas`` there, labels the pod template with the Workload's
name (so the pods are found) and scales to what is admitted — nothing, until
the first session admits it.

:func:`sync` makes the Deployment follow its Workload:

* admitted: ``replicas`` = the committed count, template on the flavors' nodes;
* a replica preempted: the commit has marked the chosen pod with the lowest
  pod-deletion-cost and lowered the committed count; the scale-down here makes
  the ReplicaSet remove exactly that pod;
* evicted whole: ``replicas`` = 0; once no pod is left, the next commit gives the
  quota back (:meth:`Scalable.stopped`);
* the desired count changed: the Workload's spec follows; below the committed
  count, the committed count is lowered first (the Workload stays the source of
  truth), then the Deployment.

Every scale is written with ``preemptd.io/scaled-replicas``, the count it set.
A ``spec.replicas`` that differs from it was written by someone else — an HPA
through ``/scale``, ``kubectl scale``, a GitOps sync — and is taken as the new
desired count (written to the annotation in the same patch that scales the
Deployment back to what is admitted). So an HPA is followed, not fought: when
it asks for fewer replicas than are admitted, the committed count comes down
to its count and stays there; when it asks for more, the Workload asks for
them and the Deployment runs what the quota admits meanwhile. All of this holds
for every :class:`Scalable` kind (a StatefulSet too).
"""

from __future__ import annotations

from typing import ClassVar

from .client import DEPLOYMENTS, PODS, WORKLOADS, Obj, Resource
from .commit import VICTIM_DELETION_COST
from .integrations import Integration
from .owners import (
    Cluster,
    Placement,
    PodSetShape,
    annotations_of,
    committed,
    ensure_workload,
    placement_patch,
    single,
    update_workload_spec,
    version_of,
)
from .workloads import (
    DESIRED_REPLICAS_ANNOTATION,
    ORIGINAL_TEMPLATE_ANNOTATION,
    SCALED_REPLICAS_ANNOTATION,
    WORKLOAD_LABEL,
    Owner,
    condition_true,
    workload_name,
)

__all__ = ["DeploymentIntegration", "Scalable", "desired_replicas", "sync_deployment"]

_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def desired_replicas(deployment: Obj) -> int | None:
    """The annotation's count; None when it is missing or not a count."""
    text = annotations_of(deployment).get(DESIRED_REPLICAS_ANNOTATION)
    if isinstance(text, str) and text.strip().isdigit():
        return int(text)
    return None


def _scaled_elsewhere(deployment: Obj) -> int | None:
    """``spec.replicas`` when someone other than preemptd wrote it since its last scale, else None."""
    recorded = annotations_of(deployment).get(SCALED_REPLICAS_ANNOTATION)
    replicas = (deployment.get("spec") or {}).get("replicas")
    if not isinstance(recorded, str) or not recorded.strip().isdigit():
        return None
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        return None
    return None if replicas == int(recorded) else replicas


class Scalable(Integration):
    """A kind run as replicas of one pod template (``spec.replicas``, ``spec.template``).

    What the user wants is kept in ``preemptd.io/desired-replicas``; ``spec.replicas``
    is the committed count (see the module docstring). An ``elastic`` kind's pod set
    has ``minCount: 1`` — any number of its replicas is useful, and it is shrunk by
    count — where a Deployment's replicas are preempted one by one, each the pod the
    session chose (SEMANTICS §6).
    """

    elastic: ClassVar[bool] = False

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        desired = _scaled_elsewhere(owner)
        if desired is None:
            desired = desired_replicas(owner)
        if desired is None:
            replicas = (owner.get("spec") or {}).get("replicas")
            desired = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
        return single(owner, count=desired, min_count=1 if self.elastic else None)

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        return (owner.get("spec") or {}).get("replicas") == 0 and not cluster.live_pods(workload_key)

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        return await sync_deployment(cluster, owner, workload, resource=self.resource, elastic=self.elastic)


class DeploymentIntegration(Scalable):
    """``apps/v1`` Deployment: GPU services, one replica at a time (SEMANTICS §6)."""

    name = "deployment"
    resource = DEPLOYMENTS


async def sync_deployment(
    cluster: Cluster, deployment: Obj, workload: Obj | None, *, resource: Resource = DEPLOYMENTS,
    elastic: bool = False,
) -> bool:
    """Bring ``deployment`` in line with ``workload`` (taking it over, creating it); idempotent.

    True when the Deployment now is as the Workload wants it; False when another
    pass is needed later (a write was refused, or an evicted Workload's pods are
    still stopping). ``resource`` is the kind (a StatefulSet is scaled the same way).
    """
    owner = Owner(resource, deployment)
    min_count = 1 if elastic else None
    if DESIRED_REPLICAS_ANNOTATION not in annotations_of(deployment):
        taken = await _take_over(cluster, owner, workload)
        if taken is None:
            return False
        owner = Owner(resource, taken)
    desired = desired_replicas(owner.obj)
    if (outside := _scaled_elsewhere(owner.obj)) is not None:
        desired = outside  # the newest word on how many are wanted (an HPA, kubectl scale)
    if desired is None:
        text = annotations_of(owner.obj).get(DESIRED_REPLICAS_ANNOTATION)
        message = f"annotation {DESIRED_REPLICAS_ANNOTATION}={text!r} is not a replica count"
        cluster.events.record(owner.obj, "Warning", "InvalidDesiredReplicas", message)
        return True  # nothing to do until the annotation changes
    if workload is None:
        shapes = single(owner.obj, count=desired, min_count=min_count)
        created = desired == 0 or await ensure_workload(cluster, owner, shapes)
        return await _scale(cluster, owner, None, 0, desired) and created
    name = str((workload.get("metadata") or {}).get("name", ""))
    key = f"{owner.namespace}/{name}"
    count = committed(workload)
    if desired == 0:
        # Nothing wanted: no Workload (a podSet needs at least one pod), no replicas.
        if await _scale(cluster, owner, None, 0, desired):
            return await cluster.writer.delete(WORKLOADS, name, owner.namespace)
        return False
    shapes = single(owner.obj, count=desired, min_count=min_count)
    updated = await update_workload_spec(cluster, owner, workload, shapes, admitted=count > 0)
    if updated is None:
        return False
    workload = updated
    evicted = condition_true(workload, "Evicted")
    if evicted:
        if not await _scale(cluster, owner, None, 0, desired):
            return False
        if not count:
            return True
        # Not yet while the ReplicaSet is still stopping its pods; then the next commit gives
        # the quota back.
        return not cluster.live_pods(key)
    if count > desired:
        lowered = await _lower_committed(cluster, workload, desired)
        if lowered is None:
            return False
        workload, count = lowered, desired
    if await _scale(cluster, owner, workload if count else None, count, desired):
        return await _clear_stale_marks(cluster, key, count)
    return False


async def _take_over(cluster: Cluster, owner: Owner, workload: Obj | None) -> Obj | None:
    deployment = owner.obj
    replicas = (deployment.get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        replicas = 1
    count = committed(workload)
    patch: Obj = {
        "metadata": {
            "resourceVersion": version_of(deployment),
            "annotations": {DESIRED_REPLICAS_ANNOTATION: str(replicas), SCALED_REPLICAS_ANNOTATION: str(count)},
        },
        "spec": {
            "replicas": count,
            "template": {"metadata": {"labels": {WORKLOAD_LABEL: workload_name(owner.kind, owner.name)}}},
        },
    }
    return await cluster.writer.patch(owner.resource, owner.name, owner.namespace, patch)


async def _scale(cluster: Cluster, owner: Owner, workload: Obj | None, replicas: int, desired: int) -> bool:
    """Set ``replicas`` (and, with an admitted ``workload``, the flavors' placement), recording
    the count set and the ``desired`` one in their annotations, all in one write.

    True when the Deployment already was, or now is, as wanted.
    """
    deployment = owner.obj
    spec: Obj = {}
    metadata: Obj = {"resourceVersion": version_of(deployment)}
    annotations: Obj = {}
    if (deployment.get("spec") or {}).get("replicas") != replicas:
        spec["replicas"] = replicas
    current = annotations_of(deployment)
    for key, value in ((SCALED_REPLICAS_ANNOTATION, str(replicas)), (DESIRED_REPLICAS_ANNOTATION, str(desired))):
        if current.get(key) != value:
            annotations[key] = value
    if workload is not None:
        original = Placement.of(deployment)
        template_spec = placement_patch(deployment, workload, cluster.flavors(), original)
        if template_spec is not None:
            spec["template"] = {"spec": template_spec}
            annotations[ORIGINAL_TEMPLATE_ANNOTATION] = original.dumps()
    if not spec and not annotations:
        return True
    if annotations:
        metadata["annotations"] = annotations
    patch: Obj = {"metadata": metadata}
    if spec:
        patch["spec"] = spec
    return await cluster.writer.patch(owner.resource, owner.name, owner.namespace, patch) is not None


async def _lower_committed(cluster: Cluster, workload: Obj, count: int) -> Obj | None:
    """The user wants fewer replicas than are committed: the Workload goes down first."""
    status = workload.get("status") or {}
    admission = dict(status.get("admission") or {})
    admission["podSets"] = [
        {**ps, "count": min(int(ps.get("count", 0)), count)} for ps in admission.get("podSets") or []
    ]
    metadata = workload.get("metadata") or {}
    patch = {"metadata": {"resourceVersion": metadata.get("resourceVersion")}, "status": {"admission": admission}}
    name = str(metadata.get("name", ""))
    namespace = str(metadata.get("namespace", ""))
    return await cluster.writer.patch(WORKLOADS, name, namespace, patch, subresource="status")


async def _clear_stale_marks(cluster: Cluster, key: str, replicas: int) -> bool:
    """Remove victim marks that no pending scale-down explains.

    A pod is marked just before its Workload's committed count is lowered; if that
    write never happened (a crash, a conflict), the mark would make the next
    ordinary scale-down take that pod instead of the one its session chose.
    While more pods run than ``replicas``, a scale-down is under way and its marks
    stay; otherwise every mark is stale.
    """
    pods = [p for p in cluster.live_pods(key) if not (p.get("metadata") or {}).get("deletionTimestamp")]
    if len(pods) > replicas:
        return True  # a scale-down under way: its pods go when the ReplicaSet removes them
    cleared = True
    for pod in pods:
        metadata = pod.get("metadata") or {}
        if (metadata.get("annotations") or {}).get(_DELETION_COST) == VICTIM_DELETION_COST:
            patch: Obj = {"metadata": {"annotations": {_DELETION_COST: None}}}
            written = await cluster.writer.patch(PODS, str(metadata.get("name")), str(metadata.get("namespace")), patch)
            cleared = cleared and written is not None
    return cleared
