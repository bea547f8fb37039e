"""Integrations: how one owner kind (a Job, a JobSet, a RayCluster…) becomes a Workload and obeys it.

Design note. The scheduler knows Workloads only; everything it decides reaches the
cluster through the owner of each Workload, and each owner kind has its own way of
running, holding and shrinking its pods. An :class:`Integration` is that way, for
one kind, and nothing else. It

* **names the kind** (:attr:`Integration.resource`: group, version, plural, kind) and
  its table in the configuration (:attr:`Integration.name`, ``[integrations.<name>]``);
* **describes it** (:meth:`Integration.pod_sets`): the pod sets it asks for, each with
  its pod template as the user wrote it, its count and its ``minCount``; the queue
  and the priority class are read the same way for every kind (the
  ``preemptd.io/queue-name`` label, the first template's ``priorityClassName``);
* **obeys its Workload** (:meth:`Integration.sync`): admitted — run (unsuspend or
  scale up) with the flavors' node selectors and tolerations in its pod templates;
  evicted — stop (suspend or scale to zero) and give the quota back once its pods
  are gone; shrunk — run fewer pods; no quota — stay held. ``sync`` is level
  triggered and idempotent: the owner reconciler calls it after every change and
  until it answers True (see ``reconciler``);
* **says when an evicted owner has stopped** (:meth:`Integration.stopped`): held
  (suspended, scaled to zero, its pods deleted) and none of its pods left alive.
  The inventory then reads its Workload as released, and the next commit writes
  the release together with the Workload's next status (``commit``, point 9), so
  ``sync`` never writes a release itself;
* **finds its pods**: every pod it makes carries the label ``preemptd.io/workload``
  with its Workload's name (:meth:`Integration.sync` puts it in the templates), which
  is how the backend counts a stopping owner's pods (``Cluster.live_pods``);
* **says what it may do** (:meth:`Integration.rules`): the RBAC rules its sync needs,
  from which ``preemptd manifests`` builds the ClusterRole;
* **says how a new owner is held** (:attr:`Integration.suspend_path`): the field the
  admission webhook (``daemon/webhook.py``) sets to true when an owner of an enabled
  integration is created, so that no pod starts before admission; None for a kind
  without such a switch (a Deployment is scaled to what is admitted on first sight,
  a grouped pod is held by the scheduling gate the webhook adds for the pod groups).

An owner is one object by default; an integration may group objects into one owner
(:meth:`Integration.owner_key`, :meth:`Integration.owner`: the pods of a pod group) and
read other kinds from the watch cache (:attr:`Integration.reads`, ``Cluster.cached``:
a TrainJob's training runtime).

Two bases do the common work. :class:`~.suspendable.Suspendable` is every kind that
has a ``suspend`` switch and a fixed list of pod templates (JobSet, the Kubeflow and
Ray kinds): a subclass says where the switch and the templates are.
``deployments.Scalable`` is every kind run as replicas of one template (Deployment,
StatefulSet): what the user wants is kept in ``preemptd.io/desired-replicas`` and
``spec.replicas`` is what is admitted. ``batch/v1`` Job keeps its own sync (``jobs``),
because the Job API lets scheduling directives change only before a Job starts.

Third-party integrations are found through the entry-point group
``preemptd.integrations`` (``registry``); the entry point names an
:class:`Integration` subclass (or instance). An integration whose kind is a custom
resource sets :attr:`Integration.optional`: while its CRD is not installed the kind
is simply empty, and it is watched from the moment the CRD appears.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from ..client import Obj, Resource
from ..owners import Cluster, PodSetShape
from ..workloads import QUEUE_LABEL

__all__ = [
    "Cluster",
    "Integration",
    "InvalidOwner",
    "Obj",
    "PodSetShape",
    "Resource",
    "Rule",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """One RBAC rule of the daemon's ClusterRole."""

    group: str  # "" for the core group
    resources: tuple[str, ...]
    verbs: tuple[str, ...]

    def to_dict(self) -> Obj:
        return {"apiGroups": [self.group], "resources": list(self.resources), "verbs": sorted(self.verbs)}


class InvalidOwner(Exception):
    """The owner cannot become a Workload as it is written; ``field`` says where."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class Integration:
    """One owner kind; see the module docstring. Subclass it and fill in the three parts."""

    name: ClassVar[str] = ""
    """The configuration table's name (``[integrations.<name>]``) and the entry point's."""
    resource: ClassVar[Resource]
    """Where the owners live and what they are called."""
    optional: ClassVar[bool] = False
    """The kind is a custom resource that may not be installed: tolerated, watched once it is."""
    label_selector: ClassVar[str] = QUEUE_LABEL
    """Which objects of the kind are watched (those that name a queue)."""
    reads: ClassVar[tuple[Resource, ...]] = ()
    """Other kinds :meth:`sync` reads (``Cluster.cached``): watched whole, and a change of
    one of them syncs every owner of this kind again (a TrainJob's training runtimes)."""
    suspend_path: ClassVar[tuple[str, ...] | None] = None
    """The keys of the kind's suspend switch (``("spec", "suspend")``), set to true at
    creation by the admission webhook; None when the kind has none."""

    def pod_sets(self, owner: Obj) -> list[PodSetShape]:
        """The pod sets ``owner`` asks for, in a fixed order; raise :class:`InvalidOwner` if unusable."""
        raise NotImplementedError

    async def sync(self, cluster: Cluster, owner: Obj, workload: Obj | None) -> bool:
        """Bring ``owner`` in line with ``workload`` (creating it when None); True when it is."""
        raise NotImplementedError

    def stopped(self, cluster: Cluster, owner: Obj, workload_key: str) -> bool:
        """The owner of the evicted Workload ``workload_key`` is held and has no live pod left:
        its quota is free, and the next commit says so (module docstring). False (the default):
        the integration gives its quota back in its own :meth:`sync`."""
        return False

    def rules(self) -> tuple[Rule, ...]:
        """The RBAC rules :meth:`sync` needs; by default, read and patch the owners, and
        list and watch what it :attr:`reads`."""
        own = Rule(self.resource.group, (self.resource.plural,), ("get", "list", "patch", "watch"))
        return (own, *(Rule(r.group, (r.plural,), ("list", "watch")) for r in self.reads))

    # -- which owner an object belongs to (one object is one owner, by default) ----------

    def owner_key(self, obj: Obj) -> str:
        """``namespace/name`` of the owner a watched object belongs to."""
        metadata = obj.get("metadata") or {}
        return f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '')}"

    def owner(self, store: Mapping[str, Obj], key: str) -> Obj | None:
        """The owner ``key`` as the watch cache holds it; None when it is gone."""
        return store.get(key)

    def observe(self, old: Obj | None, new: Obj | None) -> None:
        """A watched object of the kind changed (``new`` None: deleted), after the watch
        cache took it: for an integration that keeps an index of its own (the pod groups)."""

    def event_target(self, owner: Obj) -> Obj | None:
        """The object the owner's Events are about: the owner itself, unless it is not one
        object of the API (a pod group's Events are about its first pod); None: no Event."""
        return owner

    # -- read the same way for every kind ---------------------------------------------

    def queue(self, owner: Obj) -> str:
        labels = (owner.get("metadata") or {}).get("labels") or {}
        return str(labels.get(QUEUE_LABEL, "")) if isinstance(labels, Mapping) else ""

    def describe(self) -> str:
        """``Kind.group/version`` for listings and messages."""
        return f"{self.resource.kind}.{self.resource.api_version}"
