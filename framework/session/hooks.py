"""The plugin API: one hook specification per extension point.

Every plugin, built-in or third-party, is a module or object carrying
``@hookimpl`` functions, found through the entry-point group
``preemptd.plugins`` and switched on or off in TOML.

Hooks that sit on a hot path (``is_preemptible``, the scenario filters, the
order keys) are not called through pluggy once per element: the session takes
each plugin's implementation once at ``session_open`` and calls it directly,
wrapping it so that a raising plugin fails safe instead of stopping the
session (see :mod:`.registry`). Every answer is type-checked where the answers
are combined; a wrong one is the plugin's failure, as a raise is. A plugin must
never mutate the snapshot or the workloads it is handed; per-session state
belongs on the plugin's own objects or in ``session.state[plugin_name]``. The
session's attributes cannot be reassigned.

The search memo and ``MEMO_SAFE``. A session remembers each victim search it runs
and answers an identical later one from memory instead of searching again: same
preemptor (key, queue, priority, creation time, pod counts), same leaf, same
usage, needed flavor-resources and node targets, and the same epoch of the
preemptor's queue tree (and of node room, when nodes are searched) — see
``preemption/memo.py``. That is exact only if every plugin consulted during a
search answers as a function of those inputs and of the session's state. A plugin
declares it with a module (or plugin object) attribute ``MEMO_SAFE = True``,
promising that its answers to the hooks in :data:`SEARCH_HOOKS` depend only on
the session's committed state (accounting, node room, the victims chosen so far,
its own per-session tables) and on the preemptor's queue, priority, creation
time and shape, and that a repeated call changes nothing a later answer reads
except its own counters. Vetoes a remembered search counted are counted again on
each answer from memory, so ``Registry.vetoes`` is the same either way.
``MEMO_SAFE`` also promises that answers are monotone in the preemptor's strength, which
lets a failed search answer the searches it dominates (``preemption/memo.py``): in the
same state (the same commits of the preemptor's queue tree, the same node room, the same
victims chosen in that tree; victims chosen in other trees must not change an answer
for this one), for a preemptor of the same queue that is no stronger (a lower priority, or
the same priority and created no earlier) and asks for no less of each flavor-resource,
with the same ones needed, a plugin offers no candidate it did not offer the stronger
one, nor with more permission (one it offered only within nominal is not offered while
borrowing), gives it no scenario filter if it gave the stronger one none, and adds no
note or explanation in its search if it added none in the stronger one's. Vetoes need
no such promise: a failed search answers others only when no plugin may refuse a
candidate in the session (see ``is_preemptible``), because which candidates a walk asks
about depends on the order and classes of the candidates, which change with the
request. The built-in plugins keep it: ``priority`` offers the workloads below the
preemptor's priority, ``cohort-reclaim`` bounds by priority too and its classes only
tighten as the request grows, the scenario filters of ``min-runtime`` and ``gpu-victims``
depend on the session alone.
The same promise lets a victim walk keep the victims it has accepted waiting before it
takes them from the quota and the nodes, and walk a search its quota bound proves
hopeless without fit tests (``preemption/walk.py``): a plugin's answer during a search
must not depend on the walk's tentative state (usage and node room while candidates are
being tried), only on what was committed before the search began and on the victims
handed to it.
If an enabled plugin implements any hook of :data:`SEARCH_HOOKS` without
declaring ``MEMO_SAFE = True``, the memo is off for the whole session and
``preemptd cycle --timings`` says which plugin turned it off. A new hook that a
victim search consults must be added to :data:`SEARCH_HOOKS`, and its
documentation must say what ``MEMO_SAFE`` promises about it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

from ..model import FR, Workload
from ..quota import QuotaNode
from .assignment import Assignment, VictimSearch
from .candidates import Candidate

if TYPE_CHECKING:
    # The one reference up inside the session floor: hooks name the session and
    # the scenario their implementations receive (as pytest's hookspec does).
    from .session import Scenario, Session

__all__ = ["MEMO_SAFE_ATTRIBUTE", "PROJECT", "SEARCH_HOOKS", "hookimpl", "hookspec"]

PROJECT = "preemptd"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# The hooks a victim search consults, directly or through the statement's events:
# an implementation of any of them must come from a plugin declaring MEMO_SAFE for
# the session to remember searches (see the module documentation).
SEARCH_HOOKS = (
    "is_preemptible",
    "get_accumulated_scenario_filters",
    "preemption_candidates",
    "victim_order",
    "on_admit",
    "on_evict",
    "placement_score",
    "victim_strategy",
)
MEMO_SAFE_ATTRIBUTE = "MEMO_SAFE"

ScenarioFilter = Callable[["Scenario"], bool]
OrderKey = Callable[["Workload"], Sequence[Any]]
VictimKey = Callable[["Candidate"], Sequence[Any]]
EntryPicker = Callable[[Sequence[Assignment]], int]
SearchAllowed = Callable[[QuotaNode, FR, int], bool]


class VictimWalk(Protocol):
    """What a :data:`VictimStrategy` is handed: one preemptor's search, on the session.

    The walk holds the mechanism; the strategy decides which candidate to take next.
    ``request`` is the :class:`VictimSearch` (preemptor, leaf, usage, needed). While
    the strategy runs, the taken victims are virtually evicted from
    ``session.accounting`` (so every share or usage the strategy reads already has
    them removed); the walk rolls all of it back when the strategy returns.
    """

    session: Session
    request: VictimSearch
    victims: list[Candidate]
    lines: list[str]

    def candidates(self) -> list[Candidate]:
        """Every plugin's ``preemption_candidates`` for this search, using a needed
        flavor-resource, in the session's victim order (§4)."""

    def order(self, candidate: Candidate) -> Sequence[Any]:
        """The session's victim order key for one candidate (already evicted first)."""

    def preemptible(self, candidate: Candidate) -> bool:
        """``is_preemptible`` over every plugin, remembered for the search; a veto is
        recorded (it decides the ``MinRuntime`` pending reason)."""

    def take(self, candidate: Candidate, reason: str | None = None) -> bool:
        """Virtually evict ``candidate`` (as a victim of ``reason``, its own by
        default) unless it is not preemptible, is the rest of an elastic workload
        whose single pods are not all taken yet, or a scenario filter rejects the
        victims with it; ``False`` leaves everything as it was."""

    def fits(self) -> bool:
        """Whether the request fits Available now (borrowing allowed), and its pods
        the nodes when node room is what is short."""


