"""Plugin ``min-runtime``: a guaranteed minimum runtime before preemption and reclaim.

SEMANTICS §5, after the min-runtime seed. A running workload may not be taken
as a victim until it has run for the min-runtime that applies to the pair
(preemptor, victim):

* **preempt** (both in the same leaf queue): the first ``preemptMinRuntime``
  set on the victim's queue or one of its ancestors, else
  ``default_preempt_min_runtime``;
* **reclaim** (different leaf queues), method ``lca``: the first
  ``reclaimMinRuntime`` set walking up from the child of the two leaves'
  lowest common ancestor on the victim's side, else the default. The seed's
  reason: a setting then only matters between siblings, so parts of the tree
  can be administered separately. Without a common ancestor the victim's
  top-level queue decides, else the default. Method ``queue`` walks up from
  the victim's own leaf instead.

``is_preemptible`` vetoes whole workloads still inside their window. Elastic
workloads are always let through there, because their pods above
``minCount`` may go at any time; the scenario filter instead rejects a
scenario that would take a still-protected elastic workload below its
``minCount`` (its "rest" unit, which evicts it whole).

Cost: ``is_preemptible`` runs once per candidate of every victim search. The
session's longest possible window is known at open, so a candidate admitted
longer ago than that (or with no window at all) is answered with two integer
operations, and the session is told so at open (``session.never_vetoes`` with
``unless_admitted_after``): a walk the quota bound proves hopeless then stops after
the last candidate admitted later. A recently admitted candidate's answer depends only on its workload,
the two leaves and the action (the clock is the session's), so it is worked out
once per session for each (preemptor leaf, action) and victim workload and kept
in a row keyed by the workload's identity; every call still tells its preemptor
(the note, the explanation) and the framework still counts every refusal. The
note naming a protected candidate is the same text for every preemptor told of
it: it is built only when a message reads it, and kept across sessions. Windows
are resolved once per (preemptor leaf, victim leaf) pair and session.

Which window applies to a pair, and the configuration table, live in
:mod:`.resolve` (the simulator's invariant checker reads the same module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from preemptd.framework import ScenarioFilter, format_timestamp, hookimpl

from .resolve import (
    METHODS,
    NAME,
    PREEMPT,
    RECLAIM,
    Config,
    Resolution,
    reclaim_start,
    resolve_preempt,
    resolve_reclaim,
)

if TYPE_CHECKING:
    from preemptd.framework import Candidate, QuotaNode, Scenario, Session, Workload

__all__ = [
    "MEMO_SAFE",
    "METHODS",
    "NAME",
    "PREEMPT",
    "RECLAIM",
    "VETO_REASON",
    "Config",
    "Resolution",
    "reclaim_start",
    "resolve_preempt",
    "resolve_reclaim",
]

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)
VETO_REASON = "MinRuntime"  # the pending reason the session reports for this plugin's vetoes
# `preemptd explain` lists at most this many protected victims per preemptor; a
# cluster with thousands of fresh workloads would otherwise bury the explanation.
EXPLAIN_LIMIT = 10


class _Explained:
    """The explanation lines written for one preemptor (only in a session that keeps them)."""

    __slots__ = ("key", "vetoed")

    def __init__(self, key: str) -> None:
        self.key = key
        # Victims refused so far, by identity; holding them keeps every id unique.
        self.vetoed: dict[int, Workload] = {}


class _Protected:
    """A victim workload inside the window of one (preemptor leaf, action) pair: until
    when, and the note naming it, written when a preemptor is first told of it and then
    shared by every preemptor of the leaf that is (the text depends on neither)."""

    __slots__ = ("admitted_at", "key", "note", "resolution", "until")

    def __init__(self, key: str, admitted_at: int, resolution: Resolution) -> None:
        self.key = key
        self.admitted_at = admitted_at
        self.resolution = resolution
        self.until = admitted_at + resolution.ms
        self.note: str | None = None

    def first_note(self) -> str:
        note = self.note
        if note is None:
            # The text is a function of the three: kept across sessions, which tell the
            # same pending preemptors of the same protected candidates again and again.
            place = (self.key, self.admitted_at, self.resolution)
            note = _NOTES.get(place)
            if note is None:
                if len(_NOTES) >= _NOTES_KEPT:
                    _NOTES.clear()
                note = _NOTES[place] = (
                    f"min-runtime: the first protected candidate, {self.key}, becomes preemptible "
                    f"at {format_timestamp(self.until)} ({_since(self.admitted_at, self.resolution)})"
                )
            self.note = note
        return note

    # The note itself (``Session.add_note``): its text is made only if a message reads it.
    __str__ = first_note


# Notes written so far, by (candidate key, admitted at, resolution): see _Protected.first_note.
_NOTES: dict[tuple[str, int, Resolution], str] = {}
_NOTES_KEPT = 4096  # at most this many; then they are made afresh


# A row's entry for one victim workload: the workload and its leaf (what the answer was
# worked out for), whether it is elastic, and its window if it is still inside one.
_Answer = tuple["Workload", "QuotaNode", bool, "_Protected | None"]


class _State:
    """Per-session tables, on ``session.state["min-runtime"]``."""

    __slots__ = (
        "earliest",
        "elastic_at_risk",
        "explained",
        "explaining",
        "fresh_after",
        "last_earliest",
        "last_explained",
        "last_key",
        "last_leaf",
        "last_preempt",
        "last_preemptor",
        "last_reclaim",
        "last_row",
        "longest",
        "method",
        "now",
        "preempt",
        "preempt_default",
        "reclaim",
        "reclaim_default",
        "rows",
        "session",
    )

    def __init__(self, session: Session, config: Config) -> None:
        self.session = session
        self.explaining = session.explaining
        self.now = session.now
        self.method = config.reclaim_resolve_method
        self.preempt_default = config.default_preempt_min_runtime_ms
        self.reclaim_default = config.default_reclaim_min_runtime_ms
        tree = session.snapshot.tree
        longest = max(self.preempt_default, self.reclaim_default)
        for node in tree.nodes.values():
            for value in (node.spec.preempt_min_runtime, node.spec.reclaim_min_runtime):
                if value is not None and value > longest:
                    longest = value
        # No window is longer than this: a candidate admitted at or before now - longest
        # (now >= admitted + longest) is preemptible whatever the queues say.
        self.longest = longest
        self.fresh_after = self.now - longest
        # Whether some elastic workload is still inside the longest window (the scenario
        # filter is needed): worked out at the session's first search, if it has one.
        self.elastic_at_risk: bool | None = None if longest > 0 else False
        self.preempt: dict[int, Resolution] = {}  # victim leaf index -> resolution
        self.reclaim: dict[int, dict[int, Resolution]] = {}  # preemptor leaf -> victim leaf -> ...
        # Per preemptor leaf, the answers for each action: id(victim workload) -> _Answer.
        self.rows: dict[int, tuple[dict[int, _Answer], dict[int, _Answer]]] = {}
        # Per preemptor told of a protected candidate, when the earliest window it was told
        # of ends (its note names that candidate); and what its explanation lists.
        self.earliest: dict[str, int] = {}
        self.explained: dict[str, _Explained] = {}
        self.last_preemptor: Workload | None = None
        self.last_key = ""
        self.last_earliest: int | None = None
        self.last_explained: _Explained | None = None
        self.last_leaf: QuotaNode | None = None
        self.last_row: dict[int, Resolution] = {}
        self.last_preempt: dict[int, _Answer] = {}
        self.last_reclaim: dict[int, _Answer] = {}

    def switch(self, preemptor: Workload) -> None:
        """Point the one-entry cache at ``preemptor``'s leaf (a search asks for one preemptor)."""
        leaf = self.session.leaf(preemptor.queue)
        index = -1 if leaf is None else leaf.index
        self.last_preemptor = preemptor
        self.last_key = key = preemptor.key
        self.last_earliest = self.earliest.get(key)
        self.last_explained = None
        self.last_leaf = leaf
        self.last_row = self.reclaim.setdefault(index, {})
        rows = self.rows.get(index)
        if rows is None:
            rows = self.rows[index] = ({}, {})
        self.last_preempt, self.last_reclaim = rows

    def resolve(self, action: str, victim_leaf: QuotaNode) -> Resolution:
        """The window for the current preemptor (see :meth:`switch`) and ``victim_leaf``."""
        if action == "preempt":
            found = self.preempt.get(victim_leaf.index)
            if found is None:
                found = self.preempt[victim_leaf.index] = resolve_preempt(victim_leaf, self.preempt_default)
            return found
        found = self.last_row.get(victim_leaf.index)
        if found is None:
            found = resolve_reclaim(self.last_leaf, victim_leaf, self.reclaim_default, self.method)
            self.last_row[victim_leaf.index] = found
        return found

    def answer(self, action: str, workload: Workload, victim_leaf: QuotaNode) -> _Answer:
        """The current preemptor's leaf's answer for ``workload`` (admitted inside the
        longest window), worked out once per session, leaf pair and action: it depends on
        nothing else (the clock is the session's)."""
        row = self.last_preempt if action == "preempt" else self.last_reclaim
        found = row.get(id(workload))
        if found is not None and found[0] is workload and found[1] is victim_leaf:
            return found
        admitted_at = workload.admitted_at
        assert admitted_at is not None
        resolution = self.resolve(action, victim_leaf)
        # A window of 0 protects nothing, even with admittedAt ahead of the clock (the
        # seed: "0: always preemptible"); otherwise the boundary itself is preemptible.
        protected = None
        if resolution.ms != 0 and self.now < admitted_at + resolution.ms:
            protected = _Protected(workload.key, admitted_at, resolution)
        found = row[id(workload)] = (workload, victim_leaf, workload.is_elastic, protected)
        return found

    def veto(self, victim: Candidate, protected: _Protected, min_count: int = 0) -> None:
        """Tell the current preemptor's pending message and explanation why ``victim`` was
        refused. Text is only built when a message reads the note or a line is written,
        not per veto (``is_preemptible`` does the same in line)."""
        until = protected.until
        earliest = self.last_earliest
        if earliest is None or until < earliest:
            self.last_earliest = self.earliest[self.last_key] = until
            self.session.add_note(self.last_key, NAME, protected)
        if self.explaining:
            self.explain(victim, protected, min_count)

    def explain(self, victim: Candidate, protected: _Protected, min_count: int) -> None:
        told = self.last_explained
        if told is None:
            key = self.last_key
            told = self.explained.get(key)
            if told is None:
                told = self.explained[key] = _Explained(key)
            self.last_explained = told
        workload = victim.workload
        if id(workload) in told.vetoed:
            return
        told.vetoed[id(workload)] = workload
        if len(told.vetoed) <= EXPLAIN_LIMIT:
            shrink = f"; it may shrink only down to minCount {min_count} meanwhile" if min_count else ""
            self.session.explain(
                told.key,
                f"min-runtime: {victim.key} is protected until {format_timestamp(protected.until)} "
                f"({_since(protected.admitted_at, protected.resolution)}){shrink}",
            )


