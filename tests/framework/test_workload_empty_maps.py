"""A Workload's labels and annotations (``model.Workload.__post_init__``): a FrozenDict,
empty or not, is kept as it is (the typed reader gives one shared empty FrozenDict for
an absent map, which no record writes again); any other map is frozen, and an empty one
or none is the model's one shared empty map.
"""

from __future__ import annotations

from typing import Any

import pytest
from preemptd.framework.model import FrozenDict, PodSet, Workload

from tests.framework.test_workload_parts_by_text import QUEUES, flavor, read_both, workload

POD_SETS = (PodSet("main", 1, {"cpu": 1000}),)


def made(**maps: Any) -> Workload:
    return Workload("ns", "w", "q", POD_SETS, **maps)


@pytest.mark.parametrize("empty", [None, {}])
def test_no_map_or_an_empty_dict_is_the_one_shared_empty_map(empty: Any) -> None:
    record = made(labels=empty, annotations=empty)
    shared = made().labels
    assert type(shared) is FrozenDict and shared == {}
    assert record.labels is shared and record.annotations is shared and made().annotations is shared


def test_a_frozen_map_empty_or_not_is_kept_and_any_other_frozen() -> None:
    labels, empty = FrozenDict({"team": "x"}), FrozenDict()
    record = made(labels=labels, annotations=empty)
    assert record.labels is labels and record.annotations is empty
    other = made(labels={"team": "x"}, annotations={"note": "y"})
    assert type(other.labels) is FrozenDict and type(other.annotations) is FrozenDict
    assert (other.labels, other.annotations) == ({"team": "x"}, {"note": "y"})
    mixed = made(labels=labels, annotations={"note": "y"})
    assert mixed.labels is labels and type(mixed.annotations) is FrozenDict
    assert made(labels={}, annotations=empty).labels is made().labels
    assert other.key == "ns/w" and record == made(labels={"team": "x"})


def test_read_workloads_share_one_empty_map_for_their_absent_maps() -> None:
    bare, also = workload("a"), workload("c")
    full = workload("b")
    full["metadata"] |= {"labels": {"team": "x"}, "annotations": {"note": "y"}}
    found = read_both([flavor("a100"), *QUEUES, bare, full, also])
    a, b, c = found.workloads["ns/a"], found.workloads["ns/b"], found.workloads["ns/c"]
    assert type(a.labels) is FrozenDict and a.labels == {}
    assert a.labels is a.annotations is a.flavor_scan is c.labels is c.annotations
    assert (dict(b.labels), dict(b.annotations)) == ({"team": "x"}, {"note": "y"})
    assert type(b.labels) is FrozenDict and type(b.annotations) is FrozenDict
