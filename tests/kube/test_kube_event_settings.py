"""Which Events a workload's life posts, under each ``[daemon] events`` setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from preemptd.daemon.config import read_config

from .apiserver import ApiServer
from .cluster import Controllers, flavor, job, node, priority_class, queue, step, until

pytestmark = pytest.mark.asyncio


def _setup(server: ApiServer) -> None:
    server.put("preemptd.io", "resourceflavors", flavor("a100", {"gpu": "a100"}))
    server.put("preemptd.io", "queues", queue("team-a", {"cpu": "4"}, flavor_name="a100",
                                              preemption={"withinQueue": "LowerPriority"}))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("low", 10))
    server.put("scheduling.k8s.io", "priorityclasses", priority_class("high", 1000))
    server.put("", "nodes", node("node-1", {"cpu": "16"}, {"gpu": "a100"}))


def _posted(server: ApiServer) -> list[tuple[str, str, str, str]]:
    """(kind and name of the object, type, reason) of every Event, sorted; messages left out."""
    return sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["type"], e["reason"])
        for e in server.list("", "events", "default")
    )


async def _preemption(server: ApiServer, backend, controllers: Controllers) -> None:
    """low runs; high arrives and preempts it; low's pods stop; high runs, low waits."""
    _setup(server)
    server.put("batch", "jobs", job("low", "team-a", {"cpu": "4"}, priority_class_name="low"))
    await step(backend, server, controllers)
    server.put("batch", "jobs", job("high", "team-a", {"cpu": "4"}, priority_class_name="high"))
    report = await step(backend, server, controllers)
    assert ["default/job-low"] == [p.workload for p in report.decisions.preempted]
    controllers.finish_terminating()
    controllers.step()
    await step(backend, server, controllers)
    await step(backend, server, controllers)
    assert server.get("batch", "jobs", "high", "default")["spec"]["suspend"] is False
    assert server.get("batch", "jobs", "low", "default")["spec"]["suspend"] is True


async def test_by_default_only_the_preemption_is_an_event_once_on_the_victims_workload(
    server, backend, controllers: Controllers
) -> None:
    """Workloads created, admitted, waiting, an eviction finished: all in status conditions, no
    Event. The preemption is one Event, on the victim's Workload (not again on its Job), naming
    the preemptor and the reason."""
    await _preemption(server, backend, controllers)
    assert [("Workload", "job-low", "Normal", "Preempted")] == _posted(server)
    (event,) = server.list("", "events", "default")
    assert "Preempted the workload to accommodate default/job-high (InQueue)" == event["message"]


async def test_with_events_all_every_step_is_posted_and_decisions_on_the_owner_too(
    server, make_backend, controllers: Controllers
) -> None:
    """events = "all": Workload created (on the Job), admitted and preempted (on the Workload and
    its Job), the eviction finished and every new waiting reason (on the Workload)."""
    backend = await make_backend(events="all")
    await _preemption(server, backend, controllers)
    posted = set(_posted(server))
    assert {
        ("Job", "low", "Normal", "CreatedWorkload"),
        ("Job", "high", "Normal", "CreatedWorkload"),
        ("Job", "low", "Normal", "Admitted"),
        ("Workload", "job-low", "Normal", "Admitted"),
        ("Job", "high", "Normal", "Admitted"),
        ("Workload", "job-high", "Normal", "Admitted"),
        ("Job", "low", "Normal", "Preempted"),
        ("Workload", "job-low", "Normal", "Preempted"),
        ("Workload", "job-low", "Normal", "EvictionFinished"),
    } <= posted
    assert ("Workload", "job-high", "Normal", "PendingPreemption") in posted


async def test_the_setting_is_read_at_each_event_so_a_reload_applies_at_once(
    server, backend, controllers: Controllers
) -> None:
    """The backend's configuration replaced (as a reload does): the next Events follow it."""
    _setup(server)
    server.put("batch", "jobs", job("first", "team-a", {"cpu": "1"}))
    await step(backend, server, controllers)
    assert [] == _posted(server)
    backend.config = dataclasses.replace(
        backend.config, daemon=dataclasses.replace(backend.config.daemon, events="all")
    )
    server.put("batch", "jobs", job("second", "team-a", {"cpu": "1"}))
    await step(backend, server, controllers)
    assert [("Job", "second", "Normal", "Admitted"), ("Job", "second", "Normal", "CreatedWorkload"),
            ("Workload", "job-second", "Normal", "Admitted")] == _posted(server)


async def test_by_default_what_the_user_must_fix_is_still_a_warning(server, backend) -> None:
    """An unusable pod template (on the Job: no Workload is made) and an Inadmissible Workload (a
    Queue that does not exist) are Warnings under the default setting."""
    _setup(server)
    bad = job("bad", "team-a", {"cpu": "lots"})
    server.put("batch", "jobs", bad)
    server.put("batch", "jobs", job("lost", "nowhere", {"cpu": "1"}))
    await until(lambda: server.get("preemptd.io", "workloads", "job-lost", "default") is not None,
                what="the lost Job's Workload")
    await step(backend, server)
    assert [("Job", "bad", "Warning", "InvalidPodTemplate"),
            ("Workload", "job-lost", "Warning", "Inadmissible")] == _posted(server)


async def test_the_events_setting_takes_all_or_changes_and_names_the_line_otherwise(tmp_path: Path) -> None:
    config = tmp_path / "preemptd.toml"
    config.write_text('[daemon]\nevents = "all"\n')
    settings, problems = read_config(config)
    assert ([], "all") == (problems, settings.daemon.events)
    config.write_text('[daemon]\nlog_level = "info"\n')
    settings, problems = read_config(config)
    assert ([], "changes") == (problems, settings.daemon.events)
    config.write_text('[daemon]\nlog_level = "info"\nevents = "some"\n')
    _, problems = read_config(config)
    assert [f"{config}:3: daemon.events: expected one of 'all', 'changes', got 'some'"] == [str(p) for p in problems]
