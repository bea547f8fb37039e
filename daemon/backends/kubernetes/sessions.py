"""The thread a backend's session runs in, off the event loop.

A session is CPU-bound and may run long; the event loop must keep renewing the lease,
serving the probes and reading the watches meanwhile, so each session runs in a thread
of its own (:meth:`SessionThread.run`) and the cycle awaits its result.

When the loop abandons a cycle (its deadline, a lost lease, shutdown) while the session
runs, the thread cannot be stopped: it runs to its end, and its result is discarded
(logged, counted in :attr:`SessionThread.discarded`, reported to :attr:`on_discard`),
never used. Only one session thread exists at a time: a cycle first awaits
:meth:`previous` — the abandoned one's end. The thread is a daemon thread, so a session
that never ends cannot keep the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["RunsSessions", "SessionThread"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class SessionThread:
    """Runs one session at a time in a thread; see the module docstring."""

    def __init__(self, name: str, what: str = "session") -> None:
        self.name = name  # the thread's name
        self.what = what  # how the log names it ("session", "shadow session")
        self.discarded = 0  # sessions that ended after their cycle was abandoned
        self.on_discard: Callable[[], None] = lambda: None  # hears of each (metrics)
        self._ended: asyncio.Future[None] | None = None
        self._began = 0.0  # time.monotonic() when the last session thread started

    async def previous(self) -> None:
        """Wait for an abandoned session still running: never two session threads at once."""
        ended = self._ended
        if ended is None or ended.done():
            return
        log.warning("the previous %s was abandoned and is still running; waiting for it to end", self.what)
        await asyncio.shield(ended)

    def age(self) -> float:
        """Seconds the session thread under way has been running (0 when none runs)."""
        ended = self._ended
        if ended is None or ended.done():
            return 0.0
        return time.monotonic() - self._began

    def run(self, work: Callable[[], T]) -> asyncio.Future[T]:
        """Run ``work`` in a session thread; its result, unless the awaiting cycle was abandoned.

        An exception of ``work`` is the future's; a ``BaseException`` that is not an
        ``Exception`` (``sys.exit`` in a hook) fails this session, not the daemon.
        """
        loop = asyncio.get_running_loop()
        result: asyncio.Future[T] = loop.create_future()
        ended: asyncio.Future[None] = loop.create_future()
        self._ended = ended
        began = self._began = time.monotonic()

        def finish(outcome: tuple[T] | BaseException) -> None:
            ended.set_result(None)
            if result.cancelled():
                self.discarded += 1
                self.on_discard()
                log.warning("an abandoned %s ended after %.1fs; its decisions are discarded",
                            self.what, time.monotonic() - began)
            elif isinstance(outcome, BaseException):
                result.set_exception(outcome)
            else:
                result.set_result(outcome[0])

        def target() -> None:
            outcome: tuple[T] | BaseException
            try:
                outcome = (work(),)
            except Exception as exc:
                outcome = exc
            except BaseException as exc:  # e.g. sys.exit in a hook: this session failed, not the daemon
                outcome = RuntimeError(f"the session raised {type(exc).__name__}: {exc}")
            with contextlib.suppress(RuntimeError):  # the loop is closed: the process is ending
                loop.call_soon_threadsafe(finish, outcome)

        threading.Thread(target=target, name=self.name, daemon=True).start()
        return result


class RunsSessions:
    """What the service reads of a backend's session thread, ``self.sessions``: the
    live backend and the Kueue shadow both run their sessions through one."""

    sessions: SessionThread

    @property
    def sessions_discarded(self) -> int:
        """Sessions that ended after their cycle was abandoned (see the module)."""
        return self.sessions.discarded

    @property
    def on_discard(self) -> Callable[[], None]:
        return self.sessions.on_discard

    @on_discard.setter
    def on_discard(self, hear: Callable[[], None]) -> None:
        self.sessions.on_discard = hear

    def session_age(self) -> float:
        """Seconds the session thread under way has been running (0 when none runs)."""
        return self.sessions.age()
