"""The scheduling model: small frozen records built once from objects.

Amounts are integers (see :mod:`quantity`), times are milliseconds since the
epoch, durations milliseconds. Keys of namespaced objects are ``namespace/name``.
Nothing here knows about YAML, Kubernetes clients or plugins.

Immutable all the way down: the records are frozen, sequences are tuples and
every mapping is a :class:`FrozenDict` (a record given a plain dict freezes a
copy of it). The daemon's caches and every session share these objects, so a
plugin that could change one would change what the next session sees; a write
raises ``TypeError`` in the plugin's own hook instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from operator import attrgetter
from sys import intern
from typing import Any, Literal, NoReturn, TypeVar, cast

__all__ = [
    "FR",
    "Admission",
    "Flavor",
    "FlavorFungibility",
    "FlavorQuotas",
    "FrozenDict",
    "LabelRequirement",
    "LabelSelector",
    "LocalQueue",
    "Node",
    "Pod",
    "PodFacts",
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
    "freeze",
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
SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]

K = TypeVar("K")
V = TypeVar("V")


class FrozenDict(dict[K, V]):
    """A dict that refuses every write: reads cost what a dict's cost (the hot loops
    read requests and labels millions of times), writes raise ``TypeError``."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("the scheduling model is read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self, *memo: Any) -> FrozenDict[K, V]:
        return self

    __deepcopy__ = __copy__

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


_EMPTY: FrozenDict[Any, Any] = FrozenDict()


def freeze(mapping: Mapping[K, V]) -> FrozenDict[K, V]:
    """``mapping`` as a :class:`FrozenDict` (itself if it is one already)."""
    if type(mapping) is FrozenDict:
        return mapping
    return FrozenDict(mapping)


