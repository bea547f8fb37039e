"""The metrics Kueue users graph (issue 20, point 11), scraped from the daemon's /metrics:
admission waits per queue, quota gauges per queue and flavor, pending workloads by queue and
reason, preemptions by preempting queue and reason, and the build info. Every expected figure
is worked out by hand in the test's docstring from SEMANTICS §1."""

from __future__ import annotations

import asyncio
import dataclasses
import platform
from pathlib import Path

import aiohttp
import pytest
from kube.apiserver import ApiServer
from kube.cluster import until
from preemptd.daemon.http import HttpServer
from preemptd.daemon.metrics import Metrics
from preemptd.daemon.service import _count_decisions, _queue_of
from preemptd.framework.decisions import Admitted, AdmittedPodSet, Decisions, Pending, Preempted
from preemptd.framework.model import PodSetAdmission
from preemptd.framework.snapshot import Snapshot
from preemptd.framework.testing import cohort, inventory, queue, snapshot, workload
from prometheus_client.parser import text_string_to_metric_families
from running import cluster, config, running_jobs, start

from preemptd import __version__

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]

NOW = 1_800_000_000_000


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def scrape(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=metrics.exposition)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session, session.get(f"{server.url}/metrics") as response:
            assert response.status == 200
            return samples(await response.text())
    finally:
        await server.stop()


def lab() -> Snapshot:
    """Cohort lab of team-a {cpu 4}, team-b {cpu 4, lendingLimit 2}, team-c {cpu 2}. Admitted:
    a1 (team-a, 6 cpu: 2 above its nominal) and b1 (team-b, 1 cpu). Pending: c1 (team-c,
    2 cpu, created 90 s before now) and c2 (team-c)."""
    queues = [cohort("lab"), queue("team-a", "lab", cpu=4), queue("team-b", "lab", cpu=4, lending_limit=2),
              queue("team-c", "lab", cpu=2)]
    workloads = [
        workload("a1", "team-a", 6, admitted=True),
        workload("b1", "team-b", 1, admitted=True),
        workload("c1", "team-c", 2, created=NOW - 90_000),
        workload("c2", "team-c", 2, created=NOW - 10_000),
    ]
    return snapshot(inventory(queues, workloads), NOW)


