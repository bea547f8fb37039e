"""The victim search for one preemptor (SEMANTICS §4, §6): mechanism only (floor 5).

Inside the package, from the ground up: ``units`` (what a workload can give),
``unitindex`` (a queue's units by priority),
``nodeindex`` and ``nodechoice`` (one replica's node and victims), ``replicas``
(a Deployment's replicas one at a time), ``walk`` and ``strategy`` (taking candidates
in order, or in a plugin's), ``search`` (a minimal set of whole and elastic units) and
``victims`` (which of the two a preemptor needs). Nothing
here imports ``flavors`` or an action: flavor evaluation calls the search, never
the other way round (Kueue's ``preemptionOracle`` keeps the same direction).
"""

from __future__ import annotations

from ..session.candidates import UNIT_SOURCES
from .memo import asked_again
from .unitindex import QueueUnits, queue_takes, queue_units, takes_by_queue
from .units import candidate_units, pod_unit
from .victims import find_victims

# The candidate index's lists hold only units the framework made: an answer of their
# runs alone is not checked candidate by candidate (``session.registry``).
UNIT_SOURCES.add(QueueUnits)

__all__ = ["QueueUnits", "asked_again", "candidate_units", "find_victims", "pod_unit", "queue_takes", "queue_units", "takes_by_queue"]
