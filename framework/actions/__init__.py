"""What a session does (floor 7 of ``framework/``).

One action runs today: ``allocate``, the rounds of SEMANTICS §2. ``preempt`` and
``reclaim`` are switches of its nomination (``Session.in_queue_enabled``,
``Session.cross_queue_enabled``), not actions of their own: the victim search
(``preemption/``) runs inside each nomination. ``run.py`` runs the configured
actions in order.
"""

from __future__ import annotations

from collections.abc import Callable

from ..session import Session
from .allocate import run_rounds

__all__ = ["ACTIONS"]

ACTIONS: dict[str, Callable[[Session], None]] = {"allocate": run_rounds}
