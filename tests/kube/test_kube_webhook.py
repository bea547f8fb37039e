"""The admission webhook: real AdmissionReview requests over HTTPS, and what it answers."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import aiohttp
import pytest
from preemptd.daemon.backends.kubernetes.integrations.registry import resolve_integrations
from preemptd.daemon.backends.kubernetes.webhook import WebhookServer, review
from preemptd.daemon.config import Config

from .apiserver import json_patch
from .cluster import deployment, job
from .kinds import pod_template, pytorchjob

INTEGRATIONS = resolve_integrations(Config())[0].enabled


def request(obj: dict, *, group: str, resource: str, operation: str = "CREATE") -> dict:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7f0b2c1e", "operation": operation, "object": obj,
            "resource": {"group": group, "version": "v1", "resource": resource},
            "kind": {"group": group, "version": "v1", "kind": obj["kind"]},
        },
    }


def patched(answer: dict, obj: dict) -> dict:
    response = answer["response"]
    assert ("7f0b2c1e", True) == (response["uid"], response["allowed"])
    if "patch" not in response:
        return obj
    assert "JSONPatch" == response["patchType"]
    return json_patch(obj, json.loads(base64.b64decode(response["patch"])))


def test_a_new_labelled_job_is_created_suspended() -> None:
    created = job("train", "team", {"cpu": "1"}, suspend=False)
    after = patched(review(request(created, group="batch", resource="jobs"), INTEGRATIONS), created)
    assert after["spec"]["suspend"] is True


def test_a_pytorchjob_without_a_run_policy_gets_one_that_suspends_it() -> None:
    created = pytorchjob("train", "team", {"Worker": (2, pod_template({"cpu": "1"}))})
    del created["spec"]["runPolicy"]
    after = patched(review(request(created, group="kubeflow.org", resource="pytorchjobs"), INTEGRATIONS), created)
    assert {"suspend": True} == after["spec"]["runPolicy"]


def test_a_grouped_pod_gets_the_admission_gate_beside_its_own() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "g-0", "labels": {"preemptd.io/queue-name": "team", "preemptd.io/pod-group": "g"}},
           "spec": {"schedulingGates": [{"name": "theirs"}], "containers": []}}
    after = patched(review(request(pod, group="", resource="pods"), INTEGRATIONS), pod)
    assert [{"name": "theirs"}, {"name": "preemptd.io/admission"}] == after["spec"]["schedulingGates"]


@pytest.mark.parametrize(
    ("what", "obj", "group", "resource", "operation"),
    [
        ("already suspended", job("a", "team", {"cpu": "1"}), "batch", "jobs", "CREATE"),
        ("no queue label", {**job("b", "team", {"cpu": "1"}, suspend=False), "metadata": {"name": "b"}}, "batch", "jobs", "CREATE"),
        ("an update", job("c", "team", {"cpu": "1"}, suspend=False), "batch", "jobs", "UPDATE"),
        ("no switch: a Deployment", deployment("d", "team", {"cpu": "1"}), "apps", "deployments", "CREATE"),
        ("a pod of no group", {"kind": "Pod", "metadata": {"name": "p", "labels": {"preemptd.io/queue-name": "t"}},
                               "spec": {}}, "", "pods", "CREATE"),
    ],
)
def test_everything_else_is_allowed_unchanged(what: str, obj: dict, group: str, resource: str, operation: str) -> None:
    answer = review(request(obj, group=group, resource=resource, operation=operation), INTEGRATIONS)
    assert {"uid": "7f0b2c1e", "allowed": True} == answer["response"], what


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _post(port: int, cafile: Path, body: dict) -> tuple[dict, str]:
    """The answer, and the SHA-256 of the certificate the server presented."""
    context = ssl.create_default_context(cafile=str(cafile))
    async with aiohttp.ClientSession() as session, session.post(
        f"https://127.0.0.1:{port}/mutate", json=body, ssl=context
    ) as response:
        assert 200 == response.status
        answer = await response.json()
    presented = await asyncio.to_thread(ssl.get_server_certificate, ("127.0.0.1", port))
    return answer, hashlib.sha256(ssl.PEM_cert_to_DER_cert(presented)).hexdigest()


def _fingerprint(cert: Path) -> str:
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(cert.read_text())).hexdigest()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates")
@pytest.mark.asyncio
async def test_the_https_server_answers_reviews_and_serves_a_rotated_certificate(tmp_path: Path) -> None:
    """A real AdmissionReview over TLS gets the hold patch; new files (a cert-manager rotation)
    are served from the next connection on, without a restart."""
    first, first_key = _certificate(tmp_path, "first")
    second, second_key = _certificate(tmp_path, "second")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(first, cert)
    shutil.copy(first_key, key)
    port = _free_port()
    server = WebhookServer(INTEGRATIONS, host="127.0.0.1", port=port, cert_file=str(cert), key_file=str(key))
    await server.start()
    try:
        created = job("train", "team", {"cpu": "1"}, suspend=False)
        answer, seen = await _post(port, first, request(created, group="batch", resource="jobs"))
        assert patched(answer, created)["spec"]["suspend"] is True
        assert _fingerprint(first) == seen

        shutil.copy(second_key, key)
        shutil.copy(second, cert)
        assert server.reload() is True
        assert server.reload() is False  # nothing changed since
        _, seen = await _post(port, second, request(created, group="batch", resource="jobs"))
        assert _fingerprint(second) == seen
        assert 2 == server.reviews
    finally:
        await server.stop()


def test_an_enabled_webhook_without_its_certificate_is_a_located_configuration_problem(tmp_path: Path) -> None:
    """`preemptd run` checks the files before it starts: each missing one is named."""
    from preemptd.daemon.service import check_configuration

    config = tmp_path / "preemptd.toml"
    config.write_text(f'[webhook]\nenabled = true\ncert_file = "{tmp_path}/tls.crt"\nkey_file = "{tmp_path}/tls.key"\n')
    _, _, problems = check_configuration(config)
    assert [f"{config}:3: webhook.cert_file: cannot read {tmp_path}/tls.crt",
            f"{config}:4: webhook.key_file: cannot read {tmp_path}/tls.key"] == [str(p) for p in problems]
