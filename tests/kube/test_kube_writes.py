"""What one preemption costs in API writes, counted at the server, and what they say.

A whole victim is four writes, status and Events included: its Workload evicted,
the Preempted Event, its Job suspended, and — once its pods are gone — one
status write that gives its quota back *and* says why it waits (or admits it
again). Counted here as the test API server saw them: every create, update,
patch and delete request about the victim's Job or Workload, and every Event
about either that was stored (created or updated).
"""

from __future__ import annotations

from collections import Counter

import pytest

from . import crds
from .apiserver import ApiServer
from .cluster import Controllers, conditions, flavor, job, node, priority_class, queue, settle, step
from .kinds import KindControllers, jobset, leaderworkerset, pod_template

pytestmark = pytest.mark.asyncio

WRITES = ("create", "update", "patch", "delete")


def _setup(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "8", "nvidia.com/gpu": "4"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16", "nvidia.com/gpu": "8"}, {"gpu": "a100"}))


def _writes_about(server: ApiServer, owner: str, since_request: int, since_change: int) -> Counter[str]:
    """The writes about the Job ``owner`` and its Workload since the marks, by what was written."""
    counts: Counter[str] = Counter()
    names = {owner, f"job-{owner}"}
    for record in server.requests[since_request:]:
        if record.verb not in WRITES or record.plural not in ("jobs", "workloads") or record.name not in names:
            continue
        what = "Job" if record.plural == "jobs" else "Workload"
        counts[f"{what} {record.verb}{'/' + record.subresource if record.subresource else ''}"] += 1
    for change in server.journal[since_change:]:
        if (change.kind.plural == "events" and change.type in ("ADDED", "MODIFIED")
                and change.obj["involvedObject"]["name"] in names):
            counts[f"Event {change.obj['reason']}"] += 1
    return counts


async def _running_low(server: ApiServer, backend, controllers: Controllers) -> None:  # type: ignore[no-untyped-def]
    """A low-priority Job admitted and running, holding the whole queue's GPUs."""
    _setup(server)
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="low"))
    await step(backend, server, controllers)
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is False and controllers.pods_of(low)


async def test_a_preemption_is_four_writes_and_the_victim_says_why_it_waits(
    server, backend, controllers: Controllers
) -> None:
    """Evicted, Event, Job suspended, then one status write with the quota given back and the
    session's pending reason: four writes about the victim from its preemption to its waiting."""
    await _running_low(server, backend, controllers)
    since_request, since_change = len(server.requests), len(server.journal)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [p.workload for p in report.decisions.preempted]
    controllers.finish_terminating()
    controllers.step()
    report = await step(backend, server, controllers)
    assert ["default/job-high"] == [a.workload for a in report.decisions.admitted]
    for _ in range(2):  # nothing more to say about the victim while its reason stays the same
        await step(backend, server, controllers)
    await backend.events.flush()
    await settle(backend, server)

    writes = _writes_about(server, "low", since_request, since_change)
    assert {"Workload patch/status": 2, "Job patch": 1, "Event Preempted": 1} == dict(writes)
    assert 4 == sum(writes.values())

    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    status = victim["status"]
    assert "admission" not in status and "admittedAt" not in status
    assert "Pending" == status["state"]
    found = conditions(victim)
    # Why it waits is the session's reason (SEMANTICS: it needs room only a higher-priority
    # workload holds, and may not preempt it), not merely "evicted".
    assert ("False", "PreemptionNoCandidates") == (found["QuotaReserved"]["status"], found["QuotaReserved"]["reason"])
    assert ("False", "Evicted") == (found["Admitted"]["status"], found["Admitted"]["reason"])
    assert ("True", "Preempted") == (found["Evicted"]["status"], found["Evicted"]["reason"])  # the record
    assert "default/job-high" in found["Preempted"]["message"]
    assert server.get("batch", "jobs", "high", "default")["spec"]["suspend"] is False


