"""Fixtures: a test API server with preemptd's CRDs, a client for it, and a backend."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest_asyncio
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.backend import KubernetesBackend
from preemptd.daemon.backends.kubernetes.client import Kube
from preemptd.daemon.config import BackendConfig, Config
from preemptd.daemon.plugins import resolve_plugins

from .apiserver import ApiServer
from .cluster import Controllers, install_crds

NOW_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z; a fixed session clock


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as api:
        install_crds(api)
        yield api


def client_for(server: ApiServer) -> Kube:
    configuration = Configuration(host=server.url)
    return Kube.from_configuration(configuration)


@pytest_asyncio.fixture
async def kube(server: ApiServer) -> AsyncIterator[Kube]:
    client = client_for(server)
    yield client
    await client.close()


BackendFactory = Callable[..., Awaitable[KubernetesBackend]]


@pytest_asyncio.fixture
async def make_backend(server: ApiServer) -> AsyncIterator[BackendFactory]:
    """Start backends (each with its own client, like a daemon process); all stopped at the end."""
    started: list[tuple[KubernetesBackend, Kube]] = []

    async def make(
        *, dry_run: bool = False, clock: Callable[[], int] = lambda: NOW_MS, events: str | None = None
    ) -> KubernetesBackend:
        config = dataclasses.replace(Config(), backend=BackendConfig(kind="kubernetes"))
        if events is not None:  # [daemon] events; the default unless given
            config = dataclasses.replace(config, daemon=dataclasses.replace(config.daemon, events=events))
        plugins, problems = resolve_plugins(config)
        assert not problems
        client = client_for(server)
        backend = KubernetesBackend(client, config=config, plugins=plugins, dry_run=dry_run, clock=clock)
        await backend.start(timeout=5)
        started.append((backend, client))
        return backend

    yield make
    for backend, client in started:
        await backend.stop()
        await client.close()


@pytest_asyncio.fixture
async def backend(make_backend: BackendFactory) -> KubernetesBackend:
    return await make_backend()


@pytest_asyncio.fixture
def controllers(server: ApiServer) -> Controllers:
    return Controllers(server)