def _since(admitted_at: int, resolution: Resolution) -> str:
    return f"admitted {format_timestamp(admitted_at)} + {resolution.describe()}"


def _state(session: Session) -> _State:
    state: _State | None = session.state.get(NAME)
    if state is None:
        config = session.plugin_config(NAME)
        state = _State(session, config if isinstance(config, Config) else Config())
        session.state[NAME] = state
    return state


def _min_count(workload: Workload) -> int:
    """The most pods an elastic workload keeps when shrunk (0: not elastic)."""
    floor = 0
    for pod_set in workload.pod_sets:
        if pod_set.min_count is not None and pod_set.min_count > floor:
            floor = pod_set.min_count
    return floor


@hookimpl
def plugin_config_schema() -> type[Config]:
    return Config


@hookimpl
def session_open(session: Session) -> None:
    session.state.pop(NAME, None)
    state = _state(session)
    if state.longest == 0:
        # No window anywhere: every candidate is preemptible and no scenario is filtered.
        session.never_vetoes(NAME)
    else:
        # is_preemptible allows at once, with no note, a candidate outside the longest window.
        session.never_vetoes(NAME, unless_admitted_after=state.fresh_after)


@hookimpl
def session_close(session: Session) -> None:
    state = session.state.get(NAME)
    if not isinstance(state, _State) or not state.explaining:
        return
    for key, told in sorted(state.explained.items()):
        hidden = len(told.vetoed) - EXPLAIN_LIMIT
        if hidden > 0:
            session.explain(key, f"min-runtime: {hidden} more protected candidate(s) not listed")


