"""One pass over one snapshot, and the plugin API it calls (floor 4 of ``framework/``).

Inside this package the files import each other at runtime in one direction,
``candidates → statement → assignment → hooks → registry → session``; the only
reference back up is ``hooks.py`` naming ``Session`` and ``Scenario`` in
annotations (type-only, as pytest's hookspec names its ``Config``).
"""

from __future__ import annotations

from .assignment import (
    FIT,
    MODE_NAMES,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorOption,
    NodeChoice,
    PodSetAssignment,
    SearchResult,
    VictimSearch,
)
from .candidates import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    Candidate,
    DeferredPods,
    HeldRoom,
    NodeRoom,
    Offer,
    Runs,
    Source,
    Taken,
    sort_candidates,
)
from .hooks import EntryPicker, ScenarioFilter, SearchAllowed, VictimStrategy, VictimWalk, hookimpl
from .registry import ANSWERS, Impl, PluginError, Policy, Registry, bad_answer
from .session import (
    KNOWN_ACTIONS,
    Scenario,
    ScenarioFilters,
    Session,
    collect_candidates,
    collect_runs,
    order_for,
    with_vetoes,
)
from .statement import Statement

__all__ = [
    "ANSWERS",
    "CLASS_HIERARCHICAL",
    "CLASS_OTHER_QUEUE",
    "CLASS_SAME_QUEUE",
    "FIT",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_QUEUE",
    "KNOWN_ACTIONS",
    "MODE_NAMES",
    "NOCANDIDATES",
    "NOFIT",
    "PREEMPT",
    "RECLAIM",
    "Assignment",
    "Candidate",
    "DeferredPods",
    "EntryPicker",
    "FlavorOption",
    "HeldRoom",
    "Impl",
    "NodeChoice",
    "NodeRoom",
    "Offer",
    "PluginError",
    "PodSetAssignment",
    "Policy",
    "Registry",
    "Runs",
    "Scenario",
    "ScenarioFilter",
    "ScenarioFilters",
    "SearchAllowed",
    "SearchResult",
    "Session",
    "Source",
    "Statement",
    "Taken",
    "VictimSearch",
    "VictimStrategy",
    "VictimWalk",
    "bad_answer",
    "collect_candidates",
    "collect_runs",
    "hookimpl",
    "order_for",
    "sort_candidates",
    "with_vetoes",
]
