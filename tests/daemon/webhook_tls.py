"""Certificates for the webhook's tests, made with the openssl binary, and an HTTPS client."""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="the openssl binary is not installed")


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def make_pair(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA ``<name>-ca`` and a certificate for 127.0.0.1 and localhost it signed:
    (ca.crt, tls.crt, tls.key) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", f"/CN={name}-ca", cwd=directory)
    _openssl("req", *ec, "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={name}", cwd=directory)
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "tls.crt", "-days", "1", "-extfile", "san.cnf", cwd=directory)
    return directory / "ca.crt", directory / "tls.crt", directory / "tls.key"


class SecretVolume:
    """Files laid out as the kubelet mounts a Secret: ``tls.crt -> ..data/tls.crt``, ``..data``
    a symlink to a timestamped directory, swapped in one rename on an update."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._serial = 0

    @property
    def cert_file(self) -> Path:
        return self.root / "tls.crt"

    @property
    def key_file(self) -> Path:
        return self.root / "tls.key"

    def publish(self, files: dict[str, bytes]) -> None:
        self._serial += 1
        version = self.root / f"..{self._serial:04d}"
        version.mkdir()
        for name, data in files.items():
            (version / name).write_bytes(data)
        staged = self.root / "..data_tmp"
        staged.symlink_to(version.name)
        os.replace(staged, self.root / "..data")
        for name in files:
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(Path("..data") / name)


def client_context(ca_file: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_file))


def review(obj: Any, *, group: str = "batch", kind: str = "Job", operation: str = "CREATE") -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview as the API server sends it for ``obj``."""
    metadata = (obj.get("metadata") or {}) if isinstance(obj, dict) else {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": "v1", "kind": kind},
            "resource": {"group": group, "version": "v1", "resource": kind.lower() + "s"},
            "requestKind": {"group": group, "version": "v1", "kind": kind},
            "namespace": metadata.get("namespace", "default"),
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


async def post(url: str, ca_file: Path, body: bytes) -> dict[str, Any]:
    """POST ``body`` over HTTPS (the server's certificate checked against ``ca_file``); the JSON answer."""
    headers = {"Content-Type": "application/json"}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers, ssl=client_context(ca_file)) as response,
    ):
        assert 200 == response.status, await response.text()
        answer: dict[str, Any] = await response.json()
        return answer


def decoded_patch(answer: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The JSONPatch of an AdmissionReview answer; None when it has none."""
    response = answer["response"]
    if "patch" not in response:
        assert "patchType" not in response
        return None
    assert "JSONPatch" == response["patchType"]
    patch: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return patch
