"""Jobs end to end: a labelled Job in, a Workload, admission and preemption out."""

from __future__ import annotations

import json

import pytest
from preemptd.daemon.backends.kubernetes.jobs import sync_job

from .apiserver import ApiServer
from .cluster import (
    Controllers,
    assert_least_privilege,
    conditions,
    events_for,
    flavor,
    job,
    node,
    priority_class,
    queue,
    settle,
    step,
    until,
)

pytestmark = pytest.mark.asyncio


ORIGINAL = "preemptd.io/original-template"


def _setup(server: ApiServer, **preemption: str) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"},
                                                        [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "8", "nvidia.com/gpu": "4"}, flavor_name="a100",
                                              preemption=dict(preemption) or None))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16", "nvidia.com/gpu": "8"}, {"gpu": "a100", "zone": "z1"}))


async def test_suspended_job_is_admitted_and_unsuspended_on_its_flavor(server, backend) -> None:
    """A labelled suspended Job gets a Workload owned by it, is admitted, and runs on the flavor's nodes."""
    _setup(server)
    server.put("batch", "jobs", job("train", "team-a", {"cpu": "2", "nvidia.com/gpu": "1"}, parallelism=2,
                                    priority_class_name="high", node_selector={"zone": "z1"}))
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "job-train", "default")
    assert workload is not None
    the_job = server.get("batch", "jobs", "train", "default")
    assert [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": the_job["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}] == workload["metadata"]["ownerReferences"]
    assert {"name": "main", "count": 2, "requests": {"cpu": "2", "nvidia.com/gpu": "1"},
            "nodeSelector": {"zone": "z1"}} == workload["spec"]["podSets"][0]
    assert 1000 == workload["spec"]["priority"]

    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "job-train", "default")
    assert {"queue": "team-a", "podSets": [{"name": "main", "count": 2,
            "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"}}]} == workload["status"]["admission"]
    found = conditions(workload)
    assert ("True", "True") == (found["QuotaReserved"]["status"], found["Admitted"]["status"])
    assert "Admitted" == workload["status"]["state"]
    the_job = server.get("batch", "jobs", "train", "default")
    assert the_job["spec"]["suspend"] is False
    template = the_job["spec"]["template"]
    assert {"zone": "z1", "gpu": "a100"} == template["spec"]["nodeSelector"]
    assert [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}] == template["spec"]["tolerations"]
    assert "job-train" == template["metadata"]["labels"]["preemptd.io/workload"]
    # A routine admission is in the Workload's conditions; by default it posts no Event.
    assert [] == events_for(server, "train") + events_for(server, "job-train")
    queue_status = server.get("preemptd.io", "queues", "team-a")["status"]
    assert {"pendingWorkloads", "admittedWorkloads", "nominal", "usage"} <= set(queue_status)


async def test_high_priority_job_preempts_and_the_victim_is_suspended_with_its_original_saved(
    server, backend, controllers: Controllers
) -> None:
    """The victim's Workload is Evicted/Preempted naming the preemptor; its Job is suspended, its
    template left on the flavor's nodes with the user's own saved beside it (given back at its next
    admission); once its pods are gone the preemptor is admitted."""
    _setup(server, withinQueue="LowerPriority")
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"},
                                    priority_class_name="low", node_selector={"zone": "z1"}))
    await step(backend, server, controllers)
    assert server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is False
    assert 1 == len(controllers.pods_of(server.get("batch", "jobs", "low", "default")))

    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    # One cycle creates the high Workload and, seeing it at once, preempts the low one.
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [p.workload for p in report.decisions.preempted]
    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    found = conditions(victim)
    assert ("True", "Preempted") == (found["Evicted"]["status"], found["Evicted"]["reason"])
    assert ("True", "InQueue") == (found["Preempted"]["status"], found["Preempted"]["reason"])
    assert "default/job-high" in found["Preempted"]["message"]
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is True
    assert {"zone": "z1", "gpu": "a100"} == low["spec"]["template"]["spec"]["nodeSelector"]
    assert {"nodeSelector": {"zone": "z1"}, "tolerations": [], "extra": {"parallelism": 1}} == json.loads(
        low["metadata"]["annotations"][ORIGINAL])
    assert victim["status"]["admission"]  # the quota is held until the pods are gone

    report = await step(backend, server, controllers)
    assert [] == report.decisions.preempted  # never evicted twice
    assert [] == report.decisions.admitted
    controllers.finish_terminating()
    controllers.step()
    # One cycle: the eviction finishes (quota back), and the preemptor is admitted.
    report = await step(backend, server)
    victim = server.get("preemptd.io", "workloads", "job-low", "default")
    assert "admission" not in victim["status"]
    assert "Pending" == victim["status"]["state"]
    # Queued again asking for what its user wrote, not for the flavor it left.
    assert {"zone": "z1"} == victim["spec"]["podSets"][0]["nodeSelector"]
    assert "tolerations" not in victim["spec"]["podSets"][0]
    assert ["default/job-high"] == [a.workload for a in report.decisions.admitted]
    assert server.get("batch", "jobs", "high", "default")["spec"]["suspend"] is False
    assert_least_privilege(server)


