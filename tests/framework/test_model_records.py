"""Records made by ``objects.records`` are the records the model's constructors make.

The readers of a large snapshot build Pods, Workloads, pod sets, admissions and the
intake's entries as their *twins* (plain classes with the same slots) and then give them
the model's class, so that no field is written through a call. These tests hold every
builder to the constructor of its class over arbitrary values (equal fields of the same
types, derived fields included), and the Pods the intake writes in place, item after
item, to the walker's reading of each.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from preemptd.framework.model import (
    Admission,
    FlavorQuotas,
    FrozenDict,
    LabelSelector,
    Node,
    Pod,
    PodFacts,
    PodSet,
    PodSetAdmission,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Workload,
)
from preemptd.framework.objects.fields import Entry
from preemptd.framework.objects.nodes import parse_pod
from preemptd.framework.objects.records import builder, twin
from preemptd.framework.objects.typed_pods import LastMaps, decode_item, pod_of_item

texts = st.text(max_size=6)
maybe_texts = st.none() | texts
integers = st.integers(min_value=-(2**70), max_value=2**70)
# Maps as the readers hand them over (shared FrozenDicts) and as a caller might (dicts).
maps = st.dictionaries(texts, integers, max_size=3).flatmap(
    lambda d: st.sampled_from([d, FrozenDict(d)])
)
string_maps = st.dictionaries(texts, texts, max_size=3).flatmap(
    lambda d: st.sampled_from([d, FrozenDict(d)])
)
tolerations = st.lists(st.builds(Toleration, key=texts), max_size=2).flatmap(
    lambda ts: st.sampled_from([ts, tuple(ts)])
)
pod_sets = st.builds(
    PodSet, name=texts, count=integers, requests=maps, min_count=st.none() | integers,
    node_selector=string_maps, tolerations=tolerations,
)  # fmt: skip
pod_set_admissions = st.builds(PodSetAdmission, name=texts, count=integers, flavors=string_maps)
admissions = st.builds(
    Admission, queue=texts, pod_sets=st.lists(pod_set_admissions, max_size=2).flatmap(
        lambda ps: st.sampled_from([ps, tuple(ps)])
    ),
)  # fmt: skip
flavor_scans = st.dictionaries(texts, maps, max_size=2).flatmap(
    lambda d: st.sampled_from([d, FrozenDict(d), FrozenDict({k: FrozenDict(v) for k, v in d.items()})])
)
workloads = st.builds(
    Workload,
    namespace=texts, name=texts, queue=texts,
    pod_sets=st.lists(pod_sets, max_size=2).flatmap(lambda ps: st.sampled_from([ps, tuple(ps)])),
    priority=integers, created=integers, uid=texts,
    owner_kind=st.none() | st.sampled_from(["Deployment", "Job", ""]), owner_name=maybe_texts,
    admission=st.none() | admissions, admitted_at=st.none() | integers, evicted=st.booleans(),
    flavor_scan=flavor_scans, source=texts, local_queue=maybe_texts,
    labels=string_maps, annotations=string_maps,
)  # fmt: skip
entries = st.builds(Entry, file=texts, kind=texts, namespace=maybe_texts, name=texts, body=string_maps)
pods = st.builds(
    Pod,
    namespace=texts, name=texts, requests=maps, node_name=maybe_texts, workload=maybe_texts,
    priority=st.none() | integers, created=integers, deleting=st.booleans(),
    force_delete=st.booleans(), deletion_cost=integers, phase=texts, labels=string_maps,
    source=texts,
)  # fmt: skip

resource_quotas = st.builds(
    ResourceQuota, nominal=integers, borrowing_limit=st.none() | integers, lending_limit=st.none() | integers
)
flavor_quotas = st.builds(
    FlavorQuotas, flavor=texts, resources=st.dictionaries(texts, resource_quotas, max_size=2).flatmap(
        lambda d: st.sampled_from([d, FrozenDict(d)])
    ),
)  # fmt: skip
resource_groups = st.builds(
    ResourceGroup,
    covered=st.lists(texts, max_size=2).flatmap(lambda c: st.sampled_from([c, tuple(c)])),
    flavors=st.lists(flavor_quotas, max_size=2).flatmap(lambda f: st.sampled_from([f, tuple(f)])),
)
preemption_policies = st.builds(
    PreemptionPolicy,
    within_queue=st.sampled_from(["Never", "LowerPriority"]), reclaim_within_cohort=st.sampled_from(["Never", "Any"]),
    borrow_within_cohort=st.sampled_from(["Never", "LowerPriority"]), max_priority_threshold=st.none() | integers,
)  # fmt: skip
queue_specs = st.builds(
    QueueSpec,
    name=texts, parent=maybe_texts,
    resource_groups=st.lists(resource_groups, max_size=2).flatmap(lambda g: st.sampled_from([g, tuple(g)])),
    preemption=preemption_policies, queueing_strategy=st.sampled_from(["BestEffortFIFO", "StrictFIFO"]),
    preempt_min_runtime=st.none() | integers, reclaim_min_runtime=st.none() | integers, defined=st.booleans(),
    source=texts, fair_weight=st.fractions(min_value=0, max_denominator=10).map(Fraction),
    namespace_selector=st.none() | st.builds(LabelSelector, match_labels=string_maps),
)  # fmt: skip

nodes = st.builds(
    Node, name=texts, labels=string_maps, allocatable=maps, unschedulable=st.booleans(),
    taints=st.lists(st.builds(Taint, key=texts, value=texts, effect=texts), max_size=2).flatmap(
        lambda ts: st.sampled_from([ts, tuple(ts)])
    ),
)  # fmt: skip


def given_values(record: Any) -> list[Any]:
    """The values a constructor was given: its init fields, read back (the same objects
    when ``__post_init__`` kept them)."""
    return [getattr(record, field.name) for field in dataclasses.fields(record) if field.init]


def same_record(built: Any, expected: Any) -> None:
    assert type(built) is type(expected)
    assert built == expected
    for name in type(expected).__slots__:  # every slot, derived ones too
        assert getattr(built, name) == getattr(expected, name), name
        assert type(getattr(built, name)) is type(getattr(expected, name)), name


@pytest.mark.parametrize(
    ("cls", "records"),
    [
        (Pod, pods), (PodSet, pod_sets), (PodSetAdmission, pod_set_admissions), (Admission, admissions),
        (Workload, workloads), (Entry, entries), (ResourceQuota, resource_quotas), (FlavorQuotas, flavor_quotas),
        (ResourceGroup, resource_groups), (PreemptionPolicy, preemption_policies), (QueueSpec, queue_specs),
        (Node, nodes),
    ],
)
def test_a_builder_makes_the_record_its_constructor_makes(cls: type, records: Any) -> None:
    build = builder(cls)

    @given(records)
    def check(made_by_constructor: Any) -> None:
        # Rebuild from the very values the constructor was given (before its __post_init__
        # normalised them, where it did: a dict made a FrozenDict, a list a tuple).
        values = given_values(made_by_constructor)
        names = [field.name for field in dataclasses.fields(cls) if field.init]  # a Pod's order is not its fields'
        named = dict(zip(names, values, strict=True))
        same_record(build(*values), cls(**named))

    check()


@given(st.lists(st.tuples(texts, integers), max_size=3), st.lists(st.tuples(texts, texts), max_size=3))
def test_a_builder_runs_post_init_on_raw_values(requests: list[tuple[str, int]], labels: list[tuple[str, str]]) -> None:
    """Given plain dicts and lists, the builder's record is normalised as the constructor's."""
    values = ("ns", "p", dict(requests), "n1", None, None, 0, False, False, 0, "Running", dict(labels), "f")
    frozen = (FrozenDict(requests), FrozenDict(labels) if labels else FrozenDict())  # a Pod has no __post_init__
    facts = PodFacts("ns", None, None, 0, frozen[1], False, 0, "Running", "f", False, "")
    same_record(builder(Pod)("p", frozen[0], "n1", facts), Pod(*values))
    pod_set = ("main", 2, dict(requests), None, dict(labels), [Toleration(key="k")])
    same_record(builder(PodSet)(*pod_set), PodSet(*pod_set))
    wl = ("ns", "w", "q", [PodSet(*pod_set)], 0, 0, "", "Deployment", "d", None, None, False, {}, "", None, {}, dict(labels))
    same_record(builder(Workload)(*wl), Workload(*wl))


def test_a_class_without_slots_of_its_own_has_no_twin() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Pod):
        extra: int = 0

    for cls in (Plain, Derived, int):
        with pytest.raises(TypeError):
            twin(cls)


pod_texts = st.fixed_dictionaries(
    {
        "name": st.text("abc", min_size=1, max_size=3),
        "namespace": st.sampled_from(["ns", "other", ""]),
        "labels": st.sampled_from([None, {}, {"preemptd.io/workload": "w"}, {"a": "b"}]),
        "annotations": st.sampled_from([None, {"preemptd.io/force-delete": "true"}]),
        "creationTimestamp": st.sampled_from([None, "2025-12-28T16:21:47.854Z", "2025-12-28T16:21:48Z"]),
        "nodeName": st.sampled_from([None, "n1", "n2"]),
        "containers": st.sampled_from([None, [], [{"resources": {"requests": {"cpu": "1"}}}]]),
        "initContainers": st.sampled_from([None, [{"resources": {"requests": {"cpu": "2"}}}]]),
        "phase": st.sampled_from([None, "Running", "Succeeded", "Pending"]),
    }
)


def pod_document(fields: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: fields[k] for k in ("name", "namespace", "labels", "annotations", "creationTimestamp")}
    spec = {k: fields[k] for k in ("nodeName", "containers", "initContainers")}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": metadata, "spec": spec, "status": {"phase": fields["phase"]}}


@given(st.lists(pod_texts, min_size=1, max_size=8))
def test_pod_items_read_one_after_another_equal_each_read_alone(items: list[dict[str, Any]]) -> None:
    """The intake compares a Pod item's texts with the last item's (``LastMaps``); the
    records of a run of items equal the walker's reading of each, and each item read on
    its own."""
    documents = [pod_document(i) for i in items]
    raws = msgspec.json.decode(msgspec.json.encode(documents), type=list[msgspec.Raw])
    last = LastMaps()
    for document, raw in zip(documents, raws, strict=True):
        item = decode_item(raw)
        assert item is not None
        in_run = pod_of_item("f.json", raw, item, last)
        alone = pod_of_item("f.json", raw, item, LastMaps())
        metadata = document["metadata"]
        walked, problems = parse_pod(Entry("f.json", "Pod", metadata["namespace"] or "default", metadata["name"], document))
        assert problems == []
        assert isinstance(in_run, Pod) and isinstance(alone, Pod)
        same_record(in_run, walked)
        same_record(alone, walked)
