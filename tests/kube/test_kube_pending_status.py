"""A waiting workload's status is rewritten when the cause it gives changes, and only then."""

from __future__ import annotations

import pytest
from preemptd.daemon.backends.kubernetes.commit import _message_of_meaning
from preemptd.framework.decisions import Pending

from .apiserver import ApiServer
from .cluster import conditions, events_for, flavor, job, node, queue, step


def _status_writes(server: ApiServer, name: str, since: int) -> int:
    return sum(1 for r in server.requests[since:]
               if r.verb == "patch" and r.plural == "workloads" and r.name == name and r.subresource == "status")


def _quota_reserved(server: ApiServer, name: str) -> tuple[str, str]:
    found = conditions(server.get("preemptd.io", "workloads", name, "default"))["QuotaReserved"]
    return found["reason"], found["message"]


@pytest.mark.asyncio
async def test_an_inadmissible_workload_whose_cause_changes_is_told_the_new_cause_once(server, backend) -> None:
    """Queue "team-b" unknown, then created as a parent queue: still Inadmissible, but for
    another cause, written once with one Warning; the cycles after it write nothing."""
    server.put("preemptd.io", "resourceflavors", flavor("default"))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"flavor": "default"}))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}))
    server.put("batch", "jobs", job("lost", "team-b", {"cpu": "1"}))
    await step(backend, server)
    await step(backend, server)
    reason, first = _quota_reserved(server, "job-lost")
    assert ("Inadmissible", True) == (reason, first.endswith("unknown queue 'team-b'"))

    server.put("preemptd.io", "queues", queue("team-b", {"cpu": "4"}))
    server.put("preemptd.io", "queues", queue("team-b-child", {"cpu": "2"}, parent="team-b"))
    since = len(server.requests)
    for _ in range(3):
        await step(backend, server)
    await backend.events.flush()
    reason, message = _quota_reserved(server, "job-lost")
    assert "Inadmissible" == reason
    assert "not a leaf queue" in message
    assert 1 == _status_writes(server, "job-lost", since)
    assert sorted([first, message]) == sorted(m for _, r, m in events_for(server, "job-lost") if r == "Inadmissible")


def _waiting(reason: str, message: str) -> dict:
    condition = {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}
    return {"metadata": {"name": "job-big", "namespace": "default"}, "status": {"conditions": [condition]}}


@pytest.mark.parametrize(
    ("reason", "written", "now", "kept"),
    [
        # the same cause with figures that moved since (other workloads' usage)
        ("NoFit", "insufficient unused quota: needs 3 more cpu in flavor a", "insufficient unused quota: "
         "needs 1 more cpu in flavor a", True),
        # the same victims named in another order
        ("PendingPreemption", "preempting default/a, default/b; admitted once they have released their quota",
         "preempting default/b, default/a; admitted once they have released their quota", True),
        # another cause under the same reason
        ("NoFit", "insufficient unused quota: needs 3 more cpu in flavor a",
         "resource nvidia.com/gpu is not covered by queue team-a", False),
        ("PendingPreemption", "preempting default/a; admitted once they have released their quota",
         "preempting default/a, default/b; admitted once they have released their quota", False),
        # an Inadmissible message is read from the objects alone: any change is a new cause
        ("Inadmissible", "LocalQueue 'default/q': queue 'x' is missing 1 flavor",
         "LocalQueue 'default/q': queue 'x' is missing 2 flavor", False),
    ],
)
def test_a_pending_message_is_rewritten_only_when_its_cause_changes(
    reason: str, written: str, now: str, kept: bool
) -> None:
    waiting = tuple(n.strip() for n in now.removeprefix("preempting ").partition(";")[0].split(",")) \
        if now.startswith("preempting ") else ()
    pending = Pending("default/job-big", reason, now, waiting)
    assert (written if kept else now) == _message_of_meaning(_waiting(reason, written), pending)
