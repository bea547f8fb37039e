"""Heads judged without a flavor scan: the nomination-level face of a failed search.

A failed victim search answers every weaker head of its queue asking the same in the
same state (:mod:`.memo`, :func:`~.failures.dominated`). A head whose whole nomination
ended without victims — every flavor ``NoFit`` or ``NoCandidates``, every search it
asked answered that way, and no plugin saying anything meanwhile — therefore decides
every later head of its queue with the same pod sets that is no stronger, while the
state stands: the flavor scan would evaluate the same flavors the same way (it reads
the pod sets, the queue and the state), and every search it would ask is answered by
a failure kept for the first head or one before it. The later head gets the first one's
assignment without a scan; its pending message is the one its own search would get
from :func:`~.failures.dominated`, naming the head it is judged with. Kept heads judge most
heads of a saturated session, each several: what judging needs of one is worked out once
(:class:`Kept`: its explanation line; the failed searches that may answer its request,
read again only as failures are added, :class:`~.failures.Answers`), so judging one more head
is the state check, the pod-set and priority tests (the cheapest first) and the message:
:func:`judge`. The rounds take the kept head's assignment as it is, with that message
(``actions/allocate.py``); :func:`judged_head` writes the judgement out as an assignment
of its own (a plugin ordering the round reads every entry's assignment).

Only where the scan is known: the assigner is ``flavor-fungibility`` or the framework's
own, the memo is on (every search hook ``MEMO_SAFE``), no plugin answers
``may_search_victims``, and the head is a plain pending workload (not elastic, not a
Deployment, no stored ``flavorScan`` to resume from).
"""

from __future__ import annotations

from ..model import Workload
from ..quota import QuotaNode
from ..session import NOCANDIDATES, NOFIT, Assignment, SearchResult, Session
from .failures import Answers, answers_now, search_state
from .memo import Said, plugins_said, tally

__all__ = ["Before", "Kept", "State", "head_counts", "judge", "judged_by", "judged_head", "keep_head", "kept_heads", "state_now"]

_HEADS = "_judged_heads"  # in ``session.state``: leaf index -> (state, kept heads)
_KNOWN = "_judged_heads_known"  # in ``session.state``: whether this session's scan is known
_ASSIGNERS = frozenset({"flavor-fungibility"})

State = tuple[int, int, int]  # failures.search_state
Before = tuple[Said, int, State]


class Kept:
    """A kept head and what judging another head by it needs, worked out once: the line
    every head it judges is explained by and, when it had no candidates, the failed
    searches that answer its request (:class:`~.failures.Answers`). ``count`` and
    ``requests`` (of its first pod set) tell most other heads apart before their pod
    sets are compared whole. Read-only once kept: the rounds may hand its assignment
    over as it is (see :func:`judge`)."""

    __slots__ = (
        "answers", "assignment", "count", "counters", "created", "first", "head", "level", "nofit", "pod_sets",
        "priority", "requests", "scan", "tally", "tried",
    )

    def __init__(self, head: Workload, assignment: Assignment, session: Session) -> None:
        self.head = head
        self.assignment = assignment
        # Its borrowing level as the rounds order their entries (none without a fit).
        self.nofit = assignment.mode == NOFIT
        self.level = assignment.level if not self.nofit else 0
        self.priority = head.priority
        self.created = head.created
        self.pod_sets = head.pod_sets
        first = head.pod_sets[0] if head.pod_sets else None
        self.count = first.count if first is not None else -1
        self.requests = first.requests if first is not None else None
        # Its only pod set, when it has one (compared field by field, :func:`judge`).
        self.first = first if len(head.pod_sets) == 1 else None
        # What a judgement counts, held so that judging reads no session state by name.
        self.tally = tally(session)
        self.counters = session.counters
        self.tried = f"flavors as for {head.key}: the same pod sets, no lower priority, the same state"
        self.answers = (
            Answers(assignment.usage, assignment.needed, assignment.node_short)
            if assignment.mode == NOCANDIDATES
            else None
        )
        # A copy of its assignment's flavor scan (complete once it is kept), the one every
        # head it judges stores (``Decisions.flavor_scans`` is read, never changed, by whoever
        # writes it); ``None`` when it has none (a judged head then stores none).
        scan = assignment.flavor_scan
        self.scan: dict[str, dict[str, int]] | None = dict(scan) if scan else None


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
    return _counts(session, workload, leaf)


def _counts(session: Session, workload: Workload, leaf: QuotaNode) -> Before:
    """:func:`head_counts` of a judgeable head: what the plugins said, the searches not
    answerable by the memo, and the tree's search state."""
    counts = tally(session)
    return plugins_said(session, workload), counts.asked - counts.answered, search_state(session, leaf)


def keep_head(
    session: Session, leaf: QuotaNode, workload: Workload, assignment: Assignment, before: Before | None
) -> None:
    """Keep ``workload``'s nomination to judge later heads by, when it may (see the module)."""
    if before is None or assignment.mode not in (NOFIT, NOCANDIDATES):
        return
    # ``head_counts`` again: what made ``workload`` judgeable is fixed for it and the
    # session but for the statement's held operations, tested here.
    if assignment.victims or assignment.vetoed_by or session.statement.ops:
        return
    if _counts(session, workload, leaf) != before:
        return  # a plugin spoke, a search was not answerable so, or the state moved
    state = before[-1]
    heads: dict[int, tuple[State, list[Kept]]] = session.state.setdefault(_HEADS, {})
    kept = heads.get(leaf.index)
    if kept is None or kept[0] != state:
        kept = heads[leaf.index] = (state, [])
    kept[1].append(Kept(workload, assignment, session))


