"""The benchmark shapes, generated tiny: each keeps the property it is named for.

These are smoke tests of ``benchmarks/`` (no timing): the saturated shape really has every
queue at its nominal with nothing to borrow, the contended one really has many heads
wanting one full flavor, the large one keeps its three-level tree, the growth series grow
the way they say, and the floor and the fit used by the benchmarks compute what they claim.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

# ``benchmarks`` is a top-level folder of the repository, not an installed package.
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from preemptd.framework.model import Workload  # noqa: E402
from preemptd.framework.objects import Inventory, parse_objects  # noqa: E402
from preemptd.framework.run import run_session  # noqa: E402
from preemptd.framework.snapshot import Snapshot  # noqa: E402

from benchmarks import generate as gen  # noqa: E402
from benchmarks.bench_growth import exponent  # noqa: E402
from benchmarks.bench_session import default_session  # noqa: E402
from benchmarks.parse_floor import touch  # noqa: E402

GPU = "nvidia.com/gpu"
FR = tuple[str, str]


def _inventory(objects: list[dict[str, object]]) -> Inventory:
    inventory = parse_objects([("generated.json", obj) for obj in objects])
    assert inventory.problems == []
    assert inventory.inadmissible == {}
    return inventory


def _usage(inventory: Inventory) -> dict[str, Counter[FR]]:
    """Per leaf queue, what its admitted workloads use per (flavor, resource)."""
    usage: dict[str, Counter[FR]] = defaultdict(Counter)
    for workload in inventory.workloads.values():
        if workload.admission is None:
            continue
        for pod_set, admitted in zip(workload.pod_sets, workload.admission.pod_sets, strict=True):
            for resource, amount in pod_set.requests.items():
                usage[workload.queue][(admitted.flavors[resource], resource)] += admitted.count * amount
    return usage


def _nominal(inventory: Inventory, queue: str) -> dict[FR, int]:
    return {
        (flavor.flavor, resource): quota.nominal
        for group in inventory.queues[queue].resource_groups
        for flavor in group.flavors
        for resource, quota in flavor.resources.items()
    }


def _node_room(inventory: Inventory) -> dict[str, Counter[str]]:
    """Per node, allocatable minus the requests of its bound pods."""
    room = {name: Counter(node.allocatable) for name, node in inventory.nodes.items()}
    for pod in inventory.pods.values():
        assert pod.node_name is not None
        room[pod.node_name].subtract(pod.requests)
    return room


@pytest.fixture(scope="module")
def saturated() -> Inventory:
    return _inventory(gen.generate_saturated(1, queues=20, workloads=600))


@pytest.fixture(scope="module")
def contended() -> Inventory:
    spec = replace(gen.CONTENDED, nodes=60, workloads=300, queues=15, leaves_per_cohort=5)
    return _inventory(gen.generate_spec(spec, "test/contended/1"))


def test_every_shape_name_resolves_and_an_unknown_one_is_refused() -> None:
    """Each shape the benchmarks run by default has a generator; a misspelt one is an error."""
    for name in (*gen.SHAPES, "S", "grow-queues-2500", "grow-deep-20000"):
        assert callable(gen.shape_maker(name))
    for name in ("saturate", "grow-wide-100", "grow-deep-x", "grow-deep-0", "typical-XL"):
        with pytest.raises(ValueError, match="unknown shape"):
            gen.shape_maker(name)


def test_shapes_are_deterministic_per_seed() -> None:
    """The same seed gives identical objects; another seed gives others."""
    small = {"queues": 10, "workloads": 100}
    assert gen.generate_saturated(2, **small) == gen.generate_saturated(2, **small)
    assert gen.generate_saturated(2, **small) != gen.generate_saturated(3, **small)
    spec = replace(gen.CONTENDED, nodes=20, workloads=100, queues=10, leaves_per_cohort=5)
    assert gen.generate_spec(spec, "k/1") == gen.generate_spec(spec, "k/1")
    assert gen.generate_spec(spec, "k/1") != gen.generate_spec(spec, "k/2")


def test_saturated_every_queue_uses_exactly_its_nominal(saturated: Inventory) -> None:
    """Each leaf's admitted usage equals its nominal quota for every flavor and resource."""
    leaves = [q for q in saturated.queues.values() if q.resource_groups]
    assert len(leaves) == 20
    usage = _usage(saturated)
    for queue in leaves:
        nominal = _nominal(saturated, queue.name)
        assert nominal and all(amount > 0 for amount in nominal.values()), queue.name
        assert dict(usage[queue.name]) == nominal, queue.name


def test_saturated_has_77_percent_pending_and_spread_priorities(saturated: Inventory) -> None:
    """77 % of the workloads are pending; inside each queue priorities span the range."""
    workloads = list(saturated.workloads.values())
    pending = sum(1 for w in workloads if w.admission is None)
    assert pending / len(workloads) == pytest.approx(0.77, abs=0.01)
    by_queue: dict[str, list[int]] = defaultdict(list)
    for workload in workloads:
        by_queue[workload.queue].append(workload.priority)
    for queue, priorities in by_queue.items():
        assert len(priorities) == 30, queue
        assert min(priorities) < 250 and max(priorities) > 750, queue
        assert len(set(priorities)) > 20, queue