@hookimpl
def is_preemptible(session: Session, action: str, preemptor: Workload, preemptee: Candidate) -> bool:
    state: _State | None = session.state.get(NAME)
    if state is None:
        state = _state(session)
    if preemptee.evicted:
        return True  # already on its way out: not re-checked (SEMANTICS §5)
    workload = preemptee.workload
    admitted_at = workload.admitted_at
    if admitted_at is None or admitted_at <= state.fresh_after:
        return True
    if preemptor is not state.last_preemptor:
        state.switch(preemptor)
    found = (state.last_preempt if action == "preempt" else state.last_reclaim).get(id(workload))
    if found is None or found[0] is not workload or found[1] is not preemptee.leaf:
        found = state.answer(action, workload, preemptee.leaf)
    protected = found[3]
    if found[2] or protected is None:
        # An elastic workload's pods above minCount may go; the scenario filter guards the rest.
        return True
    # State.veto, in line: most vetoes name a window ending before the ones told so far.
    until = protected.until
    earliest = state.last_earliest
    if earliest is None or until < earliest:
        state.last_earliest = state.earliest[state.last_key] = until
        session.add_note(state.last_key, NAME, protected)
    if state.explaining:
        state.explain(preemptee, protected, 0)
    return False  # else: this preemptor was already told of a window ending no later