def _freeze_fields(record: object, *names: str) -> None:
    for name in names:
        value = getattr(record, name)
        if type(value) is not FrozenDict:
            object.__setattr__(record, name, FrozenDict(value))


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
    node_labels: Mapping[str, str] = _EMPTY
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def __post_init__(self) -> None:
        _freeze_fields(self, "node_labels")
        object.__setattr__(self, "node_taints", tuple(self.node_taints))
        object.__setattr__(self, "tolerations", tuple(self.tolerations))


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    flavor: str
    resources: Mapping[str, ResourceQuota]

    def __post_init__(self) -> None:
        _freeze_fields(self, "resources")


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "covered", tuple(self.covered))
        object.__setattr__(self, "flavors", tuple(self.flavors))


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
class LabelRequirement:
    """One ``matchExpressions`` entry of a Kubernetes label selector."""

    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector (``matchLabels`` and ``matchExpressions``, ANDed).

    An empty selector selects everything, as in Kubernetes. ``nothing`` is the selector
    that selects nothing: what Kubernetes makes of a *missing* selector where the API
    says so (Kueue's ClusterQueue ``namespaceSelector``); preemptd's own Queue without a
    selector has none at all (``QueueSpec.namespace_selector`` is ``None``).
    """

    match_labels: Mapping[str, str] = _EMPTY
    match_expressions: tuple[LabelRequirement, ...] = ()
    nothing: bool = False

    def __post_init__(self) -> None:
        _freeze_fields(self, "match_labels")
        object.__setattr__(self, "match_expressions", tuple(self.match_expressions))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the API server puts on every Namespace: its own name."""


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """A namespaced name for a leaf Queue: ``spec.queueName`` of the namespace's Workloads."""

    namespace: str
    name: str
    queue: str
    source: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


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
    fair_weight: Fraction = Fraction(1)  # spec.fairSharing.weight (SEMANTICS §7.1)
    # spec.namespaceSelector: which namespaces' workloads may use it; None: every namespace.
    namespace_selector: LabelSelector | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_groups", tuple(self.resource_groups))

    def admits_namespace(self, labels: Mapping[str, str]) -> bool:
        """Whether a Namespace with these labels may use this queue."""
        selector = self.namespace_selector
        return selector is None or selector.matches(labels)


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    requests: Mapping[str, int]
    min_count: int | None = None
    node_selector: Mapping[str, str] = _EMPTY
    tolerations: tuple[Toleration, ...] = ()

    def __post_init__(self) -> None:
        _freeze_fields(self, "requests")
        if type(self.node_selector) is not FrozenDict:
            selector = self.node_selector
            object.__setattr__(self, "node_selector", FrozenDict(selector) if selector else _EMPTY)
        if type(self.tolerations) is not tuple:
            object.__setattr__(self, "tolerations", tuple(self.tolerations))


@dataclass(frozen=True, slots=True)
class PodSetAdmission:
    name: str
    count: int
    flavors: Mapping[str, str]  # resource -> flavor

    def __post_init__(self) -> None:
        _freeze_fields(self, "flavors")


@dataclass(frozen=True, slots=True)
class Admission:
    queue: str
    pod_sets: tuple[PodSetAdmission, ...]

    def __post_init__(self) -> None:
        if type(self.pod_sets) is not tuple:
            object.__setattr__(self, "pod_sets", tuple(self.pod_sets))


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
    flavor_scan: Mapping[str, Mapping[str, int]] = _EMPTY
    source: str = ""
    # spec.queueName when it named a LocalQueue of the namespace (``queue`` is then that
    # LocalQueue's Queue); None when it named a Queue itself.
    local_queue: str | None = None
    # metadata.labels and metadata.annotations, for plugins. Most Workloads have few or
    # none: without any, both are one shared empty mapping.
    labels: Mapping[str, str] = _EMPTY
    annotations: Mapping[str, str] = _EMPTY
    # Derived, kept: sessions ask for them all the time. "namespace/name" (interned: the
    # same text as its Pods' ``workload``), and whether an apps/v1 Deployment owns it
    # (SEMANTICS §6).
    key: str = field(init=False, repr=False, compare=False)
    is_deployment: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", intern(f"{self.namespace}/{self.name}"))
        object.__setattr__(self, "is_deployment", self.owner_kind == DEPLOYMENT)
        if type(self.pod_sets) is not tuple:
            object.__setattr__(self, "pod_sets", tuple(self.pod_sets))
        scan = self.flavor_scan
        if scan and (type(scan) is not FrozenDict or any(type(v) is not FrozenDict for v in scan.values())):
            object.__setattr__(self, "flavor_scan", FrozenDict({k: freeze(v) for k, v in scan.items()}))
        elif type(scan) is not FrozenDict:
            object.__setattr__(self, "flavor_scan", _EMPTY)
        if type(self.labels) is not FrozenDict or type(self.annotations) is not FrozenDict:
            for name in ("labels", "annotations"):  # a FrozenDict, empty or not, is kept
                if type(value := getattr(self, name)) is not FrozenDict:
                    object.__setattr__(self, name, FrozenDict(value) if value else _EMPTY)

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

    def __post_init__(self) -> None:
        _freeze_fields(self, "labels", "allocatable")
        if type(self.taints) is not tuple:
            object.__setattr__(self, "taints", tuple(self.taints))


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the Pods of a pod set say alike: all but requests, node, deletion, name's end."""

    namespace: str = ""
    workload: str | None = None  # "namespace/name" of the owning workload, from the label
    priority: int | None = None
    created: int = 0
    labels: Mapping[str, str] = _EMPTY
    force_delete: bool = False  # annotation preemptd.io/force-delete: "true"
    deletion_cost: int = 0
    phase: str = "Running"
    source: str = ""
    deleting: bool = False  # deletionTimestamp set
    stem: str = ""  # the name up to and with its last "-" (last: not read as the Pod's own)


@dataclass(frozen=True, slots=True, init=False)
class Pod:
    """A Pod. ``facts`` holds what it says alike with its pod set's other Pods (read as its own)
    and its name up to the last "-", ``tail`` the rest; the constructor takes each value given over those."""

    tail: str
    requests: Mapping[str, int]
    node_name: str | None = None
    facts: PodFacts = PodFacts()

    def __init__(
        self, namespace: str | None = None, name: str | None = None, requests: Mapping[str, int] = _EMPTY, node_name: str | None = None,
        workload: str | None = None, priority: int | None = None, created: int | None = None, deleting: bool | None = None, force_delete: bool | None = None,
        deletion_cost: int | None = None, phase: str | None = None, labels: Mapping[str, str] | None = None, source: str | None = None, facts: PodFacts = PodFacts(), tail: str = "",
    ) -> None:  # fmt: skip
        labels = labels if labels is None else freeze(labels) if labels else _EMPTY
        given = (namespace, workload, priority, created, labels, force_delete, deletion_cost, phase, source, deleting)
        changed: dict[str, Any] = {k: v for k, v in zip(PodFacts.__slots__[:-1], given, strict=True) if v is not None}
        if name is not None:
            cut = name.rfind("-") + 1
            changed["stem"], tail = name[:cut], name[cut:]
        facts = replace(facts, **changed) if changed else facts
        for slot, value in zip(Pod.__slots__, (tail, freeze(requests), node_name, facts), strict=True):
            object.__setattr__(self, slot, value)

    # The facts as the Pod's own: properties, each typed as the value it gives.
    namespace, workload, priority, created, labels, force_delete, deletion_cost, phase, source, deleting = cast(
        tuple[str, str | None, int | None, int, Mapping[str, str], bool, int, str, str, bool],
        tuple(property(attrgetter(f"facts.{name}")) for name in PodFacts.__slots__[:-1]))  # fmt: skip
    name = cast(str, property(lambda self: self.facts.stem + self.tail))
    key = cast(str, property(lambda self: f"{self.facts.namespace}/{self.facts.stem}{self.tail}"))
    holds_resources = cast(bool, property(lambda self: self.node_name is not None and self.facts.phase not in ("Succeeded", "Failed")))
    """Bound and not finished: it occupies room on its node (SEMANTICS §6)."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
