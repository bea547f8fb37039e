"""Queue objects and the queue tree (private to :mod:`objects`).

A Queue is read on its own first (:func:`parse_queue`); the tree is checked
once every Queue is read (:func:`build_queue_tree`), because a cycle, an
invalid ancestor or too deep a tree is a property of the tree, not of one
object.

Depth. A queue tree may be at most :data:`MAX_DEPTH` levels deep (a root is
level 1; an implicit cohort counts as a level). The Queue that would be one
level deeper is an error at its ``spec.parent``, and, as for any invalid
Queue, its whole tree is out. Everything here walks the tree without
recursion, and the limit keeps the rest of the code (quota, snapshot,
plugins' walks up and down the tree) well within bounds on any input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, TypeVar

from ..model import (
    BorrowWithinCohort,
    FlavorFungibility,
    FlavorQuotas,
    PreemptionPolicy,
    Preference,
    QueueingStrategy,
    QueueSpec,
    ReclaimWithinCohort,
    ResourceGroup,
    ResourceQuota,
    WhenCan,
    WithinQueue,
)
from ..quantity import format_quantity
from .fields import Catalog, Entry, Fields, Parsed, Problem, child, describe, shown
from .local_queues import parse_label_selector

__all__ = ["MAX_DEPTH", "QueueTree", "build_queue_tree", "parse_queue"]

MAX_DEPTH = 64
"""The deepest queue tree accepted, in levels (real trees have a handful)."""

T = TypeVar("T")

_WITHIN_QUEUE: dict[str, WithinQueue] = {
    "Never": "Never",
    "LowerPriority": "LowerPriority",
    "LowerOrNewerEqualPriority": "LowerOrNewerEqualPriority",
}
_RECLAIM: dict[str, ReclaimWithinCohort] = {
    "Never": "Never",
    "LowerPriority": "LowerPriority",
    "Any": "Any",
}
# `withinCohort` is KEP-83's spelling of `reclaimWithinCohort` (CONTRACT §1 aliases).
_WITHIN_COHORT: dict[str, ReclaimWithinCohort] = {
    **_RECLAIM,
    "ReclaimFromLowerPriority": "LowerPriority",
    "ReclaimFromAny": "Any",
    "ReclaimAny": "Any",
}
_BORROW: dict[str, BorrowWithinCohort] = {"Never": "Never", "LowerPriority": "LowerPriority"}
# `Borrow` and `Preempt` are KEP-582's spellings of MayStopSearch.
_WHEN_CAN_BORROW: dict[str, WhenCan] = {
    "MayStopSearch": "MayStopSearch",
    "TryNextFlavor": "TryNextFlavor",
    "Borrow": "MayStopSearch",
}
_WHEN_CAN_PREEMPT: dict[str, WhenCan] = {
    "MayStopSearch": "MayStopSearch",
    "TryNextFlavor": "TryNextFlavor",
    "Preempt": "MayStopSearch",
}
_PREFERENCE: dict[str, Preference] = {
    "BorrowingOverPreemption": "BorrowingOverPreemption",
    "PreemptionOverBorrowing": "PreemptionOverBorrowing",
}
_QUEUEING: dict[str, QueueingStrategy] = {
    "BestEffortFIFO": "BestEffortFIFO",
    "StrictFIFO": "StrictFIFO",
}


def parse_queue(entry: Entry, catalog: Catalog) -> tuple[QueueSpec, list[Problem]]:
    fields = Fields(entry)
    spec = fields.section(entry.body, "spec", "")
    parent = fields.text(spec, "parent", "spec") or None
    queue = QueueSpec(
        name=entry.name,
        parent=parent,
        resource_groups=_resource_groups(fields, spec, catalog, has_parent=parent is not None),
        preemption=_preemption(fields, spec),
        fungibility=_fungibility(fields, spec),
        queueing_strategy=fields.choice(spec, "queueingStrategy", "spec", _QUEUEING)
        or "BestEffortFIFO",
        preempt_min_runtime=fields.duration(spec, "preemptMinRuntime", "spec"),
        reclaim_min_runtime=fields.duration(spec, "reclaimMinRuntime", "spec"),
        source=entry.file,
        fair_weight=_weight(fields, fields.section(spec, "fairSharing", "spec")),
        namespace_selector=parse_label_selector(fields, spec, "namespaceSelector", "spec"),
    )
    return queue, fields.problems


_WEIGHT_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _weight(fields: Fields, section: Mapping[str, Any]) -> Fraction:
    """``spec.fairSharing.weight``, exactly (CONTRACT §1): default 1; 0, or above 10^-9."""
    value = section.get("weight")
    if value is None:
        return Fraction(1)
    text = str(value).strip() if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    suffix = text[-1:] if text[-1:] in _WEIGHT_SUFFIX else ""
    try:
        weight = Fraction(Decimal(text[: len(text) - len(suffix)])) * Fraction(10) ** _WEIGHT_SUFFIX[suffix]
        valid = weight.denominator > 0 and Decimal(text[: len(text) - len(suffix)]).is_finite()
    except (InvalidOperation, ValueError, OverflowError):
        valid = False
    if not valid or weight < 0 or 0 < weight <= Fraction(1, 10**9):
        fields.report("spec.fairSharing.weight", f"expected a weight of 0 or above 1e-9, got {shown(value)}")
        return Fraction(1)
    return weight


def _resource_groups(
    fields: Fields, spec: Mapping[str, Any], catalog: Catalog, *, has_parent: bool
) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    covered_at: dict[str, str] = {}  # resource -> path of the group covering it
    listed_at: dict[str, str] = {}  # flavor -> path where this queue lists it
    for group_path, group in fields.records(spec, "resourceGroups", "spec"):
        covered: list[str] = []
        for path, resource in fields.items(group, "coveredResources", group_path, non_empty=True):
            if not isinstance(resource, str) or not resource:
                fields.report(path, f"expected a resource name, got {shown(resource)}")
                continue
            if resource in covered:
                fields.report(path, f"resource {resource!r} is listed twice in coveredResources")
            elif resource in covered_at:
                fields.report(
                    path, f"resource {resource!r} is already covered by {covered_at[resource]}"
                )
            else:
                covered_at[resource] = group_path
            covered.append(resource)
        flavors: list[FlavorQuotas] = []
        for flavor_path, flavor in fields.records(group, "flavors", group_path, non_empty=True):
            name = fields.text(flavor, "name", flavor_path, required=True)
            if name is not None:
                name_path = child(flavor_path, "name")
                if name in listed_at:
                    fields.report(
                        name_path, f"flavor {name!r} is listed twice (first at {listed_at[name]})"
                    )
                else:
                    listed_at[name] = flavor_path
                problem = catalog.flavor_problem(name)
                if problem is not None:
                    fields.report(name_path, problem)
            quotas = _quotas(fields, flavor, flavor_path, covered, has_parent=has_parent)
            flavors.append(FlavorQuotas(name or "", quotas))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _quotas(
    fields: Fields,
    flavor: Mapping[str, Any],
    flavor_path: str,
    covered: list[str],
    *,
    has_parent: bool,
) -> dict[str, ResourceQuota]:
    quotas: dict[str, ResourceQuota] = {}
    for path, quota in fields.records(flavor, "resources", flavor_path):
        resource = fields.text(quota, "name", path, required=True)
        if resource is not None and resource in quotas:
            fields.report(child(path, "name"), f"resource {resource!r} is listed twice")
        nominal = fields.quantity(quota, "nominalQuota", path, resource or "", required=True)
        borrowing = fields.quantity(quota, "borrowingLimit", path, resource or "")
        lending = fields.quantity(quota, "lendingLimit", path, resource or "")
        if borrowing is not None and not has_parent:
            fields.report(
                child(path, "borrowingLimit"),
                "borrowingLimit needs spec.parent: a queue without a parent has nobody to borrow from",
            )
        if lending is not None and nominal is not None and lending > nominal:
            fields.report(
                child(path, "lendingLimit"),
                f"lendingLimit {format_quantity(lending, resource or '')} exceeds nominalQuota "
                f"{format_quantity(nominal, resource or '')}",
            )
        if resource is not None:
            quotas.setdefault(resource, ResourceQuota(nominal or 0, borrowing, lending))
    # Kueue's rule: a flavor gives a quota for each covered resource and for nothing else.
    # Unlike Kueue the order is free (CONTRACT §1's own example lists them out of order).
    missing = [resource for resource in covered if resource not in quotas]
    extra = sorted(quotas.keys() - set(covered))
    if covered and (missing or extra):
        wrong = [f"missing {', '.join(missing)}"] if missing else []
        wrong += [f"not in coveredResources: {', '.join(extra)}"] if extra else []
        fields.report(
            child(flavor_path, "resources"),
            f"must give a quota for exactly the group's coveredResources; {'; '.join(wrong)}",
        )
    return dict(sorted(quotas.items()))


def _preemption(fields: Fields, spec: Mapping[str, Any]) -> PreemptionPolicy:
    at = "spec.preemption"
    preemption = fields.section(spec, "preemption", "spec")
    within_queue = _aliased(
        fields,
        preemption,
        at,
        ("withinQueue", _WITHIN_QUEUE),
        ("withinClusterQueue", _WITHIN_QUEUE),
    )
    reclaim = _aliased(
        fields, preemption, at, ("reclaimWithinCohort", _RECLAIM), ("withinCohort", _WITHIN_COHORT)
    )
    borrow_at = child(at, "borrowWithinCohort")
    borrow = fields.section(preemption, "borrowWithinCohort", at)
    policy = fields.choice(borrow, "policy", borrow_at, _BORROW) or "Never"
    threshold = fields.integer(borrow, "maxPriorityThreshold", borrow_at)
    if policy != "Never" and (reclaim or "Never") == "Never":
        fields.report(
            child(borrow_at, "policy"),
            f"borrowWithinCohort.policy {policy} needs reclaimWithinCohort other than Never",
        )
    return PreemptionPolicy(
        within_queue=within_queue or "Never",
        reclaim_within_cohort=reclaim or "Never",
        borrow_within_cohort=policy,
        max_priority_threshold=threshold,
    )


def _aliased(
    fields: Fields,
    obj: Mapping[str, Any],
    at: str,
    field: tuple[str, Mapping[str, T]],
    alias: tuple[str, Mapping[str, T]],
) -> T | None:
    """A field that may also be spelled the old way; both spellings must agree."""
    value = fields.choice(obj, field[0], at, field[1])
    old = fields.choice(obj, alias[0], at, alias[1])
    if value is not None and old is not None and value != old:
        fields.report(
            child(at, alias[0]), f"{alias[0]} {obj[alias[0]]!r} contradicts {field[0]} {value!r}"
        )
    return value if value is not None else old


def _fungibility(fields: Fields, spec: Mapping[str, Any]) -> FlavorFungibility:
    at = "spec.flavorFungibility"
    fungibility = fields.section(spec, "flavorFungibility", "spec")
    when_can_borrow = fields.choice(fungibility, "whenCanBorrow", at, _WHEN_CAN_BORROW)
    when_can_preempt = fields.choice(fungibility, "whenCanPreempt", at, _WHEN_CAN_PREEMPT)
    preference = fields.choice(fungibility, "preference", at, _PREFERENCE)
    result = FlavorFungibility(
        when_can_borrow=when_can_borrow or "MayStopSearch",
        when_can_preempt=when_can_preempt or "TryNextFlavor",
        preference=preference,
    )
    if preference == "PreemptionOverBorrowing" and (
        result.when_can_borrow != "TryNextFlavor" or result.when_can_preempt != "TryNextFlavor"
    ):
        fields.report(
            child(at, "preference"),
            "PreemptionOverBorrowing needs whenCanBorrow and whenCanPreempt both TryNextFlavor",
        )
    return result


@dataclass(frozen=True, slots=True)
class QueueTree:
    """The queue tree of a snapshot, after every Queue was read."""

    queues: dict[str, QueueSpec]  # valid trees only, implicit cohorts included, by name
    excluded: dict[str, str]  # queue -> why its tree is out
    known: frozenset[str]  # every queue name, defined (valid or not) or implicit
    parents: frozenset[str]  # queues that have children: not leaves

    def queue_problem(self, name: str) -> str | None:
        """Why a workload cannot be put on queue ``name`` as an object error, or None."""
        if name not in self.known:
            return f"unknown queue {name!r}"
        if name in self.parents:
            return f"queue {name!r} is not a leaf queue; only leaf queues hold workloads"
        return None


def build_queue_tree(
    parsed: Mapping[str, Sequence[Parsed[QueueSpec]]],
) -> tuple[QueueTree, list[Problem]]:
    """Check the tree: cycles, and invalid Queues taking their whole tree out.

    ``parsed`` maps each Queue name to its copies (more than one: duplicates,
    already reported). Returns the tree and the cycle problems.
    """
    edges = {
        name: sorted({copy.value.parent for copy in copies if copy.value.parent is not None})
        for name, copies in parsed.items()
    }
    implicit = {parent for parents in edges.values() for parent in parents} - parsed.keys()
    cycles = _cycles(parsed)
    too_deep = _too_deep(parsed, cycles.keys())
    invalid: dict[str, list[Problem]] = {name: [problem] for name, problem in cycles.items()}
    for name, problem in too_deep.items():
        invalid.setdefault(name, []).append(problem)
    for name, copies in parsed.items():
        for copy in copies:
            if copy.problems or len(copies) > 1:
                invalid.setdefault(name, []).extend(copy.problems)

    queues: dict[str, QueueSpec] = {}
    excluded: dict[str, str] = {}
    for members in _components(edges, implicit):
        bad = sorted(problem for name in members for problem in invalid.get(name, ()))
        if not bad:
            for name in members:
                if name in implicit:
                    queues[name] = QueueSpec(name, parent=None, defined=False)
                else:
                    queues[name] = parsed[name][0].value
            continue
        roots = [name for name in members if not edges.get(name)]
        root = min(roots or [name for name in members if name in cycles] or members)
        reason = f"queue tree of {root!r} is invalid: {describe(bad[0])}"
        if len(bad) > 1:
            reason += f" (and {len(bad) - 1} more problems)"
        for name in members:
            excluded[name] = reason
    tree = QueueTree(
        queues=dict(sorted(queues.items())),
        excluded=dict(sorted(excluded.items())),
        known=frozenset(parsed.keys() | implicit),
        parents=frozenset(parent for parents in edges.values() for parent in parents),
    )
    return tree, sorted([*cycles.values(), *too_deep.values()])


def _too_deep(
    parsed: Mapping[str, Sequence[Parsed[QueueSpec]]], in_cycles: Set[str]
) -> dict[str, Problem]:
    """A problem for every Queue at level ``MAX_DEPTH + 1``: the first too deep on its path."""
    parent_of = {
        name: copies[0].value.parent
        for name, copies in parsed.items()
        if len(copies) == 1 and copies[0].value.parent is not None and name not in in_cycles
    }
    # Level 1: a queue without a parent, an implicit cohort, or (already invalid) a queue
    # in a cycle or defined twice; every other level is its parent's plus one.
    level: dict[str, int] = {}
    for start in sorted(parent_of):
        chain: list[str] = []
        name = start
        while name in parent_of and name not in level:
            chain.append(name)
            name = parent_of[name]
        above = level.get(name, 1)
        for member in reversed(chain):
            above += 1
            level[member] = above
    problems: dict[str, Problem] = {}
    for name in sorted(level):
        if level[name] == MAX_DEPTH + 1:
            entry = parsed[name][0].entry
            problems[name] = Problem(
                entry.file,
                entry.label,
                "spec.parent",
                f"the queue tree is more than {MAX_DEPTH} levels deep here "
                f"(at most {MAX_DEPTH} are allowed)",
            )
    return problems


def _cycles(parsed: Mapping[str, Sequence[Parsed[QueueSpec]]]) -> dict[str, Problem]:
    """A problem for every uniquely defined queue whose parent chain loops back to it."""
    parent_of = {
        name: copies[0].value.parent
        for name, copies in parsed.items()
        if len(copies) == 1 and copies[0].value.parent is not None
    }
    problems: dict[str, Problem] = {}
    finished: set[str] = set()
    for start in sorted(parent_of):
        chain: list[str] = []
        name: str | None = start
        while name is not None and name not in finished and name not in chain:
            chain.append(name)
            name = parent_of.get(name)
        finished.update(chain)
        if name is None or name not in chain:
            continue
        cycle = chain[chain.index(name) :]
        for i, member in enumerate(cycle):
            loop = [*cycle[i:], *cycle[:i], member]
            entry = parsed[member][0].entry
            problems[member] = Problem(
                entry.file,
                entry.label,
                "spec.parent",
                f"the parent chain is a cycle: {' -> '.join(loop)}",
            )
    return problems


def _components(edges: Mapping[str, Sequence[str]], implicit: set[str]) -> list[list[str]]:
    """The connected trees, each as its sorted member names, in order of their first name."""
    leader = {name: name for name in [*edges, *implicit]}

    def find(name: str) -> str:
        while leader[name] != name:
            leader[name] = leader[leader[name]]
            name = leader[name]
        return name

    for name, parents in edges.items():
        for parent in parents:
            a, b = find(name), find(parent)
            if a != b:
                leader[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for name in sorted(leader):
        members.setdefault(find(name), []).append(name)
    return [members[key] for key in sorted(members)]
