"""``/healthz``, ``/readyz`` and ``/metrics`` on ``[daemon] http_address`` (aiohttp).

* ``/healthz`` — liveness: the process answers and its scheduling loop makes
  progress. A hung loop answers 503, and the kubelet restarts the container.
* ``/readyz`` — readiness: the caches are synced and, with leader election,
  this replica either leads or stands by in contact with the API server. A
  standby is ready: it is what takes over.
* ``/metrics`` — the Prometheus text format of the daemon's own registry.
* ``/pending``, ``/pending/<queue>`` — the waiting workloads with their queue
  positions as of the last cycle (JSON, as ``preemptd pending -o json``); 503
  before the first cycle has finished.
* ``/divergence`` — in shadow mode only: where preemptd's decisions differ from
  Kueue's, as JSON (``backends.kubernetes.divergence``).

Each probe answers ``ok`` or a one-line reason, so ``curl`` shows why.
The server runs on the daemon's event loop: if the loop is blocked, no probe
is answered at all, which a probe counts as a failure too.

Securing ``/metrics`` the way controller-runtime projects do (``[daemon]``
``metrics_cert_file`` / ``metrics_key_file`` / ``metrics_token_file``):

* **TLS**: with a certificate and key, the server speaks HTTPS only. Both files
  are watched (their modification time, size and inode, polled every
  ``reload_interval`` seconds, which also sees a Secret volume's symlink swap)
  and loaded again when they change: new connections get the new certificate,
  open ones keep theirs. A pair that fails to load (half written, a key that
  does not match) is logged and the previous pair stays in use.
* **Bearer token**: with a token file, ``/metrics`` answers 401 unless the
  request carries ``Authorization: Bearer <the file's content>`` (surrounding
  whitespace ignored; compared in constant time). The file is read again when it
  changes. The probes stay open: the kubelet sends no token. Kubernetes
  TokenReview/SubjectAccessReview delegation is not done; a kube-rbac-proxy in
  front of the server is the way to get it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .config import split_address
from .metrics import CONTENT_TYPE_LATEST
from .tls import ReloadingCertificate

__all__ = ["Check", "HttpServer", "close", "serve"]

log = logging.getLogger("preemptd.http")

Check = Callable[[], tuple[bool, str]]
"""A probe: (passing, one line saying why)."""

PendingView = Callable[[str | None], dict[str, Any] | None]
"""The waiting workloads of one queue (or of all, given None); None before any cycle;
``LookupError`` for a queue the last cycle did not know."""


class HttpServer:
    """Serves the three endpoints until :meth:`stop`; ``port`` is the bound port (``:0`` picks one)."""

    def __init__(
        self,
        address: str,
        *,
        live: Check,
        ready: Check,
        metrics: Callable[[], bytes],
        pending: PendingView | None = None,
        cert_file: str = "",
        key_file: str = "",
        token_file: str = "",
        reload_interval: float = 10.0,
        divergence: Callable[[], bytes] | None = None,
    ) -> None:
        self.host, self.port = split_address(address)
        self.live = live
        self.ready = ready
        self.metrics = metrics
        self.pending = pending
        self.divergence = divergence  # shadow mode's report (JSON), else no /divergence
        self._runner: web.AppRunner | None = None
        self.tls = ReloadingCertificate(cert_file, key_file, what="metrics certificate") if cert_file else None
        self.token = _Watched(token_file) if token_file else None
        self.reload_interval = reload_interval
        self._secret = b""
        self._watch: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._probe(self.live))
        app.router.add_get("/livez", self._probe(self.live))
        app.router.add_get("/readyz", self._probe(self.ready))
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/pending", self._pending)
        app.router.add_get("/pending/{queue}", self._pending)
        if self.divergence is not None:
            app.router.add_get("/divergence", self._divergence)
        app.router.add_get("/", self._index)
        # Unreadable TLS or token files are an error at start, like a taken address.
        if self.tls is not None:
            self.tls.load()
        if self.token is not None:
            self._secret = _read_token(self.token.paths[0])
            self.token.changed()
        context = self.tls.context if self.tls is not None else None
        self._runner, self.port = await serve(app, self.host, self.port, context, logging.getLogger("aiohttp.access"))
        if self.tls is not None or self.token is not None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_files(), name="http-file-watch")
        log.info("serving /healthz, /readyz and /metrics on %s", self.url)

    async def stop(self) -> None:
        await close(self._runner, self._watch)
        self._runner = self._watch = None

    @staticmethod
    def _probe(check: Check) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.Response:
            passing, why = check()
            return web.Response(status=200 if passing else 503, text=f"{why}\n")

        return handle

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.token is not None and not self._authorized(request):
            return web.Response(status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"})
        return web.Response(body=self.metrics(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _pending(self, request: web.Request) -> web.Response:
        # Workload names are no less private than the metrics: the same token guards them.
        if self.token is not None and not self._authorized(request):
            return web.Response(status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"})
        queue = request.match_info.get("queue")
        try:
            view = self.pending(queue) if self.pending is not None else None
        except LookupError:
            return web.Response(status=404, text=f"no queue {queue!r}\n")
        if view is None:
            return web.Response(status=503, text="no cycle has finished yet\n")
        return web.json_response(text=json.dumps(view, indent=2, ensure_ascii=False) + "\n")

    def _authorized(self, request: web.Request) -> bool:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self._secret)

    async def _watch_files(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            self.reload()

    def reload(self) -> None:
        """Load the certificate pair and the token again if their files changed."""
        if self.tls is not None and self.tls.loaded:
            self.tls.refresh()
        if self.token is not None and self.token.changed():
            try:
                self._secret = _read_token(self.token.paths[0])
            except (OSError, ValueError) as exc:
                log.warning("keeping the previous bearer token: %s", exc)
            else:
                log.info("read the bearer token again from %s", self.token.paths[0])

    async def _divergence(self, request: web.Request) -> web.Response:
        if self.token is not None and not self._authorized(request):
            return web.Response(status=401, text="unauthorized\n", headers={"WWW-Authenticate": "Bearer"})
        assert self.divergence is not None
        return web.Response(body=self.divergence(), content_type="application/json")

    async def _index(self, request: web.Request) -> web.Response:
        shadow = " /divergence" if self.divergence is not None else ""
        return web.Response(text=f"preemptd: /healthz /readyz /metrics /pending{shadow}\n")


async def serve(
    app: web.Application, host: str, port: int, context: ssl.SSLContext | None, access_log: logging.Logger | None
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (over TLS with ``context``): its runner and the bound
    port (``0`` picks one). An address that cannot be bound raises ``OSError`` and leaves
    nothing running."""
    runner = web.AppRunner(app, access_log=access_log, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=context)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    sockets = getattr(site._server, "sockets", None) or []
    return runner, int(sockets[0].getsockname()[1]) if sockets else port


async def close(runner: web.AppRunner | None, watch: asyncio.Task[None] | None) -> None:
    """Stop a server :func:`serve` started, and the task that watches its files."""
    if watch is not None:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    if runner is not None:
        await runner.cleanup()


class _Watched:
    """Files and what :func:`os.stat` said of them when last loaded."""

    __slots__ = ("paths", "seen")

    def __init__(self, *paths: str) -> None:
        self.paths = paths
        self.seen: tuple[tuple[int, int, int], ...] = ()

    def changed(self) -> bool:
        """Whether a file changed since the last call (a file that cannot be read counts
        as unchanged: the last good content stays)."""
        try:
            now = tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in map(os.stat, self.paths))
        except OSError:
            return False
        if now == self.seen:
            return False
        self.seen = now
        return True


def _read_token(path: str) -> bytes:
    with open(path, "rb") as handle:
        token = handle.read().strip()
    if not token:
        raise ValueError(f"{path} is empty: a bearer token is needed")
    return token
