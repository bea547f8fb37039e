"""Typed decoding of Queues (private to :mod:`objects`); the design is :mod:`.typed`'s.

A Queue item of a JSON list is kept as its text (``typed_workloads.text_entry``) and
decoded here straight into Structs; the few checks the types cannot express (quantities,
durations, the enums, the rules that tie fields together, the catalog's flavors) are made
on them. The record of a plain, valid Queue is made without the walker's path strings;
anything else (any field the walker would report, a Queue read from a parsed mapping)
returns ``None`` and the walker reads the object, so every located error is the walker's.
The rare parts (a fair-sharing weight, a namespace selector) are read by the walker's own
readers, and any problem they find sends the whole Queue to the walker.

Every Struct forbids unknown fields and declares all known ones (``known.SCHEMAS``): a
Queue read here has none, so its text is not checked again (``find_unknown_fields``).
``tests/framework/test_typed_queues.py`` holds the two readers to the same record.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, TypeVar

import msgspec

from ..model import (
    FlavorFungibility,
    FlavorQuotas,
    FrozenDict,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
)
from ..quantity import MAX_AMOUNT, QuantityError, parse_duration, parse_quantity
from .fields import Catalog, Entry, Problem
from .known import OBJECT_META
from .local_queues import parse_label_selector
from .queues import (
    _BORROW,
    _PREFERENCE,
    _QUEUEING,
    _RECLAIM,
    _WHEN_CAN_BORROW,
    _WHEN_CAN_PREEMPT,
    _WITHIN_COHORT,
    _WITHIN_QUEUE,
    _weight,
    parse_queue,
)
from .records import (
    new_flavor_quotas,
    new_preemption,
    new_queue,
    new_resource_group,
    new_resource_quota,
)
from .typed import RawObject, _known_struct, _NotPlain
from .typed_pods import _NULL
from .typed_workloads import _walked

__all__ = ["fast_queue", "read_queue"]

T = TypeVar("T")


class _Resource(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    nominalQuota: Any = None
    borrowingLimit: Any = None
    lendingLimit: Any = None


class _Flavor(msgspec.Struct, forbid_unknown_fields=True):
    name: str | None = None
    resources: list[_Resource] | None = None


class _Group(msgspec.Struct, forbid_unknown_fields=True):
    coveredResources: list[str] | None = None
    flavors: list[_Flavor] | None = None


class _Borrow(msgspec.Struct, forbid_unknown_fields=True):
    policy: str | None = None
    maxPriorityThreshold: int | None = None


class _Preemption(msgspec.Struct, forbid_unknown_fields=True):
    withinQueue: str | None = None
    withinClusterQueue: str | None = None
    reclaimWithinCohort: str | None = None
    withinCohort: str | None = None
    borrowWithinCohort: _Borrow | None = None


class _Fungibility(msgspec.Struct, forbid_unknown_fields=True):
    whenCanBorrow: str | None = None
    whenCanPreempt: str | None = None
    preference: str | None = None


class _FairSharing(msgspec.Struct, forbid_unknown_fields=True):
    weight: Any = None


class _Requirement(msgspec.Struct, forbid_unknown_fields=True):
    key: Any = None
    operator: Any = None
    values: Any = None


class _Selector(msgspec.Struct, forbid_unknown_fields=True):
    matchLabels: Any = None
    matchExpressions: list[_Requirement] | None = None


class _Spec(msgspec.Struct, forbid_unknown_fields=True):
    parent: str | None = None
    resourceGroups: list[_Group] | None = None
    preemption: _Preemption | None = None
    flavorFungibility: _Fungibility | None = None
    queueingStrategy: str | None = None
    preemptMinRuntime: Any = None
    reclaimMinRuntime: Any = None
    fairSharing: _FairSharing | None = None
    namespaceSelector: _Selector | None = None


class _QueueText(msgspec.Struct, forbid_unknown_fields=True):
    """A Queue decoded from its own text; what is not read is skipped, not decoded."""

    apiVersion: msgspec.Raw = _NULL
    kind: msgspec.Raw = _NULL
    metadata: _known_struct("_QueueMeta", OBJECT_META, text=True) | None = None  # type: ignore[valid-type]
    spec: _Spec | None = None
    status: msgspec.Raw = _NULL


_QUEUE_TEXT = msgspec.json.Decoder(_QueueText)
_NO_SPEC = _Spec()
_NO_PREEMPTION = PreemptionPolicy()
_NO_FUNGIBILITY = FlavorFungibility()
_ONE = Fraction(1)


def read_queue(entry: Entry, catalog: Catalog) -> tuple[QueueSpec, list[Problem]]:
    """A Queue read the fast way when it is plain, else by the walker."""
    queue = fast_queue(entry, catalog)
    return (queue, []) if queue is not None else parse_queue(entry, catalog)


def fast_queue(entry: Entry, catalog: Catalog) -> QueueSpec | None:
    """The record of a plain, valid Queue kept as its text; ``None`` for the walker."""
    body = entry.body
    if type(body) is not RawObject or body.raw is None:
        return None
    try:
        spec = _QUEUE_TEXT.decode(body.raw).spec or _NO_SPEC
        queue = _queue_of(entry, catalog, spec)
    except (msgspec.ValidationError, msgspec.DecodeError, QuantityError, _NotPlain):
        return None
    body.raw = None  # read: nothing decodes it again
    return queue


def _queue_of(entry: Entry, catalog: Catalog, spec: _Spec) -> QueueSpec:
    """``parse_queue``'s record, its parts read in its order."""
    parent = spec.parent or None
    groups = spec.resourceGroups
    fair_sharing = spec.fairSharing
    weight = None if fair_sharing is None else fair_sharing.weight
    selector = spec.namespaceSelector
    return new_queue(
        name=entry.name,
        parent=parent,
        resource_groups=_resource_groups(groups, catalog, parent is not None) if groups else (),
        preemption=_preemption(spec.preemption) if spec.preemption is not None else _NO_PREEMPTION,
        fungibility=(
            _fungibility(spec.flavorFungibility) if spec.flavorFungibility is not None else _NO_FUNGIBILITY
        ),
        queueing_strategy=_choice(spec.queueingStrategy, _QUEUEING) or "BestEffortFIFO",
        preempt_min_runtime=_duration(spec.preemptMinRuntime),
        reclaim_min_runtime=_duration(spec.reclaimMinRuntime),
        defined=True,
        source=entry.file,
        fair_weight=_ONE if weight is None else _walked(entry, _weight, {"weight": weight}),
        namespace_selector=None if selector is None else _walked(
            entry, parse_label_selector, {"namespaceSelector": msgspec.to_builtins(selector)},
            "namespaceSelector", "spec",
        ),
    )


