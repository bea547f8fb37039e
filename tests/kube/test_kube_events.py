"""Events are aggregated as the Kubernetes event recorder aggregates them."""

from __future__ import annotations

import asyncio

import pytest
from preemptd.daemon.backends.kubernetes.events import COMBINED, EventRecorder

from .apiserver import ApiServer

pytestmark = pytest.mark.asyncio

WORKLOAD = {"apiVersion": "preemptd.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "job-a", "namespace": "default", "uid": "u-1"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events(server: ApiServer) -> list[dict]:
    return server.list("", "events", "default")


async def _recorded(recorder: EventRecorder, *messages: str, reason: str = "Pending") -> None:
    for message in messages:
        recorder.record(WORKLOAD, "Normal", reason, message)
        await recorder.flush()


async def test_a_repeated_event_is_one_event_whose_count_goes_up(server, kube) -> None:
    """Five repeats within the window: one Event; its count is patched at most once per
    ``patch_after`` and carries every repeat since."""
    clock = Clock()
    recorder = EventRecorder(kube, clock=clock, patch_after=60.0)
    task = asyncio.create_task(recorder.run())
    try:
        await _recorded(recorder, "waiting", "waiting", "waiting")
        assert [1] == [e["count"] for e in _events(server)]
        clock.now += 61
        await _recorded(recorder, "waiting")
        assert [4] == [e["count"] for e in _events(server)]
        await _recorded(recorder, "waiting")  # within patch_after of the last patch: kept in memory
        assert [4] == [e["count"] for e in _events(server)]
        assert (1, 1) == (recorder.written, recorder.patched)
        clock.now += 601  # a new window: a new Event
        await _recorded(recorder, "waiting")
        assert [1, 4] == sorted(e["count"] for e in _events(server))
    finally:
        task.cancel()


async def test_many_different_messages_for_one_reason_are_combined(server, kube) -> None:
    """Beyond ``similar`` different messages for one object and reason, one combined Event."""
    clock = Clock()
    recorder = EventRecorder(kube, clock=clock, similar=3, patch_after=0.0)
    task = asyncio.create_task(recorder.run())
    try:
        await _recorded(recorder, *(f"waiting for victim {i}" for i in range(8)))
        messages = sorted(e["message"] for e in _events(server))
        assert 4 == len(messages)
        assert [f"{COMBINED}waiting for victim 7"] == [m for m in messages if m.startswith(COMBINED)]
        combined = next(e for e in _events(server) if e["message"].startswith(COMBINED))
        assert 5 == combined["count"]  # the 4th to the 8th message
    finally:
        task.cancel()


async def test_events_about_one_object_are_rate_limited(server, kube) -> None:
    """A token bucket per object: ``burst`` writes, then one per ``refill`` seconds; the rest dropped."""
    clock = Clock()
    recorder = EventRecorder(kube, clock=clock, burst=3, refill=10.0, similar=100)
    task = asyncio.create_task(recorder.run())
    try:
        await _recorded(recorder, *(f"m{i}" for i in range(5)))
        assert (3, 2) == (len(_events(server)), recorder.dropped)
        clock.now += 10
        await _recorded(recorder, "m5", "m6")
        assert (4, 3) == (len(_events(server)), recorder.dropped)
        other = {**WORKLOAD, "metadata": {**WORKLOAD["metadata"], "name": "job-b", "uid": "u-2"}}
        recorder.record(other, "Normal", "Pending", "m0")
        await recorder.flush()
        assert 5 == len(_events(server))  # another object has its own bucket
    finally:
        task.cancel()


async def test_a_repeat_of_an_expired_event_is_written_anew(server, kube) -> None:
    clock = Clock()
    recorder = EventRecorder(kube, clock=clock, patch_after=0.0)
    task = asyncio.create_task(recorder.run())
    try:
        await _recorded(recorder, "waiting")
        (event,) = _events(server)
        server.remove("", "events", event["metadata"]["name"], "default")  # the server's TTL
        await _recorded(recorder, "waiting")  # the patch finds nothing
        await _recorded(recorder, "waiting")
        assert [1] == [e["count"] for e in _events(server)]
    finally:
        task.cancel()
