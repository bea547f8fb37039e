"""Typed decoding reads every Queue exactly as the located-field walker does.

A Queue item of a JSON list is kept as its text and decoded into Structs
(``objects.typed_queues``); anything the typed reader is not sure about goes to the
walker (``objects.queues.parse_queue``). Every Queue below, hand-written or generated, is
read both ways: the typed reader takes exactly the Queues the walker finds nothing wrong
with (and no unknown field in), its record equals the walker's, and for every other
Queue the problems reported are the walker's, word for word.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemptd.daemon.backends.files import parse_text
from preemptd.framework.model import (
    Flavor,
    FlavorFungibility,
    FlavorQuotas,
    LabelRequirement,
    LabelSelector,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
)
from preemptd.framework.objects import parse_objects
from preemptd.framework.objects.fields import Catalog, Entry
from preemptd.framework.objects.known import unknown_fields
from preemptd.framework.objects.queues import parse_queue
from preemptd.framework.objects.typed import RawItems, RawObject, find_unknown_fields
from preemptd.framework.objects.typed_queues import fast_queue, read_queue
from preemptd.framework.objects.typed_workloads import text_entry

CATALOG = Catalog(
    flavors={"a100": Flavor("a100"), "h100": Flavor("h100")},
    invalid_flavors=frozenset({"broken"}),
)
API = "preemptd.io/v1alpha1"


def queue(spec: Any = None, name: str = "q", **top: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": API, "kind": "Queue", "metadata": {"name": name}}
    if spec is not None:
        found["spec"] = spec
    return found | top


def text_entries(*documents: dict[str, Any]) -> list[Entry]:
    """The documents as the intake takes the items of a JSON list: each kept as its text."""
    (items,) = parse_text(json.dumps(list(documents)).encode(), json_only=True, typed=True)
    assert isinstance(items, RawItems)
    entries = [text_entry("f.json", raw) for raw in items.take()]
    assert all(entry is not None and type(entry.body) is RawObject for entry in entries)
    return entries  # type: ignore[return-value]


def walked(document: dict[str, Any]) -> tuple[QueueSpec, list[Any]]:
    """The walker's reading of the parsed document (its JSON read back, as a file gives it)."""
    parsed = json.loads(json.dumps(document))
    return parse_queue(Entry("f.json", "Queue", None, parsed["metadata"]["name"], parsed), CATALOG)


def check_both(document: dict[str, Any]) -> QueueSpec | None:
    """``document`` read typed from its text and by the walker: the typed record when
    the typed reader took it. It takes the Queue iff the walker finds no problem and
    no unknown field; then the records are equal. Otherwise the walker's problems are
    reported, the same text."""
    (entry,) = text_entries(document)
    expected, problems = walked(document)
    parsed = json.loads(json.dumps(document))
    typos = unknown_fields(Entry("f.json", "Queue", None, "q", parsed))
    found = fast_queue(entry, CATALOG)
    if problems or typos:
        assert found is None
    else:
        assert found == expected
    (again,) = text_entries(document)
    record, reported = read_queue(again, CATALOG)
    assert record == expected
    assert [str(problem) for problem in reported] == [str(problem) for problem in problems]
    assert [str(p) for p in find_unknown_fields(again)] == [str(p) for p in typos]
    return found


GROUP = {
    "coveredResources": ["cpu", "memory"],
    "flavors": [
        {"name": "a100", "resources": [{"name": "memory", "nominalQuota": "1Gi"}, {"name": "cpu", "nominalQuota": "8"}]},
        {"name": "h100", "resources": [
            {"name": "cpu", "nominalQuota": 4, "borrowingLimit": "2", "lendingLimit": "500m"},
            {"name": "memory", "nominalQuota": "2Gi"},
        ]},
    ],
}  # fmt: skip


def test_a_plain_queue_is_read_typed_with_the_values_its_text_gives() -> None:
    """Worked out from the text: cpu in milli-units, memory in bytes, the quotas of a
    flavor sorted by resource, the flavors and covered resources in the given order."""
    document = queue({"parent": "root", "resourceGroups": [GROUP], "preemption": {"withinQueue": "LowerPriority"}})
    found = check_both(document)
    assert found == QueueSpec(
        name="q",
        parent="root",
        resource_groups=(
            ResourceGroup(
                ("cpu", "memory"),
                (
                    FlavorQuotas("a100", {"cpu": ResourceQuota(8000), "memory": ResourceQuota(2**30)}),
                    FlavorQuotas("h100", {"cpu": ResourceQuota(4000, 2000, 500), "memory": ResourceQuota(2**31)}),
                ),
            ),
        ),
        preemption=PreemptionPolicy(within_queue="LowerPriority"),
        source="f.json",
    )
    assert found is not None and list(found.resource_groups[0].flavors[0].resources) == ["cpu", "memory"]