def judge(
    session: Session, leaf: QuotaNode, workload: Workload, states: dict[int, State] | None = None
) -> tuple[Kept, str] | None:
    """The kept head that judges ``workload`` and the pending message ``workload`` gets
    (its search's answer, naming the head it is judged with), or ``None``; a judgement
    is counted as :func:`judged_head` counts it. The judgement is the kept head's
    assignment with that message (:func:`judged_head` writes it out): a caller that only
    reads it may take ``Kept.assignment`` as it is instead, and must not change it.

    ``states``: :func:`~.failures.search_state` by queue tree (the root's index), kept by a
    caller while nothing is committed and no victim chosen (the nominations of a round):
    a search state is one of a whole tree."""
    # Heads are kept only in a session whose scan is known and whose memo is on (both
    # fixed for the session, ``_judgeable``): what is left to ask is the head's own. An
    # elastic head (a pod set with a min count) has the pod sets of no kept head.
    if session.statement.ops or workload.flavor_scan or workload.is_deployment or workload.admission is not None:
        return None
    if states is None:
        state = search_state(session, leaf)
    else:
        root = leaf.root.index
        known = states.get(root)
        if known is None:
            known = states[root] = search_state(session, leaf)
        state = known
    kept = kept_heads(session, leaf, state)
    if kept is None:
        return None
    found = judged_by(session, leaf, kept, state, workload)
    if found is not None:
        head = found[0]
        counters = head.counters
        if head.answers is not None:
            counters.dominated += 1  # failures.counted, with the tally held
            head.tally.answered += 1
        counters.judged += 1
    return found


def kept_heads(session: Session, leaf: QuotaNode, state: State) -> list[Kept] | None:
    """The heads kept in ``leaf`` that may judge its heads in ``state`` (the current
    :func:`~.failures.search_state`), or ``None``. The list grows as ``leaf``'s nominations
    keep more heads in that state; a nomination of ``leaf`` in another state starts a new
    one (:func:`keep_head`)."""
    heads: dict[int, tuple[State, list[Kept]]] | None = session.state.get(_HEADS)
    if heads is None:
        return None
    kept = heads.get(leaf.index)
    if kept is None or kept[0] != state:
        return None
    return kept[1]


def state_now(session: Session, leaf: QuotaNode, before: State | None) -> State:
    """:func:`~.failures.search_state` of ``leaf``: ``before`` itself when it is the same
    (a caller keeping what it read in a state tells by identity that the state stands)."""
    state = search_state(session, leaf)
    if before is not None and before == state:
        return before
    return state


def judged_by(
    session: Session, leaf: QuotaNode, kept: list[Kept], state: State, workload: Workload
) -> tuple[Kept, str] | None:
    """:func:`judge` of ``workload``, a plain pending workload (no stored flavor scan, not
    a Deployment, not admitted) offered while nothing is held (``statement.ops`` empty),
    by the heads ``kept`` of ``leaf`` in ``state`` (:func:`kept_heads`, the current state);
    not counted: the caller counts the judgement as :func:`judge` does."""
    pod_sets = workload.pod_sets
    first = pod_sets[0] if pod_sets else None
    if first is not None:
        count, requests = first.count, first.requests
        if len(pod_sets) != 1:
            first = None
    else:
        count, requests = -1, None
    priority, created = workload.priority, workload.created
    for head in kept:
        # The kept head's pod sets equal these, and it is no weaker (its priority higher,
        # or the same and created no later); the cheap tests first.
        if head.count != count or (head.requests is not requests and head.requests != requests):
            continue
        if priority > head.priority or (priority == head.priority and created < head.created):
            continue
        them = head.first
        if first is not None and them is not None:
            # One pod set each, count and requests equal, the kept one no min count: the
            # rest of PodSet.
            if not (
                them.name == first.name
                and first.min_count is None
                and them.node_selector == first.node_selector
                and them.tolerations == first.tolerations
            ):
                continue
        elif head.pod_sets != pod_sets:
            continue
        answers = head.answers
        if answers is None:
            return head, head.assignment.message
        # The answer its own search would get: the same request, a weaker preemptor
        # (failures.dominated, its failures filtered once for this request).
        failures = answers.failures
        found: list[tuple[int, int, str, str]] | None
        if answers.state == state and failures is not None and answers.seen == len(failures):
            found = answers.found  # Answers.current
        else:
            found = answers_now(session, leaf, answers, state)
        if found is None:
            return None
        for p, c, said, judge_key in found:
            if (priority < p or (priority == p and created >= c)) and judge_key != workload.key:
                return head, said
        return None
    return None


def judged_head(session: Session, leaf: QuotaNode, workload: Workload) -> Assignment | None:
    """The assignment of a kept head that judges ``workload`` (:func:`judge`), written
    out for ``workload``; or ``None``."""
    found = judge(session, leaf, workload)
    if found is None:
        return None
    head, message = found
    assignment = head.assignment
    search = None
    if head.answers is not None:
        search = SearchResult([], True, 0, frozenset(), message, [message], [], None, None, True)
    # Positional, in the order of the fields (tests/framework/test_judged_heads.py holds
    # it to ``dataclasses.replace``).
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
        [head.tried],
    )
