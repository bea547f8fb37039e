"""run_session: open a session, run the configured actions, close it.

This is what backends (files, Kubernetes, the simulator) call once per cycle.
It sits above ``actions/`` so that the session itself never imports an action:
the session is the state of one pass, the actions are what a pass does.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence

from .actions import ACTIONS
from .actions.allocate import QUEUE_ORDER
from .decisions import Decisions, number_pending
from .session import Registry, Session
from .snapshot import Snapshot

__all__ = ["run_session"]


def run_session(
    snapshot: Snapshot,
    registry: Registry,
    *,
    actions: Sequence[str] = ("allocate", "preempt"),
    timings: dict[str, float] | None = None,
    counters: dict[str, int | str] | None = None,
    memo: bool = True,
    explain: bool = True,
) -> Decisions:
    """Open a session over ``snapshot``, run the actions, close it and return its decisions.

    ``timings``, when given, receives seconds per phase: each action by name and
    ``session`` (open to close). ``counters``, when given, receives the session's
    counters (nominations, victim searches, memo hits, ...). ``memo=False`` runs every
    victim search instead of answering repeats from memory (the plain path).
    ``explain=False`` keeps no explanation lines (``Decisions.explanations`` stays empty);
    every decision and pending message is the same.
    """
    started = time.perf_counter()
    # A session allocates many short-lived objects over a large, long-lived
    # snapshot; the cyclic collector would re-scan the snapshot again and again
    # for garbage it cannot find (nothing a session makes is cyclic). It runs
    # again, as before, once the session is over.
    collecting = gc.isenabled()
    gc.disable()
    try:
        session = Session(snapshot, registry, actions=actions, memo=memo, explain=explain)
        session.open()
        for name, action in ACTIONS.items():
            if name in session.actions:
                action(session)
        decisions = session.close()
        number_pending(decisions, snapshot.pending_by_queue, session.workload_key, session.state.get(QUEUE_ORDER))
        # Plugins keep per-session state that points back at the session; dropping
        # it here frees the session by reference counting, not a later GC pass.
        session.state.clear()
        session.unit_cache.clear()
        if session.memo is not None:
            session.memo.clear()
    finally:
        if collecting:
            gc.enable()
    if timings is not None:
        timings.update(session.timings)
        timings["session"] = time.perf_counter() - started
    if counters is not None:
        counters.update(session.counters.as_dict())
    return decisions