def test_a_queue_with_every_field_is_read_typed() -> None:
    spec = {
        "parent": "root",
        "resourceGroups": [GROUP, {"coveredResources": ["nvidia.com/gpu"],
                                   "flavors": [{"name": "x", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}],
        "preemption": {"withinClusterQueue": "LowerOrNewerEqualPriority", "withinCohort": "ReclaimFromAny",
                       "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": -3}},
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor",
                              "preference": "PreemptionOverBorrowing"},
        "queueingStrategy": "StrictFIFO",
        "preemptMinRuntime": "5m",
        "reclaimMinRuntime": "1h30m",
        "fairSharing": {"weight": "500m"},
        "namespaceSelector": {"matchLabels": {"team": "a"},
                              "matchExpressions": [{"key": "env", "operator": "In", "values": ["b", "a", "a"]}]},
    }  # fmt: skip
    catalog = Catalog(flavors={**CATALOG.flavors, "x": Flavor("x")})
    (entry,) = text_entries(queue(spec, metadata={"name": "q", "labels": {"a": "b"}, "uid": 5}, status={"any": 1}))
    found = fast_queue(entry, catalog)
    assert found is not None
    assert found.preemption == PreemptionPolicy("LowerOrNewerEqualPriority", "Any", "LowerPriority", -3)
    assert found.fungibility == FlavorFungibility("TryNextFlavor", "TryNextFlavor", "PreemptionOverBorrowing")
    assert (found.queueing_strategy, found.preempt_min_runtime, found.reclaim_min_runtime) == (
        "StrictFIFO", 300_000, 5_400_000,
    )  # fmt: skip
    assert found.fair_weight == Fraction(1, 2)
    assert found.namespace_selector == LabelSelector({"team": "a"}, (LabelRequirement("env", "In", ("a", "b")),))
    assert found.resource_groups[1] == ResourceGroup(("nvidia.com/gpu",), (FlavorQuotas("x", {"nvidia.com/gpu": ResourceQuota(8)}),))
    parsed = json.loads(json.dumps(queue(spec, metadata={"name": "q", "labels": {"a": "b"}, "uid": 5}, status={"any": 1})))
    assert (found, []) == parse_queue(Entry("f.json", "Queue", None, "q", parsed), catalog)


