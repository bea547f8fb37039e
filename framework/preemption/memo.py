"""The search memo: a victim search already run answers an identical later one.

A search is a function of its inputs and of the session's state: the preemptor
as the plugins read it (key, queue, priority, creation time, pod counts), its
leaf, the usage asked for, the needed flavor-resources, the node targets, the
usage of the preemptor's queue tree, node room when nodes are searched, and the
victims this session chose so far. The statement names the state of a tree by
its epoch (bumped by every commit that changed the tree) and node room by the
node epoch, so a key made of the inputs and those epochs identifies the answer.

The memo is consulted and filled only when the statement holds no uncommitted
operation (nomination runs at the start of a round, between commits), so the
epochs name the state exactly. It repeats:

* the search of the chosen flavor that ``finish_assignment`` asks again after the
  flavor scan (``flavor-fungibility`` hands the option over; :func:`asked_again` then
  answers it without building its key again, when the state it was kept for has not
  moved);
* the searches of a head nominated again (``WaitingForQuota``, partial admission)
  in a state of its tree that has not moved.

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

It is exact only when every plugin consulted keeps the contract of ``MEMO_SAFE``
(``session/hooks.py``); otherwise the session runs with ``memo = None``. Vetoes
the search counted are counted again on every answer from memory; a search in
which a plugin failed is not remembered (its failure is counted once per run).
A Deployment's replica search that placed replicas keeps a resumable search
object and is not remembered either.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import SearchResult, Session

__all__ = [
    "Answers",
    "Tally",
    "answers_now",
    "asked_again",
    "counted",
    "dominated",
    "memo_key",
    "plugins_said",
    "recall",
    "remember",
    "remember_failure",
    "replay",
    "search_state",
    "tally",
]

Key = tuple[Any, ...]
_LEAF = 6  # where memo_key puts the leaf's index
_USAGE = 7  # and the usage asked for


def memo_key(
    session: Session,
    preemptor: Workload,
    leaf: QuotaNode,
    usage: dict[FR, int],
    needed: frozenset[FR],
    targets: Sequence[tuple[PodSet, int, str]],
) -> Key | None:
    """The key of one search, or ``None`` when it may not be remembered now."""
    statement = session.statement
    if session.memo is None or statement.ops:
        return None
    nodes = statement.node_epoch if (targets or preemptor.is_deployment) else -1
    pod_sets = preemptor.pod_sets
    return (
        preemptor.key,
        preemptor.queue,
        preemptor.priority,
        preemptor.created,
        preemptor.is_deployment,
        (pod_sets[0].count,) if len(pod_sets) == 1 else tuple([ps.count for ps in pod_sets]),
        leaf.index,
        tuple(usage.items()),
        needed,
        tuple([(spec.name, count, flavor) for spec, count, flavor in targets]) if targets else (),
        statement.epoch(leaf),
        nodes,
        len(session.relied),
        len(session.taken),
    )


class Tally:
    """The searches a session's nominations asked, and how many of the answers are ones
    a failed search of the same state gives every weaker head asking the same: answered
    by one (:func:`dominated`), kept as one (:func:`remember_failure`), or recalled from
    memory where such an answer was kept (``keys``). ``heads.py`` reads it."""

    __slots__ = ("answered", "asked", "keys")

    def __init__(self) -> None:
        self.asked = 0
        self.answered = 0
        self.keys: set[Key] = set()


_TALLY = "_search_tally"  # in ``session.state``


def tally(session: Session) -> Tally:
    found: Tally | None = session.state.get(_TALLY)
    if found is None:
        found = session.state[_TALLY] = Tally()
    return found


def recall(session: Session, key: Key, counts: Tally | None = None) -> SearchResult | None:
    """The remembered answer (a fresh copy), its vetoes counted again; or ``None``
    (``counts``: the session's :func:`tally`, when the caller holds it)."""
    assert session.memo is not None
    found = session.memo.get(key)
    if found is None:
        return None
    counts = counts if counts is not None else tally(session)
    if key in counts.keys:
        counts.answered += 1
    session.counters.memo_hits += 1
    return replay(session, found)


def replay(session: Session, found: tuple[SearchResult, Sequence[tuple[str, int]]]) -> SearchResult:
    """A kept answer again: its vetoes counted once more, and a fresh copy of it (the
    rounds may change its lists)."""
    result, vetoes = found
    if vetoes:
        counter = session.registry.vetoes
        for plugin, count in vetoes:
            counter[plugin] += count
    return SearchResult(
        list(result.victims),
        result.allow_borrowing,
        result.level,
        result.vetoed_by,
        result.message,
        list(result.lines),
        silent=result.silent,
    )


Said = tuple[int, int, int, int]


def plugins_said(session: Session, workload: Workload) -> Said:
    """Vetoes and failures counted, notes added and ``workload``'s explanations, so far:
    each only grows, so two equal readings mean no plugin said anything in between."""
    registry = session.registry
    explained = session.decisions.explanations.get(workload.key)
    return (
        sum(registry.vetoes.values()),
        sum(registry.failures.values()),
        session.notes_added,
        len(explained) if explained is not None else 0,
    )


Before = tuple[dict[str, int], Said]


def snapshot_counts(session: Session, preemptor: Workload) -> Before:
    """What a search may change that :func:`remember` and :func:`remember_failure` read:
    the registry's veto counts and what the plugins said."""
    return dict(session.registry.vetoes), plugins_said(session, preemptor)


def remember(session: Session, key: Key, result: SearchResult, before: Before, after: Said) -> bool:
    """Keep ``result`` under ``key`` with the vetoes its search counted (``after``:
    :func:`plugins_said` once it ran; counts only grow: equal sums, equal counts)."""
    assert session.memo is not None
    if result.replicas or result.resume is not None:
        return False
    vetoes_before, said = before
    registry = session.registry
    if after[1] != said[1]:
        return False
    vetoes: tuple[tuple[str, int], ...] = ()
    if after[0] != said[0]:
        vetoes = tuple([
            (plugin, count - vetoes_before.get(plugin, 0))
            for plugin, count in registry.vetoes.items()
            if count != vetoes_before.get(plugin, 0)
        ])
    session.memo[key] = (result, vetoes)
    return True


def asked_again(
    session: Session, result: SearchResult, leaf: QuotaNode, usage: dict[FR, int]
) -> SearchResult | None:
    """``result`` asked for once more, exactly as :func:`recall` answers it (a fresh copy,
    its vetoes counted again), by whoever holds it and knows that the search would be the
    same: same preemptor, needed flavor-resources and node targets (the leaf and the
    usage, in the same order, are checked here). ``None`` when it is not kept in the memo
    or the state it was kept for moved (then the caller searches)."""
    key = result.memo_key
    statement = session.statement
    if key is None or session.memo is None or statement.ops:
        return None
    leaf_epoch, nodes, relied, taken = key[-4:]
    if (
        key[_LEAF] != leaf.index
        or key[_USAGE] != tuple(usage.items())
        or leaf_epoch != statement.epoch(leaf)
        or (nodes != -1 and nodes != statement.node_epoch)
        or relied != len(session.relied)
        or taken != len(session.taken)
    ):
        return None
    found = recall(session, key)
    if found is not None:
        tally(session).asked += 1
        found.memo_key = key
    return found


# -- dominated searches ---------------------------------------------------------------

# Per leaf: the state the failures were kept in, and for each failure the preemptor's
# key, priority and creation time, the usage it asked for, the needed flavor-resources,
# whether node room was searched, and the answer's message.
_Failure = tuple[str, int, int, dict[FR, int], frozenset[FR], bool, str]
_Failures = dict[int, tuple[tuple[int, int, int], list[_Failure]]]
_FAILURES = "_failed_searches"  # in ``session.state``: leaf index -> (state, failures)


def _failures(session: Session) -> _Failures:
    found: _Failures | None = session.state.get(_FAILURES)
    if found is None:
        found = session.state[_FAILURES] = {}
    return found


_VICTIMS = "_victims_by_tree"  # in ``session.state``: victims chosen so far, per queue tree


def search_state(session: Session, leaf: QuotaNode) -> tuple[int, int, int]:
    """The state a failed search answers in: the commits of the preemptor's queue tree,
    node room, and the victims chosen so far in that tree. Victims chosen in another tree
    are never candidates of this one, and take no quota from it."""
    statement = session.statement
    return (statement.epoch(leaf), statement.node_epoch, _victims_in_tree(session, leaf))


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
    kept = by_leaf.get(leaf.index)
    if kept is None or preemptor.is_deployment:
        return None
    failures = kept[1]
    if kept[0] != (state if state is not None else search_state(session, leaf)):
        del by_leaf[leaf.index]
        return None
    priority = preemptor.priority
    created = preemptor.created
    with_room = bool(targets)
    for failure in failures:
        _, p, c, asked, wanted, room, _ = failure
        if (
            (priority < p or (priority == p and created >= c))
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
    tries them, as (priority, creation time, message naming the judge): what is left of
    :func:`dominated` for a preemptor asking exactly that is the priority test. Kept by
    whoever asks the same request again and again (``heads.py``); :func:`answers_now`
    brings it up to date.

    ``state``: the search state ``failures`` was last read in. A leaf has one list of
    failures per state, made when its first failure is kept and dropped only once its
    state has moved on, and a state never comes back (every part of it only grows): so
    while the state is ``state`` and the list holds ``seen`` failures, ``found`` is
    :func:`answers_now`'s answer as it is (:meth:`current`)."""

    __slots__ = ("failures", "found", "needed", "seen", "state", "usage", "with_room")

    def __init__(self, usage: dict[FR, int], needed: frozenset[FR], with_room: bool) -> None:
        self.usage = usage
        self.needed = needed
        self.with_room = with_room
        self.failures: list[_Failure] | None = None  # the leaf's list these were read from
        self.seen = 0  # how many of its failures were read
        self.found: list[tuple[int, int, str]] = []
        self.state: tuple[int, int, int] | None = None

    def current(self, state: tuple[int, int, int]) -> list[tuple[int, int, str]] | None:
        """``found`` when nothing was kept since it was read in ``state`` (the current
        search state), else ``None`` (then ask :func:`answers_now`)."""
        failures = self.failures
        if self.state == state and failures is not None and self.seen == len(failures):
            return self.found
        return None


def answers_now(
    session: Session, leaf: QuotaNode, answers: Answers, state: tuple[int, int, int]
) -> list[tuple[int, int, str]] | None:
    """The failures of ``leaf`` kept in ``state`` (the current :func:`search_state`) that
    answer ``answers``' request, or ``None`` when none is kept in it. A preemptor (not a
    Deployment) asking that request is dominated, as :func:`dominated` says, by the first
    of them it is no stronger than; who takes that answer counts it with :func:`counted`."""
    by_leaf = _failures(session)
    kept = by_leaf.get(leaf.index)
    if kept is None:
        return None
    if kept[0] != state:
        del by_leaf[leaf.index]
        return None
    failures = kept[1]
    if failures is not answers.failures:
        answers.failures = failures
        answers.seen = 0
        answers.found = []
    if answers.seen != len(failures):
        usage, needed, with_room, found = answers.usage, answers.needed, answers.with_room, answers.found
        for failure in islice(failures, answers.seen, None):
            _, p, c, asked, wanted, room, _ = failure
            if wanted == needed and room == with_room and _asks_no_less(usage, asked):
                found.append((p, c, _judged_text(failure)))
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
    kept = by_leaf.get(leaf.index)
    failures: list[_Failure]
    if kept is None or kept[0] != state:
        failures = []
        by_leaf[leaf.index] = (state, failures)
    else:
        failures = kept[1]
    failures.append(
        (preemptor.key, preemptor.priority, preemptor.created, dict(usage), needed, bool(targets), result.message)
    )
    counts = counts if counts is not None else tally(session)
    counts.answered += 1
    if result.memo_key is not None:
        counts.keys.add(result.memo_key)
