"""What a nomination produces: the flavors chosen for a workload and what admitting it needs.

These records sit below the hook specifications: ``assign_flavors`` returns an
:class:`Assignment`, ``preemption_candidates`` receives a :class:`VictimSearch`, and
the victim search (``preemption/``) and flavor evaluation (``flavors.py``) fill them in.
They hold no behaviour beyond reading themselves, so every floor above may build them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from .candidates import Candidate

__all__ = [
    "FIT",
    "MODE_NAMES",
    "NOCANDIDATES",
    "NOFIT",
    "PREEMPT",
    "RECLAIM",
    "Assignment",
    "FlavorOption",
    "NodeChoice",
    "PodSetAssignment",
    "SearchResult",
    "VictimSearch",
]

# SEMANTICS §3: NoFit < NoCandidates < Preempt < Reclaim < Fit.
NOFIT, NOCANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
MODE_NAMES = ("NoFit", "NoCandidates", "Preempt", "Reclaim", "Fit")


@dataclass(slots=True)
class VictimSearch:
    """What a preemptor asks for: handed to ``preemption_candidates``."""

    preemptor: Workload
    leaf: QuotaNode
    usage: dict[FR, int]
    needed: frozenset[FR]
    # Every attempt of this search may borrow (SEMANTICS §4: ``borrowWithinCohort:
    # Never`` and the preemptor's queue not strictly below its nominal), so a candidate
    # usable only within nominal is never taken: a plugin may leave such candidates out,
    # adding to ``left_out`` how many of them the search would have been handed (those
    # that use a needed flavor-resource or, ``with_room``, hold node room; see
    # ``QueueUnits.count_between``), so that its wording stays the same.
    borrowing_only: bool = False
    with_room: bool = False
    left_out: int = 0
    # Whether the plugins' answer to this request, and to every request of the queue it
    # dominates (no stronger, asking for no less of the same flavor-resources), can only
    # lose candidates for the rest of the session, as its committed state grows (usage
    # added, node room taken, victims chosen): a plugin whose answer may gain one clears
    # it (``preemption/failures.py``, read only with the built-in plugins).
    lasting: bool = True
    # A plugin that counts what it leaves out of this request (``left_out``) from what may
    # grow later in the session (a sibling queue going above its nominal) says so: a
    # failure without candidates then does not last, as a later search may count some.
    counts_later: bool = False


@dataclass(slots=True)
class SearchResult:
    victims: list[Candidate] = field(default_factory=list)
    allow_borrowing: bool = True
    level: int = 0
    vetoed_by: frozenset[str] = frozenset()
    message: str = ""
    # What the search looked at, in plain words, for `preemptd explain`.
    lines: list[str] = field(default_factory=list)
    # Deployments: the replicas placed so far and the search that can place more.
    replicas: list[Any] = field(default_factory=list)
    resume: Any = None
    # The search memo's key this answer is kept under, when it is (``preemption/memo.py``).
    memo_key: Any = None
    # No plugin was asked about a candidate or a scenario: there were none, or the quota
    # bound proved the search hopeless in a session where nobody may refuse one.
    silent: bool = False
    # A silent failure the plugins said holds for the rest of the session
    # (``VictimSearch.lasting``).
    lasting: bool = False


@dataclass(slots=True)
class NodeChoice:
    """One replica's node and victims, and the free room it takes there besides theirs."""

    node: str
    victims: list[Candidate]
    from_free: dict[str, int]


@dataclass(slots=True)
class FlavorOption:
    """What one flavor offers one podSet's resource group."""

    flavor: str
    mode: int
    level: int = 0
    needed: frozenset[FR] = frozenset()
    usage: dict[FR, int] = field(default_factory=dict)
    message: str = ""
    victims: list[Candidate] = field(default_factory=list)
    vetoed_by: frozenset[str] = frozenset()
    search: SearchResult | None = None
    # With a search: whether the nodes of the flavor lacked room for the pods when it was
    # judged (its ``needed`` then holds every flavor-resource of ``usage``).
    node_short: bool = False
    # Set when the victim search this flavor needs was left out (``evaluate_flavor(...,
    # defer=True)``): what ``flavors.search_flavor`` needs to run it. ``mode`` and ``level``
    # are then the best the search could give.
    unsearched: Any = None

    def describe(self) -> str:
        borrow = f", borrowing level {self.level}" if self.level else ""
        text = f"flavor {self.flavor}: {MODE_NAMES[self.mode]}{borrow}"
        return f"{text} ({self.message})" if self.message else text


@dataclass(slots=True)
class PodSetAssignment:
    name: str
    count: int
    flavors: dict[str, str]
    usage: dict[FR, int]
    spec: PodSet


@dataclass(slots=True)
class Assignment:
    """A workload's chosen flavors, and what admitting it needs."""

    workload: Workload
    leaf: QuotaNode
    pod_sets: list[PodSetAssignment] = field(default_factory=list)
    usage: dict[FR, int] = field(default_factory=dict)
    mode: int = FIT
    level: int = 0
    needed: frozenset[FR] = frozenset()
    message: str = ""
    victims: list[Candidate] = field(default_factory=list)
    allow_borrowing: bool = True
    vetoed_by: frozenset[str] = frozenset()
    node_short: bool = False  # the quota fits or not, the nodes lack room right now
    # Deployments (SEMANTICS §6): why it may not grow now; the committed total an
    # admission raises it to; the node and victims of each replica it preempts for.
    blocked: str = ""
    committed_total: dict[str, int] = field(default_factory=dict)
    replicas: list[NodeChoice] = field(default_factory=list)
    search: SearchResult | None = None  # the victim search behind ``victims``
    # podSet -> resource -> index of the last flavor examined (-1: whole list scanned).
    flavor_scan: dict[str, dict[str, int]] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)

    @property
    def borrowing(self) -> bool:
        return self.level > 0

    @property
    def needs_preemption(self) -> bool:
        return self.mode in (NOCANDIDATES, PREEMPT, RECLAIM)

    def node_targets(self) -> list[tuple[PodSet, int, str]]:
        """(podSet, count, flavor) of every podSet placed on a single flavor."""
        out = []
        for ps in self.pod_sets:
            flavors = set(ps.flavors.values())
            if len(flavors) == 1:
                out.append((ps.spec, ps.count, next(iter(flavors))))
        return out