def variant(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``queue(spec)`` with the field at dotted ``path`` (below the Queue) set to ``value``."""
    found = copy.deepcopy(queue(spec))
    *parents, last = path.split(".")
    target: Any = found
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return found


PLAIN = {"parent": "root", "resourceGroups": [GROUP]}
RESOURCES = "spec.resourceGroups.0.flavors.0.resources"
VARIANTS: dict[str, dict[str, Any]] = {
    "plain": queue(PLAIN),
    "no spec": queue(),
    "null spec": queue(None) | {"spec": None},
    "spec a list": variant(PLAIN, "spec", []),
    "empty parent": variant(PLAIN, "spec.parent", ""),
    "parent a number": variant(PLAIN, "spec.parent", 3),
    "no groups": variant(PLAIN, "spec.resourceGroups", []),
    "groups a mapping": variant(PLAIN, "spec.resourceGroups", GROUP),
    "group null": variant(PLAIN, "spec.resourceGroups", [None]),
    "no covered resources": variant(PLAIN, "spec.resourceGroups.0.coveredResources", []),
    "covered resource empty": variant(PLAIN, "spec.resourceGroups.0.coveredResources", ["cpu", ""]),
    "covered resource a number": variant(PLAIN, "spec.resourceGroups.0.coveredResources", ["cpu", 1]),
    "covered twice in a group": variant(PLAIN, "spec.resourceGroups.0.coveredResources", ["cpu", "cpu"]),
    "covered by two groups": variant(PLAIN, "spec.resourceGroups", [GROUP, GROUP]),
    "covered twice, quotas given once": variant(PLAIN, "spec.resourceGroups", [
        {"coveredResources": ["cpu", "cpu"], "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 1}]}]},
    ]),
    "covered by two groups of other flavors": variant(PLAIN, "spec.resourceGroups", [
        {"coveredResources": ["cpu"], "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 1}]}]},
        {"coveredResources": ["cpu"], "flavors": [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 1}]}]},
    ]),
    "two groups": variant(PLAIN, "spec.resourceGroups", [
        {"coveredResources": ["cpu"], "flavors": [{"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 1}]}]},
        {"coveredResources": ["memory"], "flavors": [{"name": "h100", "resources": [{"name": "memory", "nominalQuota": 1}]}]},
    ]),
    "no flavors": variant(PLAIN, "spec.resourceGroups.0.flavors", None),
    "flavor unnamed": variant(PLAIN, "spec.resourceGroups.0.flavors.0.name", None),
    "flavor name empty": variant(PLAIN, "spec.resourceGroups.0.flavors.0.name", ""),
    "flavor unknown": variant(PLAIN, "spec.resourceGroups.0.flavors.0.name", "nope"),
    "flavor invalid": variant(PLAIN, "spec.resourceGroups.0.flavors.0.name", "broken"),
    "flavor listed twice": variant(PLAIN, "spec.resourceGroups.0.flavors.1.name", "a100"),
    "no resources": variant(PLAIN, RESOURCES, None),
    "resource missing": variant(PLAIN, RESOURCES, [{"name": "cpu", "nominalQuota": "1"}]),
    "resource not covered": variant(PLAIN, RESOURCES, [
        {"name": "cpu", "nominalQuota": "1"}, {"name": "memory", "nominalQuota": "1"}, {"name": "gpu", "nominalQuota": "1"},
    ]),
    "resource twice": variant(PLAIN, RESOURCES, [
        {"name": "cpu", "nominalQuota": "1"}, {"name": "cpu", "nominalQuota": "2"}, {"name": "memory", "nominalQuota": "1"},
    ]),
    "resource unnamed": variant(PLAIN, RESOURCES + ".0.name", ""),
    "no nominal quota": variant(PLAIN, RESOURCES + ".0", {"name": "memory"}),
    "bad nominal quota": variant(PLAIN, RESOURCES + ".0.nominalQuota", "lots"),
    "negative nominal quota": variant(PLAIN, RESOURCES + ".0.nominalQuota", "-1"),
    "nominal quota a list": variant(PLAIN, RESOURCES + ".0.nominalQuota", [1]),
    "nominal quota true": variant(PLAIN, RESOURCES + ".0.nominalQuota", True),
    "nominal quota beyond 64 bits": variant(PLAIN, RESOURCES + ".0.nominalQuota", 2**70),
    "nominal quota a float": variant(PLAIN, RESOURCES + ".0.nominalQuota", 1.5),
    "borrowing without a parent": variant(variant(PLAIN, "spec.parent", None)["spec"], RESOURCES + ".0.borrowingLimit", "1"),
    "bad borrowing limit": variant(PLAIN, RESOURCES + ".0.borrowingLimit", "x"),
    "lending above nominal": variant(PLAIN, RESOURCES + ".0.lendingLimit", "2Gi"),
    "lending at nominal": variant(PLAIN, RESOURCES + ".0.lendingLimit", "1Gi"),
    "resource a string": variant(PLAIN, RESOURCES + ".0", "cpu"),
    "unknown resource field": variant(PLAIN, RESOURCES + ".0.nominal", "1"),
    "unknown spec field": variant(PLAIN, "spec.preemtion", {}),
    "unknown metadata field": variant(PLAIN, "metadata.nam", "x"),
    "preemption a string": variant(PLAIN, "spec.preemption", "Never"),
    "within queue": variant(PLAIN, "spec.preemption", {"withinQueue": "LowerOrNewerEqualPriority"}),
    "within queue unknown": variant(PLAIN, "spec.preemption", {"withinQueue": "Always"}),
    "within queue empty": variant(PLAIN, "spec.preemption", {"withinQueue": ""}),
    "within queue a number": variant(PLAIN, "spec.preemption", {"withinQueue": 1}),
    "within queue both spellings": variant(PLAIN, "spec.preemption", {"withinQueue": "Never", "withinClusterQueue": "Never"}),
    "within queue spellings differ": variant(PLAIN, "spec.preemption", {"withinQueue": "Never", "withinClusterQueue": "LowerPriority"}),
    "reclaim old spelling": variant(PLAIN, "spec.preemption", {"withinCohort": "ReclaimAny"}),
    "reclaim spellings agree": variant(PLAIN, "spec.preemption", {"reclaimWithinCohort": "LowerPriority", "withinCohort": "ReclaimFromLowerPriority"}),
    "reclaim spellings differ": variant(PLAIN, "spec.preemption", {"reclaimWithinCohort": "Any", "withinCohort": "ReclaimFromLowerPriority"}),
    "borrow within cohort": variant(PLAIN, "spec.preemption", {"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}}),
    "borrow without reclaim": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"policy": "LowerPriority"}}),
    "borrow policy unknown": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"policy": "Sometimes"}}),
    "borrow a list": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": []}),
    "threshold a float": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"maxPriorityThreshold": 1.0}}),
    "threshold true": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"maxPriorityThreshold": True}}),
    "threshold beyond 64 bits": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"maxPriorityThreshold": 2**63}}),
    "threshold at the bottom": variant(PLAIN, "spec.preemption", {"borrowWithinCohort": {"maxPriorityThreshold": -(2**63)}}),
    "fungibility": variant(PLAIN, "spec.flavorFungibility", {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}),
    "fungibility preference unmet": variant(PLAIN, "spec.flavorFungibility", {"preference": "PreemptionOverBorrowing"}),
    "fungibility unknown": variant(PLAIN, "spec.flavorFungibility", {"whenCanBorrow": "Maybe"}),
    "strict fifo": variant(PLAIN, "spec.queueingStrategy", "StrictFIFO"),
    "queueing unknown": variant(PLAIN, "spec.queueingStrategy", "LIFO"),
    "min runtime": variant(PLAIN, "spec.preemptMinRuntime", "90s"),
    "min runtime bare number": variant(PLAIN, "spec.preemptMinRuntime", "600"),
    "min runtime a number": variant(PLAIN, "spec.reclaimMinRuntime", 600),
    "weight": variant(PLAIN, "spec.fairSharing", {"weight": 2}),
    "weight zero": variant(PLAIN, "spec.fairSharing", {"weight": "0"}),
    "weight too small": variant(PLAIN, "spec.fairSharing", {"weight": "1n"}),
    "weight a list": variant(PLAIN, "spec.fairSharing", {"weight": [1]}),
    "fair sharing a number": variant(PLAIN, "spec.fairSharing", 1),
    "fair sharing typo": variant(PLAIN, "spec.fairSharing", {"wieght": 1}),
    "selector": variant(PLAIN, "spec.namespaceSelector", {"matchExpressions": [{"key": "a", "operator": "Exists"}]}),
    "selector empty": variant(PLAIN, "spec.namespaceSelector", {}),
    "selector without operator": variant(PLAIN, "spec.namespaceSelector", {"matchExpressions": [{"key": "a"}]}),
    "selector label a number": variant(PLAIN, "spec.namespaceSelector", {"matchLabels": {"a": 1}}),
    "selector typo": variant(PLAIN, "spec.namespaceSelector", {"matchLabel": {"a": "b"}}),
    "selector expression typo": variant(PLAIN, "spec.namespaceSelector", {"matchExpressions": [{"key": "a", "op": "Exists"}]}),
    "status anything": variant(PLAIN, "status", [1, {"x": None}]),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_queue_read_typed_equals_the_walkers_reading_or_is_left_to_it(name: str) -> None:
    found = check_both(VARIANTS[name])
    if name in ("plain", "no spec", "null spec", "no groups", "within queue", "reclaim old spelling",
                "borrow within cohort", "fungibility", "strict fifo", "min runtime", "weight", "selector",
                "selector empty", "lending at nominal", "threshold at the bottom", "status anything",
                "nominal quota a float", "reclaim spellings agree", "weight zero", "two groups"):
        assert found is not None  # read typed, not left to the walker


quantities = st.sampled_from(["1", "8", "500m", "16Gi", 4, 0, 1.5, "lots", "-1", "", True, None, [1], 2**64])
names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "", 3, None])
flavors = st.sampled_from(["a100", "h100", "broken", "nope", "", None])
enums = st.sampled_from([
    "Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any", "ReclaimFromAny", "ReclaimAny",
    "ReclaimFromLowerPriority", "MayStopSearch", "TryNextFlavor", "Borrow", "Preempt",
    "BorrowingOverPreemption", "PreemptionOverBorrowing", "BestEffortFIFO", "StrictFIFO", "", 1,
])  # fmt: skip


def optional(**fields: Any) -> Any:
    return st.fixed_dictionaries({}, optional=fields)


resources = optional(name=names, nominalQuota=quantities, borrowingLimit=quantities, lendingLimit=quantities)
flavor_docs = optional(name=flavors, resources=st.none() | st.lists(resources, max_size=3))
groups = optional(
    coveredResources=st.none() | st.lists(names, max_size=3),
    flavors=st.none() | st.lists(flavor_docs, max_size=2),
)
specs = optional(
    parent=st.sampled_from(["root", "", None, 5]),
    resourceGroups=st.none() | st.lists(groups, max_size=2),
    preemption=optional(
        withinQueue=enums, withinClusterQueue=enums, reclaimWithinCohort=enums, withinCohort=enums,
        borrowWithinCohort=optional(policy=enums, maxPriorityThreshold=st.sampled_from([0, -5, 2**63, 1.0, True, "1"])),
    ),
    flavorFungibility=optional(whenCanBorrow=enums, whenCanPreempt=enums, preference=enums),
    queueingStrategy=enums,
    preemptMinRuntime=st.sampled_from(["5m", "1h30m", "600", 600, "", None]),
    reclaimMinRuntime=st.sampled_from(["5m", "-1s", None]),
    fairSharing=optional(weight=st.sampled_from(["2", 0.5, "0", "1n", "x", None, 3])),
    namespaceSelector=st.none() | optional(
        matchLabels=st.sampled_from([{"a": "b"}, {"a": 1}, {"": "x"}, None]),
        matchExpressions=st.lists(optional(
            key=st.sampled_from(["a", "", None]), operator=st.sampled_from(["In", "Exists", "Nope", None]),
            values=st.sampled_from([["x"], [], None, [1]]),
        ), max_size=2),
    ),
    typo=st.just(1),
)  # fmt: skip


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_generated_queues_read_typed_equal_the_walkers_reading(spec: dict[str, Any]) -> None:
    check_both(queue(spec))


def plain_quota_specs() -> Any:
    """Valid Queues only: one group over the covered resources, known flavors, quotas."""
    covered = st.lists(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), min_size=1, max_size=3, unique=True)

    def group(resources: list[str]) -> Any:
        quota = st.sampled_from(["1", "8", "500m", "16Gi", 4, 0])
        flavor = st.fixed_dictionaries({
            "resources": st.permutations(resources).flatmap(
                lambda order: st.tuples(*[st.fixed_dictionaries({"name": st.just(r), "nominalQuota": quota},
                                                                optional={"lendingLimit": st.just("0")})
                                          for r in order]).map(list)
            ),
        })  # fmt: skip
        return st.lists(flavor, min_size=1, max_size=2).map(
            lambda fs: {"coveredResources": resources,
                        "flavors": [f | {"name": n} for f, n in zip(fs, ["a100", "h100"], strict=False)]}
        )  # fmt: skip

    return covered.flatmap(group).map(lambda g: {"parent": "root", "resourceGroups": [g]})


@settings(max_examples=150)
@given(plain_quota_specs())
def test_generated_valid_queues_are_all_read_typed(spec: dict[str, Any]) -> None:
    assert check_both(queue(spec)) is not None


def test_a_snapshot_of_queues_read_from_a_json_list_equals_the_one_read_from_documents() -> None:
    """Through ``parse_objects``: the tree, the excluded trees, the problems and the
    unknown fields are the same whichever way the Queues are read."""
    items: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}} for name in ("a100", "h100")
    ]
    items += [VARIANTS[name] | {"metadata": {"name": name.replace(" ", "-")}} for name in sorted(VARIANTS)]
    items += [queue(PLAIN | {"parent": "elsewhere"}, name="q")]  # a tree of its own, valid
    (document,) = parse_text(json.dumps(items).encode(), json_only=True, typed=True)
    typed = parse_objects([("f.json", document)])
    plain = parse_objects([("f.json", copy.deepcopy(item)) for item in items])
    assert [str(p) for p in typed.problems] == [str(p) for p in plain.problems]
    assert [str(p) for p in typed.unknown_fields] == [str(p) for p in plain.unknown_fields]
    assert typed.queues == plain.queues and typed.excluded_queues == plain.excluded_queues
    assert {"q", "elsewhere"} <= typed.queues.keys() and "root" in typed.excluded_queues
    assert typed.unknown_fields and typed.problems


def test_a_queue_item_is_kept_as_its_text_and_let_go_of_once_read() -> None:
    read, walked_entry = text_entries(queue(PLAIN), queue(PLAIN | {"parent": 3}, name="bad"))
    assert type(read.body) is RawObject and read.body.raw is not None
    assert (read.name, read.namespace, read.kind) == ("q", None, "Queue")
    assert read_queue(read, CATALOG) == walked(queue(PLAIN))
    assert read.body.raw is None  # nothing decodes it again
    assert read_queue(walked_entry, CATALOG) == walked(queue(PLAIN | {"parent": 3}, name="bad"))
    assert type(walked_entry.body) is RawObject and walked_entry.body.raw is not None
