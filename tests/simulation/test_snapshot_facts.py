"""Facts the simulator keeps between sessions and hands each snapshot, so that plugins
read them at open instead of scanning the cluster every session: how many of the
snapshot's workloads are Deployments (``Snapshot.deployment_count``, read by
gpu-victims through ``Snapshot.has_deployments``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from preemptd.daemon.simulation.cluster import ClusterModel
from preemptd.daemon.simulation.command import setup
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import load_scenario
from preemptd.framework.model import Workload
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import inventory, queue, workload
from preemptd.plugins import gpu_victims, priority

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "gpu-serving.yaml"


class _Counts:
    """Records, at every session's open, the count the snapshot came with and a recount."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, int]] = []

    @hookimpl
    def session_open(self, session: Session) -> None:
        snapshot = session.snapshot
        kept = snapshot.deployment_count
        self.seen.append((kept, sum(w.is_deployment for w in snapshot.workloads.values())))


def test_the_simulators_snapshots_carry_the_count_of_their_deployments(tmp_path: Path) -> None:
    """Deployments arrive, finish and are scaled among Jobs (the bundled serving example,
    with its batch Deployment arriving again every 40 minutes for 30): at every session
    the count the model kept is the number of Deployments in the snapshot's workloads,
    and it went up and down during the run."""
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    for entry in data["workloads"]:
        if entry["object"]["metadata"]["name"] == "batch-embed":
            entry["runtime"] = "30m"
            entry["repeat"] = {"count": 8, "every": "40m"}
    path = tmp_path / "serving.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    scenario = load_scenario(path)
    plugins = setup(scenario, None).plugins.registry()
    counts = _Counts()  # first, before gpu-victims asks the snapshot
    registry = Registry(
        [("counts", counts, None), *((name, plugins.pm.get_plugin(name), plugins.configs[name]) for name in plugins.names)]
    )
    simulate(scenario, registry, actions=("allocate", "preempt"), cycle_interval=scenario.cycle_interval)
    assert counts.seen and all(kept == recount for kept, recount in counts.seen)
    assert len({recount for _, recount in counts.seen}) > 2


def _deployment(name: str) -> Workload:
    return dataclasses.replace(workload(name, "q", 1), owner_kind="Deployment")


def test_a_built_snapshot_counts_its_deployments_once_when_first_asked() -> None:
    """Snapshot.build leaves the count unknown; the first question counts, later ones read it."""
    snapshot = Snapshot.build(inventory([queue("q", cpu=4)], [_deployment("d"), workload("j", "q", 1)]), now=0)
    before = snapshot.deployment_count
    assert (None, True, 1) == (before, snapshot.has_deployments(), snapshot.deployment_count)
    empty = Snapshot.build(inventory([queue("q", cpu=4)], [workload("j", "q", 1)]), now=0)
    assert (False, 0) == (empty.has_deployments(), empty.deployment_count)


def test_gpu_victims_takes_the_snapshots_kept_count_instead_of_scanning() -> None:
    """A snapshot handed a count of 0 is taken at its word: gpu-victims declares at open
    that it refuses nothing, without looking through the workloads (which here would
    say otherwise)."""
    snapshot = Snapshot.build(inventory([queue("q", cpu=4)], [_deployment("d")]), now=0)
    snapshot.deployment_count = 0
    session = Session(snapshot, Registry([("priority", priority, None), ("gpu-victims", gpu_victims, None)]))
    session.open()
    assert not session.may_veto


def test_listings_by_queue_are_handed_on_until_a_listing_of_their_kind_changes() -> None:
    """Successive snapshots of an unchanged model share the admitted and pending mappings
    by queue; a new pending workload renews the pending one only, and both stay what
    Snapshot.build makes of the same objects."""
    model = ClusterModel(inventory([queue("q", cpu=4), queue("r", cpu=4)], []))
    model.add([workload("run", "q", 1, admitted=True), workload("wait", "r", 8)], now=0)
    first, second = model.snapshot(now=0), model.snapshot(now=1)
    model.add([workload("late", "q", 8)], now=2)
    third = model.snapshot(now=2)
    built = Snapshot.build(model.inventory(), now=2)
    assert first.admitted_by_queue is second.admitted_by_queue is third.admitted_by_queue
    assert first.pending_by_queue is second.pending_by_queue is not third.pending_by_queue
    assert (dict(built.admitted_by_queue), dict(built.pending_by_queue)) == (
        dict(third.admitted_by_queue),
        dict(third.pending_by_queue),
    )
    assert ["q", "r"] == list(third.pending_by_queue)
