"""The systemd notify protocol, spoken directly (no python-systemd).

systemd passes ``NOTIFY_SOCKET``: the path of a datagram socket, or an
abstract socket name written with a leading ``@``. Each message is one
datagram of newline-separated ``KEY=VALUE`` lines (sd_notify(3)). The daemon
sends

* ``READY=1`` once its caches are synced (``Type=notify`` waits for it),
* ``STATUS=…`` as it goes (shown by ``systemctl status``),
* ``WATCHDOG=1`` while the scheduling loop makes progress — not from a timer
  of its own: a loop that hangs stops feeding the watchdog and systemd
  restarts the service after ``WatchdogSec``,
* ``RELOADING=1`` then ``READY=1`` around a SIGHUP reload,
* ``STOPPING=1`` when shutdown begins.

``WATCHDOG_USEC`` says how often systemd expects a ping; the daemon checks
twice per period, as sd_watchdog_enabled(3) advises. ``WATCHDOG_PID``, when
set, names the process the watchdog is for: another process ignores it.
Outside systemd (no ``NOTIFY_SOCKET``) every call does nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Mapping

from .clock import Clock

__all__ = ["Notifier", "feed_watchdog"]

log = logging.getLogger("preemptd.notify")


class Notifier:
    """Sends notify messages to systemd (see the module docstring)."""

    def __init__(self, address: str | None = None, *, watchdog_usec: int | None = None) -> None:
        self.address = address or None
        self.watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self.sent: list[str] = []  # every message sent, for `systemctl status`-like introspection in tests
        self._socket: socket.socket | None = None
        self._warned = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        environ = os.environ if environ is None else environ
        watchdog: int | None = None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        if usec.isdigit() and (not pid or pid == str(os.getpid())):
            watchdog = int(usec)
        return cls(environ.get("NOTIFY_SOCKET"), watchdog_usec=watchdog)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between two watchdog checks (half of ``WATCHDOG_USEC``), None if off."""
        return None if self.watchdog_usec is None else self.watchdog_usec / 2_000_000

    def _target(self) -> str | bytes:
        assert self.address is not None
        if self.address.startswith("@"):
            return b"\0" + self.address[1:].encode()  # the abstract namespace (Linux)
        return self.address

    def send(self, *fields: str) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; False (and one warning) if it cannot be sent."""
        if self.address is None:
            return False
        message = "\n".join(fields)
        if not self.address.startswith(("/", "@")):
            self._warn(f"unsupported NOTIFY_SOCKET {self.address!r}")
            return False
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._socket.sendto(message.encode(), self._target())
        except OSError as exc:
            self._warn(f"cannot notify systemd at {self.address}: {exc}")
            return False
        self.sent.append(message)
        return True

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(message)

    def ready(self, status: str | None = None) -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def reloading(self) -> bool:
        # MONOTONIC_USEC: systemd ≥ 253 matches the reload to this message (Type=notify-reload).
        return self.send("RELOADING=1", f"MONOTONIC_USEC={time.monotonic_ns() // 1000}")

    def stopping(self, status: str | None = None) -> bool:
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


async def feed_watchdog(notifier: Notifier, *, clock: Clock, progressing: Callable[[], bool]) -> None:
    """Ping the watchdog every half period while ``progressing()`` says the loop moves; until cancelled."""
    interval = notifier.watchdog_interval
    if interval is None:
        return
    stalled = False
    while True:
        if progressing():
            notifier.watchdog()
            stalled = False
        elif not stalled:
            stalled = True
            log.error("the scheduling loop makes no progress: the systemd watchdog is no longer fed")
        await clock.sleep(interval)
