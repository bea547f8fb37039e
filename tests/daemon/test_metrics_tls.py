"""/metrics over TLS, with its certificate reloaded when the files change, and behind a
bearer token (issue 20, point 11). The test certificates come from the ``openssl`` binary:
the project adds no dependency to make them."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import pytest_asyncio
from preemptd.daemon.config import parse_config
from preemptd.daemon.http import HttpServer
from preemptd.daemon.metrics import Metrics

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]

OPENSSL = shutil.which("openssl")
needs_openssl = pytest.mark.skipif(
    OPENSSL is None, reason="no openssl binary on this machine to make a test certificate with"
)


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed EC certificate for 127.0.0.1 whose subject CN is ``name``."""
    assert OPENSSL is not None
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", f"/CN={name}",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


async def served_name(port: int, trust: Path) -> str:
    """The CN of the certificate a new TLS connection to the server gets."""
    context = ssl.create_default_context(cafile=str(trust))
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # only read the certificate offered
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    # The CN as openssl prints it, from the DER the server sent.
    out = subprocess.run([str(OPENSSL), "x509", "-inform", "DER", "-noout", "-subject"],
                         input=der, capture_output=True, check=True)
    return out.stdout.decode().strip().rsplit("=", 1)[-1].strip()


async def get(url: str, *, trust: Path | None = None, token: str | None = None) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(trust)) if trust else None
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as session, session.get(url, ssl=context, headers=headers) as response:
        return response.status, await response.text()


@pytest_asyncio.fixture
async def tls_files(tmp_path: Path) -> AsyncIterator[tuple[Path, Path, Path]]:
    """The served pair (cert, key), made from certificate "first"; and the folder."""
    first_cert, first_key = certificate(tmp_path, "first")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first_cert.read_bytes())
    key.write_bytes(first_key.read_bytes())
    yield cert, key, tmp_path


@needs_openssl
async def test_metrics_are_served_over_tls_with_the_configured_certificate(
    tls_files: tuple[Path, Path, Path],
) -> None:
    cert, key, folder = tls_files
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, cert_file=str(cert), key_file=str(key))
    await server.start()
    try:
        assert server.url.startswith("https://127.0.0.1:")
        status, text = await get(f"{server.url}/metrics", trust=folder / "first.crt")
        assert status == 200 and "preemptd_build_info" in text
        assert await served_name(server.port, folder / "first.crt") == "first"
        with pytest.raises(aiohttp.ClientError):  # plain HTTP is not answered
            await get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        await server.stop()


@needs_openssl
async def test_a_renewed_certificate_is_served_to_new_connections(tls_files: tuple[Path, Path, Path]) -> None:
    cert, key, folder = tls_files
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, cert_file=str(cert), key_file=str(key),
                        reload_interval=0.05)
    await server.start()
    try:
        assert await served_name(server.port, folder / "first.crt") == "first"
        second_cert, second_key = certificate(folder, "second")
        cert.write_bytes(second_cert.read_bytes())
        key.write_bytes(second_key.read_bytes())
        for _ in range(100):
            if await served_name(server.port, second_cert) == "second":
                break
            await asyncio.sleep(0.05)
        status, _ = await get(f"{server.url}/metrics", trust=second_cert)
        assert status == 200
        assert await served_name(server.port, second_cert) == "second"
        # A broken pair (half written) is not loaded: the last good certificate stays.
        cert.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n")
        server.reload()
        assert await served_name(server.port, second_cert) == "second"
    finally:
        await server.stop()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "http-file-watch" and not t.done()]


async def test_metrics_need_the_bearer_token_and_follow_its_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret-one\n")
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, token_file=str(token))
    await server.start()
    try:
        url = f"{server.url}/metrics"
        assert (await get(url))[0] == 401
        assert (await get(url, token="wrong"))[0] == 401
        status, text = await get(url, token="s3cret-one")
        assert status == 200 and "preemptd_build_info" in text
        # The probes stay open: the kubelet sends no token.
        assert (await get(f"{server.url}/healthz"))[0] == 200
        assert (await get(f"{server.url}/readyz"))[0] == 200
        token.write_text("s3cret-two-longer\n")
        server.reload()
        assert (await get(url, token="s3cret-one"))[0] == 401
        assert (await get(url, token="s3cret-two-longer"))[0] == 200
        # An emptied file keeps the last token rather than opening /metrics to everyone.
        token.write_text("")
        server.reload()
        assert (await get(url))[0] == 401
        assert (await get(url, token="s3cret-two-longer"))[0] == 200
    finally:
        await server.stop()


async def test_an_empty_token_file_is_an_error_at_start(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("\n")
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, token_file=str(token))
    with pytest.raises(ValueError, match="is empty"):
        await server.start()
    await server.stop()


async def test_a_certificate_without_its_key_is_a_configuration_error() -> None:
    config, problems = parse_config('[daemon]\nmetrics_cert_file = "/etc/preemptd/tls.crt"\n', source="preemptd.toml")
    assert [(p.key, p.line) for p in problems] == [("daemon.metrics_key_file", 1)]
    assert "go together" in problems[0].message
    assert config.daemon.metrics_cert_file == "/etc/preemptd/tls.crt"


async def test_pending_needs_the_same_bearer_token_as_metrics(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, pending=lambda queue: {"queue": queue},
                        token_file=str(token))
    await server.start()
    try:
        assert (await get(f"{server.url}/pending"))[0] == 401
        assert (await get(f"{server.url}/pending/team-a", token="wrong"))[0] == 401
        status, text = await get(f"{server.url}/pending/team-a", token="s3cret")
        assert status == 200 and '"team-a"' in text
    finally:
        await server.stop()


@needs_openssl
async def test_a_half_written_rotation_keeps_serving_the_previous_pair(tls_files: tuple[Path, Path, Path]) -> None:
    """A Secret rotated in two steps: the new certificate lands before its key. Until the
    key follows, new connections still get the previous pair (a context loaded in place
    would hold the new certificate with the old key and fail every handshake)."""
    cert, key, folder = tls_files
    server = HttpServer("127.0.0.1:0", live=lambda: (True, "ok"), ready=lambda: (True, "ok"),
                        metrics=Metrics().exposition, cert_file=str(cert), key_file=str(key),
                        reload_interval=3600)
    await server.start()
    try:
        second_cert, second_key = certificate(folder, "second")
        cert.write_bytes(second_cert.read_bytes())  # the key is still the first's
        server.reload()
        assert await served_name(server.port, folder / "first.crt") == "first"
        key.write_bytes(second_key.read_bytes())
        server.reload()
        assert await served_name(server.port, second_cert) == "second"
    finally:
        await server.stop()