VictimStrategy = Callable[[VictimWalk], bool]


@hookspec
def plugin_config_schema() -> type | None:
    """Return the dataclass that describes this plugin's TOML table.

    Called once per plugin when the configuration is loaded, before any
    session. The table ``[plugins.<name>]`` (minus ``enabled``) is passed to
    the dataclass as keyword arguments: an unknown key or a value of the wrong
    type is a configuration error naming the key, and a ``ValueError`` raised
    by the dataclass's ``__post_init__`` is reported with the plugin's name.
    The instance is later available as ``session.plugin_config(name)``.
    Return ``None`` (or do not implement the hook) for a plugin without
    settings. Must not perform I/O.
    """


@hookspec
def session_open(session: Session) -> None:
    """Called on every enabled plugin when a session opens, in plugin order.

    The place to read configuration, precompute per-session tables and
    register fast callables with the session. All implementations are called.
    A plugin that raises here is recorded as failed for the session and its
    other hooks are still consulted.
    """


@hookspec
def session_close(session: Session) -> None:
    """Called on every enabled plugin after the last action, before the
    decisions are returned. All implementations are called; the decisions can
    be read from ``session.decisions`` but must not be changed."""


@hookspec
def is_preemptible(session: Session, action: str, preemptor: Workload, preemptee: Candidate) -> bool | None:
    """May ``preemptee`` be taken as a victim for ``preemptor``?

    ``action`` is ``"preempt"`` when both are in the same leaf queue and
    ``"reclaim"`` otherwise. Combined as AND over plugins; a plugin that does
    not answer (returns ``None``) does not restrict. Called once per candidate
    per search; a plugin that raises, or answers anything but a bool or ``None``,
    counts as ``False`` (not preemptible) and as failed.

    A plugin that knows in ``session_open`` that it will allow every candidate of the
    session (``min-runtime`` with no window anywhere) calls
    ``session.never_vetoes(its_name)``: it is then not asked at all, and when no plugin
    may refuse a candidate or a scenario, a search the quota bound proves hopeless is not
    walked (the walk would only have told the plugins about its candidates). A plugin
    that may refuse only recently admitted candidates (``min-runtime``: those admitted
    inside its longest window) calls ``session.never_vetoes(its_name,
    unless_admitted_after=t)``: it is still asked, and when every plugin asked has said so,
    a hopeless walk without scenario filters ends after the last candidate admitted after
    the earliest such ``t`` (:attr:`Session.veto_horizon`).
    """