async def test_elastic_job_is_shrunk_by_lowering_parallelism(server, backend, controllers) -> None:
    """An elastic Job gives up single pods: its parallelism goes down, it keeps running."""
    _setup(server, withinQueue="LowerPriority")
    server.put("batch", "jobs", job("elastic", "team-a", {"cpu": "1", "nvidia.com/gpu": "1"}, parallelism=4,
                                    min_parallelism=2, priority_class_name="low"))
    await step(backend, server, controllers)
    assert 4 == server.get("batch", "jobs", "elastic", "default")["spec"]["parallelism"]
    workload = server.get("preemptd.io", "workloads", "job-elastic", "default")
    assert 2 == workload["spec"]["podSets"][0]["minCount"]

    server.put("batch", "jobs", job("high", "team-a", {"cpu": "1", "nvidia.com/gpu": "1"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert [("default/job-elastic", 1)] == [(p.workload, p.count) for p in report.decisions.preempted]
    elastic = server.get("batch", "jobs", "elastic", "default")
    assert elastic["spec"]["suspend"] is False
    assert 3 == elastic["spec"]["parallelism"]
    assert 4 == json.loads(elastic["metadata"]["annotations"][ORIGINAL])["extra"]["parallelism"]
    assert 3 == server.get("preemptd.io", "workloads", "job-elastic", "default")["status"]["admission"]["podSets"][0]["count"]


async def test_completed_job_gives_its_quota_back(server, backend, controllers) -> None:
    """A Job that completes marks its Workload Finished, and the next Job gets the quota."""
    _setup(server)
    server.put("batch", "jobs", job("first", "team-a", {"cpu": "8"}))
    server.put("batch", "jobs", job("second", "team-a", {"cpu": "8"}))
    report = await step(backend, server, controllers)
    assert 1 == len(report.decisions.admitted)
    first = report.decisions.admitted[0].workload.removeprefix("default/job-")
    done = server.get("batch", "jobs", first, "default")
    server.put("batch", "jobs", {**done, "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    # One cycle: the Workload finishes (quota back) and the other Job is admitted.
    report = await step(backend, server)
    assert "Finished" == server.get("preemptd.io", "workloads", f"job-{first}", "default")["status"]["state"]
    second = "second" if first == "first" else "first"
    assert [f"default/job-{second}"] == [a.workload for a in report.decisions.admitted]


async def test_job_created_running_is_suspended_until_admitted(server, backend) -> None:
    """A labelled Job created unsuspended is held (suspended) like Kueue's webhook would."""
    _setup(server)
    server.put("preemptd.io", "queues", queue("small", {"cpu": "1"}, flavor_name="a100"))
    server.put("batch", "jobs", job("big", "small", {"cpu": "4"}, suspend=False))
    await step(backend, server)
    assert server.get("batch", "jobs", "big", "default")["spec"]["suspend"] is True
    await step(backend, server)
    workload = server.get("preemptd.io", "workloads", "job-big", "default")
    assert "NoFit" == conditions(workload)["QuotaReserved"]["reason"]


def _two_flavor_queue(server: ApiServer) -> None:
    """Queue team-a with 4 GPUs on a100, then 4 on h100 (each flavor its own node label and taint)."""
    for name in ("a100", "h100"):
        server.put("preemptd.io", "resourceflavors", flavor(
            name, {"gpu": name}, [{"key": "gpu", "operator": "Equal", "value": name, "effect": "NoSchedule"}]))
        server.put("", "nodes", node(f"node-{name}", {"cpu": "16", "nvidia.com/gpu": "8"}, {"gpu": name, "zone": "z1"}))
    two = queue("team-a", {"cpu": "8", "nvidia.com/gpu": "4"}, flavor_name="a100",
                preemption={"withinQueue": "LowerPriority"})
    (group,) = two["spec"]["resourceGroups"]
    group["flavors"].append({**group["flavors"][0], "name": "h100"})
    server.put("preemptd.io", "queues", two)
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))


def _job_writes(server: ApiServer, since: int, name: str) -> list[tuple[str | None, str]]:
    return [(r.subresource, r.verb) for r in server.requests[since:]
            if r.plural == "jobs" and r.name == name and r.verb not in ("get", "list", "watch")]


async def test_a_preempted_job_is_suspended_in_one_write_and_re_placed_when_admitted_again(
    server, backend, controllers: Controllers
) -> None:
    """Preemption writes the Job once (suspend; its template stays on the old flavor, the user's
    own saved). Admitted again on another flavor, the Job, still suspended, has status.startTime
    cleared and then resumes on the new flavor's nodes in one patch, built from the saved original:
    the order the Job API allows, with no write refused."""
    await _preempt_low_then_free_h100(server, backend, controllers, fail_resume=False)


async def test_a_refused_resume_after_start_time_is_cleared_is_finished_by_the_next_pass(
    server, backend, controllers: Controllers
) -> None:
    """The resume patch of a re-placed Job fails (503) after its startTime was cleared: the owner is
    driven again, and the Job runs on its new flavor; no admission is lost."""
    backend.owners.first_retry = 0.02
    await _preempt_low_then_free_h100(server, backend, controllers, fail_resume=True)


async def _preempt_low_then_free_h100(
    server: ApiServer, backend, controllers: Controllers, *, fail_resume: bool
) -> None:
    _two_flavor_queue(server)
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="low",
                                    node_selector={"zone": "z1"}))
    await step(backend, server, controllers)
    running = server.get("batch", "jobs", "low", "default")
    assert running["status"]["startTime"]
    assert {"zone": "z1", "gpu": "a100"} == running["spec"]["template"]["spec"]["nodeSelector"]
    server.put("batch", "jobs", job("mid", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="high"))
    await step(backend, server, controllers)
    assert {"gpu": "h100"} == server.get("batch", "jobs", "mid", "default")["spec"]["template"]["spec"]["nodeSelector"]

    since = len(server.requests)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [p.workload for p in report.decisions.preempted]
    assert [(None, "patch")] == _job_writes(server, since, "low")
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is True
    assert {"zone": "z1", "gpu": "a100"} == low["spec"]["template"]["spec"]["nodeSelector"]
    assert low["status"]["startTime"]
    controllers.finish_terminating()
    controllers.step()
    await step(backend, server, controllers)  # eviction finished; high admitted on a100
    assert server.get("batch", "jobs", "high", "default")["spec"]["suspend"] is False
    assert [(None, "patch")] == _job_writes(server, since, "low")  # nothing more while it waits

    mid = server.get("batch", "jobs", "mid", "default")
    server.put("batch", "jobs", {**mid, "status": {**mid["status"], "conditions": [{"type": "Complete",
                                                                                  "status": "True"}]}})
    since = len(server.requests)
    if fail_resume:
        server.fail(1, code=503, reason="ServiceUnavailable",
                    when=lambda r: r.plural == "jobs" and r.name == "low" and r.verb == "patch" and not r.subresource)
    # mid's Workload finishes (its quota on h100 is free); low is admitted there.
    admitted = [a.workload for _ in range(2) for a in (await step(backend, server, controllers)).decisions.admitted]
    assert ["default/job-low"] == admitted
    if fail_resume:
        await until(lambda: server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is False,
                    what="the resume, driven again")
        assert [("status", "patch"), (None, "patch"), (None, "patch")] == _job_writes(server, since, "low")
        controllers.step()
    else:
        assert [("status", "patch"), (None, "patch")] == _job_writes(server, since, "low")
        assert 0 == backend.writer.errors
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is False
    assert {"zone": "z1", "gpu": "h100"} == low["spec"]["template"]["spec"]["nodeSelector"]
    assert [{"key": "gpu", "operator": "Equal", "value": "h100", "effect": "NoSchedule"}] == low["spec"][
        "template"]["spec"]["tolerations"]
    assert {"nodeSelector": {"zone": "z1"}, "tolerations": [], "extra": {"parallelism": 1}} == json.loads(
        low["metadata"]["annotations"][ORIGINAL])
    assert ["node-h100"] == [p["spec"]["nodeName"] for p in controllers.pods_of(low)]


async def test_a_preempted_job_admitted_again_on_the_same_flavor_is_only_resumed(
    server, backend, controllers: Controllers
) -> None:
    """Its template already is on that flavor's nodes: one Job write (suspend: false), no status
    write, two writes for the whole admission (Workload status, Job)."""
    _setup(server, withinQueue="LowerPriority")
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="low"))
    await step(backend, server, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)
    controllers.finish_terminating()
    controllers.step()
    await step(backend, server, controllers)
    high = server.get("batch", "jobs", "high", "default")
    assert high["spec"]["suspend"] is False
    server.put("batch", "jobs", {**high, "status": {**high["status"], "conditions": [{"type": "Complete",
                                                                                    "status": "True"}]}})
    since = len(server.requests)
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [a.workload for a in report.decisions.admitted]
    writes = [(r.plural, r.subresource) for r in server.requests[since:]
              if r.verb not in ("get", "list", "watch") and r.name in ("low", "job-low")]
    assert [("workloads", "status"), ("jobs", None)] == writes
    low = server.get("batch", "jobs", "low", "default")
    assert low["spec"]["suspend"] is False
    assert {"gpu": "a100"} == low["spec"]["template"]["spec"]["nodeSelector"]


