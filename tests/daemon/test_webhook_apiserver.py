"""The webhook in an API server's admission flow, served by a running daemon.

The in-process API server (tests/kube/apiserver.py) has no admission chain: it
cannot call a webhook by itself. :class:`AdmittingApiServer` adds the step a
real server takes for a mutating webhook on CREATE of ``batch/v1`` jobs: the
object, its namespace filled in, goes to the webhook as an ``AdmissionReview``
over HTTPS (certificate checked against the CA bundle), the answer's uid must
match, and its JSONPatch is applied to the object before it is validated and
stored.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from kube.apiserver import ApiFailure, ApiServer, Kind, json_patch
from kube.cluster import install_crds, job, until
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import JOBS, Kube
from preemptd.daemon.config import WebhookConfig
from running import cluster, config, start
from webhook_tls import make_pair, needs_openssl

pytestmark = [pytest.mark.asyncio, needs_openssl]

SECRETS = Kind("", "v1", "secrets", "Secret", namespaced=True, status=False)
CONFIGURATIONS = Kind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                      "MutatingWebhookConfiguration", namespaced=False, status=False)


class AdmittingApiServer(ApiServer):
    """The test API server with a mutating admission webhook for Job creates (module docstring)."""

    def __init__(self, ca_file: Path) -> None:
        super().__init__(bookmark_interval=0.2)
        self.ca_bundle = ca_file.read_bytes()  # clientConfig.caBundle
        self.server_hostname: str | None = None  # the Service's name, when the URL is an address
        self.webhook_url = ""  # none yet: creates are stored as sent
        self.reviews: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._admitted: dict[int, Any] = {}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.method == "POST" and self.webhook_url:
            try:
                kind, namespace, name, _ = self._route(request)
            except ApiFailure:
                pass
            else:
                if (kind.group, kind.plural) == ("batch", "jobs") and name is None:
                    self._admitted[id(request)] = await self._admit(kind, namespace, await request.json())
        return await super()._handle(request)

    def _dispatch(self, request: web.Request, verb: Any, kind: Kind, namespace: str | None, name: str | None,
                  sub: str | None, body: Any) -> tuple[dict[str, Any], int]:
        body = self._admitted.pop(id(request), body)
        return super()._dispatch(request, verb, kind, namespace, name, sub, body)

    async def _admit(self, kind: Kind, namespace: str | None, obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid, "kind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
                "resource": {"group": kind.group, "version": kind.version, "resource": kind.plural},
                "namespace": namespace, "operation": "CREATE", "object": obj, "dryRun": False,
                "userInfo": {"username": "alice"},
            },
        }
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.post(self.webhook_url, json=review, ssl=ssl.create_default_context(cadata=self.ca_bundle.decode()),
                         server_hostname=self.server_hostname) as response,
        ):
            response.raise_for_status()
            answer = await response.json()
        self.reviews.append((review, answer))
        result = answer["response"]
        assert uid == result["uid"] and result["allowed"] is True
        if "patch" in result:
            assert "JSONPatch" == result["patchType"]
            obj = json_patch(obj, json.loads(base64.b64decode(result["patch"])))
        return obj


@dataclasses.dataclass
class Setup:
    server: AdmittingApiServer
    cert_file: Path
    key_file: Path


@pytest_asyncio.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    ca_file, cert_file, key_file = make_pair(tmp_path / "tls", "preemptd-webhook")
    async with AdmittingApiServer(ca_file) as server:
        install_crds(server)
        yield Setup(server, cert_file, key_file)


def _suspends(server: ApiServer, name: str) -> list[bool]:
    """``spec.suspend`` of the Job ``name`` in each version the server stored, in order."""
    return [bool(e.obj["spec"].get("suspend")) for e in server.journal
            if e.kind.plural == "jobs" and e.obj["metadata"]["name"] == name]


async def test_a_job_created_running_is_stored_suspended_and_runs_once_admitted(setup: Setup) -> None:
    """Through the daemon's webhook the Job is suspended before it is stored: it never runs before
    its admission, and the daemon has nothing to suspend; admitted, it is resumed."""
    server = setup.server
    cluster(server, 0)
    webhook = WebhookConfig(enabled=True, address="127.0.0.1:0", cert_file=str(setup.cert_file),
                            key_file=str(setup.key_file))
    running = start(server, "a", dataclasses.replace(config(), webhook=webhook))
    user = Kube.from_configuration(Configuration(host=server.url))
    try:
        daemon = running.daemon
        await until(lambda: daemon.synced, what="the daemon to sync")
        assert daemon.webhook is not None
        server.webhook_url = daemon.webhook.url
        await user.create(JOBS, job("train", "team-a", {"cpu": "1"}, suspend=False), "default")
        plain = job("plain", "team-a", {"cpu": "1"}, suspend=False)
        del plain["metadata"]["labels"]
        await user.create(JOBS, plain, "default")
        await until(lambda: False in _suspends(server, "train")[1:], what="the Job to be resumed")
        assert [True, False] == _suspends(server, "train")[:2]
        assert [False] == _suspends(server, "plain")  # not labelled: stored as sent, never touched
        assert [("train", True), ("plain", False)] == [
            (r["request"]["object"]["metadata"]["name"], "patch" in a["response"]) for r, a in server.reviews]
        assert 1 == daemon.webhook.outcomes["suspended"] and 1 == daemon.webhook.outcomes["unmanaged"]
        exposed = daemon.metrics.exposition().decode()
        assert 'preemptd_webhook_reviews_total{kind="Job",outcome="patched"} 1.0' in exposed
        assert 'preemptd_webhook_reviews_total{kind="Job",outcome="unchanged"} 1.0' in exposed
        url = daemon.webhook.url
    finally:
        assert 0 == await running.stop()
        await user.close()
    # Stopped with the daemon: the API server can no longer reach it.
    with pytest.raises(aiohttp.ClientConnectorError):
        async with aiohttp.ClientSession() as session, session.post(url, json={}, ssl=False):
            pass


async def test_without_the_webhook_the_same_job_is_stored_running_and_suspended_later(setup: Setup) -> None:
    """The behaviour the webhook removes: the Job is stored running and the daemon suspends it after."""
    server = setup.server
    cluster(server, 0)
    running = start(server, "a")
    user = Kube.from_configuration(Configuration(host=server.url))
    try:
        await until(lambda: running.daemon.synced, what="the daemon to sync")
        await user.create(JOBS, job("train", "team-a", {"cpu": "1"}, suspend=False), "default")
        await until(lambda: len(_suspends(server, "train")) >= 2, what="the daemon to see the Job")
        assert [False, True] == _suspends(server, "train")[:2]
    finally:
        assert 0 == await running.stop()
        await user.close()



async def test_a_daemon_with_self_managed_certificates_is_trusted_through_the_ca_bundle_it_sets(
    setup: Setup, tmp_path: Path
) -> None:
    """No certificate given: the daemon makes one, keeps it in a Secret, writes the configuration's
    caBundle; an API server trusting that bundle and calling the Service's name gets the patch."""
    server = setup.server
    for kind in (SECRETS, CONFIGURATIONS):  # the test server knows neither kind by itself
        server.kinds[kind.ref] = kind
        server.objects.setdefault(kind.ref, {})
    server.put("admissionregistration.k8s.io", "mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "preemptd"},
        "webhooks": [{"name": "jobs.preemptd.io", "clientConfig": {"service": {
            "name": "preemptd-webhook", "namespace": "preemptd-system", "path": "/mutate"}}}]})
    cluster(server, 0)
    webhook = WebhookConfig(enabled=True, address="127.0.0.1:0", certificate="self-managed",
                            cert_file=str(tmp_path / "run" / "tls.crt"), key_file=str(tmp_path / "run" / "tls.key"))
    running = start(server, "a", dataclasses.replace(config(), webhook=webhook))
    user = Kube.from_configuration(Configuration(host=server.url))
    try:
        daemon = running.daemon
        def trusted() -> bool:
            stored = server.get("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "preemptd")
            return "caBundle" in stored["webhooks"][0]["clientConfig"]

        await until(lambda: daemon.webhook is not None and daemon.webhook.certificate.loaded, what="a certificate")
        await until(trusted, what="the caBundle")
        assert daemon.webhook is not None
        (hook,) = server.get("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "preemptd")["webhooks"]
        server.ca_bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
        server.server_hostname = "preemptd-webhook.preemptd-system.svc"
        server.webhook_url = daemon.webhook.url
        await user.create(JOBS, job("train", "team-a", {"cpu": "1"}, suspend=False), "default")
        assert [True] == _suspends(server, "train")[:1]
        assert server.get("", "secrets", "preemptd-webhook-tls", "preemptd-system") is not None
    finally:
        assert 0 == await running.stop()
        await user.close()