class _ElasticFloor:
    """The scenario filter of one search: no still-protected elastic workload may be
    taken below its ``minCount`` (SEMANTICS §5).

    Whether a scenario is valid depends on each victim alone, so verdicts are kept
    per victim. The framework hands over every victim so far at each step, so a
    Python loop over them would make a search that needs thousands of victims
    quadratic in Python. Instead: a scenario that is the last accepted one plus one
    victim (the common step) is recognised by a list comparison, and any other is
    checked against the set of victims already found harmless; both run at C speed,
    and only victims not seen before are judged in Python.
    """

    __slots__ = ("accepted", "harmless", "kept", "state")

    def __init__(self, state: _State) -> None:
        self.state = state
        self.accepted: list[Candidate] = []  # a copy of the last accepted scenario
        self.harmless: set[int] = set()  # ids of victims judged harmless
        self.kept: list[Candidate] = []  # keeps those ids from being reused

    def __call__(self, scenario: Scenario) -> bool:
        victims = scenario.victims
        known = len(self.accepted)
        if len(victims) == known + 1 and victims[:known] == self.accepted:
            if not self._judge(scenario, victims[-1]):
                return False
            self.accepted.append(victims[-1])
            return True
        if not self.harmless.issuperset(map(id, victims)):
            for victim in victims:
                if id(victim) not in self.harmless and not self._judge(scenario, victim):
                    return False
        self.accepted = list(victims)
        return True

    def _judge(self, scenario: Scenario, victim: Candidate) -> bool:
        if id(victim) in self.harmless:
            return True
        if not self._offends(scenario, victim):
            self.harmless.add(id(victim))
            self.kept.append(victim)
            return True
        return False

    def _offends(self, scenario: Scenario, victim: Candidate) -> bool:
        # Single pods are above minCount by construction, and a victim on its way out
        # is not re-checked: only a unit that evicts the workload can offend.
        if victim.single_pod or victim.evicted:
            return False
        state = self.state
        workload = victim.workload
        admitted_at = workload.admitted_at
        if admitted_at is None or admitted_at <= state.fresh_after:
            return False
        floor = _min_count(workload)
        if floor == 0:
            return False
        # The hook is asked with "preempt" for every search; the pair of leaves decides.
        if state.last_preemptor is not scenario.preemptor:
            state.switch(scenario.preemptor)
        kind = "preempt" if victim.leaf is state.last_leaf else "reclaim"
        protected = state.answer(kind, workload, victim.leaf)[3]
        if protected is None:
            return False
        state.veto(victim, protected, floor)
        return True


@hookimpl
def get_accumulated_scenario_filters(session: Session, action: str, preemptor: Workload) -> list[ScenarioFilter]:
    state = _state(session)
    at_risk = state.elastic_at_risk
    if at_risk is None:
        fresh_after = state.fresh_after
        at_risk = state.elastic_at_risk = any(
            w.admitted_at is not None and w.admitted_at > fresh_after and w.is_elastic
            for w in session.snapshot.admitted
        )
    if not at_risk:
        return []  # no filter at all: the search then builds no scenarios for us
    return [_ElasticFloor(state)]
