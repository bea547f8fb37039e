"""Failed victim searches that answer weaker ones: the dominance half of the search memo
(``memo.py``).

A failed search also answers the searches it *dominates* (:func:`dominated`): once
a preemptor's search found no victims without asking a plugin about a candidate or a
scenario (it had no candidate at all, or the quota bound proved it hopeless in a session
where no plugin may refuse one: ``SearchResult.silent``), and no plugin said anything in
it (no note, no explanation), a later preemptor of the same queue in the same state (the
commits of its queue tree, node room, the victims chosen in that tree:
:func:`search_state`) that is no stronger (a lower priority, or the same priority and
created no earlier) and asks for no less of the same flavor-resources, with the same
needed ones, fails too: its candidates are among the first one's, each with no more
permission, so even all of them together free no more than the first one's did, which
was short of a request no larger; and its search asks no plugin about a candidate or a
scenario either (the session's plugins may refuse none, and a plugin that gave the
stronger one no scenario filter gives it none). It
gets the first one's answer without a search, its message naming the preemptor it was
judged with. In a saturated queue this answers most heads of a queue after the first
few; ``heads.py`` takes it one step further, to whole nominations.

**Lasting failures.** A session's committed state only grows: the rounds add usage
(admissions, preemptors, reservations), take node room and choose victims, and never give
any of it back. Usage added anywhere never raises a queue's Available, and a queue's
candidates of its own (``priority``) only lose the units taken. Only ``cohort-reclaim``
may offer a queue more later: a sibling that goes above its nominal. It offers nothing,
and only counts what it leaves out, to a search that may only borrow
(``borrowWithinCohort: Never`` and the queue not strictly below its nominal) without the
advantage at any level, and to a queue that never reclaims; each of these stays so as
usage grows, for the failed search and for every search it dominates
(``VictimSearch.lasting``). Such a failure, in a session whose plugins are the built-in
ones that offer candidates and scenario filters (those filters read only the snapshot)
and with no policy of a plugin deciding the searches, holds for the rest of the session:
a state that moves keeps it (:func:`_kept_now`), and it answers the searches it
dominates in any later state. The quota bound is a quota test and a failure without
candidates has none, so neither reads node room. A failure without candidates lasts only
when no plugin counts the units it leaves out of the request from what may grow
(``VictimSearch.counts_later``): a later search may count some, and is then worded as a
search with candidates. A head offered again in a later state is never judged with a
failure of its own: it is searched.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import SearchResult, Session
from .memo import Before, Said, Tally, plugins_said, tally

__all__ = [
    "Answers", "answers_now", "counted", "dominated", "lasting_here", "remember_failure", "search_state", "search_state_at",
]

# Per leaf: the state the failures were kept in, and for each failure the preemptor's
# key, priority and creation time, the usage it asked for, the needed flavor-resources,
# whether node room was searched, the answer's message and whether it lasts.
_Failure = tuple[str, int, int, dict[FR, int], frozenset[FR], bool, str, bool]
_Failures = dict[int, tuple[tuple[int, int, int], list[_Failure]]]
_FAILURES = "_failed_searches"  # in ``session.state``: leaf index -> (state, failures)


def _failures(session: Session) -> _Failures:
    found: _Failures | None = session.state.get(_FAILURES)
    if found is None:
        found = session.state[_FAILURES] = {}
    return found


def _kept_now(by_leaf: _Failures, leaf: QuotaNode, state: tuple[int, int, int]) -> list[_Failure] | None:
    """The failures of ``leaf`` that answer in ``state`` (the current search state), or
    ``None``: those kept in it, or, once the state moved on, the lasting ones of the
    state before, kept anew in this one (a new list: who read the old one reads again)."""
    kept = by_leaf.get(leaf.index)
    if kept is None:
        return None
    if kept[0] == state:
        return kept[1]
    lasting = [failure for failure in kept[1] if failure[7]]
    if not lasting:
        del by_leaf[leaf.index]
        return None
    by_leaf[leaf.index] = (state, lasting)
    return lasting


_KNOWN = "_lasting_failures_known"  # in ``session.state``: whether failures may last
_OFFERING = frozenset({"priority", "cohort-reclaim"})  # offer candidates as the module says
_FILTERING = frozenset({"min-runtime", "gpu-victims"})  # scenario filters read the snapshot only


def lasting_here(session: Session) -> bool:
    """Whether a failure may last in this session (see the module notes): the built-in
    plugins offer the candidates and the scenario filters, and no plugin's policy
    decides which heads search or how."""
    known: bool | None = session.state.get(_KNOWN)
    if known is None:
        registry = session.registry
        offering = {impl.plugin for impl in registry.impls("preemption_candidates")}
        filtering = {impl.plugin for impl in registry.impls("get_accumulated_scenario_filters")}
        policy = session.policy
        known = session.state[_KNOWN] = (
            offering <= _OFFERING
            and filtering <= _FILTERING
            and (policy is None or (policy.strategy is None and policy.picker is None and not policy.allowed))
        )
    return known


_VICTIMS = "_victims_by_tree"  # in ``session.state``: victims chosen so far, per queue tree


def search_state(session: Session, leaf: QuotaNode) -> tuple[int, int, int]:
    """The state a failed search answers in: the commits of the preemptor's queue tree,
    node room, and the victims chosen so far in that tree. Victims chosen in another tree
    are never candidates of this one, and take no quota from it."""
    statement = session.statement
    return (statement.epoch(leaf), statement.node_epoch, _victims_in_tree(session, leaf))


def search_state_at(session: Session, leaf: QuotaNode, epoch: int) -> tuple[int, int, int]:
    """:func:`search_state`, with ``epoch`` the tree's epoch (``Statement.epoch``) its caller
    read in the same state."""
    return (epoch, session.statement.node_epoch, _victims_in_tree(session, leaf))


def _victims_in_tree(session: Session, leaf: QuotaNode) -> int:
    """How many units ``session.relied`` holds of ``leaf``'s tree; every victim a session
    chooses (``session.taken`` included) is added to it, never removed."""
    relied = session.relied
    kept: list[Any] | None = session.state.get(_VICTIMS)
    if kept is None:
        kept = session.state[_VICTIMS] = [0, {}]
    if kept[0] != len(relied):
        counts: dict[int, int] = kept[1]
        for victim in islice(relied.values(), kept[0], None):
            root = victim.leaf.root.index
            counts[root] = counts.get(root, 0) + 1
        kept[0] = len(relied)
    found: int = kept[1].get(leaf.root.index, 0)
    return found


def _asks_no_less(usage: dict[FR, int], than: dict[FR, int]) -> bool:
    if len(usage) != len(than):
        return False
    for fr, amount in than.items():
        asked = usage.get(fr)
        if asked is None or asked < amount:
            return False
    return True


def _judged_text(failure: _Failure) -> str:
    return f"{failure[6]} (judged with {failure[0]}: no lower priority, asking for no more)"


def dominated(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
    state: tuple[int, int, int] | None = None,
) -> SearchResult | None:
    """The answer of a failed search this one is dominated by (see the module
    documentation), or ``None``. Called only where :func:`memo_key` gave a key (``state``:
    :func:`search_state`, when the caller read it)."""
    by_leaf = _failures(session)
    if leaf.index not in by_leaf or preemptor.is_deployment:
        return None
    failures = _kept_now(by_leaf, leaf, state if state is not None else search_state(session, leaf))
    if failures is None:
        return None
    priority = preemptor.priority
    created = preemptor.created
    with_room = bool(targets)
    key = preemptor.key
    for failure in failures:
        judge, p, c, asked, wanted, room, _, _ = failure
        if (
            judge != key  # a head searched again (a lasting failure of its own) is not judged
            and (priority < p or (priority == p and created >= c))
            and wanted == needed
            and room == with_room
            and _asks_no_less(usage, asked)
        ):
            session.counters.dominated += 1
            tally(session).answered += 1
            text = _judged_text(failure)
            return SearchResult(message=text, lines=[text], silent=True)
    return None


class Answers:
    """The failed searches of one leaf that may answer one request (its usage, needed
    flavor-resources and whether node room is searched), in the order :func:`dominated`
    tries them, as (priority, creation time, message naming the judge, the judge's key): what is left of
    :func:`dominated` for a preemptor asking exactly that is the priority test. Kept by
    whoever asks the same request again and again (``heads.py``); :func:`answers_now`
    brings it up to date.

    ``state``: the search state ``failures`` was last read in. A leaf has one list of
    failures per state, made when its first failure is kept (or its lasting ones are kept
    anew, :func:`_kept_now`) and dropped only once its state has moved on, and a state
    never comes back (every part of it only grows): so
    while the state is ``state`` and the list holds ``seen`` failures, ``found`` is
    :func:`answers_now`'s answer as it is (:meth:`current`)."""

    __slots__ = ("failures", "found", "needed", "seen", "state", "usage", "with_room")

    def __init__(self, usage: dict[FR, int], needed: frozenset[FR], with_room: bool) -> None:
        self.usage = usage
        self.needed = needed
        self.with_room = with_room
        self.failures: list[_Failure] | None = None  # the leaf's list these were read from
        self.seen = 0  # how many of its failures were read
        self.found: list[tuple[int, int, str, str]] = []
        self.state: tuple[int, int, int] | None = None

    def current(self, state: tuple[int, int, int]) -> list[tuple[int, int, str, str]] | None:
        """``found`` when nothing was kept since it was read in ``state`` (the current
        search state), else ``None`` (then ask :func:`answers_now`)."""
        failures = self.failures
        if self.state == state and failures is not None and self.seen == len(failures):
            return self.found
        return None


def answers_now(
    session: Session, leaf: QuotaNode, answers: Answers, state: tuple[int, int, int]
) -> list[tuple[int, int, str, str]] | None:
    """The failures of ``leaf`` kept in ``state`` (the current :func:`search_state`) that
    answer ``answers``' request, or ``None`` when none is kept in it. A preemptor (not a
    Deployment) asking that request is dominated, as :func:`dominated` says, by the first
    of them it is no stronger than; who takes that answer counts it with :func:`counted`."""
    failures = _kept_now(_failures(session), leaf, state)
    if failures is None:
        return None
    if failures is not answers.failures:
        answers.failures = failures
        answers.seen = 0
        answers.found = []
    if answers.seen != len(failures):
        usage, needed, with_room, found = answers.usage, answers.needed, answers.with_room, answers.found
        for failure in islice(failures, answers.seen, None):
            _, p, c, asked, wanted, room, _, _ = failure
            if wanted == needed and room == with_room and _asks_no_less(usage, asked):
                found.append((p, c, _judged_text(failure), failure[0]))
        answers.seen = len(failures)
    answers.state = state
    return answers.found


def counted(session: Session) -> None:
    """Count one answer :func:`answers_now` gave, as :func:`dominated` counts its own."""
    session.counters.dominated += 1
    tally(session).answered += 1


def remember_failure(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
    result: SearchResult,
    before: Before,
    after: Said | None = None,
    state: tuple[int, int, int] | None = None,
    counts: Tally | None = None,
) -> None:
    """Keep a failed search for :func:`dominated` when it may answer others: silent (no
    candidate, or proved hopeless by the quota bound with nobody to refuse one) and
    nothing said by any plugin while it ran (:func:`plugins_said` once it ran, ``after``
    when the caller read it, is ``before``'s). Called only where :func:`memo_key` gave a
    key; ``state``, ``counts``: :func:`search_state`, :func:`tally`, when the caller read them."""
    if result.victims or result.vetoed_by or preemptor.is_deployment:
        return
    if session.policy is not None and session.policy.strategy is not None:
        return
    if not result.silent or (after if after is not None else plugins_said(session, preemptor)) != before[1]:
        return  # walked, or a plugin was asked about a candidate or a scenario
    state = state if state is not None else search_state(session, leaf)
    by_leaf = _failures(session)
    failures = _kept_now(by_leaf, leaf, state)
    if failures is None:
        failures = []
        by_leaf[leaf.index] = (state, failures)
    lasting = result.lasting and lasting_here(session)
    failures.append(
        (
            preemptor.key, preemptor.priority, preemptor.created, dict(usage), needed, bool(targets), result.message,
            lasting,
        )
    )
    counts = counts if counts is not None else tally(session)
    counts.answered += 1
    if result.memo_key is not None:
        counts.keys.add(result.memo_key)
