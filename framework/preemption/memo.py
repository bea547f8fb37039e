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

A failed search also answers the searches it dominates (``failures.py``).

It is exact only when every plugin consulted keeps the contract of ``MEMO_SAFE``
(``session/hooks.py``); otherwise the session runs with ``memo = None``. Vetoes
the search counted are counted again on every answer from memory; a search in
which a plugin failed is not remembered (its failure is counted once per run).
A Deployment's replica search that placed replicas keeps a resumable search
object and is not remembered either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import SearchResult, Session

__all__ = [
    "Tally",
    "asked_again",
    "memo_key",
    "plugins_said",
    "recall",
    "remember",
    "remember_unsaid",
    "replay",
    "tally",
]

Key = tuple[Any, ...]
_LEAF = 6  # where memo_key puts the leaf's index
_USAGE = 7  # and the usage asked for
_STATE = 10  # and, from there on, the state it is asked in (tree epoch, node room, takes)


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
    by one (``failures.dominated``), kept as one (``failures.remember_failure``), or recalled from
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


def remember_unsaid(session: Session, key: Key, result: SearchResult) -> None:
    """:func:`remember` of an answer given with no plugin asked or counting anything (a
    failure's dominated answer, ``failures.dominated``): kept with no vetoes, as
    :func:`remember` keeps it, without reading the plugins' counts before and after."""
    assert session.memo is not None  # a key is made only with the memo on
    assert not result.replicas and result.resume is None
    session.memo[key] = (result, ())


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
    counts = tally(session)
    found = recall(session, key, counts)
    if found is not None:
        counts.asked += 1
        found.memo_key = key
    return found
