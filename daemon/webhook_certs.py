"""Self-managed webhook certificates: a CA and a serving certificate made with openssl.

Design note. With ``[webhook] certificate = "self-managed"`` preemptd needs no
cert-manager: it keeps a CA and a serving certificate in a Secret of its own
namespace, puts the CA bundle into its MutatingWebhookConfiguration's
``caBundle``, and rotates both before they expire. The keys and certificates
are made by the ``openssl`` binary (no Python crypto library): EC P-256 keys, a
CA valid ``CA_DAYS``, a serving certificate valid ``SERVING_DAYS`` for the
Service's DNS names, signed by the newest CA.

The Secret (``kubernetes.io/tls``) holds ``tls.crt`` and ``tls.key`` (served),
``ca.crt`` (the bundle the API server trusts: the newest CA first, then older
ones not yet expired) and ``ca.key`` (the newest CA's key).

Every replica serves the webhook (the Service picks any), so every replica
runs a :class:`CertificateKeeper`; one pass (:meth:`CertificateKeeper.ensure`):

1. read the Secret; if there is none, make everything and create it (any
   replica: a create that loses the race is a 409, and the winner's Secret
   is read on the next pass);
2. the leader (only) renews what is due, one step per pass, each step safe
   for a replica still serving the old certificate:

   * a CA with less than a third of its life left: a new CA goes *in front
     of* the bundle, the old one stays (it still signs what is served);
   * the serving certificate — due (a third of its life left), not signed by
     the newest CA, not for the Service's names, or not matching its key — is
     issued again from the newest CA, but only once the configuration's
     ``caBundle`` holds that CA, so the API server already trusts it;
   * CAs that have expired leave the bundle;

   each a replace with the Secret's resourceVersion (a conflict: next pass);
3. the leader sets every webhook's ``caBundle`` to the bundle when it differs
   (a standby only when none is set yet: a first install);
4. every replica writes ``tls.crt`` and ``tls.key`` to ``cert_file`` and
   ``key_file`` (a writable, memory-backed volume) when they differ, and the
   server takes them up (``daemon/webhook.py``) at once.

A pass that cannot reach the API server, or whose openssl fails, is logged
and retried; the certificate already served stays served. A dry run reads and
serves, and writes nothing to the cluster.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import secrets
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .backends.kubernetes.client import ApiError, Kube, Obj, Resource

__all__ = [
    "CA_DAYS",
    "SECRETS",
    "SERVING_DAYS",
    "WEBHOOK_CONFIGURATIONS",
    "CertificateKeeper",
    "Issued",
    "OpensslError",
    "dns_names",
]

log = logging.getLogger("preemptd.webhook")

SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
    namespaced=False,
)

CA_DAYS = 730
SERVING_DAYS = 90
_DAY = 86_400.0
_PEM_END = b"-----END CERTIFICATE-----"


class OpensslError(Exception):
    """The openssl binary is missing or refused a command."""


def dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names the API server may use to reach ``service`` (it uses ``<svc>.<ns>.svc``)."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


def split_pems(bundle: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each ending with a newline."""
    found = []
    for chunk in bundle.split(_PEM_END)[:-1]:
        start = chunk.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            found.append(chunk[start:] + _PEM_END + b"\n")
    return found


