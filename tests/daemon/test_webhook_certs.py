"""Self-managed webhook certificates against the test API server: made, shared, trusted, rotated."""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kube.apiserver import ApiServer, Kind
from kubernetes_asyncio.client import Configuration
from preemptd.daemon.backends.kubernetes.client import ApiError, Kube
from preemptd.daemon.config import WebhookConfig
from preemptd.daemon.webhook import CertificateError, WebhookServer
from preemptd.daemon.webhook_certs import CertificateKeeper, Issued, split_pems
from webhook_tls import needs_openssl

pytestmark = [pytest.mark.asyncio, needs_openssl]

NAMESPACE = "preemptd-system"
SERVICE_NAME = "preemptd-webhook.preemptd-system.svc"  # the name the API server calls
DAY = 86_400.0

SECRETS = Kind("", "v1", "secrets", "Secret", namespaced=True, status=False)
CONFIGURATIONS = Kind("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                      "MutatingWebhookConfiguration", namespaced=False, status=False)


def configuration() -> dict[str, Any]:
    webhook = {"name": "jobs.preemptd.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"name": "preemptd-webhook", "namespace": NAMESPACE, "path": "/mutate"}}}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "preemptd"}, "webhooks": [webhook]}


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ApiServer]:
    async with ApiServer(bookmark_interval=0.2) as api:
        for kind in (SECRETS, CONFIGURATIONS):  # the test server knows neither kind by itself
            api.kinds[kind.ref] = kind
            api.objects.setdefault(kind.ref, {})
        api.put("admissionregistration.k8s.io", "mutatingwebhookconfigurations", configuration())
        yield api


@pytest_asyncio.fixture
async def kube(server: ApiServer) -> AsyncIterator[Kube]:
    client = Kube.from_configuration(Configuration(host=server.url))
    yield client
    await client.close()


def keeper(kube: Kube, where: Path, *, leading: bool = True, dry_run: bool = False,
           now: Callable[[], float] = time.time) -> CertificateKeeper:
    return CertificateKeeper(
        kube, namespace=NAMESPACE, secret="preemptd-webhook-tls", configuration="preemptd",
        service="preemptd-webhook", cert_file=str(where / "tls.crt"), key_file=str(where / "tls.key"),
        leading=lambda: leading, dry_run=dry_run, now=now,
    )


def stored(server: ApiServer) -> Issued:
    secret = server.get("", "secrets", "preemptd-webhook-tls", NAMESPACE)
    issued = Issued.of(secret)
    assert issued is not None, secret
    return issued


def ca_bundle(server: ApiServer) -> bytes:
    (webhook,) = server.get("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "preemptd")["webhooks"]
    return base64.b64decode(webhook["clientConfig"]["caBundle"])


def writes(server: ApiServer, since: int = 0) -> list[tuple[str, str]]:
    return [(r.plural, r.verb) for r in server.requests[since:] if r.verb not in ("get", "list", "watch")]


async def presented(webhook: WebhookServer, bundle: bytes) -> dict[str, Any]:
    """The certificate the server presents to a client that trusts ``bundle`` and asks for the Service's name."""
    context = ssl.create_default_context(cadata=bundle.decode())
    _, writer = await asyncio.open_connection("127.0.0.1", webhook.port, ssl=context, server_hostname=SERVICE_NAME)
    try:
        peer: dict[str, Any] = writer.get_extra_info("peercert")
    finally:
        writer.close()
        await writer.wait_closed()
    return peer


async def test_the_first_pass_makes_a_ca_and_a_certificate_the_api_server_trusts(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    first = keeper(kube, tmp_path / "a")
    assert await first.ensure() is True
    issued = stored(server)
    assert 1 == len(split_pems(issued.ca_bundle))
    assert issued.ca_bundle == ca_bundle(server)  # the configuration trusts the CA
    assert issued.cert == (tmp_path / "a" / "tls.crt").read_bytes()
    assert issued.key == (tmp_path / "a" / "tls.key").read_bytes()
    assert 0o600 == (tmp_path / "a" / "tls.key").stat().st_mode & 0o777
    assert "kubernetes.io/tls" == server.get("", "secrets", "preemptd-webhook-tls", NAMESPACE)["type"]
    webhook = WebhookServer(WebhookConfig(enabled=True, address="127.0.0.1:0", certificate="self-managed",
                                          cert_file=str(tmp_path / "a" / "tls.crt"),
                                          key_file=str(tmp_path / "a" / "tls.key")),
                            suspend_fields={("batch", "Job"): "/spec/suspend"}, keeper=first)
    await webhook.start()
    try:
        await _until(lambda: webhook.certificate.loaded)
        peer = await presented(webhook, ca_bundle(server))  # verified for the Service's name
        assert ("DNS", SERVICE_NAME) in peer["subjectAltName"]
    finally:
        await webhook.stop()
    # A second pass has nothing to do.
    since = len(server.requests)
    assert await first.ensure() is True
    assert [] == writes(server, since)


async def test_another_replica_serves_the_same_certificate_and_writes_nothing(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path / "leader").ensure()
    since = len(server.requests)
    assert await keeper(kube, tmp_path / "standby", leading=False).ensure()
    assert [] == writes(server, since)
    assert (tmp_path / "leader" / "tls.crt").read_bytes() == (tmp_path / "standby" / "tls.crt").read_bytes()


async def test_a_standby_gives_its_bundle_only_to_a_configuration_that_has_none(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path, leading=False).ensure()  # a first install, no leader yet
    assert stored(server).ca_bundle == ca_bundle(server)
    mine = configuration()
    mine["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"the leader's").decode()
    server.put("admissionregistration.k8s.io", "mutatingwebhookconfigurations", mine)
    assert await keeper(kube, tmp_path, leading=False).ensure()
    assert b"the leader's" == ca_bundle(server)


async def test_two_replicas_starting_together_create_one_secret(server: ApiServer, kube: Kube, tmp_path: Path) -> None:
    one, two = keeper(kube, tmp_path / "one"), keeper(kube, tmp_path / "two", leading=False)
    results = await asyncio.gather(one.ensure(), two.ensure())
    # The loser of the create has nothing to serve until its next pass reads the winner's Secret.
    for replica, ready in zip((one, two), results, strict=True):
        assert ready or await replica.ensure()
    served = stored(server).cert
    assert served == (tmp_path / "one" / "tls.crt").read_bytes() == (tmp_path / "two" / "tls.crt").read_bytes()


async def test_a_serving_certificate_with_a_third_of_its_life_left_is_issued_again_from_the_same_ca(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path).ensure()
    before = stored(server)
    assert await keeper(kube, tmp_path, now=lambda: time.time() + 55 * DAY).ensure()  # 35 of 90 days left
    assert before == stored(server)
    since = len(server.requests)
    assert await keeper(kube, tmp_path, now=lambda: time.time() + 65 * DAY).ensure()  # 25 days left
    after = stored(server)
    assert after.cert != before.cert and after.key != before.key
    assert before.ca_bundle == after.ca_bundle == ca_bundle(server)
    assert [("secrets", "update")] == writes(server, since)  # the configuration is left as it was
    assert after.cert == (tmp_path / "tls.crt").read_bytes()


async def test_a_ca_due_for_renewal_is_rotated_in_two_steps_the_api_server_trusts_throughout(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path).ensure()
    old = stored(server)
    later = keeper(kube, tmp_path, now=lambda: time.time() + 500 * DAY)  # 230 of 730 days left
    # Step 1: the new CA joins the bundle; the old certificate is still served, and trusted.
    assert await later.ensure()
    step = stored(server)
    new_ca, old_ca = split_pems(step.ca_bundle)
    assert [old_ca] == split_pems(old.ca_bundle)
    assert step.cert == old.cert and step.ca_key != old.ca_key
    assert step.ca_bundle == ca_bundle(server)
    # Step 2 (the next pass; the new CA is not due): the configuration trusts the new CA, so the
    # certificate, signed by the old one, is issued from the new one.
    assert await keeper(kube, tmp_path).ensure()
    done = stored(server)
    assert done.cert != old.cert and done.ca_bundle == step.ca_bundle
    assert _signed_by(done.cert, new_ca, tmp_path)
    assert not _signed_by(done.cert, old_ca, tmp_path)
    since = len(server.requests)
    assert await keeper(kube, tmp_path).ensure()  # back to today: nothing is due
    assert [] == writes(server, since)


async def test_no_certificate_from_a_new_ca_is_served_before_the_configuration_trusts_it(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path).ensure()
    old = stored(server)
    refused = lambda r: r.plural == "mutatingwebhookconfigurations" and r.verb == "update"  # noqa: E731
    server.fail(1, code=500, when=refused)
    with pytest.raises(ApiError):  # the new CA is in the Secret, not yet in the caBundle
        await keeper(kube, tmp_path, now=lambda: time.time() + 500 * DAY).ensure()
    assert old.ca_bundle == ca_bundle(server)
    assert await keeper(kube, tmp_path).ensure()  # the caBundle is set; the certificate stays
    assert old.cert == stored(server).cert == (tmp_path / "tls.crt").read_bytes()
    assert stored(server).ca_bundle == ca_bundle(server)
    assert await keeper(kube, tmp_path).ensure()  # now it is issued from the new CA
    assert old.cert != stored(server).cert == (tmp_path / "tls.crt").read_bytes()


async def test_a_dry_run_writes_nothing_and_serves_nothing_without_a_secret(
    server: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    assert await keeper(kube, tmp_path, dry_run=True).ensure() is False
    assert [] == writes(server)
    assert not (tmp_path / "tls.crt").exists()


async def test_an_unreadable_secret_is_replaced_by_the_leader_only(server: ApiServer, kube: Kube, tmp_path: Path) -> None:
    server.put("", "secrets", {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                               "metadata": {"name": "preemptd-webhook-tls", "namespace": NAMESPACE},
                               "data": {"tls.crt": "bm90IGEgY2VydA=="}})
    assert await keeper(kube, tmp_path / "standby", leading=False).ensure() is False
    assert [] == writes(server)
    assert await keeper(kube, tmp_path / "leader").ensure() is True
    assert stored(server).cert == (tmp_path / "leader" / "tls.crt").read_bytes()


def _signed_by(cert: bytes, ca: bytes, where: Path) -> bool:
    (where / "check-ca.pem").write_bytes(ca)
    (where / "check.pem").write_bytes(cert)
    done = subprocess.run(["openssl", "verify", "-CAfile", "check-ca.pem", "check.pem"], cwd=where,
                          capture_output=True, check=False)
    return done.returncode == 0


async def _until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _server(where: Path, keeper: CertificateKeeper) -> WebhookServer:
    config = WebhookConfig(enabled=True, address="127.0.0.1:0", certificate="self-managed",
                           cert_file=str(where / "tls.crt"), key_file=str(where / "tls.key"), reload_interval=20)
    return WebhookServer(config, suspend_fields={("batch", "Job"): "/spec/suspend"}, keeper=keeper)


async def test_a_pass_that_fails_is_retried_until_the_server_has_a_certificate(
    server: ApiServer, kube: Kube, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server.fail(2, code=503, reason="ServiceUnavailable", when=lambda r: r.plural == "secrets")
    webhook = _server(tmp_path, keeper(kube, tmp_path))
    await webhook.start()
    try:
        await _until(lambda: webhook.certificate.loaded)
    finally:
        await webhook.stop()
    failed = [r.getMessage() for r in caplog.records if "certificate pass failed" in r.getMessage()]
    assert 2 == len(failed), failed
    assert stored(server).cert == (tmp_path / "tls.crt").read_bytes()


async def test_self_managed_certificates_without_openssl_stop_the_start(
    kube: Kube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(CertificateError, match="openssl"):
        await _server(tmp_path, keeper(kube, tmp_path)).start()
