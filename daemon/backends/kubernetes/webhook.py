"""A mutating admission webhook: new owners are held from their creation, as Kueue's are.

Design note. Without it, a Job created without ``suspend: true`` starts its pods
and is suspended only when the daemon first sees it (``jobs``); a grouped pod
created without the admission gate cannot be held at all (``integrations.podgroup``).
The API server calls this webhook on every CREATE its MutatingWebhookConfiguration
selects; for an object of an enabled integration's kind that carries the
integration's labels (the queue label, and for pods the group label), the answer
is the integration's :meth:`~.integrations.Integration.hold_at_creation` patch
(``suspend: true`` at the kind's switch; the scheduling gate for a grouped pod).
Everything else is allowed unchanged: the webhook never refuses an object.

* **Failure policy.** ``Ignore`` is what the manifests in ``docs/webhook.md`` set:
  while the daemon is down, objects are still created, unheld, and the daemon holds
  them on first sight as it always has. ``Fail`` would stop every labelled creation
  while the webhook is unreachable.
* **Namespaces.** The configuration's ``namespaceSelector`` leaves out
  ``kube-system`` and the daemon's own namespace; its ``objectSelector`` asks for the
  queue label, so the API server calls the webhook only for labelled objects.
* **Certificate.** The server reads its certificate and key from files (a
  cert-manager ``Certificate``'s Secret, mounted) and loads them again whenever the
  files change (:meth:`WebhookServer.reload`), so a rotation needs no restart; the
  API server trusts it through the CA bundle cert-manager injects.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import ssl
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from .client import Obj
from .integrations import Integration

__all__ = ["WebhookServer", "review"]

log = logging.getLogger("preemptd.kubernetes.webhook")


def _selected(integration: Integration, obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    wanted = [key.strip() for key in integration.label_selector.split(",") if key.strip()]
    return isinstance(labels, dict) and all(key in labels for key in wanted)


def review(body: Any, integrations: Iterable[Integration]) -> Obj:
    """The AdmissionReview answering ``body`` (``admission.k8s.io/v1``): allowed, held if managed."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        raise ValueError("an AdmissionReview with a request is expected")
    response: Obj = {"uid": request.get("uid", ""), "allowed": True}
    resource = request.get("resource") or {}
    obj = request.get("object")
    if request.get("operation") == "CREATE" and isinstance(obj, dict) and isinstance(resource, dict):
        for integration in integrations:
            kind = integration.resource
            if (kind.group, kind.plural) != (resource.get("group", ""), resource.get("resource")):
                continue
            if not _selected(integration, obj):
                continue
            patch = integration.hold_at_creation(obj)
            if patch:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
            break
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class WebhookServer:
    """HTTPS on ``host:port``; ``POST /mutate`` answers AdmissionReviews (see the module docstring)."""

    def __init__(
        self, integrations: Iterable[Integration], *, host: str, port: int, cert_file: str, key_file: str,
        reload_interval: float = 10.0,
    ) -> None:
        self.integrations = tuple(integrations)
        self.host = host
        self.port = port
        self.cert_file = cert_file
        self.key_file = key_file
        self.reload_interval = reload_interval
        self.reviews = 0  # answered
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._loaded: tuple[float, float] | None = None
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None
        self.reload()

    def reload(self) -> bool:
        """Load the certificate and key again if either file changed; True when it did."""
        stamp = (os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime)
        if stamp == self._loaded:
            return False
        self.context.load_cert_chain(self.cert_file, self.key_file)
        if self._loaded is not None:
            log.info("webhook certificate reloaded from %s", self.cert_file)
        self._loaded = stamp
        return True

    async def start(self) -> None:
        app = web.Application(client_max_size=8 * 2**20)
        app.router.add_post("/mutate", self._mutate)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.context)
        await site.start()
        self._watch = asyncio.create_task(self._reloading(), name="webhook-certificate")

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._runner is not None:
            await self._runner.cleanup()

    async def _reloading(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                self.reload()
            except (OSError, ssl.SSLError) as exc:  # half-written files: the old pair serves on
                log.warning("webhook certificate not reloaded: %s", exc)

    async def _mutate(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            answer = review(body, self.integrations)
        except ValueError as exc:
            return web.json_response({"message": str(exc)}, status=400)
        self.reviews += 1
        return web.json_response(answer)
