"""Kueue's own objects (``kueue.x-k8s.io``) -> the model, and their status written back.

A Kueue installation is read as it is dumped by ``kubectl get ... -A -o yaml``:
ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload and
WorkloadPriorityClass of every version Kueue serves (ClusterQueue, LocalQueue,
ResourceFlavor, Workload, WorkloadPriorityClass: ``v1beta1`` and ``v1beta2``;
Cohort also ``v1alpha1``). The core PriorityClass and Namespace are preemptd's own
kinds already; the Namespaces' labels are handed over (:attr:`KueueObjects.namespaces`)
for ClusterQueue namespace selectors.

Mapping (README, "Kueue objects"):

* ClusterQueue -> a leaf Queue; its cohort (``spec.cohort`` in v1beta1,
  ``spec.cohortName`` in v1beta2) is the parent. The quota, preemption,
  fungibility, queueing and fair-sharing fields have Kueue's shape already.
* Cohort -> a parent Queue (``spec.parent`` in v1alpha1, ``spec.parentName``
  after), with its own ``resourceGroups``. Kueue keeps ClusterQueue and Cohort
  names apart and preemptd's queue tree has one name space, so a cohort that
  shares its name with a ClusterQueue gets the queue name ``NAME-cohort`` (or
  ``NAME-cohort-2``... if that is taken too); every other cohort keeps its name.
* Workload -> a Workload on the ClusterQueue its LocalQueue (``spec.queueName``
  in its namespace) names. Pod sets come from each pod template (containers'
  requests, or their limits where a request is not given, as the API server
  defaults them; the largest init container where it is larger; plus the pod
  overhead), with ``count``, ``minCount``, ``nodeSelector`` and
  ``tolerations``. ``status.admission`` (``clusterQueue`` and
  ``podSetAssignments``) is the quota it holds while ``QuotaReserved`` is not
  ``False``; ``Evicted`` marks it leaving; ``Finished`` takes it out of the
  snapshot. The priority is ``spec.priority`` when set (Kueue stores the
  resolved value there), else the class named by ``priorityClassName`` and
  ``priorityClassSource`` (v1beta1) or ``priorityClassRef`` (v1beta2).
* Kueue's admission rules that preemptd has no field for are applied here to
  Kueue's workloads only: a ClusterQueue's ``namespaceSelector`` (none admits
  no namespace, ``{}`` admits all), ``stopPolicy`` on a ClusterQueue or
  LocalQueue, and ``spec.active: false``. A pending workload they stop is
  pending ``Inadmissible`` (:attr:`KueueObjects.held`); an admitted one that
  Kueue would drain is leaving (``evicted``).

Each object is read with located errors and isolated like preemptd's own kinds; a
field of the other version (``cohort`` in a v1beta2 ClusterQueue) is an error, and
fields preemptd does not act on (admission checks, topology, ...) are warnings.

Writing back (``kueue_status``): the status Kueue itself would write, so that
``cycle --apply`` steps sessions in Kueue's format. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..model import (
    Flavor,
    FlavorFungibility,
    LabelSelector,
    PreemptionPolicy,
    QueueSpec,
    WhenCan,
    Workload,
)
from .fields import Catalog, Entry, Fields, Problem, child
from .kueue_status import commit_admitted, commit_pending, commit_preempted, is_kueue_workload
from .kueue_workloads import (
    GROUP,
    KINDS,
    ONLY_KUEUE,
    STOP_POLICIES,
    LocalQueueRef,
    Lookups,
    QueueRules,
    finished,
    other_version,
    read_version,
)
from .local_queues import parse_label_selector
from .nodes import parse_flavor
from .queues import (
    _BORROW,
    _PREFERENCE,
    _QUEUEING,
    _RECLAIM,
    _WHEN_CAN_BORROW,
    _WHEN_CAN_PREEMPT,
    _WITHIN_QUEUE,
    _resource_groups,
    _weight,
)

__all__ = [
    "GROUP",
    "READ_KINDS",
    "KueueObjects",
    "cohort_queue_names",
    "commit_admitted",
    "commit_pending",
    "commit_preempted",
    "is_kueue_workload",
    "scope",
]

T = TypeVar("T")

# Kueue's enum spellings are preemptd's own (.queues); v1beta2 dropped `Borrow`/`Preempt`,
# v1beta1's deprecated first spellings of MayStopSearch.
_WHEN_CAN: dict[str, WhenCan] = {"MayStopSearch": "MayStopSearch", "TryNextFlavor": "TryNextFlavor"}

# Spec fields preemptd does not act on: a warning each, once per object.
_IGNORED: dict[str, tuple[str, ...]] = {
    "ClusterQueue": ("admissionChecks", "admissionChecksStrategy", "admissionScope", "concurrentAdmissionPolicy"),
    "LocalQueue": ("fairSharing",), "ResourceFlavor": ("topologyName",),
}



READ_KINDS = frozenset(KINDS)  # every kind scope() may answer for


def scope(kind: str, api_version: object) -> bool | None:
    """Whether an object read here is namespaced; ``None`` for one that is not read here.

    Read here: Kueue's kinds (in group ``kueue.x-k8s.io``; ClusterQueue, Cohort,
    LocalQueue and WorkloadPriorityClass also without an apiVersion). A Kueue kind preemptd does not read (AdmissionCheck, Topology, ...) is
    ``None``: the intake skips it with a warning like any unknown kind.
    """
    if api_version is None:
        return KINDS[kind][0] if kind in ONLY_KUEUE else None
    if not isinstance(api_version, str) or api_version.rpartition("/")[0] != GROUP:
        return None
    known = KINDS.get(kind)
    return known[0] if known is not None else None


def cohort_queue_names(cluster_queues: Iterable[str], cohorts: Iterable[str]) -> dict[str, str]:
    """Cohort name -> its queue name: itself, unless a ClusterQueue has that name.

    Then ``NAME-cohort``, or ``NAME-cohort-N`` (N = 2, 3, ...) when that is taken by
    a ClusterQueue or a cohort as well. Depends only on the two sets of names.
    """
    queues = set(cluster_queues)
    names = set(cohorts)
    taken = queues | names
    renamed: dict[str, str] = {}
    for name in sorted(names):
        if name not in queues:
            renamed[name] = name
            continue
        candidate, number = f"{name}-cohort", 2
        while candidate in taken:
            candidate, number = f"{name}-cohort-{number}", number + 1
        taken.add(candidate)
        renamed[name] = candidate
    return renamed


@dataclass(slots=True)
class KueueObjects(Lookups):
    """The Kueue objects of one snapshot, read with everything they refer to.

    Built from the intake's entries of Kueue's kinds (:meth:`build`); hands the
    objects that become model records to :func:`~preemptd.framework.objects.parse_objects`
    under the kind and key preemptd reads them as (:meth:`entries`), and reads
    them when asked (:meth:`reader`). LocalQueues and WorkloadPriorityClasses are
    only looked up by Kueue's Workloads; they are read here, with their problems in
    :attr:`problems`. The Namespaces' labels are set by the caller, who reads them.
    """

    by_kind: dict[str, list[Entry]] = field(default_factory=dict)
    ids: set[int] = field(default_factory=set)  # id() of every entry read here
    queue_names: dict[str, str] = field(default_factory=dict)  # cohort name -> queue name
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @classmethod
    def build(cls, entries: Iterable[Entry]) -> KueueObjects:
        objects = cls()
        for entry in entries:
            objects.by_kind.setdefault(entry.kind, []).append(entry)
            objects.ids.add(id(entry))
        cluster_queues = {entry.name for entry in objects.by_kind.get("ClusterQueue", ())}
        cohorts = {entry.name for entry in objects.by_kind.get("Cohort", ())}
        for entry in objects.by_kind.get("ClusterQueue", ()):
            cohorts.update(_names(entry.body, ("cohort", "cohortName")))
        for entry in objects.by_kind.get("Cohort", ()):
            cohorts.update(_names(entry.body, ("parent", "parentName")))
        objects.queue_names = cohort_queue_names(cluster_queues, cohorts)
        objects._read_lookups()
        return objects

    def entries(self) -> Iterable[tuple[str, str, Entry]]:
        """``(preemptd kind, key, entry)`` for every object that becomes a model record.

        A Finished Workload is left out: it holds nothing and waits for nothing.
        """
        for entry in self.by_kind.get("ResourceFlavor", ()):
            yield "ResourceFlavor", entry.name, entry
        for entry in self.by_kind.get("ClusterQueue", ()):
            yield "Queue", entry.name, entry
        for entry in self.by_kind.get("Cohort", ()):
            yield "Queue", self.queue_names.get(entry.name, entry.name), entry
        for entry in self.by_kind.get("Workload", ()):
            if not finished(entry.body):
                yield "Workload", entry.key, entry

    def reader(
        self, parse: Callable[[Entry], tuple[T, list[Problem]]], catalog: Catalog | None = None
    ) -> Callable[[Entry], tuple[T, list[Problem]]]:
        """``parse`` for preemptd's own objects; Kueue's are read here (by their kind)."""
        if not self.ids:
            return parse  # no Kueue object: nothing in between
        readers: dict[str, Callable[[Entry], tuple[Any, list[Problem]]]] = {
            "ResourceFlavor": self._flavor,
            "ClusterQueue": lambda entry: self._cluster_queue(entry, catalog or Catalog()),
            "Cohort": lambda entry: self._cohort(entry, catalog or Catalog()),
            "Workload": lambda entry: self.read_workload(entry, catalog or Catalog()),
        }

        def read(entry: Entry) -> tuple[T, list[Problem]]:
            if not self._is_kueue(entry):
                return parse(entry)
            try:
                value: T
                value, problems = readers[entry.kind](entry)
            except Exception as exc:  # the net under the readers, as objects.guarded
                text = str(exc)
                text = text if len(text) <= 200 else text[:197] + "..."
                problem = Problem(entry.file, entry.label, "", f"cannot be read: {type(exc).__name__}: {text}")
                return self._fallback(entry), [problem]
            return value, problems

        return read

    def _is_kueue(self, entry: Entry) -> bool:
        return id(entry) in self.ids

    def _fallback(self, entry: Entry) -> Any:
        if entry.kind == "ResourceFlavor":
            return Flavor(entry.name)
        if entry.kind == "Workload":
            return Workload(entry.namespace or "default", entry.name, "", (), source=entry.file)
        name = entry.name if entry.kind == "ClusterQueue" else self.queue_names.get(entry.name, entry.name)
        parents = _names(entry.body, ("cohort", "cohortName", "parent", "parentName"))
        parent = self.queue_names.get(parents[0], parents[0]) if parents else None
        return QueueSpec(name, parent=parent, source=entry.file)

    # --- the objects only Kueue's Workloads refer to --------------------------------

    def _read_lookups(self) -> None:
        for key, copies in _by_key(self.by_kind.get("LocalQueue", ())).items():
            read = [self._local_queue(entry) for entry in copies]
            self._record(copies, [problems for _, problems in read])
            if len(copies) == 1 and not read[0][1]:
                self.local_queues[key] = read[0][0]
            else:
                self.invalid_local_queues.add(key)
        for key, copies in _by_key(self.by_kind.get("WorkloadPriorityClass", ())).items():
            read_classes = [self._class(entry) for entry in copies]
            self._record(copies, [problems for _, problems in read_classes])
            if len(copies) == 1 and not read_classes[0][1]:
                self.classes[key] = read_classes[0][0]
            else:
                self.invalid_classes.add(key)

    def _record(self, copies: list[Entry], problems: list[list[Problem]]) -> None:
        for own in problems:
            self.problems.extend(own)
        if len(copies) > 1:
            files = ", ".join(sorted(entry.file for entry in copies))
            for entry in copies:
                self.problems.append(
                    Problem(
                        entry.file,
                        entry.label,
                        "metadata.name",
                        f"{entry.kind} {entry.key!r} is defined {len(copies)} times (in {files}); "
                        "every copy is ignored",
                    )
                )

    def _local_queue(self, entry: Entry) -> tuple[LocalQueueRef, list[Problem]]:
        fields = Fields(entry)
        read_version(fields, entry)
        spec = fields.section(entry.body, "spec", "")
        cluster_queue = fields.text(spec, "clusterQueue", "spec", required=True) or ""
        stop = fields.choice(spec, "stopPolicy", "spec", STOP_POLICIES) or "None"
        self._ignored(entry, spec)
        return LocalQueueRef(cluster_queue, stop), fields.problems

    def _class(self, entry: Entry) -> tuple[int, list[Problem]]:
        fields = Fields(entry)
        read_version(fields, entry)
        value = fields.integer(entry.body, "value", "", required=True)
        if value is not None and not -(2**31) <= value < 2**31:
            fields.report("value", f"must fit 32 bits, got {value}")
        return value or 0, fields.problems

    def _ignored(self, entry: Entry, spec: Mapping[str, Any]) -> None:
        for name in _IGNORED.get(entry.kind, ()):
            if spec.get(name) not in (None, [], {}):
                self.warnings.append(
                    Problem(entry.file, entry.label, f"spec.{name}", "preemptd does not apply this; ignored")
                )

    # --- queues -------------------------------------------------------------------------

    def _flavor(self, entry: Entry) -> tuple[Flavor, list[Problem]]:
        fields = Fields(entry)
        read_version(fields, entry)
        flavor, problems = parse_flavor(entry)
        self._ignored(entry, entry.body.get("spec") or {})
        return flavor, fields.problems + problems

    def _parent(self, fields: Fields, spec: Mapping[str, Any], name: str) -> str | None:
        cohort = fields.text(spec, name, "spec") or None
        return self.queue_names.get(cohort, cohort) if cohort is not None else None

    def _cluster_queue(self, entry: Entry, catalog: Catalog) -> tuple[QueueSpec, list[Problem]]:
        fields = Fields(entry)
        version = read_version(fields, entry)
        spec = fields.section(entry.body, "spec", "")
        other_version(fields, entry, version, spec, "spec")
        cohort_field = "cohort" if version == "v1beta1" else "cohortName"
        parent = self._parent(fields, spec, cohort_field)
        groups = _resource_groups(fields, spec, catalog, has_parent=parent is not None)
        queue = QueueSpec(
            name=entry.name,
            parent=parent,
            resource_groups=groups,
            preemption=_preemption(fields, spec),
            fungibility=_fungibility(fields, spec, version),
            queueing_strategy=fields.choice(spec, "queueingStrategy", "spec", _QUEUEING) or "BestEffortFIFO",
            source=entry.file,
            fair_weight=_weight(fields, fields.section(spec, "fairSharing", "spec")),
        )
        selector = parse_label_selector(fields, spec, "namespaceSelector", "spec")
        stop = fields.choice(spec, "stopPolicy", "spec", STOP_POLICIES) or "None"
        self.rules[entry.name] = QueueRules(selector or LabelSelector(nothing=True), stop)
        self._ignored(entry, spec)
        return queue, _renamed(fields.problems, f"spec.{cohort_field}")

    def _cohort(self, entry: Entry, catalog: Catalog) -> tuple[QueueSpec, list[Problem]]:
        fields = Fields(entry)
        version = read_version(fields, entry)
        spec = fields.section(entry.body, "spec", "")
        other_version(fields, entry, version, spec, "spec")
        parent_field = "parent" if version == "v1alpha1" else "parentName"
        parent = self._parent(fields, spec, parent_field)
        queue = QueueSpec(
            name=self.queue_names.get(entry.name, entry.name),
            parent=parent,
            resource_groups=_resource_groups(fields, spec, catalog, has_parent=parent is not None),
            source=entry.file,
            fair_weight=_weight(fields, fields.section(spec, "fairSharing", "spec")),
        )
        return queue, _renamed(fields.problems, f"spec.{parent_field}")



def _names(body: Mapping[str, Any], keys: tuple[str, ...]) -> list[str]:
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        return []
    return [spec[key] for key in keys if isinstance(spec.get(key), str) and spec[key]]


def _by_key(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    found: dict[str, list[Entry]] = {}
    for entry in entries:
        found.setdefault(entry.key, []).append(entry)
    return dict(sorted(found.items()))


def _renamed(problems: list[Problem], parent_field: str) -> list[Problem]:
    """The quota reader's messages name preemptd's ``spec.parent``; say Kueue's field."""
    return [
        Problem(p.file, p.object, p.path, p.message.replace("spec.parent", parent_field))
        if "spec.parent" in p.message
        else p
        for p in problems
    ]


