"""The scheduling model: small frozen records built once from objects.

Amounts are integers (see :mod:`quantity`), times are milliseconds since the
epoch, durations milliseconds. Keys of namespaced objects are ``namespace/name``.
Nothing here knows about YAML, Kubernetes clients or plugins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "FR",
    "Admission",
    "Flavor",
    "FlavorFungibility",
    "FlavorQuotas",
    "Node",
    "Pod",
    "PodSet",
    "PodSetAdmission",
    "PreemptionPolicy",
    "PriorityClass",
    "QueueSpec",
    "ResourceGroup",
    "ResourceQuota",
    "Taint",
    "Toleration",
    "Workload",
    "tolerates",
]

FR = tuple[str, str]
"""A flavor-resource pair ``(flavor, resource)``: the unit of quota accounting."""

WithinQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohort = Literal["Never", "LowerPriority"]
WhenCan = Literal["MayStopSearch", "TryNextFlavor"]
Preference = Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"]
QueueingStrategy = Literal["BestEffortFIFO", "StrictFIFO"]

GPU_RESOURCES = frozenset({"nvidia.com/gpu", "amd.com/gpu"})
DEPLOYMENT = "Deployment"
FORCE_DELETE_ANNOTATION = "preemptd.io/force-delete"
WORKLOAD_LABEL = "preemptd.io/workload"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # "Equal" | "Exists"
    value: str = ""
    effect: str = ""  # "" matches every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


def tolerates(tolerations: tuple[Toleration, ...], taint: Taint) -> bool:
    """Whether any toleration tolerates ``taint`` (Kubernetes' rule)."""
    return any(t.tolerates(taint) for t in tolerations)


@dataclass(frozen=True, slots=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    within_queue: WithinQueue = "Never"
    reclaim_within_cohort: ReclaimWithinCohort = "Never"
    borrow_within_cohort: BorrowWithinCohort = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: WhenCan = "MayStopSearch"
    when_can_preempt: WhenCan = "TryNextFlavor"
    preference: Preference | None = None  # None: not set; the plugin picks the default


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A Queue object, or an implicit cohort (``defined=False``) named only as a parent."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    preemption: PreemptionPolicy = PreemptionPolicy()
    fungibility: FlavorFungibility = FlavorFungibility()
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    preempt_min_runtime: int | None = None
    reclaim_min_runtime: int | None = None
    defined: bool = True
    source: str = ""


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, int]
    min_count: int | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class PodSetAdmission:
    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor


@dataclass(frozen=True, slots=True)
class Admission:
    queue: str
    pod_sets: tuple[PodSetAdmission, ...]


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    queue: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    created: int = 0
    uid: str = ""
    owner_kind: str | None = None
    owner_name: str | None = None
    admission: Admission | None = None
    admitted_at: int | None = None
    evicted: bool = False
    flavor_scan: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    source: str = ""
    # Derived, kept: sessions ask for them all the time. "namespace/name", and
    # whether an apps/v1 Deployment owns it (SEMANTICS §6).
    key: str = field(init=False, repr=False, compare=False)
    is_deployment: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "is_deployment", self.owner_kind == DEPLOYMENT)

    @property
    def tiebreak(self) -> tuple[str, str, str]:
        """SEMANTICS §2: ``(metadata.uid or "", namespace, name)``."""
        return (self.uid, self.namespace, self.name)

    @property
    def is_elastic(self) -> bool:
        return any(ps.min_count is not None for ps in self.pod_sets)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    requests: Mapping[str, int]
    node_name: str | None = None
    workload: str | None = None  # "namespace/name" of the owning workload, from the label
    priority: int | None = None
    created: int = 0
    deleting: bool = False  # deletionTimestamp set
    force_delete: bool = False  # annotation preemptd.io/force-delete: "true"
    deletion_cost: int = 0
    phase: str = "Running"
    labels: Mapping[str, str] = field(default_factory=dict)
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def holds_resources(self) -> bool:
        """Bound and not finished: it occupies room on its node (SEMANTICS §6)."""
        return self.node_name is not None and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