@hookspec
def get_accumulated_scenario_filters(session: Session, action: str, preemptor: Workload) -> list[ScenarioFilter] | None:
    """Filters over the victims accumulated so far in one victim search.

    Called once per preemptor search; the returned lists are concatenated.
    Each filter receives a :class:`Scenario` and returns whether it is
    acceptable; a scenario is valid only if every filter accepts it. A filter
    that raises rejects the scenario.

    ``action`` is always ``"preempt"``: one search mixes victims of the
    preemptor's own queue and of other queues of its cohort, so a filter judges
    each victim by its own leaf (``candidate.leaf is preemptor's leaf`` for an
    in-queue victim), as ``min-runtime`` does. ``Scenario.action`` is the same.
    """


@hookspec
def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[Candidate] | None:
    """Candidates a preemptor may take victims from.

    ``assignment`` is the :class:`VictimSearch` of this search (the argument keeps
    its historical name): the preemptor's leaf, the usage it asks for and the
    flavor-resources it lacks (``needed``).

    Called once per victim search; lists are concatenated in plugin order
    (duplicates by key are dropped, the first one kept). A plugin that raises
    contributes nothing. Build candidates with ``candidate_units``; for a Deployment
    preemptor's node-by-node search it may return one ``DeferredPods`` for a
    Deployment's pods, which the search expands node by node: return it as it is.
    The built-in plugins answer with an ``Offer``, a list that also names the runs of
    the candidate index it was made of, so that the framework filters and bounds it run
    by run; any other list is read candidate by candidate, with the same result.
    The framework only reads an answer (it never changes or keeps the list), so a
    plugin may hand the same list to several searches.
    """


@hookspec
def workload_order(session: Session) -> OrderKey | None:
    """A sort key for pending workloads, called once per session.

    The session composes the keys of all plugins, in plugin order, into one
    tuple: the first plugin whose key differs decides ("first decisive wins"),
    and the tie-break key ``(uid, namespace, name)`` ends every tuple. The key
    is computed once per workload, never per comparison. A key every value of
    which holds the same number of items may say so with the attribute
    ``fixed_length = n`` (a value of another length then counts as a key that
    raised): when every key says so, the session's key holds the plugins' items
    unnested, in the same order, with fewer steps per comparison.
    """


@hookspec
def victim_order(session: Session, preemptor: Workload) -> VictimKey | None:
    """A sort key for victim candidates of one preemptor search.

    Composed like :func:`workload_order`; placed after the framework's own
    "already evicted first" part and the class of the candidate. Called once
    per search. A key whose value does not depend on the preemptor may say so
    with the attribute ``preemptor_independent = True``: when every key says
    so, the session keeps each candidate's composed key for the rest of the
    session instead of computing it again in every search.
    """


@hookspec(firstresult=True)
def assign_flavors(session: Session, workload: Workload) -> Assignment | None:
    """Choose flavors for a pending workload's podSets.

    The first plugin that returns an :class:`Assignment` wins; with no answer
    the framework takes, per podSet and resource group, the first flavor that
    fits. Called once per nomination. A plugin that raises, or returns anything
    but an ``Assignment`` or ``None``, is treated as no answer (and counted as
    failed).

    The built-in ``flavor-fungibility`` plugin comes before every third-party
    plugin and answers for every workload: while it is enabled, a third-party
    ``assign_flavors`` is never called (``preemptd plugins`` says so). Disable
    ``flavor-fungibility`` to choose flavors in a plugin of your own.
    """


