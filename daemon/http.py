"""``/healthz``, ``/readyz`` and ``/metrics`` on ``[daemon] http_address`` (aiohttp).

* ``/healthz`` — liveness: the process answers and its scheduling loop makes
  progress. A hung loop answers 503, and the kubelet restarts the container.
* ``/readyz`` — readiness: the caches are synced and, with leader election,
  this replica either leads or stands by in contact with the API server. A
  standby is ready: it is what takes over.
* ``/metrics`` — the Prometheus text format of the daemon's own registry.
* ``/divergence`` — in shadow mode only: where preemptd's decisions differ from
  Kueue's, as JSON (``backends.kubernetes.divergence``).

Each probe answers ``ok`` or a one-line reason, so ``curl`` shows why.
The server runs on the daemon's event loop: if the loop is blocked, no probe
is answered at all, which a probe counts as a failure too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from .config import split_address
from .metrics import CONTENT_TYPE_LATEST

__all__ = ["Check", "HttpServer"]

log = logging.getLogger("preemptd.http")

Check = Callable[[], tuple[bool, str]]
"""A probe: (passing, one line saying why)."""


class HttpServer:
    """Serves the three endpoints until :meth:`stop`; ``port`` is the bound port (``:0`` picks one)."""

    def __init__(
        self, address: str, *, live: Check, ready: Check, metrics: Callable[[], bytes],
        divergence: Callable[[], bytes] | None = None,
    ) -> None:
        self.host, self.port = split_address(address)
        self.live = live
        self.ready = ready
        self.metrics = metrics
        self.divergence = divergence  # shadow mode's report (JSON), else no /divergence
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._probe(self.live))
        app.router.add_get("/livez", self._probe(self.live))
        app.router.add_get("/readyz", self._probe(self.ready))
        app.router.add_get("/metrics", self._metrics)
        if self.divergence is not None:
            app.router.add_get("/divergence", self._divergence)
        app.router.add_get("/", self._index)
        self._runner = web.AppRunner(app, access_log=logging.getLogger("aiohttp.access"), shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            self._runner = None
            raise
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("serving /healthz, /readyz and /metrics on %s", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    def _probe(check: Check) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.Response:
            passing, why = check()
            return web.Response(status=200 if passing else 503, text=f"{why}\n")

        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _divergence(self, request: web.Request) -> web.Response:
        assert self.divergence is not None
        return web.Response(body=self.divergence(), content_type="application/json")

    async def _index(self, request: web.Request) -> web.Response:
        shadow = " /divergence" if self.divergence is not None else ""
        return web.Response(text=f"preemptd: /healthz /readyz /metrics{shadow}\n")
