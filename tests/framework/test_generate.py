"""The benchmark generator: deterministic, valid, and consistent with its nodes and quota."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

# ``benchmarks`` is a top-level folder of the repository, not an installed package.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from preemptd.framework.objects import Inventory, parse_objects  # noqa: E402

from benchmarks.generate import generate  # noqa: E402


@pytest.fixture(scope="module")
def small() -> Inventory:
    return parse_objects([("generated-S.yaml", obj) for obj in generate("S", 1)])


def test_same_seed_gives_the_same_cluster() -> None:
    """Two runs with one seed give identical objects; another seed gives others."""
    assert generate("S", 3) == generate("S", 3)
    assert generate("S", 3) != generate("S", 4)


def test_small_cluster_parses_without_problems(small: Inventory) -> None:
    """Every generated object is valid: no problems, nothing inadmissible, sizes as specified."""
    assert small.problems == []
    assert small.inadmissible == {}
    assert len(small.nodes) == 100
    assert len(small.workloads) == 1000
    assert len([q for q in small.queues.values() if q.resource_groups]) == 10
    pending = sum(1 for w in small.workloads.values() if w.admission is None)
    assert 0.2 <= pending / len(small.workloads) <= 0.3


def test_admitted_pods_fit_their_nodes(small: Inventory) -> None:
    """Bound pods never exceed a node's allocatable, and sit on nodes of the admitted flavor."""
    used: dict[str, Counter[str]] = defaultdict(Counter)
    pods_of: Counter[str] = Counter()
    for pod in small.pods.values():
        assert pod.node_name in small.nodes
        assert pod.workload is not None
        workload = small.workloads[pod.workload]
        assert workload.admission is not None
        flavor = small.flavors[next(iter(workload.admission.pod_sets[0].flavors.values()))]
        node = small.nodes[pod.node_name]
        assert all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
        used[pod.node_name].update(pod.requests)
        pods_of[pod.workload] += 1
    for name, requests in used.items():
        allocatable = small.nodes[name].allocatable
        for resource, amount in requests.items():
            assert amount <= allocatable.get(resource, 0), (name, resource)
    for key, workload in small.workloads.items():
        expected = sum(ps.count for ps in workload.pod_sets) if workload.admission else 0
        assert expected == pods_of[key], key


def test_admitted_usage_fits_quota(small: Inventory) -> None:
    """Per leaf, usage stays within nominal + borrowingLimit; per cohort, within the cohort's quota."""
    usage: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for workload in small.workloads.values():
        if workload.admission is None:
            continue
        for pod_set, admitted in zip(workload.pod_sets, workload.admission.pod_sets, strict=True):
            for resource, amount in pod_set.requests.items():
                usage[workload.queue][(admitted.flavors[resource], resource)] += admitted.count * amount
    cohort_usage: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    cohort_quota: dict[str, Counter[tuple[str, str]]] = defaultdict(Counter)
    for queue in small.queues.values():
        if not queue.resource_groups:
            continue
        assert queue.parent is not None
        for group in queue.resource_groups:
            for flavor in group.flavors:
                for resource, quota in flavor.resources.items():
                    fr = (flavor.flavor, resource)
                    used = usage[queue.name][fr]
                    if quota.borrowing_limit is not None:
                        assert used <= quota.nominal + quota.borrowing_limit, (queue.name, fr)
                    lendable = quota.nominal if quota.lending_limit is None else quota.lending_limit
                    reserve = quota.nominal - lendable
                    cohort_quota[queue.parent][fr] += lendable
                    cohort_usage[queue.parent][fr] += max(0, used - reserve)
    for cohort, frs in cohort_usage.items():
        for fr, used in frs.items():
            assert used <= cohort_quota[cohort][fr], (cohort, fr)
