"""The simulator (issue 7): scenarios, the discrete-event clock, invariants, the report."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from preemptd.daemon.cli import main
from preemptd.daemon.simulation import engine as simulation
from preemptd.daemon.simulation.command import setup, to_toml
from preemptd.daemon.simulation.engine import simulate
from preemptd.daemon.simulation.scenario import ScenarioError, load_scenario, scenario_from_data
from preemptd.framework.decisions import Admitted, AdmittedPodSet, Decisions

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLES = REPO / "examples" / "scenarios"
GPU = "nvidia.com/gpu"
API = "preemptd.io/v1alpha1"


# --- builders ------------------------------------------------------------------------------


def flavor(name: str = "default", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {"nodeLabels": labels or {}}}


def queue(name: str, quotas: dict[str, int], parent: str | None = "lab", **spec: Any) -> dict[str, Any]:
    flavors = [{"name": f, "resources": [{"name": GPU, "nominalQuota": str(n)}]} for f, n in quotas.items()]
    body: dict[str, Any] = {"resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}], **spec}
    if parent is not None:
        body["parent"] = parent
    return {"apiVersion": API, "kind": "Queue", "metadata": {"name": name}, "spec": body}


def job(
    name: str, queue_name: str, gpus: int, *, arrival: str, runtime: str, count: int = 1, **extra: Any
) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": count, "requests": {GPU: str(gpus)}}
    if "min_count" in extra:
        pod_set["minCount"] = extra.pop("min_count")
    entry: dict[str, Any] = {
        "arrival": arrival,
        "runtime": runtime,
        "object": {
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"queueName": queue_name, "podSets": [pod_set], **extra},
        },
    }
    return entry


def lab(**spec_b: Any) -> list[dict[str, Any]]:
    """A cohort ``lab`` of two 8-GPU queues that reclaim from each other."""
    return [
        flavor(),
        queue("team-a", {"default": 8}, preemption={"withinQueue": "LowerPriority", "reclaimWithinCohort": "Any"}),
        queue("team-b", {"default": 8}, preemption={"reclaimWithinCohort": "Any"}, **spec_b),
    ]


def run(data: dict[str, Any], *, verify: bool = False, config: str | None = None) -> dict[str, Any]:
    scenario = scenario_from_data(data, source="test")
    entry = setup(scenario, config)
    outcome = simulate(
        scenario,
        entry.plugins.registry(),
        actions=tuple(entry.config.scheduler.actions),
        cycle_interval=entry.cycle_interval,
        verify=entry.plugins.registry() if verify else None,
    )
    return outcome.figures


def violations(figures: dict[str, Any]) -> dict[str, int]:
    invariants = figures["invariants"]
    return {key: invariants[key]["count"] for key in ("quotaExceeded", "minRuntimeViolations", "preemptorStalls")}


# --- hand-checked scenarios -----------------------------------------------------------------


def test_reclaim_story_waits_preemptions_and_work_lost() -> None:
    """Cohort reclaim evicts the newest borrowers, the preemptor waits out the grace, the victims requeue.

    team-b gets b-0..b-3 (4 GPUs each) at 0, 1m, 2m, 3m: 16 GPUs, borrowing 8 of
    team-a's. a (8 GPUs) arrives at 20m within team-a's nominal and reclaims the
    newest: b-3 then b-2 (4 + 4 = 8). They go at 20m30s (grace 30s): a is admitted,
    waiting 30s. b-2 and b-3 requeue and fit again when a ends at 50m30s: 30m each.
    team-b waits [0, 0, 0, 0, 30m, 30m]: p50 0s, p95 and max 30m.
    Work lost: (20m − 2m) × 4 + (20m − 3m) × 4 = 140 GPU-minutes = 2.333 GPU-hours.
    team-b used: 4 × 1h × 2 (b-0, b-1) + 4 × (18.5m + 17.5m)/60 (until gone) + 4 × 1h × 2
    (reruns) = 16 + 2.4 = 18.4 GPU-hours; team-a used 8 × 0.5h = 4.
    team-b borrows 4 × 1m (2m–3m) + 8 × 17.5m (to 20m30s) + 8 × 9.5m (50m30s–1h) + 4 × 1m
    = 224 GPU-minutes = 3.733 h, all of it lent by idle team-a.
    """
    figures = run(
        {
            "duration": "2h",
            "cycleInterval": "10s",
            "objects": lab(),
            "workloads": [
                {**job("b", "team-b", 4, arrival="0s", runtime="1h"), "repeat": {"count": 4, "every": "1m"}},
                job("a", "team-a", 8, arrival="20m", runtime="30m"),
            ],
        },
        verify=True,
    )
    assert {"total": 2, "evictions": 2, "shrinks": 0, "byReason": {"InCohortReclamation": 2}} == figures["preemptions"]
    b, a = figures["queues"]["team-b"], figures["queues"]["team-a"]
    assert {"p50": 0.0, "p95": 1800.0, "max": 1800.0} == b["waitSeconds"]
    assert {"p50": 30.0, "p95": 30.0, "max": 30.0} == a["waitSeconds"]
    assert (6, 1) == (b["admissions"], a["admissions"])
    assert 2.333 == b["workLostHours"]
    assert (18.4, 4.0) == (b["usedHours"], a["usedHours"])
    assert (3.733, 3.733) == (b["borrowedHours"], a["lentHours"])
    assert 0 == figures["thrash"]["workloads"]
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_reclaim_waits_for_the_victims_min_runtime_window() -> None:
    """A victim protected by its queue's reclaimMinRuntime is reclaimed exactly when the window ends.

    b-big (16 GPUs, borrowing 8) starts at 0; team-b sets reclaimMinRuntime 15m, which
    the LCA rule applies (lab's child on the victim's side is team-b). a (8 GPUs)
    arrives at 5m and is vetoed until 15m, when the clock wakes for the window's end
    although nothing else happens; b-big goes at 15m30s, a waits 10m30s. b-big
    requeues and fits again when a ends at 45m30s: wait 30m. Work lost 15m × 16 = 4 GPU-h.
    """
    figures = run(
        {
            "duration": "3h",
            "cycleInterval": "10s",
            "objects": lab(reclaimMinRuntime="15m"),
            "workloads": [
                job("b-big", "team-b", 16, arrival="0s", runtime="2h"),
                job("a", "team-a", 8, arrival="5m", runtime="30m"),
            ],
        },
        verify=True,
    )
    assert 630.0 == figures["queues"]["team-a"]["waitSeconds"]["max"]
    assert 1800.0 == figures["queues"]["team-b"]["waitSeconds"]["max"]
    assert 4.0 == figures["queues"]["team-b"]["workLostHours"]
    assert figures["vetoes"]["min-runtime"] > 0
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_shrunk_elastic_victim_releases_its_pods_at_once() -> None:
    """An elastic victim loses pods above minCount and their quota immediately: no grace to wait.

    b-serve runs 12 one-GPU pods (minCount 4), borrowing 4. a (8 GPUs) arrives at 10m;
    4 are free, so 4 single pods are taken (one shrink of count 4, b-serve keeps 8 =
    its nominal). The next cycle, 10s later, admits a: wait 10s, nothing evicted, no
    work lost.
    """
    figures = run(
        {
            "duration": "1h",
            "cycleInterval": "10s",
            "objects": lab(),
            "workloads": [
                job("b-serve", "team-b", 1, count=12, min_count=4, arrival="0s", runtime="forever"),
                job("a", "team-a", 8, arrival="10m", runtime="20m"),
            ],
        },
        verify=True,
    )
    assert {"total": 1, "evictions": 0, "shrinks": 1, "byReason": {"InCohortReclamation": 1}} == figures["preemptions"]
    assert 10.0 == figures["queues"]["team-a"]["waitSeconds"]["max"]
    assert (0, 1) == (figures["queues"]["team-b"]["evicted"], figures["queues"]["team-b"]["shrunk"])
    assert 0.0 == figures["thrash"]["workLostHours"]


def test_a_finishing_workload_hands_its_quota_to_the_next() -> None:
    """Run time counts from admission; the waiting workload starts the moment quota frees.

    One 8-GPU queue: j0 (8 GPUs, 1h) at 0 and j1 (8 GPUs, 30m) at 5m. j1 waits until
    j0 ends at 1h: 55m. Used 8 × 1h + 8 × 0.5h = 12 GPU-h of 8 × 2h = 16: utilization 75%.
    """
    figures = run(
        {
            "duration": "2h",
            "objects": [flavor(), queue("solo", {"default": 8}, parent=None)],
            "workloads": [
                job("j0", "solo", 8, arrival="0s", runtime="1h"),
                job("j1", "solo", 8, arrival="5m", runtime="30m"),
            ],
        }
    )
    assert 3300.0 == figures["queues"]["solo"]["waitSeconds"]["max"]
    assert 12.0 == figures["queues"]["solo"]["usedHours"]
    assert 0.75 == figures["flavors"]["default"]["meanUtilization"]


def test_nodes_keep_a_quota_fitting_workload_waiting() -> None:
    """With Node objects a workload waits for room on a node, not only for quota.

    Two 8-GPU nodes, quota 16. j0 and j1 (one 6-GPU pod each) land on different nodes,
    leaving 2 GPUs on each; j2 (one 4-GPU pod) at 1m fits the quota (12 + 4 = 16) but
    no node, until j0 ends at 30m: wait 29m. Capacity comes from the nodes: 16.
    """
    figures = run(
        {
            "duration": "1h",
            "nodeGroups": [{"name": "node", "count": 2, "labels": {"pool": "gpu"}, "allocatable": {GPU: "8"}}],
            "objects": [flavor("default", {"pool": "gpu"}), queue("solo", {"default": 16}, parent=None)],
            "workloads": [
                job("j0", "solo", 6, arrival="0s", runtime="30m"),
                job("j1", "solo", 6, arrival="0s", runtime="2h"),
                job("j2", "solo", 4, arrival="1m", runtime="10m"),
            ],
        },
        verify=True,
    )
    assert 1740.0 == figures["queues"]["solo"]["waitSeconds"]["max"]
    assert 16.0 == figures["flavors"]["default"]["capacity"]


def test_skipping_idle_cycles_changes_nothing_but_the_session_count() -> None:
    """Jumping over cycles that could not decide differently gives the figures of running them all."""
    data = {
        "duration": "3h",
        "cycleInterval": "30s",
        "objects": lab(reclaimMinRuntime="15m"),
        "workloads": [
            {**job("b", "team-b", 4, arrival="0s", runtime="50m"), "repeat": {"count": 6, "every": "7m", "jitter": "3m"}},
            {**job("a", "team-a", 8, arrival="20m", runtime="25m"), "repeat": {"count": 3, "every": "30m"}},
        ],
    }
    skipped = run(data)
    every = run({**data, "runIdleCycles": True})
    assert skipped["sessions"] < every["sessions"] == 361
    for figures in (skipped, every):
        figures.pop("sessions")
        figures.pop("idleCyclesSkipped")
    assert every == skipped


def test_verify_mode_reports_a_model_that_disagrees_with_snapshot_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification catches a simulator snapshot that differs from Snapshot.build of the same objects."""
    original = simulation.ClusterModel.snapshot

    def without_pending(self: Any, *, now: int) -> Any:
        snap = original(self, now=now)
        snap.pending, snap.pending_by_queue = [], {}
        return snap

    monkeypatch.setattr(simulation.ClusterModel, "snapshot", without_pending)
    with pytest.raises(simulation.SimulationError, match="decided differently"):
        run({"duration": "10m", "objects": lab(), "workloads": [job("a", "team-a", 1, arrival="0s", runtime="1m")]}, verify=True)