def quota(name: str, queue_name: str, cohort_name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = {"queue": queue_name, "cohort": cohort_name, "flavor": "default", "resource": "cpu"}
    return name, tuple(sorted(labels.items()))


async def test_quota_gauges_per_queue_and_flavor_match_the_hand_figures() -> None:
    """Nominal in cores: 4, 4, 2, and 0 for the implicit lab. Usage: 6, 1, 0; lab 6, since
    b1's 1 cpu stays inside team-b's local reserve (4 − lendingLimit 2 = 2, SEMANTICS §1).
    Borrowed: team-a 6 − 4 = 2, the others 0. Lent: the siblings borrow 2 in all; idle
    lendable quota is team-a 0, team-b min(2, 4 − 1) = 2, team-c min(2, 2) = 2, so team-b and
    team-c lend 2 × 2/4 = 1 each. A root neither borrows nor lends: no series."""
    metrics = Metrics()
    snap = lab()
    metrics.observe_quota(snap.tree, snap.accounting)
    found = await scrape(metrics)
    expected = {
        "preemptd_queue_nominal_quota": {"team-a": 4, "team-b": 4, "team-c": 2, "lab": 0},
        "preemptd_queue_resource_usage": {"team-a": 6, "team-b": 1, "team-c": 0, "lab": 6},
        "preemptd_queue_resource_borrowed": {"team-a": 2, "team-b": 0, "team-c": 0},
        "preemptd_queue_resource_lent": {"team-a": 0, "team-b": 1, "team-c": 1},
    }
    for name, values in expected.items():
        for queue_name, value in values.items():
            assert found[quota(name, queue_name, "" if queue_name == "lab" else "lab")] == value, (name, queue_name)
    assert quota("preemptd_queue_resource_borrowed", "lab", "") not in found
    # The gauges follow the last cycle: a queue gone leaves no series.
    solo = snapshot(inventory([queue("solo", cpu=1)], []), NOW)
    metrics.observe_quota(solo.tree, solo.accounting)
    found = samples(metrics.exposition().decode())
    assert {dict(labels)["queue"] for name, labels in found if name.startswith("preemptd_queue_")} == {"solo"}


async def test_admission_waits_pending_and_preemptions_by_queue_and_reason() -> None:
    """c1, created 90 s before the cycle, is admitted: one wait of 90 s in team-c's
    histogram (not in the 60 s bucket, in the 300 s one). It preempts b1 by reclamation:
    one preemption by team-c. c2 stays pending (PreemptionNoCandidates)."""
    metrics = Metrics()
    snap = lab()
    decisions = Decisions(
        now=NOW,
        admitted=[Admitted("ns/c1", "team-c", False, (AdmittedPodSet("main", 1, {"cpu": "default"}),))],
        preempted=[Preempted("ns/b1", "ns/c1", "InCohortReclamation")],
        pending=[Pending("ns/c2", "PreemptionNoCandidates")],
    )
    counted = _count_decisions(metrics, decisions, snapshot=snap)
    metrics.observe_pending(decisions, _queue_of(snap))
    found = await scrape(metrics)
    team_c = (("queue", "team-c"),)
    assert found[("preemptd_admission_wait_time_seconds_count", team_c)] == 1
    assert found[("preemptd_admission_wait_time_seconds_sum", team_c)] == 90
    assert found[("preemptd_admission_wait_time_seconds_bucket", (("le", "60.0"), *team_c))] == 0
    assert found[("preemptd_admission_wait_time_seconds_bucket", (("le", "300.0"), *team_c))] == 1
    preempting = (("preempting_queue", "team-c"), ("reason", "InCohortReclamation"))
    assert found[("preemptd_preempted_workloads_total", preempting)] == 1
    assert found[("preemptd_pending_workloads", (("queue", "team-c"), ("reason", "PreemptionNoCandidates")))] == 1
    # A dry run decides the same again next cycle: neither the wait nor the preemption
    # is counted twice.
    _count_decisions(metrics, decisions, counted, snap)
    found = samples(metrics.exposition().decode())
    assert found[("preemptd_admission_wait_time_seconds_count", team_c)] == 1
    assert found[("preemptd_preempted_workloads_total", preempting)] == 1
    # The pending gauges follow the last cycle.
    metrics.observe_pending(Decisions(now=NOW), _queue_of(snap))
    assert not [name for name, _ in samples(metrics.exposition().decode()) if name == "preemptd_pending_workloads"]


async def test_a_growth_is_counted_as_a_growth_with_its_pods_not_as_an_admission() -> None:
    """Queue solo {cpu 8}: e (count 6, minCount 2, 1 cpu per pod) runs with a committed
    count of 2 and grows to 5 (3 pods more); n, pending, is admitted. One admission (n),
    one growth (e) of 3 pods; e observes no admission wait. A dry run deciding the same
    growth again next cycle does not count it twice."""
    e = workload("e", "solo", 1, count=6, min_count=2, admitted=True)
    assert e.admission is not None
    e = dataclasses.replace(
        e, admission=dataclasses.replace(e.admission, pod_sets=(PodSetAdmission("main", 2, {"cpu": "default"}),))
    )
    snap = snapshot(inventory([queue("solo", cpu=8)], [e, workload("n", "solo", 1, created=NOW - 30_000)]), NOW)
    decisions = Decisions(
        now=NOW,
        admitted=[
            Admitted("ns/e", "solo", False, (AdmittedPodSet("main", 5, {"cpu": "default"}),), grown=True),
            Admitted("ns/n", "solo", False, (AdmittedPodSet("main", 1, {"cpu": "default"}),)),
        ],
    )
    metrics = Metrics()
    counted = _count_decisions(metrics, decisions, snapshot=snap)
    _count_decisions(metrics, decisions, counted, snap)
    found = await scrape(metrics)
    solo = (("queue", "solo"),)
    assert found[("preemptd_admissions_total", solo)] == 1
    assert found[("preemptd_elastic_growths_total", solo)] == 1
    assert found[("preemptd_elastic_grown_pods_total", solo)] == 3
    assert found[("preemptd_admission_wait_time_seconds_count", solo)] == 1  # n's only


async def test_build_info_names_the_version_and_python() -> None:
    found = await scrape(Metrics())
    labels = (("python", platform.python_version()), ("version", __version__))
    assert found[("preemptd_build_info", labels)] == 1


async def test_a_running_daemon_exports_them_behind_its_bearer_token(server: ApiServer, tmp_path: Path) -> None:
    """A daemon against the test API server, configured with a token file: three 1-cpu
    Jobs in team-a {cpu 100} are admitted; /metrics refuses a scrape without the token and,
    with it, shows three admission waits and team-a's quota as the last cycle saw it."""

    token = tmp_path / "token"
    token.write_text("scrape-me\n")
    cluster(server, jobs=3)
    daemon = start(server, "a", config(metrics_token_file=str(token)))  # type: ignore[arg-type]
    try:
        await until(lambda: {"job-000", "job-001", "job-002"} <= running_jobs(server), what="the jobs to run")
        url = f"{daemon.daemon.http.url}/metrics"
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as response:
                assert response.status == 401

            async def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
                headers = {"Authorization": "Bearer scrape-me"}
                async with session.get(url, headers=headers) as response:
                    assert response.status == 200
                    return samples(await response.text())

            usage = quota("preemptd_queue_resource_usage", "team-a", "")
            for _ in range(100):
                found = await scraped()
                if found.get(usage) == 3:
                    break
                await asyncio.sleep(0.05)
    finally:
        await daemon.stop()
    assert found[usage] == 3
    assert found[quota("preemptd_queue_nominal_quota", "team-a", "")] == 100
    assert found[("preemptd_admission_wait_time_seconds_count", (("queue", "team-a"),))] == 3
    assert ("preemptd_build_info", (("python", platform.python_version()), ("version", __version__))) in found