def _preemption(fields: Fields, spec: Mapping[str, Any]) -> PreemptionPolicy:
    at = "spec.preemption"
    preemption = fields.section(spec, "preemption", "spec")
    within = fields.choice(preemption, "withinClusterQueue", at, _WITHIN_QUEUE) or "Never"
    reclaim = fields.choice(preemption, "reclaimWithinCohort", at, _RECLAIM) or "Never"
    borrow_at = child(at, "borrowWithinCohort")
    borrow = fields.section(preemption, "borrowWithinCohort", at)
    policy = fields.choice(borrow, "policy", borrow_at, _BORROW) or "Never"
    threshold = fields.integer(borrow, "maxPriorityThreshold", borrow_at)
    if policy != "Never" and reclaim == "Never":
        fields.report(
            child(borrow_at, "policy"),
            f"borrowWithinCohort.policy {policy} needs reclaimWithinCohort other than Never",
        )
    return PreemptionPolicy(within, reclaim, policy, threshold)


def _fungibility(fields: Fields, spec: Mapping[str, Any], version: str) -> FlavorFungibility:
    at = "spec.flavorFungibility"
    section = fields.section(spec, "flavorFungibility", "spec")
    old = version == "v1beta1"
    borrow = fields.choice(section, "whenCanBorrow", at, _WHEN_CAN_BORROW if old else _WHEN_CAN)
    preempt = fields.choice(section, "whenCanPreempt", at, _WHEN_CAN_PREEMPT if old else _WHEN_CAN)
    preference = fields.choice(section, "preference", at, _PREFERENCE)
    result = FlavorFungibility(borrow or "MayStopSearch", preempt or "TryNextFlavor", preference)
    if preference is not None and (result.when_can_borrow, result.when_can_preempt) != (
        "TryNextFlavor",
        "TryNextFlavor",
    ):
        fields.report(
            child(at, "preference"),
            "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor",
        )
    return result