async def test_a_stopped_victim_the_session_says_nothing_about_still_gets_its_quota_back(
    server, backend, controllers: Controllers
) -> None:
    """A cycle that decides nothing (no actions) still writes a stopped victim's release, alone."""
    await _running_low(server, backend, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)
    controllers.finish_terminating()
    controllers.step()
    await settle(backend, server)
    assert server.get("preemptd.io", "workloads", "job-low", "default")["status"]["admission"]

    since = len(server.requests)
    report = await backend.cycle(actions=[])
    assert [] == report.decisions.pending and [] == report.decisions.admitted
    await settle(backend, server)
    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    assert "admission" not in victim["status"]
    assert ("False", "Evicted") == (conditions(victim)["QuotaReserved"]["status"],
                                    conditions(victim)["QuotaReserved"]["reason"])
    status_writes = [r for r in server.requests[since:]
                     if r.verb in WRITES and r.plural == "workloads" and r.name == "job-low"]
    assert 1 == len(status_writes)


async def test_a_stopped_victim_admitted_at_once_gets_its_release_and_admission_in_one_write(
    server, backend, controllers: Controllers
) -> None:
    """The preemptor goes away while the victim stops: the session that reads the victim as
    released admits it again, and one status write says both (a fresh run: new admittedAt)."""
    await _running_low(server, backend, controllers)
    first_run = server.get("preemptd.io", "workloads", "job-low", "default")["status"]["admittedAt"]
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)
    server.remove("batch", "jobs", "high", "default")
    server.remove("preemptd.io", "workloads", "job-high", "default")
    controllers.finish_terminating()
    controllers.step()
    await settle(backend, server)

    since = len(server.requests)
    later = backend.clock() + 60_000
    backend.clock = lambda: later
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [a.workload for a in report.decisions.admitted]
    status_writes = [r for r in server.requests[since:]
                     if r.verb in WRITES and r.plural == "workloads" and r.name == "job-low"]
    assert 1 == len(status_writes)
    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    found = conditions(victim)
    assert ("True", "True", "False") == (found["QuotaReserved"]["status"], found["Admitted"]["status"],
                                         found["Evicted"]["status"])
    assert victim["status"]["admittedAt"] != first_run
    assert "2026-01-01T00:01:00" in found["QuotaReserved"]["lastTransitionTime"]  # it was False between
    assert server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is False