def _resource_groups(groups: list[_Group], catalog: Catalog, has_parent: bool) -> tuple[ResourceGroup, ...]:
    """The groups, each covering resources no group before it covers, each flavor known
    and listed once in the Queue."""
    made: list[ResourceGroup] = []
    covered_before: set[str] = set()
    listed: set[str] = set()
    for group in groups:
        covered, flavors = group.coveredResources, group.flavors
        if not covered or not flavors:
            raise _NotPlain  # at least one of each
        for resource in covered:
            if not resource or resource in covered_before:
                raise _NotPlain  # covered twice, here or in a group before
            covered_before.add(resource)
        quotas: list[FlavorQuotas] = []
        for flavor in flavors:
            name = flavor.name
            if not name or name in listed or name not in catalog.flavors:
                raise _NotPlain
            listed.add(name)
            quotas.append(new_flavor_quotas(name, _quotas(flavor.resources or (), covered, has_parent)))
        made.append(new_resource_group(tuple(covered), tuple(quotas)))
    return tuple(made)


def _quotas(
    resources: list[_Resource] | tuple[()], covered: list[str], has_parent: bool
) -> FrozenDict[str, ResourceQuota]:
    """A flavor's quotas, one for each covered resource and for nothing else."""
    quotas: dict[str, ResourceQuota] = {}
    for quota in resources:
        resource = quota.name
        if not resource or resource in quotas or quota.nominalQuota is None:
            raise _NotPlain
        nominal = parse_quantity(quota.nominalQuota, resource)
        borrowing = quota.borrowingLimit
        if borrowing is not None:
            if not has_parent:
                raise _NotPlain  # nobody to borrow from
            borrowing = parse_quantity(borrowing, resource)
        lending = quota.lendingLimit
        if lending is not None:
            lending = parse_quantity(lending, resource)
            if lending > nominal:
                raise _NotPlain
        quotas[resource] = new_resource_quota(nominal, borrowing, lending)
    if quotas.keys() != set(covered):
        raise _NotPlain
    return FrozenDict(sorted(quotas.items()))


def _choice(value: str | None, allowed: dict[str, T]) -> T | None:
    """An enum field's canonical value; ``None`` when absent."""
    if value is None:
        return None
    if value not in allowed:
        raise _NotPlain
    return allowed[value]


def _aliased(value: T | None, old: T | None) -> T | None:
    """A field also spelled the old way: both spellings must agree."""
    if value is not None and old is not None and value != old:
        raise _NotPlain
    return value if value is not None else old


def _preemption(doc: _Preemption) -> PreemptionPolicy:
    within_queue = _aliased(_choice(doc.withinQueue, _WITHIN_QUEUE), _choice(doc.withinClusterQueue, _WITHIN_QUEUE))
    reclaim = _aliased(_choice(doc.reclaimWithinCohort, _RECLAIM), _choice(doc.withinCohort, _WITHIN_COHORT))
    borrow = doc.borrowWithinCohort
    policy = (None if borrow is None else _choice(borrow.policy, _BORROW)) or "Never"
    threshold = None if borrow is None else borrow.maxPriorityThreshold
    if threshold is not None and not -MAX_AMOUNT - 1 <= threshold <= MAX_AMOUNT:
        raise _NotPlain
    if policy != "Never" and (reclaim or "Never") == "Never":
        raise _NotPlain
    return new_preemption(within_queue or "Never", reclaim or "Never", policy, threshold)


def _fungibility(doc: _Fungibility) -> FlavorFungibility:
    when_can_borrow = _choice(doc.whenCanBorrow, _WHEN_CAN_BORROW) or "MayStopSearch"
    when_can_preempt = _choice(doc.whenCanPreempt, _WHEN_CAN_PREEMPT) or "TryNextFlavor"
    preference = _choice(doc.preference, _PREFERENCE)
    if preference == "PreemptionOverBorrowing" and (
        when_can_borrow != "TryNextFlavor" or when_can_preempt != "TryNextFlavor"
    ):
        raise _NotPlain
    return FlavorFungibility(when_can_borrow, when_can_preempt, preference)


def _duration(value: Any) -> int | None:
    return None if value is None else parse_duration(value)