@hookspec
def on_admit(session: Session, workload: Workload, count: int | None) -> None:
    """A statement admitted (or reserved quota for) ``workload``. All called.

    Only plugins that implement it pay for it: the session checks once per
    session whether anybody listens.
    """


@hookspec
def on_evict(session: Session, workload: Workload, count: int | None) -> None:
    """A statement evicted ``workload`` (or ``count`` of its pods). All called."""


@hookspec
def placement_score(session: Session, preemptor: Workload) -> Callable[[Candidate], float] | None:
    """The preemptor's score for taking each victim's place (lower = taken first).

    Called once per victim search of a Deployment preemptor; the ``gpu-victims``
    plugin adds the returned scores up and ranks pods by them after their
    lifecycle class and priority (SEMANTICS §6). Without an answer every
    placement scores the same. A scorer that raises scores 0.
    """


@hookspec(firstresult=True)
def round_order(session: Session) -> EntryPicker | None:
    """Who goes next among a round's entries (SEMANTICS §2.3; §7.2 for fair sharing).

    Called once per session, after ``session_open``. The first plugin that answers
    wins; with no answer the framework sorts each round's entries once, by borrowing
    level, then the workload order (``workload_order``), then the tie-break key.

    The answer is a callable ``picker(entries) -> index``. Before each pick the
    framework hands it the :class:`Assignment` of every entry of the round not
    processed yet (in a stable order: the classic one) and processes the entry at
    the returned index; it is called again for the next pick, so it sees the
    accounting as the entries processed before changed it (``session.accounting``:
    admitted usage, a preemptor's reserved usage, a ``NoCandidates`` reservation,
    victims still holding their quota). A ``NoFit`` entry has ``mode == NOFIT``
    and no usage. A picker that raises, or returns anything but an index into
    ``entries``, is counted as failed and the classic order decides the rest of
    the session. Called once per pick: keep it proportional to the entries.
    """


@hookspec
def may_search_victims(session: Session) -> SearchAllowed | None:
    """Whether a flavor whose request does not fit Available may ask for victims (§3).

    Called once per session, after ``session_open``. The answer is a callable
    ``allowed(leaf, fr, request) -> bool``; it is asked only when the classic rule
    says no (the request is above the queue's nominal, it fits no ancestor below
    the root and ``borrowWithinCohort`` is ``Never``), so answers combine as OR with
    the classic rule and every plugin's answer. Without an answer such a flavor is
    ``NoFit``. A callable that raises counts as ``False`` and as failed.
    """


@hookspec(firstresult=True)
def victim_strategy(session: Session) -> VictimStrategy | None:
    """The victim search's candidate lists and target choice (SEMANTICS §4; §7.4).

    Called once per session, after ``session_open``; the first answer wins. Without
    one the framework runs §4: every plugin's ``preemption_candidates`` in victim
    order, the attempt plan (with / without borrowing), fill-back.

    The answer is a callable ``strategy(walk) -> bool`` run once per victim search
    of every preemptor but a Deployment's node-by-node one, with a
    :class:`VictimWalk`. It collects its candidate lists (``walk.candidates()`` or
    its own, built with ``candidate_units``), decides the order and the targets,
    and takes victims with ``walk.take`` until ``walk.fits()``; it returns whether
    the request fits. On ``True`` the framework fills back (reverse from the
    second-to-last victim, borrowing allowed) and the victims are the answer, each
    with the reason it was taken as; ``walk.lines`` is added to the preemptor's
    explanation. A strategy that raises is counted as failed and its search finds
    no victims (``PreemptionNoCandidates``): no preemption on a broken policy.

    The strategy runs inside a victim search, so it is one of :data:`SEARCH_HOOKS`:
    ``MEMO_SAFE = True`` on its plugin promises that what it takes depends only on
    the walk's request, the session's committed state (the accounting of the
    preemptor's queue tree, node room, the victims chosen so far) and its own
    per-session tables — never on how many times it ran. Without that declaration
    the session runs with the search memo off. ``round_order`` and
    ``may_search_victims`` are not consulted inside a search and need no declaration.
    """