def test_saturated_nodes_are_full_and_pods_sit_on_their_flavor(saturated: Inventory) -> None:
    """No node is over its allocatable, at most one node per flavor has GPUs free, and every
    pod sits on a node of the flavor its workload was admitted on."""
    room = _node_room(saturated)
    assert all(amount >= 0 for free in room.values() for amount in free.values())
    partly_free = Counter(saturated.nodes[name].labels[gen.FLAVOR_LABEL] for name, free in room.items() if free[GPU])
    assert all(count <= 1 for count in partly_free.values())
    for pod in saturated.pods.values():
        assert pod.workload is not None and pod.node_name is not None
        admission = saturated.workloads[pod.workload].admission
        assert admission is not None
        flavor = admission.pod_sets[0].flavors[GPU]
        assert saturated.nodes[pod.node_name].labels[gen.FLAVOR_LABEL] == flavor


def test_saturated_allocate_alone_admits_nothing(saturated: Inventory) -> None:
    """With every queue at nominal in full cohorts, no pending workload fits without a
    victim: a session that only allocates admits none (nothing can be borrowed)."""
    _, registry = default_session()
    snapshot = Snapshot.build(saturated, now=gen.NOW_MS)
    decisions = run_session(snapshot, registry(), actions=("allocate",))
    assert decisions.admitted == []
    assert len(decisions.pending) == sum(1 for w in saturated.workloads.values() if w.admission is None)


def test_contended_many_heads_want_gpus_of_one_full_flavor(contended: Inventory) -> None:
    """Every queue tries the same flavor first; most queues' heads (their highest-priority
    pending workload) ask for GPUs, and together they ask for more GPUs than that flavor's
    nodes have free."""
    first = Counter(
        q.resource_groups[0].flavors[0].flavor for q in contended.queues.values() if q.resource_groups
    )
    assert len(first) == 1
    (flavor, queues), = first.items()
    assert queues == 15
    heads: dict[str, Workload] = {}
    for workload in sorted(contended.workloads.values(), key=lambda w: (-w.priority, w.created)):
        if workload.admission is None:
            heads.setdefault(workload.queue, workload)
    gpu_heads = [w for w in heads.values() if any(GPU in ps.requests for ps in w.pod_sets)]
    assert len(gpu_heads) >= 0.8 * queues
    wanted = sum(ps.count * ps.requests.get(GPU, 0) for w in gpu_heads for ps in w.pod_sets)
    room = _node_room(contended)
    free = sum(r[GPU] for name, r in room.items() if contended.nodes[name].labels[gen.FLAVOR_LABEL] == flavor)
    assert wanted > free


def test_large_is_the_three_level_L_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """``large`` generates L (4,000 nodes, 1,000 queues in cohorts under orgs, 20k
    workloads); scaled down, the tree still has orgs above the cohorts."""
    monkeypatch.setattr(gen, "generate", lambda size, seed: [{"size": size, "seed": seed}])
    assert gen.generate_shape("large", 7) == [{"size": "L", "seed": 7}]
    monkeypatch.undo()
    spec = gen.SIZES["L"]
    assert (spec.nodes, spec.queues, spec.workloads, spec.cohorts_per_group) == (4_000, 1_000, 20_000, 10)
    small = replace(spec, nodes=40, workloads=200, queues=200, leaves_per_cohort=10)
    inventory = _inventory(gen.generate_spec(small, "test/large/1"))
    cohort = inventory.queues["cohort-000"]
    assert cohort.parent == "org-00"
    assert inventory.queues["q-0000"].parent == "cohort-000"
    assert inventory.pods


def test_growth_series_grow_queues_or_depth() -> None:
    """``queues`` keeps 100 workloads per queue; ``deep`` keeps 100 queues; both 10 per node."""
    for count in (2_500, 20_000):
        wide = gen.growth_spec("queues", count)
        deep = gen.growth_spec("deep", count)
        assert (wide.queues, wide.nodes, wide.workloads) == (count // 100, count // 10, count)
        assert (deep.queues, deep.nodes, deep.workloads) == (100, count // 10, count)
    tiny = gen.generate_shape("grow-deep-300", 1)
    assert sum(1 for o in tiny if o["kind"] == "Workload") == 300
    assert sum(1 for o in tiny if o["kind"] == "Queue") == 100  # cohorts are implicit


def test_exponent_fits_a_power_law() -> None:
    """Linear growth fits 1.0, quadratic 2.0 (checked by hand: t = c * n**k)."""
    counts = [2_500, 5_000, 10_000, 20_000]
    assert exponent(counts, [0.1 * n for n in counts]) == pytest.approx(1.0)
    assert exponent(counts, [3e-9 * n * n for n in counts]) == pytest.approx(2.0)


def test_parse_floor_counts_every_object(tmp_path: Path) -> None:
    """The floor script visits every object of the file it reads, as a whole process."""
    objects = gen.generate_saturated(1, queues=10, workloads=50)
    kinds = Counter(str(o["kind"]) for o in objects)
    assert touch(objects) == kinds + Counter({"with a body": len(objects) - kinds["PriorityClass"]})
    path = tmp_path / "saturated.json"
    path.write_text(json.dumps(objects), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(_ROOT / "benchmarks" / "parse_floor.py"), str(path)],
        capture_output=True, text=True, check=True,
    )
    assert f"Workload={kinds['Workload']}" in done.stdout.split()


def test_generate_cli_writes_a_shape_to_json(tmp_path: Path) -> None:
    """``python -m benchmarks.generate --shape NAME --out F.json`` writes that shape."""
    path = tmp_path / "s.json"
    assert gen.main(["--shape", "grow-deep-300", "--seed", "4", "--out", str(path)]) == 0
    assert json.loads(path.read_text(encoding="utf-8")) == gen.generate_shape("grow-deep-300", 4)
    with pytest.raises(SystemExit):
        gen.main(["--shape", "saturate", "--out", str(path)])
