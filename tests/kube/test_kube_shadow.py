"""Shadow mode (issue 18, point 5): preemptd reads a Kueue cluster, writes nothing, and reports
where its decisions differ from the state Kueue produced.

Each fixture is one ClusterQueue "default"-flavored with 4 cpu, its own namespace and a
LocalQueue ``main`` to it; the expected decisions are worked out from SEMANTICS.md:

* agree: a, b (2 cpu each) admitted, c (2 cpu) pending; ``withinClusterQueue: Never``. c
  needs 2 cpu, none is free, and no victim may be taken (§3: within nominal, so the victim
  search runs, §4: no candidate) -> pending ``PreemptionNoCandidates``, as in Kueue.
* admit: a (2 cpu) admitted, c (2 cpu) pending: 2 cpu are free -> preemptd admits c on
  ``default`` (§2.4 Fits), Kueue holds it pending: ``would-admit``.
* preempt: low (4 cpu, priority 0) admitted, high (4 cpu, priority 100) pending;
  ``withinClusterQueue: LowerPriority``: low is a same-queue candidate of strictly lower
  priority (§4), the only one, so it is the victim (reason ``InQueue``) and high waits
  (``PendingPreemption``): ``would-preempt`` on low; high is pending on both sides.
* judge: first (4 cpu) admitted; old (4 cpu, priority 0, older) and urgent (4 cpu,
  priority 100) pending; ``Never``. Then first finishes and Kueue admits old. preemptd,
  with both pending and 4 cpu free, takes urgent first (§2.1: higher priority heads its
  queue) and admits it; old then finds no room and no candidate -> pending
  ``PreemptionNoCandidates``: ``would-not-admit`` on old.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import structlog
import yaml
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.backends.kubernetes.divergence import Divergence, DivergenceLog, summary
from preemptd.daemon.backends.kubernetes.shadow import KueueShadow, ShadowError
from preemptd.daemon.config import BackendConfig, Config, DaemonConfig, SchedulerConfig
from preemptd.daemon.logging import configure_logging
from preemptd.daemon.notify import Notifier
from preemptd.daemon.plugins import resolve_plugins
from preemptd.daemon.service import Daemon, check_configuration
from prometheus_client import CollectorRegistry

from .apiserver import ApiServer, validate
from .cluster import REPO, until
from .kueue_crds import GROUP, install_kueue, kueue_crds

pytestmark = pytest.mark.asyncio

NOW_MS = 1_767_225_600_000 + 3_600_000  # 2026-01-01T01:00:00Z
PLURALS = {
    "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
    "Workload": "workloads", "Cohort": "cohorts", "WorkloadPriorityClass": "workloadpriorityclasses",
}


# --- Kueue-shaped objects ------------------------------------------------------------------


def kueue(kind: str, name: str, spec: dict[str, Any], *, namespace: str | None = None, version: str = "v1beta2",
          **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": f"{GROUP}/{version}", "kind": kind, "metadata": metadata, "spec": spec, **extra}


def cluster_queue(name: str, *, within: str = "Never", version: str = "v1beta2", cohort: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": "Never"},
        "resourceGroups": [{
            "coveredResources": ["cpu"],
            "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
        }],
    }
    if cohort is not None:
        spec["cohort" if version == "v1beta1" else "cohortName"] = cohort
    return kueue("ClusterQueue", name, spec, version=version)


def workload(
    namespace: str, name: str, cpu: int, *, priority: int = 0, minute: int = 0, admitted_in: str | None = None,
    version: str = "v1beta2",
) -> dict[str, Any]:
    obj = kueue(
        "Workload", name,
        {
            "queueName": "main",
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "image": "job:1", "resources": {"requests": {"cpu": str(cpu)}}},
            ]}}}],
        },
        namespace=namespace, version=version,
    )
    obj["metadata"].update(uid=f"uid-{namespace}-{name}", creationTimestamp=f"2026-01-01T00:{minute:02d}:00Z")
    since = f"2026-01-01T00:{minute + 1:02d}:00Z"
    if admitted_in is None:
        obj["status"] = {"conditions": [{
            "type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": f"couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
                       f"request > maximum capacity ({name})",
            "lastTransitionTime": since,
        }]}
    else:
        obj["status"] = admitted(admitted_in, cpu, since)
    return obj


def admitted(cluster_queue: str, cpu: int, since: str) -> dict[str, Any]:
    return {
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": str(cpu)}},
        ]},
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": f"Quota reserved in ClusterQueue {cluster_queue}", "lastTransitionTime": since},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted",
             "lastTransitionTime": since},
        ],
    }


def case(name: str, *, within: str = "Never") -> list[dict[str, Any]]:
    """A namespace, its LocalQueue ``main`` and a ClusterQueue of the same name."""
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}},
        kueue("LocalQueue", "main", {"clusterQueue": name}, namespace=name),
        cluster_queue(name, within=within),
    ]


FLAVOR = kueue("ResourceFlavor", "default", {})

AGREE = [
    *case("agree"),
    workload("agree", "a", 2, minute=1, admitted_in="agree"),
    workload("agree", "b", 2, minute=2, admitted_in="agree"),
    workload("agree", "c", 2, minute=3),
]
ADMIT = [*case("admit"), workload("admit", "a", 2, minute=1, admitted_in="admit"), workload("admit", "c", 2, minute=3)]
PREEMPT = [
    *case("preempt", within="LowerPriority"),
    workload("preempt", "low", 4, minute=1, admitted_in="preempt"),
    workload("preempt", "high", 4, priority=100, minute=5),
]
JUDGE = [
    *case("judge"),
    workload("judge", "first", 4, minute=1, admitted_in="judge"),
    workload("judge", "old", 4, minute=10),
    workload("judge", "urgent", 4, priority=100, minute=20),
]


def put(server: ApiServer, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        if obj["kind"] == "Namespace":
            server.put("", "namespaces", obj)
        else:
            server.put(GROUP, PLURALS[obj["kind"]], obj)


def finish(server: ApiServer, namespace: str, name: str) -> None:
    obj = server.get(GROUP, "workloads", name, namespace)
    assert obj is not None
    obj["status"]["conditions"].append({
        "type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully",
        "lastTransitionTime": "2026-01-01T00:50:00Z",
    })
    server.put(GROUP, "workloads", obj)


def admit(server: ApiServer, namespace: str, name: str, cpu: int) -> None:
    obj = server.get(GROUP, "workloads", name, namespace)
    assert obj is not None
    obj["status"] = admitted(namespace, cpu, "2026-01-01T00:51:00Z")
    server.put(GROUP, "workloads", obj)


def writes(server: ApiServer) -> list[Any]:
    return [r for r in server.requests if r.verb not in ("get", "list", "watch")]


# --- fixtures ----------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def cluster() -> AsyncIterator[ApiServer]:
    """A cluster with Kueue's CRDs (v1beta2 stored) and none of preemptd's."""
    async with ApiServer(bookmark_interval=0.2) as api:
        install_kueue(api)
        api.put(GROUP, "resourceflavors", FLAVOR)
        yield api


@pytest_asyncio.fixture
async def shadows(cluster: ApiServer) -> AsyncIterator[list[tuple[KueueShadow, CollectorRegistry]]]:
    made: list[tuple[KueueShadow, CollectorRegistry]] = []
    yield made  # filled by start_shadow
    for shadow, _ in made:
        await shadow.stop()
        await shadow.kube.close()


async def start_shadow(
    server: ApiServer, made: list[tuple[KueueShadow, CollectorRegistry]], *, grace: float = 0.0,
    clock: Any = lambda: NOW_MS,
) -> tuple[KueueShadow, CollectorRegistry]:
    config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
    plugins, problems = resolve_plugins(config)
    assert not problems
    registry = CollectorRegistry()
    kube = Kube.from_configuration(Configuration(host=server.url))
    shadow = KueueShadow(kube, config=config, plugins=plugins, registry=registry, grace=grace, clock=clock)
    made.append((shadow, registry))
    await shadow.start(timeout=5)
    return shadow, registry


async def cycle(shadow: KueueShadow, server: ApiServer) -> dict[str, Any]:
    version = server.version
    await until(lambda: all(_latest(i.store) >= _kind_version(server, i.resource.group, i.resource.plural)
                            for i in shadow.informers.values()), what=f"caches at version {version}")
    await shadow.cycle()
    return shadow.divergences.to_dict()


def _latest(store: dict[str, Any]) -> int:
    return max((int(o["metadata"].get("resourceVersion") or 0) for o in store.values()), default=0)


def _kind_version(server: ApiServer, group: str, plural: str) -> int:
    return max((int(o["metadata"]["resourceVersion"]) for o in server.list(group, plural)), default=0)


def gauge(registry: CollectorRegistry, kind: str) -> float | None:
    return registry.get_sample_value("preemptd_shadow_divergences", {"kind": kind})


def new_count(registry: CollectorRegistry, kind: str) -> float | None:
    return registry.get_sample_value("preemptd_shadow_new_divergences_total", {"kind": kind})


def shapes(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(d["kind"], d["workload"], d["queue"]) for d in report["divergences"]]


# --- the three divergences, and none -----------------------------------------------------------


async def test_a_shadow_that_decides_as_kueue_did_reports_no_divergence(cluster: ApiServer, shadows: Any) -> None:
    put(cluster, AGREE)
    shadow, registry = await start_shadow(cluster, shadows)
    for _ in range(2):
        report = await cycle(shadow, cluster)
        assert [] == report["divergences"]
        assert {"would-admit": 0, "would-not-admit": 0, "would-preempt": 0} == report["counts"]
    assert [0, 0, 0] == [gauge(registry, kind) for kind in ("would-admit", "would-not-admit", "would-preempt")]
    assert [] == writes(cluster)


async def test_a_workload_kueue_holds_pending_that_preemptd_would_admit_is_would_admit(
    cluster: ApiServer, shadows: Any
) -> None:
    put(cluster, ADMIT)
    shadow, registry = await start_shadow(cluster, shadows)
    report = await cycle(shadow, cluster)
    assert [{
        "workload": "admit/c",
        "queue": "admit",
        "kind": "would-admit",
        "since": "2026-01-01T01:00:00Z",
        "preemptd": {"action": "admit", "flavors": ["default"], "borrowing": False},
        "kueue": {
            "state": "pending", "reason": "Pending",
            "message": "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
                       "request > maximum capacity (c)",
        },
    }] == report["divergences"]
    assert "2026-01-01T01:00:00Z" == report["cycle"]
    assert 1 == gauge(registry, "would-admit")
    assert 1 == new_count(registry, "would-admit")
    # Nothing was written, so the next cycle finds the same divergence: still one, counted once.
    await cycle(shadow, cluster)
    assert 1 == gauge(registry, "would-admit")
    assert 1 == new_count(registry, "would-admit")
    assert [] == writes(cluster)


async def test_a_victim_preemptd_would_choose_that_kueue_keeps_running_is_would_preempt(
    cluster: ApiServer, shadows: Any
) -> None:
    put(cluster, PREEMPT)
    shadow, registry = await start_shadow(cluster, shadows)
    report = await cycle(shadow, cluster)
    assert [("would-preempt", "preempt/low", "preempt")] == shapes(report)
    (divergence,) = report["divergences"]
    assert {"action": "preempt", "preemptor": "preempt/high", "reason": "InQueue", "count": None} == divergence["preemptd"]
    assert {"state": "admitted", "clusterQueue": "preempt", "flavors": ["default"]} == divergence["kueue"]
    assert [0, 1] == [gauge(registry, "would-admit"), gauge(registry, "would-preempt")]
    assert [] == writes(cluster)


async def test_a_workload_kueue_admitted_that_preemptd_would_keep_pending_is_would_not_admit(
    cluster: ApiServer, shadows: Any
) -> None:
    put(cluster, JUDGE)
    shadow, registry = await start_shadow(cluster, shadows)
    lines: list[tuple[str, str, str]] = []
    shadow.divergences._line = lambda change, d: lines.append((change, d.kind, d.workload))  # type: ignore[method-assign]
    assert [] == (await cycle(shadow, cluster))["divergences"]  # both pending, on both sides
    finish(cluster, "judge", "first")
    admit(cluster, "judge", "old", 4)
    report = await cycle(shadow, cluster)
    assert [("would-not-admit", "judge/old", "judge")] == shapes(report)
    (divergence,) = report["divergences"]
    assert "keep-pending" == divergence["preemptd"]["action"]
    assert "PreemptionNoCandidates" == divergence["preemptd"]["reason"]
    assert {"state": "admitted", "clusterQueue": "judge", "flavors": ["default"]} == divergence["kueue"]
    assert 1 == gauge(registry, "would-not-admit")
    # It lasts while Kueue keeps old admitted (the judgement is not made again)...
    assert [("would-not-admit", "judge/old", "judge")] == shapes(await cycle(shadow, cluster))
    assert 1 == new_count(registry, "would-not-admit")
    # ...and ends when old does; urgent, admitted by Kueue next, is what preemptd would admit.
    finish(cluster, "judge", "old")
    admit(cluster, "judge", "urgent", 4)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert 0 == gauge(registry, "would-not-admit")
    assert [("new", "would-not-admit", "judge/old"), ("ended", "would-not-admit", "judge/old")] == lines
    assert [] == writes(cluster)


async def test_a_workload_kueue_admits_before_any_cycle_saw_it_pending_is_judged_too(
    cluster: ApiServer, shadows: Any
) -> None:
    """sneak (4 cpu, priority 0) appears already admitted once first is done: preemptd, with sneak,
    old and urgent pending, admits urgent (the highest priority) and would keep sneak waiting."""
    put(cluster, JUDGE)
    shadow, _ = await start_shadow(cluster, shadows)
    await cycle(shadow, cluster)
    finish(cluster, "judge", "first")
    put(cluster, [workload("judge", "sneak", 4, minute=30, admitted_in="judge")])
    report = await cycle(shadow, cluster)
    assert [("would-not-admit", "judge/sneak", "judge")] == shapes(report)
    assert "PreemptionNoCandidates" == report["divergences"][0]["preemptd"]["reason"]


async def test_workloads_already_running_at_the_first_cycle_are_not_judged(cluster: ApiServer, shadows: Any) -> None:
    """old runs and urgent waits (preemptd would have run urgent first), but nothing before the
    first cycle says when Kueue admitted old: no divergence."""
    put(cluster, [*case("judge"), workload("judge", "old", 4, minute=10, admitted_in="judge"),
                  workload("judge", "urgent", 4, priority=100, minute=20)])
    shadow, _ = await start_shadow(cluster, shadows)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert [] == (await cycle(shadow, cluster))["divergences"]


async def test_a_workload_kueue_admitted_as_preemptd_would_have_is_no_divergence(
    cluster: ApiServer, shadows: Any
) -> None:
    put(cluster, JUDGE)
    shadow, _ = await start_shadow(cluster, shadows)
    await cycle(shadow, cluster)
    finish(cluster, "judge", "first")
    admit(cluster, "judge", "urgent", 4)  # the higher priority first, as preemptd takes it
    assert [] == (await cycle(shadow, cluster))["divergences"]


async def test_a_workload_kueue_admitted_while_its_victim_still_leaves_is_no_divergence(
    cluster: ApiServer, shadows: Any
) -> None:
    """preemptd would preempt low for high; Kueue did, and admitted high while low, evicted,
    still holds its quota. With high pending again, preemptd relies on low's room (§2: already
    evicted victims are re-used) and waits for it (PendingPreemption): it would admit high."""
    put(cluster, PREEMPT)
    shadow, registry = await start_shadow(cluster, shadows)
    assert [("would-preempt", "preempt/low", "preempt")] == shapes(await cycle(shadow, cluster))
    low = cluster.get(GROUP, "workloads", "low", "preempt")
    assert low is not None
    low["status"]["conditions"].append({
        "type": "Evicted", "status": "True", "reason": "Preempted", "message": "Preempted to accommodate a workload",
        "lastTransitionTime": "2026-01-01T00:52:00Z",
    })
    cluster.put(GROUP, "workloads", low)
    admit(cluster, "preempt", "high", 4)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert [0, 0] == [gauge(registry, "would-preempt"), gauge(registry, "would-not-admit")]


async def test_an_invalid_kueue_object_is_logged_once_and_left_out_while_the_rest_is_compared(
    cluster: ApiServer, shadows: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bad = workload("admit", "bad", 1, minute=4)
    bad["spec"]["podSets"][0]["count"] = "two"
    put(cluster, [*ADMIT, bad])
    shadow, _ = await start_shadow(cluster, shadows)
    with caplog.at_level(logging.WARNING, logger="preemptd.shadow"):
        assert [("would-admit", "admit/c", "admit")] == shapes(await cycle(shadow, cluster))
        assert [("would-admit", "admit/c", "admit")] == shapes(await cycle(shadow, cluster))
    problems = [r.getMessage() for r in caplog.records if r.name == "preemptd.shadow" and r.levelno >= logging.WARNING]
    assert 1 == len(problems), problems
    assert "Workload/admit/bad: spec.podSets[0].count" in problems[0]


async def test_a_change_read_by_a_failed_cycle_is_read_again_by_the_next(
    cluster: ApiServer, shadows: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from preemptd.daemon.backends.kubernetes import shadow as module

    put(cluster, ADMIT[:-1])  # without c
    shadow, _ = await start_shadow(cluster, shadows)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    put(cluster, ADMIT[-1:])
    real = module.run_session

    def failing(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(module, "run_session", real)
        raise RuntimeError("a session that fails")

    monkeypatch.setattr(module, "run_session", failing)
    with pytest.raises(RuntimeError, match="a session that fails"):
        await cycle(shadow, cluster)
    assert [("would-admit", "admit/c", "admit")] == shapes(await cycle(shadow, cluster))


# --- grace, versions, and a cluster without Kueue ----------------------------------------------


async def test_a_divergence_is_reported_only_once_it_outlasts_the_grace(cluster: ApiServer, shadows: Any) -> None:
    put(cluster, ADMIT)
    now = [NOW_MS]
    shadow, registry = await start_shadow(cluster, shadows, grace=5.0, clock=lambda: now[0])
    lines: list[tuple[str, str, str]] = []
    shadow.divergences._line = lambda change, d: lines.append((change, d.kind, d.workload))  # type: ignore[method-assign]
    assert [] == (await cycle(shadow, cluster))["divergences"]
    now[0] += 4_999
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert 0 == new_count(registry, "would-admit")
    now[0] += 1
    report = await cycle(shadow, cluster)
    assert [("would-admit", "admit/c", "admit")] == shapes(report)
    assert "2026-01-01T01:00:00Z" == report["divergences"][0]["since"]  # since it was first seen
    # Kueue admits c: it ends. Then a leaves and d arrives, which preemptd would admit at once;
    # Kueue admits d within the grace: a divergence that never lasted is never reported.
    admit(cluster, "admit", "c", 2)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    finish(cluster, "admit", "a")
    put(cluster, [workload("admit", "d", 2, minute=30)])
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert {("would-admit", "admit/d")} == set(shadow.divergences.current)  # seen, not yet reported
    now[0] += 1_000
    admit(cluster, "admit", "d", 2)
    assert [] == (await cycle(shadow, cluster))["divergences"]
    now[0] += 10_000
    assert [] == (await cycle(shadow, cluster))["divergences"]
    assert 1 == new_count(registry, "would-admit")
    assert [("new", "would-admit", "admit/c"), ("ended", "would-admit", "admit/c")] == lines


async def test_a_cluster_serving_kueue_v1beta1_is_read_in_v1beta1() -> None:
    async with ApiServer(bookmark_interval=0.2) as server:
        install_kueue(server, "v1beta1")
        server.put(GROUP, "resourceflavors", {**FLAVOR, "apiVersion": f"{GROUP}/v1beta1"})
        objects = [
            *(o for o in case("old") if o["kind"] != "ClusterQueue"),
            {**kueue("LocalQueue", "main", {"clusterQueue": "old"}, namespace="old", version="v1beta1")},
            cluster_queue("old", version="v1beta1", cohort="all"),
            kueue("Cohort", "all", {}, version="v1beta1"),
            workload("old", "a", 2, minute=1, admitted_in="old", version="v1beta1"),
            workload("old", "c", 2, minute=3, version="v1beta1"),
        ]
        put(server, objects)
        made: list[tuple[KueueShadow, CollectorRegistry]] = []
        try:
            shadow, _ = await start_shadow(server, made)
            assert {r.kind: r.version for r in shadow.resources if r.group == GROUP} == {
                "ResourceFlavor": "v1beta1", "ClusterQueue": "v1beta1", "Cohort": "v1beta1",
                "LocalQueue": "v1beta1", "Workload": "v1beta1", "WorkloadPriorityClass": "v1beta1",
            }
            assert [("would-admit", "old/c", "old")] == shapes(await cycle(shadow, server))
        finally:
            for shadow, _ in made:
                await shadow.stop()
                await shadow.kube.close()


async def test_a_cluster_without_kueue_is_refused_with_a_clear_error() -> None:
    async with ApiServer(bookmark_interval=0.2) as server:
        install_kueue(server, kinds=("ResourceFlavor", "Cohort"))
        config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
        plugins, _ = resolve_plugins(config)
        kube = Kube.from_configuration(Configuration(host=server.url))
        try:
            shadow = KueueShadow(kube, config=config, plugins=plugins, registry=CollectorRegistry())
            with pytest.raises(ShadowError, match=r"no ClusterQueue of kueue.x-k8s.io \(tried v1beta2, v1beta1\)"):
                await shadow.start(timeout=5)
        finally:
            await kube.close()
        assert [] == writes(server)


async def test_the_fixtures_are_valid_kueue_objects_by_the_crds() -> None:
    schemas = {
        (crd["spec"]["names"]["kind"], version["name"]): version["schema"]["openAPIV3Schema"]
        for crd in [*kueue_crds("v1beta2"), *kueue_crds("v1beta1")]
        for version in crd["spec"]["versions"]
    }
    objects = [FLAVOR, *AGREE, *ADMIT, *PREEMPT, *JUDGE, workload("x", "y", 1, version="v1beta1"),
               cluster_queue("z", version="v1beta1", cohort="all")]
    for obj in objects:
        if obj["kind"] == "Namespace":
            continue
        errors: list[str] = []
        pruned = validate(schemas[(obj["kind"], obj["apiVersion"].rpartition("/")[2])], obj, "", errors)
        assert ([], obj["spec"]) == (errors, pruned["spec"]), obj["metadata"]


# --- the daemon: logs, metrics, /divergence, no writes -------------------------------------------


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


async def test_the_daemon_in_shadow_mode_logs_counts_and_serves_each_divergence_and_writes_nothing(
    cluster: ApiServer, restore_logging: None
) -> None:
    put(cluster, [*AGREE, *ADMIT, *PREEMPT, *JUDGE])
    settings = dataclasses.replace(
        Config(),
        backend=BackendConfig(kind="kubernetes"),
        scheduler=SchedulerConfig(cycle_interval=50),
        daemon=DaemonConfig(http_address="127.0.0.1:0"),
    )
    plugins, problems = resolve_plugins(settings)
    assert not problems
    stream = io.StringIO()
    configure_logging(log_format="json", level="info", stream=stream)
    kube = Kube.from_configuration(Configuration(host=cluster.url))
    daemon = Daemon(kube, settings, plugins, shadow="kueue", notifier=Notifier(), holder_identity="a")
    assert isinstance(daemon.backend, KueueShadow)
    task = asyncio.create_task(daemon.run(), name="daemon-shadow")

    def cycles() -> float:
        return daemon.metrics.registry.get_sample_value("preemptd_cycles_total", {"outcome": "ok"}) or 0.0

    try:
        await until(lambda: cycles() >= 3, timeout=20, what="three shadow cycles")
        finish(cluster, "judge", "first")
        admit(cluster, "judge", "old", 4)
        await until(lambda: (daemon.metrics.registry.get_sample_value(
            "preemptd_shadow_divergences", {"kind": "would-not-admit"}) or 0) == 1, timeout=20,
            what="the would-not-admit divergence")
        seen = cycles()
        await until(lambda: cycles() >= seen + 3, timeout=20, what="three more cycles")
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{daemon.http.url}/divergence") as response:
                assert 200 == response.status
                assert "application/json" == response.content_type
                report = await response.json()
            async with session.get(f"{daemon.http.url}/metrics") as response:
                metrics = await response.text()
    finally:
        daemon.stop.set()
        try:
            assert 0 == await asyncio.wait_for(task, 10)
        finally:
            await kube.close()
    assert [
        ("would-admit", "admit/c", "admit"),
        ("would-not-admit", "judge/old", "judge"),
        ("would-preempt", "preempt/low", "preempt"),
    ] == shapes(report)
    assert {"would-admit": 1, "would-not-admit": 1, "would-preempt": 1} == report["counts"]
    assert report["cycle"].endswith("Z")
    for kind in ("would-admit", "would-not-admit", "would-preempt"):
        assert f'preemptd_shadow_divergences{{kind="{kind}"}} 1.0' in metrics
        assert f'preemptd_shadow_new_divergences_total{{kind="{kind}"}} 1.0' in metrics
    assert "preemptd_dry_run 1.0" in metrics
    assert "preemptd_leader 0.0" in metrics
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    divergences = [line for line in lines if line["event"] == "divergence"]
    # One line per divergence, when it appeared, however many cycles saw it.
    assert [
        ("new", "would-admit", "admit/c", "admit on default", "pending (Pending: couldn't assign flavors to pod "
         "set main: insufficient quota for cpu in flavor default, request > maximum capacity (c))"),
        ("new", "would-preempt", "preempt/low", "preempt for preempt/high (InQueue)", "admitted in preempt on default"),
        ("new", "would-not-admit", "judge/old", "keep-pending (PreemptionNoCandidates: " + _message(report) + ")",
         "admitted in judge on default"),
    ] == [(d["change"], d["kind"], d["workload"], d["preemptd"], d["kueue"]) for d in divergences]
    assert [] == writes(cluster)
    assert 0 == kube.writes  # the client sent none either
    assert not any(r.group == "coordination.k8s.io" for r in cluster.requests)  # no Lease, not even read
    assert not any(r.group == "preemptd.io" for r in cluster.requests)
    granted = shadow_role_rules()
    assert [] == sorted((g, r, v) for g, r, v in cluster.verbs() if v not in granted.get((g, r), set()))


SHADOW_DEPLOY = REPO / "deploy" / "shadow"


def shadow_documents() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((SHADOW_DEPLOY / "kustomization.yaml").read_text())
    return [d for name in kustomization["resources"] for d in yaml.safe_load_all((SHADOW_DEPLOY / name).read_text()) if d]


def shadow_role_rules() -> dict[tuple[str, str], set[str]]:
    (role,) = [d for d in shadow_documents() if d["kind"] == "ClusterRole"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


async def test_the_shadow_deployment_reads_only_and_runs_the_shadow(tmp_path: Path) -> None:
    """deploy/shadow: list and watch on what the shadow reads and nothing else (no write verb,
    no Lease), one replica running `run --shadow kueue` on a configuration that checks."""
    expected = {(GROUP, plural): {"list", "watch"} for plural in PLURALS.values()}
    expected |= {("scheduling.k8s.io", "priorityclasses"): {"list", "watch"}, ("", "namespaces"): {"list", "watch"}}
    assert expected == shadow_role_rules()
    (deployment,) = [d for d in shadow_documents() if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert (1, ["run", "--shadow", "kueue"]) == (deployment["spec"]["replicas"], container["args"][:3])
    (configmap,) = [d for d in shadow_documents() if d["kind"] == "ConfigMap"]
    path = tmp_path / "preemptd.toml"
    path.write_text(configmap["data"]["preemptd.toml"])
    config, _, problems = check_configuration(path)
    assert ([], False) == (problems, config.leader_election.enabled)


def _message(report: dict[str, Any]) -> str:
    (judged,) = [d for d in report["divergences"] if d["kind"] == "would-not-admit"]
    message = judged["preemptd"]["message"]
    assert message  # preemptd says why it would keep old waiting
    return str(message)


async def test_a_divergence_is_logged_when_it_appears_changes_and_ends_and_not_in_between() -> None:
    registry = CollectorRegistry()
    divergences = DivergenceLog(registry)
    lines: list[tuple[str, str, str, str]] = []
    divergences._line = lambda change, d: lines.append((change, d.kind, d.workload, summary(d.kueue)))  # type: ignore[method-assign]
    waiting = {"state": "pending", "reason": "Pending", "message": "no quota"}
    admit_c = Divergence("would-admit", "ns/c", "q", {"action": "admit", "flavors": ["f"], "borrowing": False}, waiting)
    victim = Divergence("would-preempt", "ns/a", "q", {"action": "preempt", "preemptor": "ns/c", "reason": "InQueue",
                                                       "count": 2}, {"state": "admitted", "clusterQueue": "q", "flavors": ["f"]})
    divergences.update([admit_c, victim], NOW_MS)
    divergences.update([victim, admit_c], NOW_MS + 1)
    checking = dataclasses.replace(admit_c, kueue={**waiting, "reason": "AdmissionCheck", "message": "checking"})
    divergences.update([checking, victim], NOW_MS + 2)
    divergences.update([checking], NOW_MS + 3)
    assert [
        ("new", "would-preempt", "ns/a", "admitted in q on f"),
        ("new", "would-admit", "ns/c", "pending (Pending: no quota)"),
        ("changed", "would-admit", "ns/c", "pending (AdmissionCheck: checking)"),
        ("ended", "would-preempt", "ns/a", "admitted in q on f"),
    ] == lines
    report = divergences.to_dict()
    assert ("2026-01-01T01:00:00.003Z", {"would-admit": 1, "would-not-admit": 0, "would-preempt": 0}) == (
        report["cycle"], report["counts"])
    assert [("ns/c", "2026-01-01T01:00:00Z")] == [(d["workload"], d["since"]) for d in report["divergences"]]
    assert [1, 0, 1, 1] == [registry.get_sample_value(name, {"kind": kind}) for name, kind in (
        ("preemptd_shadow_divergences", "would-admit"), ("preemptd_shadow_divergences", "would-preempt"),
        ("preemptd_shadow_new_divergences_total", "would-admit"),
        ("preemptd_shadow_new_divergences_total", "would-preempt"))]
    assert "preempt 2 pod(s) for ns/c (InQueue)" == summary(victim.preemptd)
