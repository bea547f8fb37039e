"""The admission webhook over real HTTPS: AdmissionReviews in, JSONPatches out, certificates rotated."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
import pytest_asyncio
from kube.apiserver import json_patch
from kube.cluster import job
from preemptd.daemon.backends.kubernetes.integrations.registry import resolve_integrations
from preemptd.daemon.config import Config, WebhookConfig, parse_config
from preemptd.daemon.metrics import Metrics
from preemptd.daemon.webhook import (
    CertificateError,
    WebhookServer,
    pod_groups,
    pointer,
    review_admission,
    suspend_fields,
)
from webhook_tls import SecretVolume, decoded_patch, make_pair, needs_openssl, post, review

F = TypeVar("F", bound=Callable[..., Any])

ENABLED = resolve_integrations(Config())[0].enabled
SERVED = suspend_fields(ENABLED)  # the default configuration's served kinds


def https(test: F) -> F:
    """An asyncio test against a webhook served with certificates openssl made."""
    marked: F = needs_openssl(pytest.mark.asyncio(test))
    return marked


class Served:
    def __init__(self, server: WebhookServer, ca_file: Path, volume: SecretVolume, tmp: Path) -> None:
        self.server = server
        self.ca_file = ca_file
        self.volume = volume
        self.tmp = tmp

    async def ask(self, body: Any) -> dict[str, Any]:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await post(self.server.url, self.ca_file, raw)


@pytest_asyncio.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    ca_file, cert, key = make_pair(tmp_path / "first", "first")
    volume = SecretVolume(tmp_path / "secret")
    volume.publish({"tls.crt": cert.read_bytes(), "tls.key": key.read_bytes()})
    config = WebhookConfig(enabled=True, address="127.0.0.1:0", cert_file=str(volume.cert_file),
                           key_file=str(volume.key_file), reload_interval=20)
    server = WebhookServer(config, suspend_fields=SERVED, pod_groups=pod_groups(ENABLED))
    await server.start()
    try:
        yield Served(server, ca_file, volume, tmp_path)
    finally:
        await server.stop()


@https
async def test_a_managed_job_created_running_gets_a_patch_that_suspends_it(served: Served) -> None:
    running = job("train", "team-a", {"cpu": "1"}, suspend=False)
    asked = review(running)
    answer = await served.ask(asked)
    assert "admission.k8s.io/v1" == answer["apiVersion"] and "AdmissionReview" == answer["kind"]
    assert asked["request"]["uid"] == answer["response"]["uid"]
    assert answer["response"]["allowed"] is True
    assert [{"op": "add", "path": "/spec/suspend", "value": True}] == decoded_patch(answer)
    patched = json_patch(running, decoded_patch(answer))
    assert patched["spec"]["suspend"] is True
    del patched["spec"]["suspend"], running["spec"]["suspend"]
    assert running == patched  # nothing else touched


@https
async def test_a_managed_job_without_a_suspend_field_gets_one(served: Served) -> None:
    created = job("train", "team-a", {"cpu": "1"})
    del created["spec"]["suspend"]
    answer = await served.ask(review(created))
    assert json_patch(created, decoded_patch(answer))["spec"]["suspend"] is True


@https
async def test_an_already_suspended_job_is_allowed_without_a_patch(served: Served) -> None:
    answer = await served.ask(review(job("train", "team-a", {"cpu": "1"}, suspend=True)))
    assert answer["response"]["allowed"] is True
    assert decoded_patch(answer) is None
    assert 1 == served.server.outcomes["already-suspended"]


@https
async def test_a_job_without_the_queue_label_is_allowed_untouched(served: Served) -> None:
    plain = job("plain", "team-a", {"cpu": "1"}, suspend=False)
    del plain["metadata"]["labels"]
    answer = await served.ask(review(plain))
    assert answer["response"]["allowed"] is True and decoded_patch(answer) is None
    other = job("plain", "team-a", {"cpu": "1"}, suspend=False)
    other["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    assert decoded_patch(await served.ask(review(other))) is None
    assert 2 == served.server.outcomes["unmanaged"]


@https
async def test_an_update_and_a_kind_not_served_are_allowed_untouched(served: Served) -> None:
    running = job("train", "team-a", {"cpu": "1"}, suspend=False)
    assert decoded_patch(await served.ask(review(running, operation="UPDATE"))) is None
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "d", "namespace": "default", "labels": {"preemptd.io/queue-name": "team-a"}},
                  "spec": {"replicas": 2}}
    # A kind without a suspend switch is scaled by the backend instead: nothing to add here.
    assert decoded_patch(await served.ask(review(deployment, group="apps", kind="Deployment"))) is None
    assert 1 == served.server.outcomes["other-kind"]


def test_a_kind_whose_integration_is_disabled_is_not_suspended_at_creation() -> None:
    """A kind the backend does not resume is never suspended: it would wait for ever."""
    config, problems = parse_config("[integrations.jobset]\nenabled = false\n", source="p.toml")
    assert [] == problems
    served = suspend_fields(resolve_integrations(config)[0].enabled)
    assert ("jobset.x-k8s.io", "JobSet") not in served and ("batch", "Job") in served
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js", "namespace": "default", "labels": {"preemptd.io/queue-name": "team-a"}},
              "spec": {"replicatedJobs": []}}
    asked = review(jobset, group="jobset.x-k8s.io", kind="JobSet")
    assert "other-kind" == review_admission(asked, served).outcome
    assert "suspended" == review_admission(asked, SERVED).outcome


@https
async def test_a_job_controlled_by_a_served_kind_is_left_to_its_owner(served: Served) -> None:
    child = job("child", "team-a", {"cpu": "1"}, suspend=False)
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "u-1", "controller": True}]
    assert decoded_patch(await served.ask(review(child))) is None
    # A CronJob is not served: its labelled Jobs are held like any other.
    child["metadata"]["ownerReferences"][0].update(kind="CronJob", name="nightly")
    assert decoded_patch(await served.ask(review(child))) is not None


@https
async def test_a_kind_enabled_in_the_table_is_suspended_where_it_keeps_its_switch(served: Served) -> None:
    """Served with a PyTorchJob entry, a PyTorchJob without runPolicy is given one holding suspend."""
    config = WebhookConfig(enabled=True, address="127.0.0.1:0", cert_file=str(served.volume.cert_file),
                           key_file=str(served.volume.key_file))
    wider = WebhookServer(config, suspend_fields={("kubeflow.org", "PyTorchJob"): pointer(("spec", "runPolicy", "suspend"))})
    await wider.start()
    try:
        obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
               "metadata": {"name": "pt", "namespace": "default", "labels": {"preemptd.io/queue-name": "team-a"}},
               "spec": {"pytorchReplicaSpecs": {}}}
        answer = await post(wider.url, served.ca_file, json.dumps(review(obj, group="kubeflow.org", kind="PyTorchJob")).encode())
        assert [{"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}] == decoded_patch(answer)
        job_answer = await post(wider.url, served.ca_file,
                                json.dumps(review(job("t", "team-a", {"cpu": "1"}, suspend=False))).encode())
        assert decoded_patch(job_answer) is None  # only what it is given is served
    finally:
        await wider.stop()


MALFORMED: list[tuple[str, Any]] = [
    ("not JSON", b"{not json"),
    ("a list", [1, 2]),
    ("no request", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    ("v1beta1", {**review(job("a", "q", {"cpu": "1"}, suspend=False)), "apiVersion": "admission.k8s.io/v1beta1"}),
    ("object not an object", review(["a", "list"])),
    ("spec a string", review({**job("a", "q", {"cpu": "1"}, suspend=False), "spec": "oops"})),
]


@https
@pytest.mark.parametrize(("what", "body"), MALFORMED, ids=[what for what, _ in MALFORMED])
async def test_a_malformed_review_is_allowed_unchanged_and_logged(
    served: Served, caplog: pytest.LogCaptureFixture, what: str, body: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="preemptd.webhook"):
        answer = await served.ask(body)
    assert answer["response"]["allowed"] is True
    assert decoded_patch(answer) is None
    uid = body["request"]["uid"] if isinstance(body, dict) and isinstance(body.get("request"), dict) else ""
    assert uid == answer["response"]["uid"]
    assert 1 == served.server.outcomes["malformed"]
    assert any("allowed unchanged" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def _served_subject(url: str, ca_file: Path) -> str:
    """The common name of the certificate the server presents (verified against ``ca_file``)."""
    address = aiohttp.client.URL(url)
    context = ssl.create_default_context(cafile=str(ca_file))
    _, writer = await asyncio.open_connection(address.host, address.port, ssl=context)
    try:
        peer = writer.get_extra_info("peercert")
    finally:
        writer.close()
        await writer.wait_closed()
    return str(dict(part[0] for part in peer["subject"])["commonName"])


async def _until(predicate: Any, what: str, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.02)


@https
async def test_a_rotated_certificate_is_served_without_a_restart(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    url = served.server.url
    assert "first" == await _served_subject(url, served.ca_file)
    new_ca, cert, key = make_pair(served.tmp / "second", "second")

    async def serves_second() -> bool:
        try:
            return await _served_subject(url, new_ca) == "second"
        except ssl.SSLCertVerificationError:
            return False

    # Half a rotation (a new certificate beside the old key) is refused; the old pair stays served.
    old_key = served.volume.key_file.read_bytes()
    with caplog.at_level(logging.WARNING, logger="preemptd.webhook"):
        served.volume.publish({"tls.crt": cert.read_bytes(), "tls.key": old_key})
        await _until(lambda: _logged(caplog, "cannot be loaded"), "the refused pair to be logged")
    assert "first" == await _served_subject(url, served.ca_file)
    served.volume.publish({"tls.crt": cert.read_bytes(), "tls.key": key.read_bytes()})
    await _until(serves_second, "the rotated certificate to be served")
    with pytest.raises(ssl.SSLCertVerificationError):
        await _served_subject(url, served.ca_file)
    answer = await post(url, new_ca, json.dumps(review(job("t", "q", {"cpu": "1"}, suspend=False))).encode())
    assert decoded_patch(answer) is not None
    assert 1 == served.server.certificate.reloads


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in record.getMessage() for record in caplog.records)


@https
async def test_a_missing_certificate_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "tls.crt"
    config = WebhookConfig(enabled=True, address="127.0.0.1:0", cert_file=str(missing), key_file=str(missing))
    with pytest.raises(CertificateError, match=str(missing)):
        await WebhookServer(config, suspend_fields=SERVED).start()


def test_the_enabled_integrations_serve_each_suspendable_kind_at_its_own_switch() -> None:
    """The default configuration's table, from the integrations (each kind's API types)."""
    assert {
        ("batch", "Job"): "/spec/suspend",
        ("jobset.x-k8s.io", "JobSet"): "/spec/suspend",
        ("kubeflow.org", "PyTorchJob"): "/spec/runPolicy/suspend",
        ("trainer.kubeflow.org", "TrainJob"): "/spec/suspend",
        ("ray.io", "RayJob"): "/spec/suspend",
        ("ray.io", "RayCluster"): "/spec/suspend",
    } == SERVED
    assert pod_groups(ENABLED)


def test_the_suspend_field_of_each_kind_in_the_table_is_set_where_that_kind_keeps_it() -> None:
    """Table-driven: a PyTorchJob without runPolicy gets one holding suspend; the others /spec/suspend."""
    labels = {"preemptd.io/queue-name": "team-a"}
    for (group, kind), field in SERVED.items():
        obj = {"apiVersion": f"{group}/v1", "kind": kind, "metadata": {"name": "x", "labels": labels}, "spec": {}}
        verdict = review_admission(review(obj, group=group, kind=kind), SERVED)
        assert "suspended" == verdict.outcome, (kind, verdict.reason)
        patched = json_patch(copy.deepcopy(obj), list(verdict.patch))
        node: Any = patched
        for part in field.strip("/").split("/"):
            node = node[part]
        assert node is True, kind
    pytorch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"labels": labels},
               "spec": {"runPolicy": {"suspend": False, "cleanPodPolicy": "None"}}}
    verdict = review_admission(review(pytorch, group="kubeflow.org", kind="PyTorchJob"), SERVED)
    assert ({"op": "add", "path": "/spec/runPolicy/suspend", "value": True},) == verdict.patch


def test_the_webhook_table_is_checked_with_file_and_line() -> None:
    text = '[webhook]\nenabled = true\naddress = "nine"\ncert_file = ""\nreload_interval = "0s"\n'
    config, problems = parse_config(text, source="p.toml")
    assert [
        "p.toml:3: webhook.address: expected host:port such as '127.0.0.1:8080', got 'nine'",
        "p.toml:4: webhook.cert_file: must name a file when the webhook is enabled",
        "p.toml:5: webhook.reload_interval: must be longer than 0s",
    ] == [str(p) for p in problems]
    assert config.webhook.enabled is True


def test_a_key_path_becomes_the_pointer_the_table_holds() -> None:
    assert SERVED[("kubeflow.org", "PyTorchJob")] == pointer(("spec", "runPolicy", "suspend"))
    assert "/metadata/annotations/a~1b~0c" == pointer(("metadata", "annotations", "a/b~c"))


@https
async def test_every_review_is_counted_by_kind_and_outcome_in_the_metrics(served: Served) -> None:
    """preemptd_webhook_reviews_total: a Job suspended (patched), one already suspended
    (unchanged), an unreadable body (allowed-malformed, kind unknown), a grouped Pod gated."""
    metrics = Metrics()
    served.server.on_review = metrics.count_webhook_review
    await served.ask(review(job("a", "team-a", {"cpu": "1"}, suspend=False)))
    await served.ask(review(job("b", "team-a", {"cpu": "1"}, suspend=False)))
    await served.ask(review(job("c", "team-a", {"cpu": "1"}, suspend=True)))
    answer = await served.ask(b"{not json")
    assert answer["response"]["allowed"] is True
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p-0", "namespace": "default",
                        "labels": {"preemptd.io/queue-name": "team-a", "preemptd.io/pod-group": "p"}},
           "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    await served.ask(review(pod, group="", kind="Pod"))
    text = metrics.exposition().decode()
    counted = {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
               if line.startswith("preemptd_webhook_reviews_total{")}
    assert {
        'preemptd_webhook_reviews_total{kind="Job",outcome="patched"}': 2.0,
        'preemptd_webhook_reviews_total{kind="Job",outcome="unchanged"}': 1.0,
        'preemptd_webhook_reviews_total{kind="unknown",outcome="allowed-malformed"}': 1.0,
        'preemptd_webhook_reviews_total{kind="Pod",outcome="patched"}': 1.0,
    } == counted
