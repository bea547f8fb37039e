"""Fixtures for the daemon's tests: the test API server, and a check that no task outlives its test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio
from kube.apiserver import ApiServer
from kube.cluster import install_crds

# The names the daemon gives its tasks (service.py, loop.py, the backend).
OURS = ("scheduler", "cycle", "leader-election", "watchdog", "informers-sync", "informer:", "events", "daemon")


@pytest_asyncio.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """After the test, none of the daemon's named tasks is still running."""
    yield
    for _ in range(5):
        await asyncio.sleep(0)
    current = asyncio.current_task()
    leaked = sorted(
        t.get_name() for t in asyncio.all_tasks() if t is not current and not t.done() and t.get_name().startswith(OURS)
    )
    assert [] == leaked


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as api:
        install_crds(api)
        yield api
