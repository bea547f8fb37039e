"""systemd: the unit file, and the notify protocol over a real datagram socket."""

from __future__ import annotations

import asyncio
import configparser
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from preemptd.daemon.clock import ManualClock
from preemptd.daemon.config import Config
from preemptd.daemon.loop import Heartbeat
from preemptd.daemon.notify import Notifier, feed_watchdog

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "preemptd.service"


class _MultiDict(dict[str, list[str]]):
    """configparser's dict_type for systemd units, where a key may be given more than once."""

    def __setitem__(self, key: str, value: object) -> None:
        if isinstance(value, list) and key in self:
            self[key].extend(value)
        else:
            super().__setitem__(key, value)  # type: ignore[assignment]


def unit() -> dict[str, dict[str, list[str]]]:
    """The unit file as {section: {key: [values]}} (a repeated key keeps every value)."""
    parser = configparser.RawConfigParser(strict=False, dict_type=_MultiDict, empty_lines_in_values=False)  # type: ignore[arg-type]
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    sections: dict[str, dict[str, list[str]]] = {}
    for name in parser.sections():
        raw = parser._sections[name]  # type: ignore[attr-defined]
        # After parsing, configparser joins the lines of a key (repeats included) with newlines.
        sections[name] = {key: str(value).split("\n") for key, value in raw.items()}
    return sections


def test_unit_is_a_notify_service_with_a_watchdog_and_reload() -> None:
    """Type=notify (READY=1), a watchdog, reload by SIGHUP, the config file the docs name."""
    service = unit()["Service"]
    assert ["notify"] == service["Type"]
    assert ["main"] == service["NotifyAccess"]
    assert ["/bin/kill -HUP $MAINPID"] == service["ExecReload"]
    assert service["ExecStart"][0].endswith("preemptd run --config /etc/preemptd/preemptd.toml")
    assert int(service["WatchdogSec"][0]) > 0
    assert ["78"] == service["RestartPreventExitStatus"]  # a bad configuration is not retried


def test_unit_is_sandboxed_on_a_read_only_system() -> None:
    """DynamicUser on a read-only system: nothing on disk is the daemon's to write."""
    service = unit()["Service"]
    expected = {"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes",
                "PrivateTmp": "yes"}
    assert expected == {key: service[key][0] for key in expected}
    assert "AF_UNIX" in service["RestrictAddressFamilies"][0]  # the notify socket


def test_unit_gives_shutdown_time_for_the_last_cycle_and_the_lease() -> None:
    """TimeoutStopSec outlasts shutdown_timeout plus the lease release."""
    stop = unit()["Service"]["TimeoutStopSec"][0]
    seconds = int(stop.removesuffix("s"))
    assert seconds > Config().daemon.shutdown_timeout / 1000 + 5


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    """`systemd-analyze verify` accepts the unit (its ExecStart pointed at an existing program)."""
    program = shutil.which("preemptd") or str(Path(sys.executable).parent / "preemptd")
    if not Path(program).exists():
        pytest.skip("the preemptd script is not installed")
    copy = tmp_path / "preemptd.service"
    copy.write_text(UNIT.read_text().replace("/usr/bin/preemptd", program))
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "--recursive-errors=no", str(copy)],
        capture_output=True, text=True, timeout=60,
    )
    if "Failed to" in result.stderr and "bus" in result.stderr.lower():
        pytest.skip(f"systemd-analyze cannot run here: {result.stderr.strip()}")
    assert (0, "") == (result.returncode, result.stderr.strip())


# --- the notify protocol -----------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A datagram socket systemd would listen on (a short path: sun_path is 108 bytes)."""
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


def received(sock: socket.socket) -> list[str]:
    messages = []
    while True:
        try:
            messages.append(sock.recv(4096).decode())
        except BlockingIOError:
            return messages


def test_notify_messages_arrive_as_datagrams(listener) -> None:
    """READY=1 with a STATUS, STATUS alone, RELOADING=1 and STOPPING=1: one datagram each."""
    path, sock = listener
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": path})
    assert notifier.ready("caches synced")
    notifier.status("leading")
    notifier.reloading()
    notifier.stopping()
    notifier.close()
    messages = received(sock)
    assert ["READY=1\nSTATUS=caches synced", "STATUS=leading"] == messages[:2]
    assert messages[2].startswith("RELOADING=1\nMONOTONIC_USEC=")
    assert "STOPPING=1" == messages[3]


def test_abstract_socket_names_are_supported() -> None:
    """NOTIFY_SOCKET=@name is a socket in Linux's abstract namespace."""
    name = f"preemptd-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.setblocking(False)
    try:
        notifier = Notifier.from_environ({"NOTIFY_SOCKET": f"@{name}"})
        assert notifier.ready()
        notifier.close()
        assert ["READY=1"] == received(sock)
    finally:
        sock.close()


def test_without_notify_socket_nothing_is_sent() -> None:
    """Outside systemd every call is a no-op that says so."""
    notifier = Notifier.from_environ({})
    assert (False, False, None) == (notifier.enabled, notifier.ready(), notifier.watchdog_interval)


def test_watchdog_usec_is_respected_only_for_this_process() -> None:
    """WATCHDOG_USEC=30 s gives a check every 15 s; WATCHDOG_PID of another process turns it off."""
    mine = Notifier.from_environ({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())})
    other = Notifier.from_environ({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"})
    assert (15.0, None) == (mine.watchdog_interval, other.watchdog_interval)


@pytest.mark.asyncio
async def test_watchdog_is_fed_by_loop_progress_only(listener) -> None:
    """WATCHDOG=1 goes out every half period while the loop beats; a loop that hangs stops it."""
    path, sock = listener
    clock = ManualClock(start=0.0)
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000"})
    heartbeat = Heartbeat(clock, window=3.0)
    feeder = asyncio.create_task(feed_watchdog(notifier, clock=clock, progressing=heartbeat.fresh), name="watchdog")
    try:
        for _ in range(10):  # a healthy loop: a beat every second for 10 s
            heartbeat.beat()
            await clock.advance(1.0)
        healthy = received(sock)
        await clock.advance(20.0)  # the loop hangs: no beat for 20 s
        hung = received(sock)
    finally:
        feeder.cancel()
        await asyncio.gather(feeder, return_exceptions=True)
        notifier.close()
    assert ["WATCHDOG=1"] * 6 == healthy  # t = 0, 2, 4, 6, 8, 10
    assert ["WATCHDOG=1"] == hung  # t = 12: the last beat (t = 9) is within the 3 s window; then silence
