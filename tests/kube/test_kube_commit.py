"""Commits under stress: conflicts, crashes between writes, and broken objects."""

from __future__ import annotations

import pytest

from .apiserver import ApiServer, Request
from .cluster import (
    Controllers,
    conditions,
    events_for,
    flavor,
    job,
    node,
    priority_class,
    queue,
    step,
)
from .conftest import NOW_MS

pytestmark = pytest.mark.asyncio


def _setup(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}, preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "8"}, {"flavor": "default"}))


def _status_writes(server: ApiServer, since: int = 0) -> list[Request]:
    return [r for r in server.requests[since:] if r.plural == "workloads" and r.subresource == "status"]


async def test_conflict_rereads_and_decides_again_without_overwriting(server, backend) -> None:
    """A Workload changed between snapshot and commit gets 409: the change is kept, and the
    next cycle decides on the fresh object."""
    _setup(server)
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    await step(backend, server)  # the Workload exists (and is admitted) — start over with a fresh one
    server.put("batch", "jobs", job("race", "team-a", {"cpu": "1"}))
    raced: list[str] = []

    def user_edits_first(request: Request) -> None:
        if request.subresource == "status" and request.name == "job-race" and not raced:
            current = server.get("preemptd.io", "workloads", "job-race", "default")
            labels = {**current["metadata"].get("labels", {}), "owner": "alice"}
            server.put("preemptd.io", "workloads", {**current, "metadata": {**current["metadata"], "labels": labels}})
            raced.append(current["metadata"]["resourceVersion"])

    server.before_write = user_edits_first
    report = await step(backend, server)
    assert raced
    assert 1 == report.commit.dropped
    assert backend.resync
    assert 1 == backend.writer.conflicts
    race = server.get("preemptd.io", "workloads", "job-race", "default")
    assert "admission" not in (race.get("status") or {})
    assert "alice" == race["metadata"]["labels"]["owner"]

    report = await step(backend, server)
    assert ["default/job-race"] == [a.workload for a in report.decisions.admitted]
    race = server.get("preemptd.io", "workloads", "job-race", "default")
    assert "alice" == race["metadata"]["labels"]["owner"]
    assert race["status"]["admission"]
    assert server.get("batch", "jobs", "race", "default")["spec"]["suspend"] is False


async def test_restart_after_admission_written_but_job_not_unsuspended(server, make_backend) -> None:
    """A crash between the Workload write and the Job write: the next daemon unsuspends the
    Job and does not admit again."""
    _setup(server)
    first = await make_backend()
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    server.fail(1, code=500, when=lambda r: r.plural == "jobs" and r.verb == "patch")
    report = await step(first, server)
    assert ["default/job-train"] == [a.workload for a in report.decisions.admitted]
    assert server.get("preemptd.io", "workloads", "job-train", "default")["status"]["admission"]
    assert server.get("batch", "jobs", "train", "default")["spec"]["suspend"] is True
    await first.stop()  # the crash

    second = await make_backend()
    since = len(server.requests)
    report = await step(second, server)
    assert [] == report.decisions.admitted
    assert [] == _status_writes(server, since)
    assert server.get("batch", "jobs", "train", "default")["spec"]["suspend"] is False


async def test_restart_after_eviction_written_but_job_not_suspended(server, make_backend, controllers) -> None:
    """A crash between the Evicted write and the Job's suspension: the next daemon suspends the
    Job and evicts nobody twice."""
    _setup(server)
    first = await make_backend()
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "4"}, priority_class_name="low"))
    await step(first, server, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "4"}, priority_class_name="high"))
    server.fail(1, code=503, reason="ServiceUnavailable", when=lambda r: r.plural == "jobs" and r.name == "low")
    report = await step(first, server)
    assert ["default/job-low"] == [p.workload for p in report.decisions.preempted]
    assert server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is False
    await first.stop()

    second = await make_backend()
    since = len(server.requests)
    report = await step(second, server, controllers)
    assert [] == report.decisions.preempted
    assert [] == report.decisions.admitted
    assert server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is True
    assert not [r for r in _status_writes(server, since) if r.name == "job-low"]
    controllers.finish_terminating()
    controllers.step()
    report = await step(second, server)
    assert ["default/job-high"] == [a.workload for a in report.decisions.admitted]