async def test_a_release_not_yet_written_is_read_again_by_the_next_daemon(
    server, make_backend, controllers: Controllers
) -> None:
    """The victim stops while no daemon runs: the next one reads it as released from the objects
    alone (nothing was remembered) and gives its quota to the waiting preemptor."""
    first = await make_backend()
    await _running_low(server, first, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(first, server, controllers)
    await first.stop()
    controllers.finish_terminating()
    controllers.step()

    second = await make_backend()
    report = await step(second, server, controllers)
    assert ["default/job-high"] == [a.workload for a in report.decisions.admitted]
    assert [] == report.decisions.preempted
    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    assert "admission" not in victim["status"]
    assert "PreemptionNoCandidates" == conditions(victim)["QuotaReserved"]["reason"]


async def test_a_victim_whose_pods_are_still_terminating_keeps_its_quota_and_nothing_is_written(
    server, backend, controllers: Controllers
) -> None:
    """Suspended, but a pod still terminating (it holds its node's room): not released, so the
    preemptor waits and a cycle meanwhile writes nothing about the victim (SEMANTICS: an evicted
    workload keeps its usage until it is gone)."""
    await _running_low(server, backend, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is True and controllers.pods_of(low, terminating=True)

    since = len(server.requests)
    report = await step(backend, server, controllers)
    assert [] == report.decisions.admitted and [] == report.decisions.preempted
    assert not backend.inventory.released
    assert server.get("preemptd.io", "workloads", "job-low", "default")["status"]["admission"]
    assert [] == [r for r in server.requests[since:]
                  if r.verb in WRITES and r.name in ("low", "job-low")]


def _writes_about_owner(
    server: ApiServer, plural: str, owner: str, workload: str, since_request: int, since_change: int
) -> Counter[str]:
    """The writes about one owner of any kind and its Workload since the marks."""
    counts: Counter[str] = Counter()
    for record in server.requests[since_request:]:
        if record.verb not in WRITES:
            continue
        if (record.plural, record.name) == (plural, owner):
            what = "owner"
        elif (record.plural, record.name) == ("workloads", workload):
            what = "Workload"
        else:
            continue
        counts[f"{what} {record.verb}{'/' + record.subresource if record.subresource else ''}"] += 1
    for change in server.journal[since_change:]:
        if (change.kind.plural == "events" and change.type in ("ADDED", "MODIFIED")
                and change.obj["involvedObject"]["name"] in (owner, workload)):
            counts[f"Event {change.obj['reason']}"] += 1
    return counts


async def _preempted_and_waiting(
    server: ApiServer, backend, controllers: Controllers, kinds: KindControllers,  # type: ignore[no-untyped-def]
    group: str, plural: str, owner: dict,
) -> Counter[str]:
    """``owner`` admitted and running, then preempted by a high-priority Job; its writes from
    the preemption to its waiting (three more cycles after the preemptor's admission)."""
    _setup(server)
    server.put(group, plural, owner)
    name = owner["metadata"]["name"]
    workload = f"{owner['kind'].lower()}-{name}"
    await step(backend, server, controllers)
    await step(backend, server, controllers)
    kinds.step()
    await settle(backend, server)
    assert kinds.pods(server.get(group, plural, name, "default"))
    since_request, since_change = len(server.requests), len(server.journal)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert [f"default/{workload}"] == [p.workload for p in report.decisions.preempted]
    kinds.step()
    controllers.finish_terminating()
    controllers.step()
    report = await step(backend, server, controllers)
    assert ["default/job-high"] == [a.workload for a in report.decisions.admitted]
    for _ in range(2):
        await step(backend, server, controllers)
    await backend.events.flush()
    await settle(backend, server)
    victim = server.get("preemptd.io", "workloads", workload, "default")
    assert "admission" not in victim["status"]
    assert "PreemptionNoCandidates" == conditions(victim)["QuotaReserved"]["reason"]
    return _writes_about_owner(server, plural, name, workload, since_request, since_change)


async def test_a_jobset_victim_costs_four_writes_its_release_written_with_its_reason(
    server, make_backend, controllers: Controllers
) -> None:
    """Like a Job: Workload evicted, Event, JobSet suspended, then release and reason in one
    status write, once its pods are gone (the commit writes it, not the JobSet's sync)."""
    crds.install(server, crds.JOBSET)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    owner = jobset("low", "team-a", [("workers", 2, 2, pod_template({"cpu": "1", "nvidia.com/gpu": "1"}, "low"))])
    writes = await _preempted_and_waiting(server, backend, controllers, kinds, "jobset.x-k8s.io", "jobsets", owner)
    assert {"Workload patch/status": 2, "owner patch": 1, "Event Preempted": 1} == dict(writes)


async def test_a_leaderworkerset_victim_costs_four_writes_its_release_written_with_its_reason(
    server, make_backend, controllers: Controllers
) -> None:
    """Scaled to zero groups, then release and reason in one status write."""
    crds.install(server, crds.LEADERWORKERSET)
    backend = await make_backend()
    kinds = KindControllers(server, controllers)
    worker = pod_template({"cpu": "1", "nvidia.com/gpu": "1"}, "low")
    owner = leaderworkerset("serve", "team-a", None, worker, size=2, replicas=2)
    writes = await _preempted_and_waiting(
        server, backend, controllers, kinds, "leaderworkerset.x-k8s.io", "leaderworkersets", owner
    )
    assert {"Workload patch/status": 2, "owner patch": 1, "Event Preempted": 1} == dict(writes)