def test_quota_invariant_records_a_session_that_admits_beyond_quota(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that admits more than the cohort holds is recorded as a quota violation."""

    def greedy(snapshot: Any, registry: Any, **_: Any) -> Decisions:
        decisions = Decisions(now=snapshot.now)
        for workload in snapshot.pending:
            pod_sets = tuple(AdmittedPodSet(ps.name, ps.count, {GPU: "default"}) for ps in workload.pod_sets)
            decisions.admitted.append(Admitted(workload.key, workload.queue, False, pod_sets))
        return decisions

    monkeypatch.setattr(simulation, "run_session", greedy)
    figures = run(
        {
            "duration": "10m",
            "objects": lab(),
            "workloads": [job("a", "team-a", 12, arrival="0s", runtime="1h"), job("b", "team-b", 8, arrival="0s", runtime="1h")],
        }
    )
    listed = figures["invariants"]["quotaExceeded"]["listed"]
    assert {("lab", 20, 16)} == {(v["queue"], v["usage"], v["limit"]) for v in listed}


# --- invariants over generated scenarios -----------------------------------------------------

_WITHIN = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
_RECLAIM = ("Never", "LowerPriority", "Any")
_WINDOWS = (None, "0s", "5m", "20m")


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """Small random clusters: one or two flavors, a one- or two-level cohort tree,
    policies, min-runtime windows, optional nodes, and a few hours of arrivals."""
    flavors = ["f0", "f1"][: draw(st.integers(1, 2))]
    two_levels = draw(st.booleans())
    objects: list[dict[str, Any]] = [flavor(f, {"pool": f}) for f in flavors]
    if two_levels:
        for cohort in ("c0", "c1"):
            objects.append({"apiVersion": API, "kind": "Queue", "metadata": {"name": cohort},
                            "spec": {"parent": "org", "reclaimMinRuntime": draw(st.sampled_from(_WINDOWS))}})
    leaves = [f"q{i}" for i in range(draw(st.integers(2, 4)))]
    totals = dict.fromkeys(flavors, 0)
    for index, name in enumerate(leaves):
        resources = []
        for f in flavors:
            nominal = draw(st.integers(0, 16))
            totals[f] += nominal
            entry: dict[str, Any] = {"name": GPU, "nominalQuota": str(nominal)}
            limit = draw(st.sampled_from(("none", "borrowing", "lending")))
            if limit != "none":
                entry[f"{limit}Limit"] = str(draw(st.integers(0, nominal)))
            resources.append(entry)
        reclaim = draw(st.sampled_from(_RECLAIM))
        preemption: dict[str, Any] = {"withinQueue": draw(st.sampled_from(_WITHIN)), "reclaimWithinCohort": reclaim}
        if reclaim != "Never" and draw(st.booleans()):
            preemption["borrowWithinCohort"] = {"policy": "LowerPriority", "maxPriorityThreshold": 50}
        spec: dict[str, Any] = {
            "parent": f"c{index % 2}" if two_levels else "lab",
            "preemption": preemption,
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                {"name": f, "resources": [r]} for f, r in zip(flavors, resources, strict=True)
            ]}],
            "queueingStrategy": draw(st.sampled_from(("BestEffortFIFO", "StrictFIFO"))),
            "flavorFungibility": {
                "whenCanBorrow": draw(st.sampled_from(("MayStopSearch", "TryNextFlavor"))),
                "whenCanPreempt": draw(st.sampled_from(("MayStopSearch", "TryNextFlavor"))),
            },
        }
        for key in ("preemptMinRuntime", "reclaimMinRuntime"):
            window = draw(st.sampled_from(_WINDOWS))
            if window is not None:
                spec[key] = window
        objects.append({"apiVersion": API, "kind": "Queue", "metadata": {"name": name}, "spec": spec})
    workloads = []
    for index in range(draw(st.integers(4, 20))):
        count = draw(st.integers(1, 3))
        entry = job(
            f"w{index}",
            draw(st.sampled_from(leaves)),
            draw(st.integers(1, 8)),
            count=count,
            arrival=f"{draw(st.integers(0, 90))}m",
            runtime=f"{draw(st.integers(10, 120))}m",
            priority=draw(st.sampled_from((0, 50, 100))),
        )
        if count > 1 and draw(st.booleans()):
            entry["object"]["spec"]["podSets"][0]["minCount"] = draw(st.integers(1, count))
        workloads.append(entry)
    data: dict[str, Any] = {
        "duration": "4h",
        "cycleInterval": "1m",
        "terminationGrace": draw(st.sampled_from(("0s", "30s", "3m"))),
        "objects": objects,
        "workloads": workloads,
        "config": {"plugins": {"min-runtime": {
            "default_preempt_min_runtime": draw(st.sampled_from(("0s", "10m"))),
            "default_reclaim_min_runtime": draw(st.sampled_from(("0s", "10m"))),
        }}},
    }
    if draw(st.booleans()):
        data["nodeGroups"] = [
            {"name": f, "count": max(1, -(-totals[f] // 8)), "labels": {"pool": f}, "allocatable": {GPU: "8"}}
            for f in flavors
        ]
    return data


# Derandomized, so that CI runs the same examples every time: the bugs this found (the
# test below, the first of them) showed up in about one generated scenario in a thousand,
# and a test that fails one run in thirty helps nobody. To hunt, raise max_examples and
# drop derandomize locally.
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_generated_scenarios_keep_every_invariant(data: dict[str, Any]) -> None:
    """Quota is never exceeded, no victim goes before its min-runtime, preemptors get in once
    their victims are gone; and the simulator's snapshots decide as Snapshot.build's do."""
    figures = run(data, verify=True)
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


@st.composite
def deployment_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """The random clusters above, always with nodes, plus Deployments of small replicas
    whose desired counts change over time."""
    data = draw(scenarios())
    flavors = [o["metadata"]["name"] for o in data["objects"] if o["kind"] == "ResourceFlavor"]
    if "nodeGroups" not in data:
        data["nodeGroups"] = [
            {"name": f, "count": draw(st.integers(1, 4)), "labels": {"pool": f}, "allocatable": {GPU: "8"}}
            for f in flavors
        ]
    leaves = [o["metadata"]["name"] for o in data["objects"]
              if o["kind"] == "Queue" and "resourceGroups" in o["spec"]]
    changes = []
    for index in range(draw(st.integers(1, 4))):
        name = f"d{index}"
        entry = deployment(name, draw(st.sampled_from((0, 50, 100, 200))), draw(st.integers(1, 4)),
                           arrival=f"{draw(st.integers(0, 60))}m")
        spec = entry["object"]["spec"]
        spec["queueName"] = draw(st.sampled_from(leaves))
        spec["podSets"][0]["requests"] = {GPU: str(draw(st.sampled_from((1, 2, 4))))}
        if draw(st.booleans()):
            entry["runtime"] = f"{draw(st.integers(30, 180))}m"
        data["workloads"].append(entry)
        for _ in range(draw(st.integers(0, 3))):
            changes.append({"at": f"{draw(st.integers(0, 200))}m", "workload": f"web/{name}",
                            "replicas": draw(st.integers(1, 6))})
    data["replicaChanges"] = changes
    return data


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(deployment_scenarios())
def test_generated_deployment_scenarios_keep_every_invariant(data: dict[str, Any]) -> None:
    """With Deployments growing, shrinking and losing pods, the invariants still hold and the
    simulator's snapshots (terminating pods included) decide as Snapshot.build's do."""
    figures = run(data, verify=True)
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_fit_entries_never_take_quota_that_only_victims_will_free() -> None:
    """Entries admitted in the round of a preemption fit without the victims' quota.

    Cohort lab holds 11 GPUs (qv 1, qp 4, qx 3, qy 3); v (qv, 5, borrowing 4) and r (qy,
    3) run, so 3 are free. At 1m: p (qp, 4, priority 100) must reclaim v; x (qx, 3) and
    y (qy, 1) each fit the 3 free alone, not together. Admitting both while v is still
    leaving puts the cohort at 5 + 3 + 3 + 1 = 12 > 11.
    """
    figures = run(
        {
            "duration": "10m",
            "objects": [
                flavor(),
                queue("qv", {"default": 1}),
                queue("qp", {"default": 4}, preemption={"reclaimWithinCohort": "Any"}),
                queue("qx", {"default": 3}),
                queue("qy", {"default": 3}),
            ],
            "workloads": [
                job("v", "qv", 5, arrival="0s", runtime="1h"),
                job("r", "qy", 3, arrival="0s", runtime="1h"),
                job("p", "qp", 4, arrival="1m", runtime="1h", priority=100),
                job("x", "qx", 3, arrival="1m", runtime="1h"),
                job("y", "qy", 1, arrival="1m", runtime="1h"),
            ],
        }
    )
    assert 0 == figures["invariants"]["quotaExceeded"]["count"]


# --- the scenario format --------------------------------------------------------------------


def test_repeats_expand_with_names_jitter_and_runtime_ranges_from_the_seed() -> None:
    """Repeated arrivals get suffixed names, spaced arrivals and seeded runtimes within their range."""
    data = {
        "duration": "1h",
        "seed": 5,
        "objects": lab(),
        "workloads": [
            {**job("b", "team-b", 1, arrival="1m", runtime="1m"), "runtime": {"min": "10m", "max": "20m"},
             "repeat": {"count": 12, "every": "2m", "jitter": "30s"}},
        ],
    }
    first = scenario_from_data(data, source="test")
    again = scenario_from_data(data, source="test")
    assert [f"ml/b-{i:02d}" for i in range(12)] == [a.key for a in first.arrivals]
    assert all(60_000 + 120_000 * i <= a.at <= 90_000 + 120_000 * i for i, a in enumerate(first.arrivals))
    assert all(a.runtime is not None and 600_000 <= a.runtime <= 1_200_000 for a in first.arrivals)
    assert len({a.runtime for a in first.arrivals}) > 1
    assert first.arrivals == again.arrivals


def test_scenario_problems_are_all_listed_with_their_paths() -> None:
    """A broken scenario reports every structural problem at once, each with its key path."""
    with pytest.raises(ScenarioError) as caught:
        scenario_from_data(
            {
                "cycleInterval": "0s",
                "colour": "blue",
                "replicaChanges": [{"at": "later", "workload": "x", "replicas": 0}],
                "workloads": [{"arrival": "soon", "runtime": "1h", "object": {"metadata": {"name": "x"}, "status": {}}}],
            },
            source="s.yaml",
        )
    messages = "\n".join(caught.value.messages)
    for fragment in (
        "s.yaml: duration: required field is missing",
        "s.yaml: cycleInterval: must be longer than 0s",
        "s.yaml: colour: unknown key",
        "s.yaml: replicaChanges[0].at: malformed duration 'later'",
        "s.yaml: replicaChanges[0].workload: expected a workload key namespace/name, got 'x'",
        "s.yaml: replicaChanges[0].replicas: expected an integer >= 1, got 0",
        "s.yaml: workloads[0].arrival: malformed duration 'soon'",
        "s.yaml: workloads[0].object.status: an arriving workload has no status",
    ):
        assert fragment in messages


def test_invalid_objects_are_isolated_not_fatal() -> None:
    """An arriving workload on an unknown queue is reported and stays pending Inadmissible."""
    data = {
        "duration": "30m",
        "objects": lab(),
        "workloads": [job("lost", "nowhere", 1, arrival="0s", runtime="5m"), job("ok", "team-a", 1, arrival="0s", runtime="5m")],
    }
    scenario = scenario_from_data(data, source="test")
    assert any("nowhere" in problem for problem in scenario.problems)
    figures = run(data)
    assert {"Inadmissible": 1} == figures["pendingAtEnd"]
    assert 1 == figures["admissions"]


def test_scenario_config_is_valid_toml_for_the_configuration_checks() -> None:
    """The scenario's config table becomes TOML that reads back as the same data."""
    table = {"scheduler": {"actions": ["allocate", "preempt"], "cycle_interval": "5s"},
             "plugins": {"min-runtime": {"default_reclaim_min_runtime": "10m", "enabled": True}}}
    assert table == tomllib.loads(to_toml(table))


def test_every_example_scenario_loads() -> None:
    """The bundled example scenarios are valid."""
    paths = sorted(EXAMPLES.glob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        scenario = load_scenario(path)
        assert scenario.arrivals and not scenario.problems


# --- the command -----------------------------------------------------------------------------


def write(tmp_path: Path, data: dict[str, Any], name: str = "scenario.yaml") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_identical_runs_write_byte_identical_reports(tmp_path: Path) -> None:
    """Same scenario, configuration and seed: report.json and report.html are byte for byte the same."""
    scenario = str(EXAMPLES / "spot-on-demand.yaml")
    assert 0 == main(["simulate", scenario, "--report", str(tmp_path / "one")])
    assert 0 == main(["simulate", scenario, "--report", str(tmp_path / "two")])
    for name in ("report.json", "report.html"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    html = (tmp_path / "one" / "report.html").read_text(encoding="utf-8")
    assert "<svg" in html and "<script" not in html


def test_compare_runs_the_scenario_under_both_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--compare adds a second run whose configuration overrides the scenario's own."""
    scenario = str(EXAMPLES / "research-reclaim.yaml")
    assert 0 == main(["simulate", scenario, "--compare", str(EXAMPLES / "protect-30m.toml"), "--report", str(tmp_path)])
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert ["default", "protect-30m.toml"] == [run["label"] for run in report["runs"]]
    waits = [run["queues"]["research"]["waitSeconds"]["max"] for run in report["runs"]]
    assert waits[0] < waits[1]
    assert "protect-30m.toml" in capsys.readouterr().out


def test_a_bad_scenario_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unusable scenario is exit 2 with its problems on stderr."""
    assert 2 == main(["simulate", write(tmp_path, {"objects": []})])
    assert "duration: required field is missing" in capsys.readouterr().err
    assert 2 == main(["simulate", str(tmp_path / "missing.yaml")])


def test_a_bad_configuration_exits_78(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bad scenario config table or --config file is exit 78, located where it was written."""
    data = {"duration": "1h", "objects": lab(), "config": {"plugins": {"min-runtime": {"default_reclaim_min_runtime": "10"}}}}
    assert 78 == main(["simulate", write(tmp_path, data)])
    assert "config: plugins.min-runtime: " in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text('[scheduler]\ncycle_interval = "fast"\n', encoding="utf-8")
    assert 78 == main(["simulate", write(tmp_path, {"duration": "1h", "objects": lab()}), "--config", str(bad)])
    assert f"{bad}:2: scheduler.cycle_interval" in capsys.readouterr().err


def test_timings_go_to_stderr_phase_by_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--timings prints one `timing <phase> <seconds>` line per phase, the actions included."""
    data = {"duration": "30m", "objects": lab(), "workloads": [job("a", "team-a", 1, arrival="0s", runtime="5m")]}
    assert 0 == main(["simulate", write(tmp_path, data), "--timings"])
    phases = [line.split()[1] for line in capsys.readouterr().err.splitlines() if line.startswith("timing ")]
    assert ["load", "setup", "events", "snapshot", "allocate", "session", "commit", "report"] == [
        p for p in phases if p != "preempt"
    ]


# --- Deployments ----------------------------------------------------------------------------


def deployment(name: str, priority: int, replicas: int, *, arrival: str = "0s", **entry: Any) -> dict[str, Any]:
    """A serving Deployment of one-GPU replicas in queue ``serving``; no runtime: it runs on."""
    return {
        "arrival": arrival,
        **entry,
        "object": {
            "metadata": {"name": name, "namespace": "web"},
            "spec": {
                "queueName": "serving",
                "priority": priority,
                "owner": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "podSets": [{"name": "main", "count": replicas, "requests": {GPU: "1"}}],
            },
        },
    }


def serving_fleet(grace: str, changes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """Two 2-GPU nodes and a 4-GPU queue ``serving`` that preempts lower priorities: high
    (priority 100, 1 replica) and low (priority 10, 3 replicas) fill it at 0."""
    return {
        "duration": "5m",
        "cycleInterval": "10s",
        "terminationGrace": grace,
        "nodeGroups": [{"name": "gpu", "count": 2, "labels": {"pool": "gpu"}, "allocatable": {GPU: "2"}}],
        "objects": [
            flavor("default", {"pool": "gpu"}),
            queue("serving", {"default": 4}, parent=None, preemption={"withinQueue": "LowerPriority"}),
        ],
        "workloads": [deployment("high", 100, 1), deployment("low", 10, 3)],
        "replicaChanges": changes,
        **extra,
    }


def sessions(monkeypatch: pytest.MonkeyPatch, data: dict[str, Any]) -> tuple[list[tuple[int, dict[str, Any]]], dict[str, Any]]:
    """Run ``data`` (verified against Snapshot.build) and return every session that decided
    something, as (seconds after the start, its decisions' JSON without pending), and the figures."""
    seen: dict[int, dict[str, Any]] = {}  # verify mode runs each session twice, alike
    original = simulation.run_session

    def recording(snapshot: Any, registry: Any, **kwargs: Any) -> Decisions:
        decisions = original(snapshot, registry, **kwargs)
        found = json.loads(decisions.to_json())
        del found["pending"], found["now"]
        if found["admitted"] or found["preempted"] or found["podActions"]:
            seen[(snapshot.now - START_MS) // 1000] = found
        return decisions

    monkeypatch.setattr(simulation, "run_session", recording)
    figures = run(data, verify=True)
    return sorted(seen.items()), figures


START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the default start


def admitted(name: str, count: int, *, grown: bool = False) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "workload": f"web/{name}", "queue": "serving", "borrowing": False,
        "podSets": [{"name": "main", "count": count, "flavors": {GPU: "default"}}],
    }
    if grown:
        entry["grown"] = True  # running, its count raised in place
    return entry


def test_deployment_scale_up_preempts_one_pod_and_grows_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Deployment scaled up on a full cluster takes one lower-priority pod and grows once it is gone.

    Session 0s admits high (1 replica) and low (3). Pods are placed best fit in admission
    order (same admittedAt, so by name): high-main-0 on gpu-000 (2 free → 1), low-main-0
    on gpu-000 (the least free room that fits), low-main-1 and low-main-2 on gpu-001.
    Nothing changes until the replicaChange at 1m sets high to 2: the 10s ticks 10s…50s
    are skipped, session 60s = 6 × 10s. Quota 4 is full, so high preempts one replica:
    low's pods are all normal (committed 3 > 1), equal priority and age, so the higher
    name goes first — low-main-2 on gpu-001 is taken (count 1, reason InQueue); low's
    committed count drops to 2 and the pod terminates. Grace 10s: the pod is gone at
    60s + 10s = 70s, which is the next tick, and session 70s admits high with 2
    replicas (its new total committed count). 4 sessions decide nothing else: 0s, 60s, 70s.
    """
    seen, figures = sessions(
        monkeypatch, serving_fleet("10s", [{"at": "1m", "workload": "web/high", "replicas": 2}])
    )
    assert [
        (0, {"admitted": [admitted("high", 1), admitted("low", 3)], "preempted": [], "podActions": []}),
        (60, {
            "admitted": [],
            "preempted": [{"workload": "web/low", "preemptor": "web/high", "reason": "InQueue",
                           "count": 1, "pods": ["web/low-main-2"]}],
            "podActions": [],
        }),
        (70, {"admitted": [admitted("high", 2, grown=True)], "preempted": [], "podActions": []}),
    ] == seen
    assert {"total": 1, "evictions": 0, "shrinks": 1, "byReason": {"InQueue": 1}} == figures["preemptions"]
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_a_terminating_victim_pod_is_force_deleted_when_the_grace_outlasts_a_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a grace longer than the cycle, the next session force-deletes the terminating victim pod.

    As above until 60s, but grace 30s: at 70s low-main-2 is still terminating (until
    90s), so high relies on it and issues ForceDelete (SEMANTICS §6: terminating → force
    delete); the pod is removed at once, and session 80s admits high's second replica.
    """
    seen, figures = sessions(
        monkeypatch, serving_fleet("30s", [{"at": "1m", "workload": "web/high", "replicas": 2}])
    )
    assert [0, 60, 70, 80] == [t for t, _ in seen]
    assert [{"pod": "web/low-main-2", "action": "ForceDelete", "preemptor": "web/high"}] == seen[2][1]["podActions"]
    assert [admitted("high", 2, grown=True)] == seen[3][1]["admitted"]
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_replica_changes_apply_at_their_time_scale_down_and_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A user scale-down lowers the committed count at once; a later scale-up grows into the freed room.

    low goes 3 → 1 at 2m: its committed count drops to 1 at 2m (no decision: the user
    did it) and its two surplus pods (newest, then higher name: low-main-2, low-main-1)
    terminate until 2m30s. high goes 1 → 3 at 2m10s: session 130s sees the surplus
    pods still holding gpu-001 and force-deletes them, session 140s admits high with 3.
    low at 3 → 1 uses 3 GPUs for 2m then 1 to 5m: (3 × 2 + 1 × 3) / 60 = 0.15 h, plus high
    1 × 140s + 3 × 160s = 620 GPU-s: 0.15 + 0.172 = 0.322 GPU-hours.
    """
    seen, figures = sessions(
        monkeypatch,
        serving_fleet("30s", [
            {"at": "2m10s", "workload": "web/high", "replicas": 3},
            {"at": "2m", "workload": "web/low", "replicas": 1},
        ]),
    )
    assert [0, 130, 140] == [t for t, _ in seen]
    assert ["web/low-main-1", "web/low-main-2"] == sorted(a["pod"] for a in seen[1][1]["podActions"])
    assert [admitted("high", 3, grown=True)] == seen[2][1]["admitted"]
    assert 0.322 == figures["queues"]["serving"]["usedHours"]
    assert {"quotaExceeded": 0, "minRuntimeViolations": 0, "preemptorStalls": 0} == violations(figures)


def test_deployment_scenarios_are_deterministic(tmp_path: Path) -> None:
    """The same Deployment scenario (spike, scale-back, a Deployment deleted after its
    runtime) writes the same report twice, with every invariant kept (exit 0)."""
    data = serving_fleet("30s", [
        {"at": "1m", "workload": "web/high", "replicas": 3},
        {"at": "3m", "workload": "web/high", "replicas": 1},
    ])
    data["workloads"].append(deployment("canary", 50, 1, arrival="30s", runtime="2m"))
    path = write(tmp_path, data)
    reports = []
    for name in ("a", "b"):
        assert 0 == main(["simulate", path, "--report", str(tmp_path / name)])
        reports.append((tmp_path / name / "report.json").read_bytes())
    assert reports[0] == reports[1]


def test_replica_changes_must_name_a_deployment() -> None:
    """A replica change for a workload that is missing or not a Deployment is a scenario error."""
    data = serving_fleet("30s", [
        {"at": "1m", "workload": "web/nobody", "replicas": 2},
        {"at": "1m", "workload": "ml/a", "replicas": 2},
    ])
    data["objects"].append(queue("team-a", {"default": 1}, parent=None))
    data["workloads"].append(job("a", "team-a", 1, arrival="0s", runtime="1m"))
    with pytest.raises(ScenarioError) as caught:
        scenario_from_data(data, source="s.yaml")
    assert [
        "s.yaml: replicaChanges[0].workload: workload web/nobody is not in the scenario",
        "s.yaml: replicaChanges[1].workload: workload ml/a is not owned by a Deployment (apps/v1)",
    ] == caught.value.messages