async def test_broken_objects_do_not_stop_the_others(server, backend) -> None:
    """An invalid Queue, Workload and Pod are reported and skipped; a good Job is admitted."""
    _setup(server)
    broken_queue = queue("broken", {"cpu": "4"})
    broken_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "1"
    server.put("preemptd.io", "queues", broken_queue)
    server.put("preemptd.io", "workloads", {
        "apiVersion": "preemptd.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "garbage", "namespace": "default"},
        "spec": {"queueName": "team-a", "podSets": [{"name": "main", "count": 1, "requests": {"cpu": "lots"}}]},
    })
    server.put("", "pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "odd", "namespace": "default"},
                            "spec": {"nodeName": "node-1", "containers": "not a list"}})
    server.put("batch", "jobs", job("lost", "broken", {"cpu": "1"}))
    server.put("batch", "jobs", job("good", "team-a", {"cpu": "1"}))
    report = await step(backend, server)
    assert ["default/job-good"] == [a.workload for a in report.decisions.admitted]
    pending = {p.workload: p.reason for p in report.decisions.pending}
    assert {"default/garbage": "Inadmissible", "default/job-lost": "Inadmissible"} == pending
    garbage = server.get("preemptd.io", "workloads", "garbage", "default")
    assert "Inadmissible" == conditions(garbage)["QuotaReserved"]["reason"]
    problems = [str(p) for p in backend.inventory.inventory().problems]
    assert any("Pod/default/odd" in p for p in problems)
    assert any("Queue/broken" in p for p in problems)


async def test_dry_run_decides_but_writes_nothing(server, make_backend, controllers: Controllers) -> None:
    """--dry-run: the same decisions, and not one write request."""
    _setup(server)
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "1"}))
    dry = await make_backend(dry_run=True)
    since = len(server.requests)
    report = await step(dry, server)
    assert ["default/job-train"] == [a.workload for a in report.decisions.admitted]
    assert [] == [r for r in server.requests[since:] if r.verb not in ("get", "list", "watch")]
    assert server.get("preemptd.io", "workloads", "job-train", "default") is None


def _reword(server: ApiServer, name: str, message: str) -> None:
    """Give the Workload's QuotaReserved condition another text (as an earlier cycle wrote it)."""
    current = server.get("preemptd.io", "workloads", name, "default")
    status = current["status"]
    reworded = [{**c, "message": message} if c["type"] == "QuotaReserved" else c for c in status["conditions"]]
    server.put("preemptd.io", "workloads", {**current, "status": {**status, "conditions": reworded}})


async def test_a_waiting_workload_status_and_event_are_written_when_the_meaning_changes_not_the_text(
    server, make_backend, controllers: Controllers
) -> None:
    """Preemptors wait while their victims' pods stop, cycle after cycle, the clock moving: each
    one's status and Event are written once. A message whose words differ but whose reason and
    victims are the same (victims in another order; other figures) is left as it is; a new set
    of victims is written. (With every Event posted: by default a waiting reason has none.)"""
    _setup(server)
    now = [NOW_MS]

    def clock() -> int:
        now[0] += 7_000
        return now[0]

    backend = await make_backend(clock=clock, events="all")
    for name in ("low-1", "low-2", "low-3", "low-4"):
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "1"}, priority_class_name="low"))
    await step(backend, server, controllers)
    for name in ("high-1", "high-2", "high-3"):
        server.put("batch", "jobs", job(name, "team-a", {"cpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)  # the victims are chosen; their pods keep terminating
    reasons: dict[str, list[str]] = {}
    for name in ("job-high-1", "job-high-2", "job-high-3"):
        quota = conditions(server.get("preemptd.io", "workloads", name, "default"))["QuotaReserved"]
        reasons.setdefault(quota["reason"], []).append(name)
    assert (2, 1) == (len(reasons["PendingPreemption"]), len(reasons["PreemptionNoCandidates"]))
    same, changed = reasons["PendingPreemption"]
    (short,) = reasons["PreemptionNoCandidates"]
    quota = conditions(server.get("preemptd.io", "workloads", same, "default"))["QuotaReserved"]
    victims = quota["message"].removeprefix("preempting ").partition(";")[0].split(", ")
    # The same victims, named in another order and once more: other words, the same meaning.
    _reword(server, same, f"preempting {', '.join([*reversed(victims), victims[0]])}; admitted once they have "
            "released their quota")
    _reword(server, short, "no set of preemptible victims frees enough room (2 cpu short)")
    _reword(server, changed, "preempting default/job-gone; admitted once it has released its quota")
    first = len(_status_writes(server))
    for _ in range(4):
        report = await step(backend, server, controllers)
        assert [] == report.decisions.admitted
    written = [r.name for r in _status_writes(server)[first:]]
    assert [changed] == written  # its victims were not those: the one change of meaning
    for name in (same, short):  # one Event each: none asked for after the first cycle
        found = [e for e in events_for(server, name) if e[1] in ("PendingPreemption", "PreemptionNoCandidates")]
        assert 1 == len(found), (name, found)
        assert 1 == max(e.get("count", 1) for e in server.list("", "events", "default")
                        if e["involvedObject"]["name"] == name and e["reason"] == found[0][1])
