"""`preemptd run` as systemd runs it: a process that notifies, serves metrics, reloads and stops."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from kube.cluster import until
from running import cluster, kubeconfig, lease_holder, running_jobs, write_config

pytestmark = [pytest.mark.asyncio, pytest.mark.usefixtures("no_leaked_tasks")]

CONFIG = """
[scheduler]
cycle_interval = "200ms"
[backend]
kind = "kubernetes"
[daemon]
log_format = "json"
[leader_election]
lease_duration = "2s"
renew_deadline = "1s"
retry_period = "200ms"
"""


@pytest.fixture
def notify_socket() -> Iterator[tuple[str, socket.socket]]:
    folder = tempfile.mkdtemp(prefix="n", dir="/tmp")
    path = os.path.join(folder, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    try:
        yield path, sock
    finally:
        sock.close()
        shutil.rmtree(folder, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Messages:
    """What the daemon told 'systemd' so far."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.all: list[str] = []

    def read(self) -> list[str]:
        while True:
            try:
                self.all.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return self.all

    def has(self, line: str) -> bool:
        return any(line in message.split("\n") for message in self.read())


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_preemptd_run_notifies_serves_reloads_and_stops_cleanly(server, tmp_path: Path, notify_socket) -> None:
    """READY=1 after sync, WATCHDOG=1 while it schedules, /healthz /readyz /metrics on loopback,
    a bad reload refused with the process still scheduling, STOPPING=1 and exit 0 on SIGTERM,
    and the lease released."""
    cluster(server, jobs=1)
    path, sock = notify_socket
    config = write_config(tmp_path / "preemptd.toml", CONFIG)
    port = free_port()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", server)),
           "NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000", "POD_NAME": "preemptd-0"}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    env.pop("WATCHDOG_PID", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "preemptd.daemon.cli", "run", "--config", str(config),
        "--http-address", f"127.0.0.1:{port}", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    messages = Messages(sock)
    base = f"http://127.0.0.1:{port}"
    try:
        await until(lambda: messages.has("READY=1"), timeout=20, what="READY=1")
        await until(lambda: "job-000" in running_jobs(server), timeout=10, what="the job to run")
        await until(lambda: messages.has("WATCHDOG=1"), timeout=5, what="a watchdog ping")
        assert (lease_holder(server) or "").startswith("preemptd-0_")
        assert (200, "ok\n") == await get(f"{base}/healthz")
        assert (200, True) == (lambda r: (r[0], r[1].startswith("ok: leading")))(await get(f"{base}/readyz"))
        for _ in range(100):  # the job runs during the first cycle's commit; the cycle is counted at its end
            status, metrics = await get(f"{base}/metrics")
            if 'preemptd_cycles_total{outcome="ok"}' in metrics:
                break
            await asyncio.sleep(0.05)
        assert 200 == status
        for line in ("preemptd_leader 1.0", 'preemptd_cycles_total{outcome="ok"}',
                     'preemptd_api_write_duration_seconds_count{resource="workloads.preemptd.io/status",verb="patch"}',
                     'preemptd_workloads{queue="team-a",state="admitted"}', "preemptd_session_duration_seconds_bucket"):
            assert line in metrics, line

        write_config(config, CONFIG + "[daemon.extra]\n")
        process.send_signal(signal.SIGHUP)
        await until(lambda: messages.has("RELOADING=1"), timeout=5, what="RELOADING=1")

        async def refused() -> bool:
            return 'preemptd_config_reloads_total{result="rejected"} 1.0' in (await get(f"{base}/metrics"))[1]

        for _ in range(100):
            if await refused():
                break
            await asyncio.sleep(0.05)
        assert await refused()
        assert (200, "ok\n") == await get(f"{base}/healthz")  # still scheduling on the old configuration

        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    log = stderr.decode()
    assert 0 == process.returncode, log
    assert messages.has("STOPPING=1")
    assert "" == lease_holder(server)
    assert "reload refused" in log and "daemon.extra" in log
