"""Heads judged without a flavor scan: the nomination-level face of a failed search.

A failed victim search answers every weaker head of its queue asking the same in the
same state (:mod:`.memo`, :func:`~.memo.dominated`). A head whose whole nomination
ended without victims — every flavor ``NoFit`` or ``NoCandidates``, every search it
asked answered that way, and no plugin saying anything meanwhile — therefore decides
every later head of its queue with the same pod sets that is no stronger, while the
state stands: the flavor scan would evaluate the same flavors the same way (it reads
the pod sets, the queue and the state), and every search it would ask is answered by
a failure kept for the first head or one before it. The later head gets the first one's
assignment without a scan; its pending message is the one its own search would get
from :func:`~.memo.dominated`, naming the head it is judged with. Kept heads judge most
heads of a saturated session, each several: what judging needs of one is worked out once
(:class:`_Kept`: its explanation line; the failed searches that may answer its request,
read again only as failures are added, :class:`~.memo.Answers`), so judging one more head
is the state check, the priority and pod-set tests, and its own assignment.

Only where the scan is known: the assigner is ``flavor-fungibility`` or the framework's
own, the memo is on (every search hook ``MEMO_SAFE``), no plugin answers
``may_search_victims``, and the head is a plain pending workload (not elastic, not a
Deployment, no stored ``flavorScan`` to resume from).
"""

from __future__ import annotations

from ..model import Workload
from ..quota import QuotaNode
from ..session import NOCANDIDATES, NOFIT, Assignment, SearchResult, Session
from .memo import Answers, Said, answers_now, counted, plugins_said, search_state, tally

__all__ = ["Before", "head_counts", "judged_head", "keep_head"]

_HEADS = "_judged_heads"  # in ``session.state``: leaf index -> (state, kept heads)
_KNOWN = "_judged_heads_known"  # in ``session.state``: whether this session's scan is known
_ASSIGNERS = frozenset({"flavor-fungibility"})

Before = tuple[Said, int, tuple[int, int, int]]


class _Kept:
    """A kept head and what judging another head by it needs, worked out once: the line
    every head it judges is explained by and, when it had no candidates, the failed
    searches that answer its request (:class:`~.memo.Answers`)."""

    __slots__ = ("answers", "assignment", "created", "head", "pod_sets", "priority", "tried")

    def __init__(self, head: Workload, assignment: Assignment) -> None:
        self.head = head
        self.assignment = assignment
        self.priority = head.priority
        self.created = head.created
        self.pod_sets = head.pod_sets
        self.tried = f"flavors as for {head.key}: the same pod sets, no lower priority, the same state"
        self.answers = (
            Answers(assignment.usage, assignment.needed, assignment.node_short)
            if assignment.mode == NOCANDIDATES
            else None
        )


def _judgeable(session: Session, workload: Workload) -> bool:
    if session.memo is None or session.statement.ops or workload.flavor_scan:
        return False
    if workload.is_deployment or workload.admission is not None:
        return False
    for pod_set in workload.pod_sets:  # ``workload.is_elastic``, without a generator
        if pod_set.min_count is not None:
            return False
    known: bool | None = session.state.get(_KNOWN)
    if known is None:
        # The same for the whole session: who assigns flavors, who may widen the search.
        policy = session.policy
        assigners = {impl.plugin for impl in session.registry.impls("assign_flavors")}
        widened = policy is not None and bool(policy.allowed)
        known = session.state[_KNOWN] = assigners <= _ASSIGNERS and not widened
    return known


def head_counts(session: Session, workload: Workload, leaf: QuotaNode) -> Before | None:
    """What a nomination may change that :func:`keep_head` reads; ``None`` for a head
    that can judge nobody."""
    if not _judgeable(session, workload):
        return None
    counts = tally(session)
    return plugins_said(session, workload), counts.asked - counts.answered, search_state(session, leaf)


def keep_head(
    session: Session, leaf: QuotaNode, workload: Workload, assignment: Assignment, before: Before | None
) -> None:
    """Keep ``workload``'s nomination to judge later heads by, when it may (see the module)."""
    if before is None or assignment.mode not in (NOFIT, NOCANDIDATES):
        return
    if assignment.victims or assignment.vetoed_by or head_counts(session, workload, leaf) != before:
        return  # a plugin spoke, a search was not answerable so, or the state moved
    state = before[-1]
    heads: dict[int, tuple[tuple[int, int, int], list[_Kept]]] = session.state.setdefault(_HEADS, {})
    kept = heads.get(leaf.index)
    if kept is None or kept[0] != state:
        kept = heads[leaf.index] = (state, [])
    kept[1].append(_Kept(workload, assignment))


def judged_head(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment | None:
    """The assignment of a kept head that judges ``workload``, or ``None``."""
    heads: dict[int, tuple[tuple[int, int, int], list[_Kept]]] | None = session.state.get(_HEADS)
    if heads is None:
        return None
    kept = heads.get(leaf.index)
    if kept is None:
        return None
    state = search_state(session, leaf)
    if kept[0] != state or not _judgeable(session, workload):
        return None
    priority, created = workload.priority, workload.created
    pod_sets = workload.pod_sets
    for judge in kept[1]:
        if not (priority < judge.priority or (priority == judge.priority and created >= judge.created)):
            continue
        if judge.pod_sets != pod_sets:
            continue
        assignment = judge.assignment
        message = assignment.message
        search = None
        answers = judge.answers
        if answers is not None:
            # The answer its own search would get: the same request, a weaker preemptor
            # (memo.dominated, its failures filtered once for this request).
            found = answers_now(session, leaf, answers, state)
            if found is None:
                return None
            for p, c, said in found:
                if priority < p or (priority == p and created >= c):
                    message = said
                    break
            else:
                return None
            counted(session)
            search = SearchResult([], True, 0, frozenset(), message, [message], [], None, None, True)
        session.counters.judged += 1
        # Positional, in the order of the fields (tests/framework/test_judged_heads.py holds
        # it to ``dataclasses.replace``): a head is judged thousands of times a session.
        return Assignment(
            workload,
            assignment.leaf,
            list(assignment.pod_sets),
            dict(assignment.usage),
            assignment.mode,
            assignment.level,
            assignment.needed,
            message,
            [],  # victims
            assignment.allow_borrowing,
            assignment.vetoed_by,
            assignment.node_short,
            assignment.blocked,
            assignment.committed_total,
            assignment.replicas,
            search,
            assignment.flavor_scan,  # written only while its scan builds it
            [judge.tried],
        )
    return None