async def test_a_pending_job_waiting_on_its_last_flavor_asks_for_its_own_placement(server, backend) -> None:
    """A suspended Job whose template still holds the flavor it was preempted from (its user's saved
    in the annotation) keeps a Workload that asks for the user's node selector and tolerations."""
    _setup(server)
    user = {"key": "team", "operator": "Exists"}
    saved = json.dumps({"nodeSelector": {"zone": "z1"}, "tolerations": [user], "extra": {"parallelism": 1}})
    waiting = job("low", "team-a", {"cpu": "2"}, priority_class_name="low", node_selector={"zone": "z1"})
    waiting["metadata"]["annotations"] = {ORIGINAL: saved}
    template_spec = waiting["spec"]["template"]["spec"]
    template_spec["nodeSelector"] = {"zone": "z1", "gpu": "a100"}
    template_spec["tolerations"] = [user, {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    waiting["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    server.put("batch", "jobs", waiting)
    await until(lambda: server.get("preemptd.io", "workloads", "job-low", "default") is not None,
                what="the Workload")
    created = server.get("preemptd.io", "workloads", "job-low", "default")
    wanted = {"name": "main", "count": 1, "requests": {"cpu": "2"}, "nodeSelector": {"zone": "z1"},
              "tolerations": [user]}
    assert wanted == created["spec"]["podSets"][0]

    # The same for a Workload queued again after its eviction: its spec is kept to the user's.
    stale = {**created, "spec": {**created["spec"], "podSets": [{**wanted, "nodeSelector": {"zone": "z2"}}]}}
    server.put("preemptd.io", "workloads", stale)
    # The Workload's change drives its Job's sync, which brings the spec back.
    await until(lambda: wanted == server.get("preemptd.io", "workloads", "job-low", "default")["spec"]["podSets"][0],
                what="the Workload's pod set back to the user's")
    await settle(backend, server)
    assert 0 == backend.writer.errors
    assert {"zone": "z1", "gpu": "a100"} == server.get("batch", "jobs", "low", "default")["spec"]["template"][
        "spec"]["nodeSelector"]  # nothing to give back while it waits


async def test_sync_job_says_whether_the_job_matches_its_workload(server, backend, controllers) -> None:
    """False while an evicted Job's pods are still stopping (another pass is needed), True once the
    eviction is finished (the quota is given back by the next cycle's commit, not by the sync),
    and True again (nothing written) for a Job already as wanted."""
    _setup(server, withinQueue="LowerPriority")
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "2", "nvidia.com/gpu": "4"}, priority_class_name="low"))
    await step(backend, server, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "2", "nvidia.com/gpu": "2"}, priority_class_name="high"))
    await step(backend, server, controllers)
    assert controllers.pods_of(server.get("batch", "jobs", "low", "default"), terminating=True)

    def current() -> tuple[dict, dict]:
        return server.get("batch", "jobs", "low", "default"), server.get("preemptd.io", "workloads", "job-low", "default")

    assert await sync_job(backend, *current()) is False
    controllers.finish_terminating()
    controllers.step()
    await settle(backend, server)
    assert await sync_job(backend, *current()) is True
    await settle(backend, server)
    assert current()[1]["status"]["admission"]
    await step(backend, server)
    assert "admission" not in current()[1]["status"]
    since = len(server.requests)
    assert await sync_job(backend, *current()) is True
    assert [] == [r for r in server.requests[since:] if r.verb != "get"]
