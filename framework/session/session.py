"""A session: one pass over one snapshot, and every plugin answer combined once.

The session owns everything mutable of a pass: the quota accounting, the node
room, the statement that changes both, the decisions and the victims chosen
so far. Plugins see it in every hook. At open it takes each plugin's hot-path
implementations once and composes them into plain callables (order keys,
``is_preemptible``), so the loops that run per workload or per candidate
never go through pluggy.

Actions (SEMANTICS §2): ``allocate`` runs the rounds; ``preempt`` lets a head
that does not fit look for victims (in its own queue and across the cohort);
a deployment may list ``reclaim`` (cross-queue only) and ``preempt``
separately, in which case ``preempt`` means in-queue only. The victim search
is part of each round's nominations, so its time is reported under the name
of the preemption action, and the rest of the rounds under ``allocate``. The
session only holds the switches (``KNOWN_ACTIONS``); ``run.py`` runs the actions.

Every place where the answers of several plugins meet is here: the workload
order, the victim order (:func:`order_for`), ``is_preemptible``, ``assign_flavors``, the scenario
filters (:meth:`Session.scenario_filters`, :meth:`Session.scenario_rejects`)
with the "(vetoed by …)" wording (:func:`with_vetoes`),
and the candidates of a victim search (:func:`collect_candidates`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..decisions import Decisions, Pending
from ..model import PodSet, Workload
from ..quota import Accounting, QuotaNode
from ..snapshot import Snapshot
from .assignment import Assignment, VictimSearch
from .candidates import Candidate, Runs, Taken, base_order, using
from .counters import Counters
from .hooks import MEMO_SAFE_ATTRIBUTE
from .orderkeys import composed_key, default_key, keys_of
from .registry import Impl, Policy, Registry, bad_answer
from .statement import Statement

__all__ = [
    "KNOWN_ACTIONS",
    "Scenario",
    "ScenarioFilters",
    "Session",
    "collect_candidates",
    "collect_runs",
    "order_for",
    "with_vetoes",
]

ScenarioFilters = list[tuple[str, Callable[["Scenario"], bool]]]
"""The scenario filters of one search, each with the name of its plugin."""

KNOWN_ACTIONS = ("allocate", "preempt", "reclaim")


# What may still be assigned once a session is built: the framework flips it around
# each candidate collection. Everything else is fixed for the session's life, so a
# plugin that assigns (``session.state = None``) fails in its own hook instead of
# breaking the hooks and actions after it.
_ASSIGNABLE = frozenset({"defer_pods"})


class Session:
    __slots__ = (
        "_built", "_notes", "_order_key", "_preemptible", "_quiet", "_veto_reasons", "_workload_keys",
        "accounting", "actions", "counters", "cross_queue_enabled", "decisions", "defer_pods",
        "explaining", "in_queue_enabled", "memo", "notes_added", "now", "placements", "policy",
        "registry", "relied", "snapshot", "state", "statement", "taken", "timings", "unit_cache",
        "veto_horizon", "workload_key",
    )

    def __init__(
        self,
        snapshot: Snapshot,
        registry: Registry,
        *,
        actions: Sequence[str] = ("allocate", "preempt"),
        memo: bool = True,
        explain: bool = True,
    ) -> None:
        object.__setattr__(self, "_built", False)  # read by __setattr__ without a miss
        unknown = [a for a in actions if a not in KNOWN_ACTIONS]
        if unknown:
            raise ValueError(f"unknown action(s) {unknown}; known: {list(KNOWN_ACTIONS)}")
        self.snapshot = snapshot
        self.registry = registry
        self.actions = tuple(actions)
        self.now = snapshot.now
        self.accounting: Accounting = snapshot.accounting.copy()
        self.placements = snapshot.placements.copy() if snapshot.placements is not None else None
        listeners = registry.has("on_admit") or registry.has("on_evict")
        self.statement = Statement(
            self.accounting,
            self.placements,
            on_admit=self._notify_admit if listeners else None,
            on_evict=self._notify_evict if listeners else None,
        )
        self.decisions = Decisions(now=snapshot.now)
        # Whether explanation lines are kept: plugins may skip building them when not.
        self.explaining = explain
        self.state: dict[str, Any] = {}
        self.timings: dict[str, float] = {}
        self.counters = Counters()
        if not memo:
            self.counters.memo_off = "switched off"
        # Victim searches already run, by their inputs (preemption/memo.py); ``None``: off.
        self.memo: dict[tuple[Any, ...], Any] | None = {} if memo else None
        self.taken: dict[str, Taken] = {}
        # Per workload key, its units by class (``preemption/kept.py``'s ``UnitClasses``).
        self.unit_cache: dict[str, list[Any]] = {}
        # Units (``Candidate.unit``) some preemptor of this session relies on, and the
        # victims themselves.
        self.relied: dict[tuple[object, ...], Candidate] = {}
        # Set while a node-by-node search collects candidates: a Deployment's pods then
        # come as one DeferredPods unit, built node by node as the search visits nodes.
        self.defer_pods = False
        split = "reclaim" in self.actions
        self.in_queue_enabled = "preempt" in self.actions
        self.cross_queue_enabled = split or ("preempt" in self.actions)
        self._workload_keys: dict[str, tuple[Any, ...]] = {}
        self._preemptible: list[tuple[str, Callable[..., Any]]] = []  # see open()
        self._veto_reasons: dict[str, str] = {}
        self._notes: dict[str, dict[str, object]] = {}  # see add_note
        self._quiet: dict[str, int | None] = {}  # plugins that never veto (see never_vetoes)
        self.veto_horizon: int | None = None  # see never_vetoes
        self.notes_added = 0  # notes added so far (a failed search adding one answers nobody)
        self.workload_key: Callable[[Workload], tuple[Any, ...]] = default_key
        self._order_key: Callable[[Workload], tuple[Any, ...]] = default_key  # uncached
        self.policy: Policy | None = None  # the ordering and search hooks, taken at open
        self._built = True

    def __setattr__(self, name: str, value: Any) -> None:
        if self._built and name not in _ASSIGNABLE:
            raise AttributeError(f"session attribute {name!r} is read-only")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"session attribute {name!r} cannot be deleted")

    # -- plugin access -----------------------------------------------------

    def plugin_config(self, name: str) -> Any:
        """The validated configuration object of plugin ``name`` (or ``None``)."""
        return self.registry.configs.get(name)

    def leaf(self, name: str) -> QuotaNode | None:
        return self.snapshot.tree.leaves.get(name)

    # -- open / close ------------------------------------------------------

    def open(self) -> None:
        self.registry.call_all("session_open", session=self)
        keys = self.registry.call_all("workload_order", session=self)
        object.__setattr__(self, "_order_key", composed_key(keys, self.registry))
        object.__setattr__(self, "workload_key", self._cached(self._order_key))
        quiet = self._quiet
        impls = self.registry.impls("is_preemptible")
        asked = [i for i in impls if i.plugin not in quiet or quiet[i.plugin] is not None]
        # Each called with the four values in place: no argument map per candidate.
        object.__setattr__(self, "_preemptible", [(i.plugin, _positional(i)) for i in asked])
        horizons = [h for i in asked if (h := quiet.get(i.plugin)) is not None]
        if asked and len(horizons) == len(asked):
            object.__setattr__(self, "veto_horizon", min(horizons))
        object.__setattr__(self, "policy", Policy(self.registry, self))
        for name in self.registry.names:
            plugin = self.registry.pm.get_plugin(name)
            reason = getattr(plugin, "VETO_REASON", None)
            if isinstance(reason, str):
                self._veto_reasons[name] = reason
        undeclared = self.registry.memo_unsafe()
        if undeclared and self.memo is not None:
            object.__setattr__(self, "memo", None)
            self.counters.memo_off = f"plugin {undeclared} does not declare {MEMO_SAFE_ATTRIBUTE}"

    def close(self) -> Decisions:
        for key, message in sorted(self.snapshot.inadmissible.items()):
            self.decisions.pending.append(Pending(key, "Inadmissible", message))
        self.registry.call_all("session_close", session=self)
        return self.decisions

    def order_keys(self, workloads: Iterable[Workload]) -> list[tuple[Any, ...]]:
        """``[self.workload_key(w) for w in workloads]`` in one loop, kept alike."""
        return keys_of(self._workload_keys, self._order_key, workloads)

    def _cached(self, key: Callable[[Workload], tuple[Any, ...]]) -> Callable[[Workload], tuple[Any, ...]]:
        cache = self._workload_keys

        def cached(w: Workload) -> tuple[Any, ...]:
            found = cache.get(w.key)
            if found is None:
                found = cache[w.key] = key(w)
            return found

        return cached

    # -- policy checks used by the victim search ---------------------------

    def is_preemptible(self, action: str, preemptor: Workload, candidate: Candidate) -> str | None:
        """``None`` when every plugin allows it, else the name of the first plugin that vetoed.

        A plugin that raises, or answers anything but a bool or ``None``, vetoes (fail
        safe) and is counted as failed.
        """
        for plugin, asked in self._preemptible:
            try:
                ok = asked(self, action, preemptor, candidate)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.registry.record_failure(plugin, "is_preemptible", exc)
                return plugin
            if ok is True or ok is None:
                continue
            if ok is False:
                self.registry.vetoes[plugin] += 1
            else:
                self.registry.record_failure(plugin, "is_preemptible", bad_answer(ok, "a bool or None"))
            return plugin
        return None

    def plugin_assignment(self, workload: Workload) -> Assignment | None:
        """The first plugin's answer to ``assign_flavors`` (``None``: the framework's
        default assigner decides); an answer that is not an Assignment is no answer."""
        found = self.registry.call_first("assign_flavors", session=self, workload=workload)
        return found if isinstance(found, Assignment) else None

    def scenario_filters(self, preemptor: Workload) -> ScenarioFilters:
        """Every plugin's scenario filters for one search, in plugin order.

        ``get_accumulated_scenario_filters`` is always asked with ``action="preempt"``:
        one search mixes in-queue and cross-queue victims, so a filter judges each
        victim by its own leaf (see the hook's documentation)."""
        filters: ScenarioFilters = []
        for name, found in self.registry.call_all(
            "get_accumulated_scenario_filters", session=self, action="preempt", preemptor=preemptor
        ):
            for f in found:  # mostly none: a loop, not a generator per plugin and search
                filters.append((name, f))
        return filters

    def scenario_rejects(
        self, preemptor: Workload, filters: ScenarioFilters, victims: list[Candidate], *, veto: bool = True
    ) -> str | None:
        """The first plugin whose filter rejects ``victims`` (``None``: all accept).

        The list is handed over as it is: filters read it and must not keep or change
        it. A filter that raises, or answers anything but a bool, rejects (fail safe)
        and is counted as failed; with ``veto`` a rejection is also counted as the
        plugin's veto."""
        if not filters:
            return None
        scenario = Scenario(self, preemptor, victims, "preempt")
        for plugin, accept in filters:
            ok: Any  # a plugin may answer anything
            try:
                ok = accept(scenario)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                self.registry.record_failure(plugin, "scenario_filter", exc)
                ok = False
            if ok is not True:
                if ok is not False:
                    self.registry.record_failure(plugin, "scenario_filter", bad_answer(ok, "a bool"))
                if veto:
                    self.registry.vetoes[plugin] += 1
                return plugin
        return None

    def pods_fit(
        self,
        targets: list[tuple[PodSet, int, str]],
        *,
        statement: Statement | None = None,
    ) -> bool:
        """Whether every pod of ``targets`` can be placed on its flavor's nodes right now
        (on the placements of ``statement``, the session's by default)."""
        statement = statement if statement is not None else self.statement
        placements = statement.placements
        if placements is None:
            return True
        targets = [t for t in targets if placements.has_nodes(t[2])]
        if not targets:
            return True
        key = None
        if statement is self.statement and not statement.ops:
            # Committed room is named by the node epoch: the flavor scan and finish_assignment
            # ask the same about the same pod sets (which the kept entry keeps alive).
            key = [statement.node_epoch, *((id(spec), count, flavor) for spec, count, flavor in targets)]
            if statement.last_fit is not None and statement.last_fit[0] == key:
                return bool(statement.last_fit[1])
        checkpoint = statement.checkpoint()
        try:
            fits = placements.fit_all(self.snapshot.flavors, targets, statement.take_room)
        finally:
            statement.rollback(checkpoint)
        if key is not None:
            statement.last_fit = (key, fits, targets)
        return fits

    def never_vetoes(self, plugin: str, *, unless_admitted_after: int | None = None) -> None:
        """Said by ``plugin`` in ``session_open``: its ``is_preemptible`` allows every
        candidate of this session. It is then not asked (``preemption/search.py``). With
        ``unless_admitted_after``, it is still asked, but promises to allow, with no other
        effect, every candidate already evicted or whose workload was admitted at or
        before that time (or has no admission time): when every plugin asked has said so,
        the earliest such time is :attr:`veto_horizon`."""
        self._quiet[plugin] = unless_admitted_after

    @property
    def may_veto(self) -> bool:
        """Whether some plugin's ``is_preemptible`` may refuse a candidate this session."""
        return bool(self._preemptible)

    def veto_reason(self, plugin: str) -> str | None:
        """The pending reason a plugin's veto stands for (e.g. ``MinRuntime``), if it declares one."""
        return self._veto_reasons.get(plugin)

    def add_note(self, workload: str, plugin: str, text: object) -> None:
        """Let a plugin say why it held a preemptor back; the last note per plugin is
        appended to the preemptor's pending message if it finds no victims.

        ``text`` is the note's text, or an object whose ``str()`` is, taken only when a
        message reads the note: a plugin that replaces its note many times in a search
        then builds only the text that is read. That text must not depend on when it
        is taken."""
        self._notes.setdefault(workload, {})[plugin] = text
        _set_notes_added(self, self.notes_added + 1)  # through its slot (see collect_runs)

    def notes(self, workload: str) -> list[str]:
        found = self._notes.get(workload)
        return [str(text) for _, text in sorted(found.items())] if found else []

    def explain(self, workload: str, line: str) -> None:
        if self.explaining:  # else the session keeps no explanation lines
            self.decisions.explanations.setdefault(workload, []).append(line)

    # -- statement events --------------------------------------------------

    def _notify_admit(self, workload: Workload, count: int | None) -> None:
        self.registry.call_all("on_admit", session=self, workload=workload, count=count)

    def _notify_evict(self, workload: Workload, count: int | None) -> None:
        self.registry.call_all("on_evict", session=self, workload=workload, count=count)


_PREEMPTIBLE_ARGS = ("session", "action", "preemptor", "preemptee")


def _positional(impl: Impl) -> Callable[..., Any]:
    """``impl``'s ``is_preemptible`` called with (session, action, preemptor, preemptee)."""
    if impl.argnames == _PREEMPTIBLE_ARGS:
        return impl.function
    call = impl.call
    return lambda s, a, p, c: call({"session": s, "action": a, "preemptor": p, "preemptee": c})


def order_for(session: Session, preemptor: Workload) -> Callable[[Candidate], tuple[Any, ...]]:
    """The victim order of one search: already evicted first, then by class; plugin
    keys (``victim_order``) decide within a class before the base order."""
    keys = session.registry.call_all("victim_order", session=session, preemptor=preemptor)
    if not keys:
        # Units are cached per session, so are their keys: no tuple is built per search.
        return base_order

    def key(c: Candidate) -> tuple[Any, ...]:
        parts: list[Any] = [0 if c.evicted else 1, c.group]
        for name, extra in keys:
            # A key that raises leaves the candidate to the base order, after the
            # candidates the plugin could rank: (0, *key) sorts before (1,).
            try:
                parts.append((0, *extra(c)))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:
                session.registry.record_failure(name, "victim_order", exc)
                parts.append((1,))
        parts.extend(c.sort_key[2:])  # the base order and the unit's index, computed once
        return tuple(parts)

    if not all(getattr(extra, "preemptor_independent", False) for _, extra in keys):
        return key

    def kept(c: Candidate) -> tuple[Any, ...]:
        found = c.order_key
        if found is None:
            found = c.order_key = key(c)
        return found

    kept.preemptor_independent = True  # type: ignore[attr-defined]
    return kept


def collect_candidates(
    session: Session, preemptor: Workload, request: VictimSearch, *, with_room: bool, defer_pods: bool = False
) -> list[Candidate]:
    """Every plugin's candidates that use a needed flavor-resource (or, when node room
    is what is missing, that occupy room on a node). ``defer_pods``: running
    Deployments' pods may come as :class:`DeferredPods` (node-by-node search only)."""
    return collect_runs(session, preemptor, request, with_room=with_room, defer_pods=defer_pods)[0]


def collect_runs(
    session: Session, preemptor: Workload, request: VictimSearch, *, with_room: bool, defer_pods: bool = False
) -> tuple[list[Candidate], Runs | None]:
    """:func:`collect_candidates`, with the runs they come in (``candidates.using``)."""
    # ``session.defer_pods = ...`` through its slot: two per search, without the
    # session's ``__setattr__`` (``defer_pods`` may always be assigned).
    _set_defer_pods(session, defer_pods)
    hook = "preemption_candidates"
    try:
        answers = session.registry.call_all(hook, session=session, preemptor=preemptor, assignment=request)
    finally:
        _set_defer_pods(session, False)
    filtered = session.state.get(_FILTERED)
    if filtered is None:
        filtered = session.state[_FILTERED] = {}
    return using([found for _, found in answers], request.needed, with_room, filtered=filtered)


_set_defer_pods: Callable[[Session, bool], None] = Session.__dict__["defer_pods"].__set__
_set_notes_added: Callable[[Session, int], None] = Session.__dict__["notes_added"].__set__

_FILTERED = "_filtered_runs"  # in ``session.state``: ``candidates.using``'s filtered runs


@dataclass(slots=True)
class Scenario:
    """The victims accumulated so far in one search, as scenario filters see them.

    ``victims`` is the search's own list, not a copy: read it, do not keep or change it.
    """

    session: Session
    preemptor: Workload
    victims: list[Candidate]
    action: str


def with_vetoes(message: str, vetoed: Iterable[str]) -> str:
    """``message`` naming the plugins that vetoed candidates, as every pending message
    of a search without victims does."""
    names = sorted(vetoed)
    return message + " (vetoed by " + ", ".join(names) + ")" if names else message
