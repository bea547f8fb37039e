"""A mutating admission webhook: a managed owner is held from when it is created.

Design note. Without it, a Job labelled ``preemptd.io/queue-name`` and created
without ``suspend: true`` starts its pods at once, and is suspended only when
the backend first sees it (``jobs.sync_job``): its pods start and are killed.
The API server asks this webhook first (``admission.k8s.io/v1``
``AdmissionReview``, over HTTPS) and stores the Job already suspended; the
backend then only has to create its Workload.

What is mutated, and what is left alone:

* only a CREATE of a served kind: the kind of an enabled integration that has a
  suspend switch (:func:`suspend_fields`), or a grouped Pod when the pod-group
  integration is enabled (:func:`pod_groups`);
* only an object that carries the queue label (any value, as the backend's
  label selector has it: there is no "manage objects without a queue name");
* not an object whose controlling owner is itself a served kind: the owner is
  the one held back, its children follow it;
* not an object whose suspend field is already ``true``: no patch at all.

The answer is a JSONPatch (base64, ``patchType: JSONPatch``) that adds the
suspend field, creating the objects above it that are missing (``runPolicy``
of a PyTorchJob); for a Pod that carries ``preemptd.io/pod-group`` (and the
queue label), the scheduling gate ``preemptd.io/admission`` beside any gate of
its own (``integrations.podgroup.gate_patch``): a pod group has no switch, and
a grouped pod created without the gate could not be held at all. Anything the webhook cannot read — a body that is not JSON,
a review without a request, an object that is not an object, a path through
something that is not an object — is *allowed unchanged* and logged: the
webhook must never be why a create fails, the backend suspends such an object
on first sight anyway. The decision is a pure function of the review
(:func:`review_admission`), a few dictionary look-ups: the answer takes far
less than the API server's timeout.

The table. A kind is one entry, ``(API group, kind) -> JSON pointer of its
suspend field``, built from the enabled integrations (each says where its
switch is, ``Integration.suspend_path``; :func:`suspend_fields`) and handed to
the server as one mapping. So a kind is served exactly while the backend
manages it: a suspended object nobody resumes would wait for ever, and an
integration turned off in the configuration is no longer held at creation.
A third-party integration with a switch is served as a built-in one is.

The certificate. The server reads a certificate and key from files (a Secret
mounted into the pod, issued by cert-manager or by hand) and checks every
``reload_interval`` whether they changed — a Secret volume is updated in place
by a symlink swap. A changed pair is loaded into a new TLS context, which new
connections get through the listening context's SNI callback; a pair that does
not load (the two files caught mid-update, a key that does not match) is
logged and the previous certificate kept. A rotation needs no restart and
never leaves the server without a certificate. With ``certificate =
"self-managed"`` the files are made, shared through a Secret and renewed by a
:class:`~.webhook_certs.CertificateKeeper` (its module says how); the server
listens at once and completes handshakes once the first pair is written.

Counted. Every review answered is counted by the object's kind and by what was
answered (:func:`review_outcome`: ``patched``, ``unchanged``, ``allowed-malformed``),
through ``on_review`` (the daemon's ``preemptd_webhook_reviews_total``).

Not served: ``apps/v1`` Deployments, StatefulSets, LeaderWorkerSets. They have
no suspend field; the backend takes a new one's replicas into an annotation and
scales it to what is admitted, a mutation of another shape than this table's.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from .backends.kubernetes.client import ApiError
from .backends.kubernetes.integrations import Integration
from .backends.kubernetes.integrations.podgroup import GROUP_LABEL, PodGroupIntegration, gate_patch
from .backends.kubernetes.workloads import QUEUE_LABEL
from .config import WebhookConfig, split_address
from .http import close, serve
from .tls import CertificateError, ReloadingCertificate, server_context
from .webhook_certs import CertificateKeeper, OpensslError

__all__ = [
    "KEEP_INTERVAL",
    "PATH",
    "CertificateError",
    "ReloadingCertificate",
    "Verdict",
    "WebhookServer",
    "pod_groups",
    "pointer",
    "review_admission",
    "review_kind",
    "review_outcome",
    "server_context",
    "suspend_fields",
    "suspend_patch",
]

log = logging.getLogger("preemptd.webhook")

GroupKind = tuple[str, str]

POD: GroupKind = ("", "Pod")

PATH = "/mutate"
"""The URL path the MutatingWebhookConfiguration names (``clientConfig.service.path``)."""

REVIEW_API_VERSION = "admission.k8s.io/v1"

# A Job is at most etcd's request limit (1.5 MiB); its review carries it once, plus a little.
_MAX_BODY = 8 * 2**20


# --- the decision ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to answer one review: always allowed; a patch or none, and why (for the log)."""

    uid: str
    patch: tuple[dict[str, Any], ...]  # JSONPatch operations; empty: the object as it is
    # suspended (or gated) | already-suspended | unmanaged | owned | other-operation | other-kind | malformed
    outcome: str
    reason: str

    def response(self) -> dict[str, Any]:
        """The ``AdmissionReview`` body to send back."""
        answer: dict[str, Any] = {"uid": self.uid, "allowed": True}
        if self.patch:
            encoded = json.dumps(list(self.patch), separators=(",", ":")).encode()
            answer["patchType"] = "JSONPatch"
            answer["patch"] = base64.b64encode(encoded).decode("ascii")
        return {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": answer}


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def suspend_patch(obj: Mapping[str, Any], pointer: str) -> tuple[dict[str, Any], ...]:
    """The JSONPatch that makes ``pointer`` in ``obj`` true; empty when it already is.

    A missing (or null) object on the way is added with what lies below it, so the
    patch applies to the object as it is. ``ValueError`` when something on the way
    is there but is not an object.
    """
    parts = [part.replace("~1", "/").replace("~0", "~") for part in pointer.lstrip("/").split("/")]
    node: Mapping[str, Any] = obj
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            value: Any = True
            for name in reversed(parts[depth + 1 :]):
                value = {name: value}
            path = "/" + "/".join(_escape(p) for p in parts[: depth + 1])
            return ({"op": "add", "path": path, "value": value},)
        if not isinstance(child, dict):
            where = "/" + "/".join(parts[: depth + 1])
            raise ValueError(f"{where} is {type(child).__name__}, not an object")
        node = child
    if node.get(parts[-1]) is True:
        return ()
    return ({"op": "add", "path": "/" + "/".join(_escape(p) for p in parts), "value": True},)


def pointer(path: Sequence[str]) -> str:
    """The JSON pointer of a field given as its keys, e.g. ``("spec", "runPolicy", "suspend")``."""
    return "".join("/" + _escape(key) for key in path)


def suspend_fields(integrations: Iterable[Integration]) -> dict[GroupKind, str]:
    """The served kinds of ``integrations`` (the enabled ones): each that has a suspend
    switch, with the pointer of it."""
    return {
        (integration.resource.group, integration.resource.kind): pointer(integration.suspend_path)
        for integration in integrations
        if integration.suspend_path is not None
    }


def pod_groups(integrations: Iterable[Integration]) -> bool:
    """Whether grouped pods are gated at creation: the pod-group integration is enabled."""
    return any(isinstance(integration, PodGroupIntegration) for integration in integrations)


def _group_kind(request: Mapping[str, Any], obj: Mapping[str, Any]) -> GroupKind | None:
    kind = request.get("kind")
    if isinstance(kind, dict) and isinstance(kind.get("group"), str) and isinstance(kind.get("kind"), str):
        return kind["group"], kind["kind"]
    api_version, name = obj.get("apiVersion"), obj.get("kind")
    if isinstance(api_version, str) and isinstance(name, str):
        return api_version.rpartition("/")[0], name
    return None


def _controller(metadata: Mapping[str, Any]) -> GroupKind | None:
    references = metadata.get("ownerReferences")
    for reference in references if isinstance(references, list) else ():
        if isinstance(reference, dict) and reference.get("controller") is True:
            api_version, kind = reference.get("apiVersion"), reference.get("kind")
            if isinstance(api_version, str) and isinstance(kind, str):
                return api_version.rpartition("/")[0], kind
    return None


def review_admission(review: Any, kinds: Mapping[GroupKind, str], *, pod_groups: bool = False) -> Verdict:
    """The verdict on one ``AdmissionReview`` (any decoded JSON); never raises.

    ``kinds`` are the served kinds with the pointer of their suspend field;
    ``pod_groups``: a grouped Pod is gated too.
    """
    request = review.get("request") if isinstance(review, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    uid = uid if isinstance(uid, str) else ""
    if not isinstance(request, dict):
        return Verdict(uid, (), "malformed", "the review has no request")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != "AdmissionReview":
        return Verdict(uid, (), "malformed", f"not an {REVIEW_API_VERSION} AdmissionReview")
    if not uid:
        return Verdict(uid, (), "malformed", "the request has no uid")
    operation = request.get("operation")
    if operation != "CREATE":
        return Verdict(uid, (), "other-operation", f"operation {operation!r}")
    obj = request.get("object")
    if not isinstance(obj, dict):
        return Verdict(uid, (), "malformed", "request.object is not an object")
    group_kind = _group_kind(request, obj)
    if group_kind is None:
        return Verdict(uid, (), "malformed", "neither request.kind nor the object names its kind")
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    namespace = metadata.get("namespace") or request.get("namespace") or ""
    name = metadata.get("name") or metadata.get("generateName") or request.get("name") or ""
    what = f"{group_kind[1]} {namespace}/{name}"
    pointer = kinds.get(group_kind)
    gated = pod_groups and group_kind == POD
    if pointer is None and not gated:
        return Verdict(uid, (), "other-kind", f"{what}: {group_kind[0] or 'core'}/{group_kind[1]} is not served")
    labels = metadata.get("labels")
    if not isinstance(labels, dict) or QUEUE_LABEL not in labels:
        return Verdict(uid, (), "unmanaged", f"{what}: no {QUEUE_LABEL} label")
    owner = _controller(metadata)
    if owner is not None and owner in kinds:
        return Verdict(uid, (), "owned", f"{what}: controlled by a {owner[1]}, which is held back instead")
    if pointer is None:  # a Pod: held by the admission gate when it belongs to a group
        if GROUP_LABEL not in labels:
            return Verdict(uid, (), "unmanaged", f"{what}: no {GROUP_LABEL} label")
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return Verdict(uid, (), "malformed", f"{what}: spec is not an object")
        gate = tuple(gate_patch(obj))
        if not gate:
            return Verdict(uid, (), "already-suspended", f"{what}: already gated")
        return Verdict(uid, gate, "suspended", f"{what}: gated at creation (/spec/schedulingGates)")
    try:
        patch = suspend_patch(obj, pointer)
    except ValueError as exc:
        return Verdict(uid, (), "malformed", f"{what}: cannot set {pointer}: {exc}")
    if not patch:
        return Verdict(uid, (), "already-suspended", f"{what}: already suspended")
    return Verdict(uid, patch, "suspended", f"{what}: suspended at creation ({pointer})")


def review_kind(review: Any) -> str:
    """The kind of the object a review is about (``Job``, ``Pod``...); ``unknown`` when it
    names none it can be read from."""
    request = review.get("request") if isinstance(review, dict) else None
    obj = request.get("object") if isinstance(request, dict) else None
    found = _group_kind(request, obj if isinstance(obj, dict) else {}) if isinstance(request, dict) else None
    return found[1] if found is not None and found[1] else "unknown"


def review_outcome(verdict: Verdict) -> str:
    """What was answered, for counting: ``patched`` (suspended or gated), ``allowed-malformed``
    (a review it could not read, allowed as it is) or ``unchanged`` (anything else)."""
    if verdict.patch:
        return "patched"
    return "allowed-malformed" if verdict.outcome == "malformed" else "unchanged"


# --- TLS ---------------------------------------------------------------------------------


# --- the server --------------------------------------------------------------------------


KEEP_INTERVAL = 300.0
"""Seconds between two passes of the self-managed certificate's keeper (once it serves)."""


class WebhookServer:
    """Serves :data:`PATH` over HTTPS on ``[webhook] address`` until :meth:`stop`.

    With a ``keeper`` (``certificate = "self-managed"``) the keeper makes the
    files; the server listens at once and serves once they are there.
    """

    def __init__(
        self,
        config: WebhookConfig,
        *,
        suspend_fields: Mapping[GroupKind, str],
        pod_groups: bool = False,
        address: str | None = None,
        keeper: CertificateKeeper | None = None,
        keep_interval: float = KEEP_INTERVAL,
        on_review: Callable[[str, str], None] | None = None,
    ) -> None:
        self.host, self.port = split_address(address or config.address)
        self.kinds: dict[GroupKind, str] = dict(suspend_fields)  # the served kinds and their pointers
        self.pod_groups = pod_groups  # grouped Pods are gated too
        self.certificate = ReloadingCertificate(config.cert_file, config.key_file, what="webhook certificate")
        self.reload_interval = config.reload_interval / 1000
        self.keeper = keeper
        self.keep_interval = keep_interval
        self.outcomes: Counter[str] = Counter()  # reviews answered, by Verdict.outcome
        self.on_review = on_review  # (kind, review_outcome) of every review answered
        self._runner: web.AppRunner | None = None
        self._watch: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{PATH}"

    async def start(self) -> None:
        """Listen; with files of its own, :class:`CertificateError` if they cannot be served."""
        if self.keeper is None:
            self.certificate.load()
        elif shutil.which("openssl") is None:
            raise CertificateError('certificate = "self-managed" needs the openssl binary on PATH')
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_post(PATH, self._review)
        self._runner, self.port = await serve(app, self.host, self.port, self.certificate.context, None)
        watch = self._watch_certificate() if self.keeper is None else self._keep_certificate(self.keeper)
        self._watch = asyncio.create_task(watch, name="webhook-certificate")
        served = ", ".join(f"{group or 'core'}/{kind}" for group, kind in self.kinds)
        gated = "; gates grouped Pods" if self.pod_groups else ""
        log.info("admission webhook on %s (suspends %s at creation%s)", self.url, served or "nothing", gated)

    async def stop(self) -> None:
        await close(self._runner, self._watch)
        self._runner = self._watch = None

    async def _watch_certificate(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            try:
                self.certificate.refresh()
            except Exception:  # never let the watch die: the next tick tries again
                log.exception("checking the webhook certificate failed")

    async def _keep_certificate(self, keeper: CertificateKeeper) -> None:
        retry = self.reload_interval  # doubled after each failed pass, up to keep_interval
        while True:
            ready = False
            try:
                ready = await keeper.ensure()
            except (ApiError, OpensslError, OSError) as exc:
                log.warning("webhook: the certificate pass failed; again in %.0fs: %s", retry, exc)
            except Exception:  # never let the keeper die: the next pass tries again
                log.exception("webhook: the certificate pass failed; again in %.0fs", retry)
            if ready:
                self.certificate.refresh()
            if ready and self.certificate.loaded:
                retry = self.reload_interval
                await asyncio.sleep(self.keep_interval)
            else:
                await asyncio.sleep(retry)
                retry = min(retry * 2, max(self.keep_interval, self.reload_interval))

    async def _review(self, request: web.Request) -> web.Response:
        review: Any = None
        try:
            body = await request.read()
            try:
                review = json.loads(body)
            except ValueError:
                review = None
            verdict = review_admission(review, self.kinds, pod_groups=self.pod_groups)
        except Exception as exc:  # allowed whatever happened: the backend holds the object anyway
            log.exception("admission review failed; allowed unchanged")
            verdict = Verdict("", (), "malformed", f"{type(exc).__name__}: {exc}")
        self.outcomes[verdict.outcome] += 1
        if self.on_review is not None:
            try:
                self.on_review(review_kind(review), review_outcome(verdict))
            except Exception:  # a count never costs an answer
                log.exception("counting an admission review failed")
        if verdict.outcome == "malformed":
            log.warning("admission review allowed unchanged: %s", verdict.reason)
        elif verdict.outcome == "suspended":
            log.info("admission: %s", verdict.reason)
        else:
            log.debug("admission: %s", verdict.reason)
        return web.json_response(verdict.response())
