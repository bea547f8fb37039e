"""/healthz, /readyz and /metrics, served on loopback and scraped."""

from __future__ import annotations

import aiohttp
import pytest
from preemptd.daemon.http import HttpServer
from preemptd.daemon.metrics import Metrics
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition: (name, sorted labels) -> value."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def get(url: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def test_probes_and_metrics_are_served_on_loopback() -> None:
    """Each probe answers 200 or 503 with its reason; /metrics is Prometheus' text format."""
    metrics = Metrics()
    state = {"live": (True, "ok"), "ready": (False, "caches are syncing")}
    server = HttpServer("127.0.0.1:0", live=lambda: state["live"], ready=lambda: state["ready"],
                        metrics=metrics.exposition)
    await server.start()
    try:
        assert server.port != 0
        assert (200, "ok\n") == (await get(f"{server.url}/healthz"))[::2]
        assert (503, "caches are syncing\n") == (await get(f"{server.url}/readyz"))[::2]
        state["live"], state["ready"] = (False, "the scheduling loop made no progress for 40s"), (True, "ok: leading")
        assert 503 == (await get(f"{server.url}/healthz"))[0]
        assert (200, "ok: leading\n") == (await get(f"{server.url}/readyz"))[::2]
        status, content_type, text = await get(f"{server.url}/metrics")
    finally:
        await server.stop()
    assert (200, True) == (status, content_type.startswith("text/plain"))
    assert "# TYPE preemptd_session_duration_seconds histogram" in text


async def test_a_taken_address_is_an_error_at_start() -> None:
    """Binding a port that is in use fails loudly (the CLI reports it and exits 1)."""
    first = HttpServer("127.0.0.1:0", live=lambda: (True, ""), ready=lambda: (True, ""), metrics=lambda: b"")
    await first.start()
    second = HttpServer(f"127.0.0.1:{first.port}", live=lambda: (True, ""), ready=lambda: (True, ""),
                        metrics=lambda: b"")
    try:
        with pytest.raises(OSError):
            await second.start()
    finally:
        await first.stop()


async def test_metrics_cover_sessions_queues_preemptions_plugins_writes_and_leadership() -> None:
    """What the daemon feeds in comes out under the documented names and labels."""
    metrics = Metrics()
    metrics.observe_session({"allocate": 0.01, "preempt": 0.02, "session": 0.04, "commit": 0.5}, ["allocate", "preempt"])
    metrics.observe_queues({"team-a": {"admitted": 3, "pending": 2, "evicted": 1}})
    metrics.preemptions.labels("InCohortReclamation").inc(2)
    metrics.observe_plugins({"min-runtime": 1, "priority": 0}, {"gpu-victims": 4})
    metrics.observe_write("patch", "workloads.preemptd.io/status", 0.02, None)
    metrics.observe_write("patch", "workloads.preemptd.io/status", 0.03, 409)
    metrics.set_leader(True)
    found = samples(metrics.exposition().decode())
    assert 1 == found[("preemptd_session_duration_seconds_count", (("action", "preempt"),))]
    assert 1 == found[("preemptd_session_duration_seconds_count", (("action", "session"),))]
    assert ("preemptd_session_duration_seconds_count", (("action", "commit"),)) not in found
    team_a = {state: found[("preemptd_workloads", (("queue", "team-a"), ("state", state)))]
              for state in ("admitted", "pending", "evicted")}
    assert {"admitted": 3, "pending": 2, "evicted": 1} == team_a
    assert 2 == found[("preemptd_preemptions_total", (("reason", "InCohortReclamation"),))]
    assert 1 == found[("preemptd_plugin_errors_total", (("plugin", "min-runtime"),))]
    assert ("preemptd_plugin_errors_total", (("plugin", "priority"),)) not in found
    assert 4 == found[("preemptd_plugin_vetoes_total", (("plugin", "gpu-victims"),))]
    write = (("resource", "workloads.preemptd.io/status"), ("verb", "patch"))
    assert 2 == found[("preemptd_api_write_duration_seconds_count", write)]
    assert 1 == found[("preemptd_api_write_errors_total", (("code", "409"), *write))]
    assert 1 == found[("preemptd_leader", ())]


async def test_a_deleted_queue_leaves_the_workload_gauges() -> None:
    """Gauges per queue follow the queues of the last cycle."""
    metrics = Metrics()
    metrics.observe_queues({"team-a": {"admitted": 1}, "team-b": {"pending": 1}})
    metrics.observe_queues({"team-b": {"pending": 2}})
    queues = {dict(labels)["queue"] for (name, labels) in samples(metrics.exposition().decode())
              if name == "preemptd_workloads"}
    assert {"team-b"} == queues


async def test_queue_weighted_shares_follow_the_last_session() -> None:
    """preemptd_queue_weighted_share{queue}: each queue's reported share (SEMANTICS §7.6);
    a session without fair sharing leaves no series."""
    from preemptd.framework.decisions import QueueShare

    metrics = Metrics()
    metrics.observe_shares([QueueShare("team-a", 429), QueueShare("team-b", 0)])
    found = samples(metrics.exposition().decode())
    assert 429 == found[("preemptd_queue_weighted_share", (("queue", "team-a"),))]
    assert 0 == found[("preemptd_queue_weighted_share", (("queue", "team-b"),))]
    metrics.observe_shares(None)
    assert not [name for (name, _) in samples(metrics.exposition().decode()) if name == "preemptd_queue_weighted_share"]