@dataclass(frozen=True, slots=True)
class Issued:
    """What the Secret holds (PEM)."""

    ca_bundle: bytes  # the newest CA first
    ca_key: bytes  # the newest CA's
    cert: bytes
    key: bytes

    @classmethod
    def of(cls, secret: Obj | None) -> Issued | None:
        data = (secret or {}).get("data")
        if not isinstance(data, dict):
            return None
        try:
            parts = [base64.b64decode(str(data[name]), validate=True) for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")]
        except (KeyError, ValueError):
            return None
        if not all(parts) or not split_pems(parts[0]):
            return None
        return cls(*parts)

    def data(self) -> dict[str, str]:
        values = {"ca.crt": self.ca_bundle, "ca.key": self.ca_key, "tls.crt": self.cert, "tls.key": self.key}
        return {name: base64.b64encode(value).decode("ascii") for name, value in values.items()}


# --- openssl -------------------------------------------------------------------------------

_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = preemptd
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[serving]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = {names}
"""
_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


async def _openssl(*args: str, cwd: Path) -> bytes:
    try:
        process = await asyncio.create_subprocess_exec(
            "openssl", *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError:
        raise OpensslError("the openssl binary is not on PATH") from None
    out, err = await process.communicate()
    if process.returncode != 0:
        raise OpensslError(f"openssl {args[0]} failed: {err.decode(errors='replace').strip()}")
    return out


class _Workshop:
    """openssl runs in a private temporary directory (keys never left in it)."""

    def __init__(self, where: Path, names: tuple[str, ...]) -> None:
        self.where = where
        self.names = names

    @contextlib.contextmanager
    def _room(self) -> Any:
        with tempfile.TemporaryDirectory(dir=self.where, prefix=".openssl-") as room:
            path = Path(room)
            subject_names = ", ".join(f"DNS:{name}" for name in self.names)
            (path / "openssl.cnf").write_text(_CONFIG.format(names=subject_names))
            yield path

    async def new_ca(self, days: int) -> tuple[bytes, bytes]:
        with self._room() as room:
            await _openssl("req", "-x509", "-config", "openssl.cnf", "-extensions", "ca", *_EC, "-keyout", "ca.key",
                           "-out", "ca.crt", "-days", str(days), "-subj", f"/CN=preemptd-webhook-ca-{secrets.token_hex(4)}",
                           cwd=room)
            return (room / "ca.crt").read_bytes(), (room / "ca.key").read_bytes()

    async def new_serving(self, ca_cert: bytes, ca_key: bytes, days: int) -> tuple[bytes, bytes]:
        with self._room() as room:
            (room / "ca.crt").write_bytes(ca_cert)
            (room / "ca.key").write_bytes(ca_key)
            await _openssl("req", "-new", "-config", "openssl.cnf", *_EC, "-keyout", "tls.key", "-out", "tls.csr",
                           "-subj", f"/CN={self.names[-2]}", cwd=room)
            await _openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                           "-set_serial", f"0x{secrets.token_hex(16)}", "-days", str(days),
                           "-extfile", "openssl.cnf", "-extensions", "serving", "-out", "tls.crt", cwd=room)
            return (room / "tls.crt").read_bytes(), (room / "tls.key").read_bytes()

    async def lifetime(self, cert: bytes) -> tuple[float, float]:
        """(notBefore, notAfter) of a certificate, in seconds since the epoch."""
        with self._room() as room:
            (room / "c.pem").write_bytes(cert)
            out = await _openssl("x509", "-noout", "-startdate", "-enddate", "-in", "c.pem", cwd=room)
        dates = dict(line.split("=", 1) for line in out.decode().splitlines() if "=" in line)
        return float(ssl.cert_time_to_seconds(dates["notBefore"])), float(ssl.cert_time_to_seconds(dates["notAfter"]))

    async def serves(self, issued: Issued) -> bool:
        """The serving certificate is signed by the newest CA, is for our names and matches its key."""
        with self._room() as room:
            (room / "ca.crt").write_bytes(split_pems(issued.ca_bundle)[0])
            (room / "tls.crt").write_bytes(issued.cert)
            (room / "tls.key").write_bytes(issued.key)
            try:
                await _openssl("verify", "-CAfile", "ca.crt", "tls.crt", cwd=room)
                names = await _openssl("x509", "-noout", "-ext", "subjectAltName", "-in", "tls.crt", cwd=room)
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(room / "tls.crt", room / "tls.key")
            except (OpensslError, ssl.SSLError):
                return False
        listed = {part.strip()[4:] for part in names.decode().replace("\n", ",").split(",") if part.strip().startswith("DNS:")}
        return listed == set(self.names)


# --- the keeper ------------------------------------------------------------------------------


class CertificateKeeper:
    """Keeps the Secret, the caBundle and the served files in line (module docstring)."""

    def __init__(
        self,
        kube: Kube,
        *,
        namespace: str,
        secret: str,
        configuration: str,
        service: str,
        cert_file: str,
        key_file: str,
        leading: Callable[[], bool] = lambda: True,
        dry_run: bool = False,
        now: Callable[[], float] = time.time,
        ca_days: int = CA_DAYS,
        serving_days: int = SERVING_DAYS,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.secret = secret
        self.configuration = configuration
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.leading = leading
        self.dry_run = dry_run
        self.now = now
        self.ca_days = ca_days
        self.serving_days = serving_days
        self.names = dns_names(service, namespace)
        self.issued: Issued | None = None  # as last read or written
        self._missing_configuration = False

    def _workshop(self) -> _Workshop:
        self.cert_file.parent.mkdir(parents=True, exist_ok=True)
        return _Workshop(self.cert_file.parent, self.names)

    async def ensure(self) -> bool:
        """One pass; True when the files hold a certificate to serve. Raises ApiError, OpensslError."""
        secret = await self._read_secret()
        issued = Issued.of(secret)
        workshop = self._workshop()
        if issued is None and not self.dry_run and (secret is None or self.leading()):
            issued = await self._write(secret, await self._issue(workshop))
        elif issued is not None and self.leading() and not self.dry_run:
            renewed = await self._renew(workshop, issued)
            if renewed is not None:
                issued = await self._write(secret, renewed)
        if issued is None:
            return self._files_ready()
        self.issued = issued
        if not self.dry_run:
            await self._set_ca_bundle(issued.ca_bundle, only_if_unset=not self.leading())
        self._write_files(issued)
        return True

    async def _read_secret(self) -> Obj | None:
        try:
            return await self.kube.get(SECRETS, self.secret, self.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _issue(self, workshop: _Workshop) -> Issued:
        ca_cert, ca_key = await workshop.new_ca(self.ca_days)
        cert, key = await workshop.new_serving(ca_cert, ca_key, self.serving_days)
        log.info("webhook: issued a CA and a serving certificate for %s", ", ".join(self.names))
        return Issued(ca_cert, ca_key, cert, key)

    async def _due(self, workshop: _Workshop, cert: bytes) -> bool:
        """Less than a third of its life left (or already expired)."""
        begins, ends = await workshop.lifetime(cert)
        return ends - self.now() < (ends - begins) / 3

    async def _renew(self, workshop: _Workshop, issued: Issued) -> Issued | None:
        """The next renewal step due, or None (see the module docstring)."""
        cas = split_pems(issued.ca_bundle)
        live = [cas[0], *[ca for ca in cas[1:] if (await workshop.lifetime(ca))[1] > self.now()]]
        if await self._due(workshop, cas[0]):
            ca_cert, ca_key = await workshop.new_ca(self.ca_days)
            log.info("webhook: the CA is due for renewal; a new CA joins the bundle")
            return replace(issued, ca_bundle=b"".join([ca_cert, *live]), ca_key=ca_key)
        serving_ok = await workshop.serves(issued) and not await self._due(workshop, issued.cert)
        if not serving_ok and await self._trusted(cas[0]):
            cert, key = await workshop.new_serving(cas[0], issued.ca_key, self.serving_days)
            log.info("webhook: the serving certificate was issued again")
            return replace(issued, ca_bundle=b"".join(live), cert=cert, key=key)
        if len(live) != len(cas):
            log.info("webhook: expired CAs left the bundle")
            return replace(issued, ca_bundle=b"".join(live))
        return None

    async def _trusted(self, ca: bytes) -> bool:
        """Every webhook of the configuration already trusts ``ca`` (a missing configuration: yes)."""
        configuration = await self._read_configuration()
        if configuration is None:
            return True
        for webhook in configuration.get("webhooks") or []:
            bundle = base64.b64decode(((webhook or {}).get("clientConfig") or {}).get("caBundle") or "")
            if ca not in split_pems(bundle):
                return False
        return True

    async def _write(self, secret: Obj | None, issued: Issued) -> Issued | None:
        body: Obj = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": self.secret, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/name": "preemptd"}},
            "data": issued.data(),
        }
        try:
            if secret is None:
                await self.kube.create(SECRETS, body, self.namespace)
            else:
                body["metadata"]["resourceVersion"] = (secret.get("metadata") or {}).get("resourceVersion")
                body["type"] = secret.get("type") or body["type"]
                await self.kube.replace(SECRETS, self.secret, body, self.namespace)
        except ApiError as exc:
            if exc.conflict:
                log.info("webhook: the Secret %s/%s changed meanwhile; read again next pass", self.namespace, self.secret)
                return Issued.of(secret)
            raise
        return issued

    async def _read_configuration(self) -> Obj | None:
        try:
            found = await self.kube.get(WEBHOOK_CONFIGURATIONS, self.configuration)
        except ApiError as exc:
            if exc.not_found:
                if not self._missing_configuration:
                    log.warning("webhook: no MutatingWebhookConfiguration %s to give the CA bundle", self.configuration)
                self._missing_configuration = True
                return None
            raise
        self._missing_configuration = False
        return found

    async def _set_ca_bundle(self, bundle: bytes, *, only_if_unset: bool) -> None:
        """Give every webhook of the configuration ``bundle``; a standby only where none is set
        (a first install, before any leader), never replacing what the leader wrote."""
        configuration = await self._read_configuration()
        if configuration is None:
            return
        encoded = base64.b64encode(bundle).decode("ascii")
        webhooks = configuration.get("webhooks") or []
        bundles = [((w or {}).get("clientConfig") or {}).get("caBundle") for w in webhooks]
        if all(found == encoded for found in bundles) or (only_if_unset and any(bundles)):
            return
        for webhook in webhooks:
            webhook.setdefault("clientConfig", {})["caBundle"] = encoded
        try:
            await self.kube.replace(WEBHOOK_CONFIGURATIONS, self.configuration, configuration)
        except ApiError as exc:
            if not exc.conflict:
                raise
            return  # changed meanwhile: the next pass sets it
        log.info("webhook: caBundle of %s set (%d CA(s))", self.configuration, len(split_pems(bundle)))

    def _files_ready(self) -> bool:
        return self.cert_file.is_file() and self.key_file.is_file()

    def _write_files(self, issued: Issued) -> None:
        for path, content in ((self.key_file, issued.key), (self.cert_file, issued.cert)):
            with contextlib.suppress(OSError):
                if path.read_bytes() == content:
                    continue
            staged = path.with_name(f".{path.name}.new")
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
            os.replace(staged, path)
