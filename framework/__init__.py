"""The pure scheduling core: no I/O, no asyncio, no Kubernetes client.

This module is the plugin API: everything a plugin — built-in or third-party — may
use, listed in ``__all__``. Plugins import only from here (``from preemptd.framework
import Session, hookimpl``); the modules behind it may move between releases.

Floors inside the package, from the ground up (a file imports only lower floors):

1. records: ``quantity``, ``model``, ``pods``, ``decisions``
2. ``objects/``: Kubernetes-style objects → model, with located errors
3. ``quota``, ``nodes``, ``snapshot``
4. ``session/``: one pass over one snapshot, the hooks and the plugin registry
5. ``preemption/``: the victim search for one preemptor
6. ``flavors``: flavor evaluation and the default assigner
7. ``actions/``: what a session does (the rounds)
8. ``run``: open a session, run the actions, close it
9. ``testing``: builders and ``open_session`` for tests and plugin authors

``tests/test_quality.py`` checks the floors, imports inside functions and under
``TYPE_CHECKING`` included.
"""

from __future__ import annotations

from .decisions import QueueShare
from .flavors import evaluate_flavor, finish_assignment, search_flavor
from .model import (
    FR,
    Flavor,
    FlavorFungibility,
    Pod,
    PodSet,
    PreemptionPolicy,
    QueueSpec,
    ResourceGroup,
    Workload,
)
from .pods import NORMAL, Descending
from .preemption import QueueUnits, candidate_units, queue_takes, queue_units, takes_by_queue
from .quantity import (
    QuantityError,
    format_duration,
    format_quantity,
    format_timestamp,
    parse_duration,
    parse_quantity,
    parse_timestamp,
)
from .quota import Accounting, QuotaNode, fr_of
from .session import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    CLASS_SAME_QUEUE,
    FIT,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_QUEUE,
    MODE_NAMES,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    Candidate,
    DeferredPods,
    FlavorOption,
    Offer,
    PodSetAssignment,
    Scenario,
    ScenarioFilter,
    Session,
    Source,
    VictimSearch,
    VictimWalk,
    bad_answer,
    hookimpl,
)

__all__ = [
    "CLASS_HIERARCHICAL",
    "CLASS_OTHER_QUEUE",
    "CLASS_SAME_QUEUE",
    "FIT",
    "FR",
    "IN_COHORT_FAIR_SHARING",
    "IN_COHORT_RECLAIM",
    "IN_COHORT_RECLAIM_WHILE_BORROWING",
    "IN_QUEUE",
    "MODE_NAMES",
    "NOCANDIDATES",
    "NOFIT",
    "NORMAL",
    "PREEMPT",
    "RECLAIM",
    "Accounting",
    "Assignment",
    "Candidate",
    "DeferredPods",
    "Descending",
    "Flavor",
    "FlavorFungibility",
    "FlavorOption",
    "Offer",
    "Pod",
    "PodSet",
    "PodSetAssignment",
    "PreemptionPolicy",
    "QuantityError",
    "QueueShare",
    "QueueSpec",
    "QueueUnits",
    "QuotaNode",
    "ResourceGroup",
    "Scenario",
    "ScenarioFilter",
    "Session",
    "Source",
    "VictimSearch",
    "VictimWalk",
    "Workload",
    "bad_answer",
    "candidate_units",
    "evaluate_flavor",
    "finish_assignment",
    "format_duration",
    "format_quantity",
    "format_timestamp",
    "fr_of",
    "hookimpl",
    "parse_duration",
    "parse_quantity",
    "parse_timestamp",
    "queue_takes",
    "queue_units",
    "search_flavor",
    "takes_by_queue",
]
