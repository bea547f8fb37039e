"""``preemptd simulate`` as one package: a scenario replayed through real sessions.

From the ground up: ``entries`` (a scenario's entries, read with the framework's
located-field reader) and ``scenario`` (the file → :class:`Scenario`);
``cluster`` (the simulated cluster and its snapshot), ``metrics`` and
``invariants`` (what a run measures and what must hold after every session);
``commit`` (what decisions do to the cluster) and ``engine`` (the discrete-event
clock); ``html`` and ``report``; ``command`` (the CLI command). Only the CLI
imports this package, and only when the command runs.
"""

from __future__ import annotations

from .engine import simulate
from .scenario import load_scenario

__all__ = ["load_scenario", "simulate"]
