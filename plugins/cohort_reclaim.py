"""Plugin ``cohort-reclaim``: victims in other queues of the cohort tree (SEMANTICS §4).

Walks the preemptor's ancestors from its parent up. At each ancestor it looks
at the part of the subtree not yet visited, skipping every queue or cohort
that is within its nominal on all the needed flavor-resources (a lender is
never a victim while it only uses what it lends to nobody), and offers the
workloads that ``reclaimWithinCohort`` allows, each classed:

* hierarchical reclaim — the preemptor already has the *advantage* at this
  level (it is within its own nominal, or fits an ancestor below);
* reclaim without borrowing — ``borrowWithinCohort`` is ``Never``, or the
  candidate is not below the preemptor's priority, or above
  ``maxPriorityThreshold``: usable only in an attempt that ends within nominal;
* reclaim while borrowing — the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized

from preemptd.framework import (
    CLASS_HIERARCHICAL,
    CLASS_OTHER_QUEUE,
    FR,
    IN_COHORT_RECLAIM,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    Accounting,
    Candidate,
    Offer,
    QuotaNode,
    Session,
    Source,
    VictimSearch,
    Workload,
    hookimpl,
    queue_units,
    takes_by_queue,
)

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)
NAME = "cohort-reclaim"  # its per-session answers and sibling cohorts' parts, per tree (_Tree)
ABOVE = "cohort-reclaim/above"  # and of the queues and cohorts above nominal (_above)
ABOVE_ON = "cohort-reclaim/above-on"  # and of what each cohort's children are above nominal on
REACHED = "cohort-reclaim/reached"  # and of those with a workload below a priority bound (_reached)
SPANS = "cohort-reclaim/spans"  # and of each node's priorities of admitted workloads (_span)
OFFERS = "cohort-reclaim/offers"  # and of each sibling queue's part of an answer (_collect, _read_part)

KEEP_OFFERS = True
"""Whether a sibling queue's part of an answer (its runs and its count of left-out units)
is kept while nothing is taken from it (tests turn it off to compare with reading the
queue's lists at every search)."""

# A part of an answer, as the ranges of the candidate index it is made of (an Offer's
# runs: the framework filters and sums them per range), and the units left out.
_Kept = tuple[list[tuple[Source, int, int]], int]
# A tree's state, its answers (per queue, question and advantage by level) and its cohorts' parts (per question).
_Tree = tuple[tuple[int, int, int], dict[tuple[object, ...], tuple[Offer, int]], dict[tuple[object, ...], dict[tuple[int, bool], _Kept]]]


class _Part:
    """A sibling queue's part of an answer (:func:`_offer`): its candidates, their runs and
    the units left out, read at the queue's ``takes`` (``queue_takes``); ``seen``: how many
    units the session had taken (``session.relied``) when it was last found current."""

    __slots__ = ("left_out", "runs", "seen", "takes", "units")

    def __init__(self, takes: int, seen: int, units: tuple[Candidate, ...], runs: tuple[tuple[Source, int, int], ...], left_out: int) -> None:
        self.takes, self.seen, self.units, self.runs, self.left_out = takes, seen, units, runs, left_out


def _fits_at(accounting: Accounting, leaf: QuotaNode, ancestor: QuotaNode, usage: Mapping[FR, int]) -> bool:
    """usage(A) + remaining <= subtree(A) on every requested fr, where remaining is the
    request less what the levels below A can still supply from their local reserves."""
    for fr, request in usage.items():
        amount = request
        node: QuotaNode | None = leaf
        while node is not None and node is not ancestor:
            amount -= max(0, node.guaranteed.get(fr, 0) - accounting.used(node, fr))
            node = node.parent
        if accounting.used(ancestor, fr) + max(0, amount) > ancestor.subtree.get(fr, 0):
            return False
    return True


@hookimpl
def preemption_candidates(session: Session, preemptor: Workload, assignment: VictimSearch) -> list[Candidate]:
    if not session.cross_queue_enabled:
        return []
    leaf = assignment.leaf
    policy = leaf.spec.preemption
    if policy.reclaim_within_cohort == "Never" or leaf.parent is None:
        return []
    accounting = session.accounting
    usage = assignment.usage
    advantage = all(
        accounting.used(leaf, fr) + amount <= leaf.subtree.get(fr, 0) for fr, amount in usage.items()
    )
    # The advantage at each ancestor, for its siblings (only reads: nothing changes while
    # the candidates are collected).
    levels: list[tuple[QuotaNode, QuotaNode, bool]] = []
    child = leaf
    ancestor: QuotaNode | None = leaf.parent
    while ancestor is not None:
        levels.append((ancestor, child, advantage))
        if not advantage and _fits_at(accounting, leaf, ancestor, usage):
            advantage = True
        child = ancestor
        ancestor = ancestor.parent
    high = preemptor.priority if policy.reclaim_within_cohort == "LowerPriority" else None
    cut: int | None = None
    if policy.borrow_within_cohort != "Never":
        cut = preemptor.priority
        if policy.max_priority_threshold is not None:
            cut = min(cut, policy.max_priority_threshold + 1)
    if not (assignment.borrowing_only and cut is None and not any(level[2] for level in levels)):
        # It may offer more as usage grows (a sibling going above its nominal), unless it
        # only counts, as without the advantage a search that may only borrow (_offer):
        # both stay so as usage grows (``VictimSearch.lasting``).
        assignment.lasting = False
    else:
        assignment.counts_later = True  # what it counts may grow so
    # The answer is a function of the committed state of the queue tree (its epoch), the
    # units taken so far, the request and the priority bounds: kept per session for the
    # next preemptor of the same queue asking the same, as heads of a queue often do.
    # So is each sibling cohort's part of it, which preemptors of other queues of the
    # tree, asking the same, share: the answer is those parts in the same order. A
    # queue's part is kept longer, while nothing is taken from it (_collect). Answers and
    # parts are kept per tree at its state (its epoch, the units and workloads taken) and
    # dropped at its next: none is asked for at a state gone by (each of the three grows).
    statement = session.statement
    key = None
    parts: dict[tuple[int, bool], _Kept] | None = None
    if not statement.ops:
        state = (statement.epoch(leaf), len(session.relied), len(session.taken))
        trees: dict[int, _Tree] = session.state.setdefault(NAME, {})
        tree = trees.get(leaf.root.index)
        if tree is None or tree[0] != state:
            tree = trees[leaf.root.index] = (state, {}, {})
        asked = (assignment.needed, assignment.with_room, assignment.borrowing_only, high, cut, session.defer_pods)
        key = (leaf.index, asked, tuple(level[2] for level in levels))
        kept = tree[1]
        found = kept.get(key)
        if found is not None:
            assignment.left_out += found[1]
            return found[0]  # the framework only reads an answer (hook ``preemption_candidates``)
        parts = tree[2].get(asked)
        if parts is None:
            parts = tree[2][asked] = {}
    left_out = assignment.left_out
    out = Offer()
    epoch = statement.epoch(leaf) if key is not None else None
    tables = _tables(session, assignment, high, cut)
    seen = len(session.relied)
    takes = takes_by_queue(session) if tables is not None else {}
    for ancestor, child, at_level in levels:
        table = tables[at_level] if tables is not None else None
        # A sibling within nominal on every needed flavor-resource is skipped: neither it
        # nor anything below it is reclaimed.
        reached = _reached(session, ancestor, assignment.needed, epoch, high)
        _collect(session, assignment, reached, child, at_level, high, cut, out, epoch, table, seen, takes, parts)
    if key is not None:
        kept[key] = (out, assignment.left_out - left_out)
    return out


def _collect(
    session: Session,
    assignment: VictimSearch,
    reached: list[tuple[QuotaNode, tuple[int, int]]],
    skip: QuotaNode | None,
    advantage: bool,
    high: int | None,
    cut: int | None,
    out: Offer,
    epoch: int | None,
    table: dict[int, _Part] | None,
    seen: int,
    takes: Mapping[str, Sized],
    parts: dict[tuple[int, bool], _Kept] | None,
) -> None:
    """The candidates of the nodes ``reached`` (:func:`_reached`) but ``skip``, in order: of
    a queue, its part kept in ``table`` while current (``seen``, ``takes``: see
    :func:`_read_part`), else read; of a cohort, its part kept in ``parts`` (the sibling
    cohorts' parts of answers asking the same at one committed state of the tree), else
    the candidates of its own children reached. One call per level walked, not per queue:
    most of a search's queues only hand a kept part."""
    for node, span in reached:
        if node is skip:
            continue
        if node.is_leaf:
            if table is None:
                _offer(session, assignment, node, span, advantage, high, cut, out)
                continue
            part = table.get(node.index)
            if part is not None and (part.seen == seen or part.takes == len(takes.get(node.name, ()))):
                part.seen = seen
                if part.units:
                    out.extend(part.units)
                    out.runs.extend(part.runs)
                    out.size += len(part.units)
                assignment.left_out += part.left_out
                continue
            _read_part(session, assignment, node, span, advantage, high, cut, out, table, seen, takes)
            continue
        found = parts.get((node.index, advantage)) if parts is not None else None
        if found is not None:
            for run in found[0]:
                out.add(*run)
            assignment.left_out += found[1]
            continue
        start = len(out.runs)
        before = assignment.left_out
        below = _reached(session, node, assignment.needed, epoch, high)
        _collect(session, assignment, below, None, advantage, high, cut, out, epoch, table, seen, takes, None)
        if parts is not None:
            parts[(node.index, advantage)] = (out.runs[start:], assignment.left_out - before)


def _tables(
    session: Session, assignment: VictimSearch, high: int | None, cut: int | None
) -> tuple[dict[int, _Part], dict[int, _Part]] | None:
    """The session's kept sibling-queue parts (:func:`_read_part`) a search reads, without
    and with the advantage: per what :func:`_offer` reads besides the queue's lists and
    span (fixed for the session), then per queue. With the advantage it reads ``high``
    alone; without, the bounds and whether the search only borrows, and then (it only
    counts within-nominal units) the request. None when not kept: while a node-by-node
    search collects candidates the lists are built for that collection only."""
    if not KEEP_OFFERS or session.defer_pods:
        return None
    kept: dict[tuple[object, ...], dict[int, _Part]] | None = session.state.get(OFFERS)
    if kept is None:
        kept = session.state[OFFERS] = {}
    only = assignment.borrowing_only
    plain = (False, high, cut, only, assignment.needed if only else None, assignment.with_room if only else None)
    return kept.setdefault(plain, {}), kept.setdefault((True, high), {})


def _above(session: Session, node: QuotaNode, needed: frozenset[FR], epoch: int | None) -> list[QuotaNode]:
    """The children of ``node`` above nominal on a needed flavor-resource, in order. They
    read the committed usage of the tree while nothing is uncommitted (``epoch``, the
    tree's, is then given): kept per cohort and needed flavor-resources for the searches
    of every queue of the tree while the cohort's reading (:func:`_reading`) stands, and
    made from the flavor-resources each child is above nominal on, read once per cohort
    and commit (:func:`_above_on`) for every needed set asked."""
    if epoch is None:
        return [child for child, over in _above_on(session, node) if over and not needed.isdisjoint(over)]
    kept: dict[tuple[int, frozenset[FR]], tuple[list[tuple[QuotaNode, frozenset[FR]]], list[QuotaNode]]] | None
    kept = session.state.get(ABOVE)
    if kept is None:
        kept = session.state[ABOVE] = {}
    read = _reading(session, node, epoch)
    found = kept.get((node.index, needed))
    if found is not None and found[0] is read:
        return found[1]
    above = [child for child, over in read if over and not needed.isdisjoint(over)]
    if found is not None and found[1] == above:
        above = found[1]  # the same children: the answers kept beside it stand
    kept[(node.index, needed)] = (read, above)
    return above


def _reading(session: Session, node: QuotaNode, epoch: int) -> list[tuple[QuotaNode, frozenset[FR]]]:
    """:func:`_above_on` of ``node`` at the tree's ``epoch``. After a commit to the tree, only
    the children whose committed usage changed (compared with a copy kept with the reading)
    are read again: a commit moves the usage of one queue and its ancestors, and what a child
    is above nominal on is a function of its own usage. While what every child is above
    nominal on stays as it was, the reading is the same list, which every answer made from
    it is kept beside; else a new list, holding the unchanged children's entries."""
    children: dict[int, tuple[int, list[tuple[QuotaNode, frozenset[FR]]], list[dict[FR, int]]]] | None
    children = session.state.get(ABOVE_ON)
    if children is None:
        children = session.state[ABOVE_ON] = {}
    entry = children.get(node.index)
    all_usage = session.accounting.usage
    if entry is None:
        read = _above_on(session, node)
        children[node.index] = (epoch, read, [dict(all_usage[child.index]) for child in node.children])
        return read
    if entry[0] == epoch:
        return entry[1]
    read, copies = entry[1], entry[2]
    changed: list[tuple[QuotaNode, frozenset[FR]]] | None = None
    for i, child in enumerate(node.children):
        usage = all_usage[child.index]
        if usage == copies[i]:
            continue
        copies[i] = dict(usage)
        over = _over(child, usage)
        if over != read[i][1]:
            if changed is None:
                changed = list(read)
            changed[i] = (child, over)
    if changed is not None:
        read = changed
    children[node.index] = (epoch, read, copies)
    return read


def _reached(
    session: Session, node: QuotaNode, needed: frozenset[FR], epoch: int | None, high: int | None
) -> list[tuple[QuotaNode, tuple[int, int]]]:
    """The children of :func:`_above` that run a workload of priority below ``high``
    (``None``: any), each with the priorities of the workloads below it (:func:`_span`).

    Every range a search reads of a queue (``_offer``) lies below ``high``: a child whose
    workloads are all of ``high`` or above adds nothing to the answer and counts nothing
    left out, and is passed over without reading its lists. Kept per bound beside the
    answer of ``_above`` it was made from, while ``_above`` answers with that list, and
    with the tree's epoch it was last handed at: within one epoch ``_above`` answers with
    the same list (its reading stands), so the kept answer is handed without asking it."""
    if epoch is None:
        return _below(session, _above(session, node, needed, epoch), high)
    kept: dict[tuple[int, frozenset[FR], int | None], tuple[int, list[QuotaNode], list[tuple[QuotaNode, tuple[int, int]]]]]
    kept = session.state.setdefault(REACHED, {})
    key = (node.index, needed, high)
    found = kept.get(key)
    if found is not None and found[0] == epoch:
        return found[2]
    above = _above(session, node, needed, epoch)
    reached = found[2] if found is not None and found[1] is above else _below(session, above, high)
    kept[key] = (epoch, above, reached)
    return reached


def _below(
    session: Session, nodes: list[QuotaNode], high: int | None
) -> list[tuple[QuotaNode, tuple[int, int]]]:
    spans: dict[int, tuple[int, int] | None] = session.state.setdefault(SPANS, {})  # _span's table
    out = []
    for node in nodes:
        span = spans[node.index] if node.index in spans else _span(session, node)
        if span is not None and (high is None or span[0] < high):
            out.append((node, span))
    return out


def _span(session: Session, node: QuotaNode) -> tuple[int, int] | None:
    """The lowest and highest priority of the admitted workloads of the queues below
    ``node`` (None: none). The candidate index lists exactly these workloads of a queue,
    by priority, whatever the session takes (``queue_units``): its ranges are ranges of
    these priorities. Read once per session (the snapshot does not change in one)."""
    spans: dict[int, tuple[int, int] | None] | None = session.state.get(SPANS)
    if spans is None:
        spans = session.state[SPANS] = {}
    if node.index in spans:
        return spans[node.index]
    span: tuple[int, int] | None = None
    if node.is_leaf:
        listing = session.snapshot.admitted_by_queue.get(node.name, ())
        if listing:
            priorities = [workload.priority for workload in listing]
            span = (min(priorities), max(priorities))
    else:
        found = [one for one in (_span(session, child) for child in node.children) if one is not None]
        if found:
            span = (min(one[0] for one in found), max(one[1] for one in found))
    spans[node.index] = span
    return span


def _above_on(session: Session, node: QuotaNode) -> list[tuple[QuotaNode, frozenset[FR]]]:
    """Each child of ``node``, in order, with the flavor-resources it uses more of than its
    nominal (subtree) quota."""
    all_usage = session.accounting.usage
    return [(child, _over(child, all_usage[child.index])) for child in node.children]


def _over(node: QuotaNode, usage: Mapping[FR, int]) -> frozenset[FR]:
    """The flavor-resources ``node`` uses more of than its nominal (subtree) quota."""
    subtree = node.subtree
    over = [fr for fr, used in usage.items() if used > subtree.get(fr, 0)]
    # A flavor-resource it does not use is above a quota only below zero.
    over.extend(fr for fr, quota in subtree.items() if quota < 0 and fr not in usage)
    return frozenset(over)


def _offer(
    session: Session,
    assignment: VictimSearch,
    leaf: QuotaNode,
    span: tuple[int, int],
    advantage: bool,
    high: int | None,
    cut: int | None,
    out: Offer,
) -> None:
    """The candidates of ``leaf``, a queue above nominal on a needed flavor-resource,
    with a workload below ``high``; ``span``: the lowest and highest priority of its
    workloads (a range without any of them is not asked for: nothing is read)."""
    # Each class is a range of priorities of the queue's units (the candidate index):
    # reclaimWithinCohort LowerPriority keeps those below the preemptor's (``high``);
    # without the advantage, those below ``cut`` (the preemptor's priority and
    # maxPriorityThreshold + 1) are reclaimed while borrowing (unless
    # borrowWithinCohort is Never: no cut), the rest only within nominal.
    if advantage:
        hierarchical = queue_units(session, leaf, reason=IN_COHORT_RECLAIM, group=CLASS_HIERARCHICAL)
        hierarchical.offer_between(out, None, high)
        return
    if cut is not None and span[0] < cut:
        borrowing = queue_units(session, leaf, reason=IN_COHORT_RECLAIM_WHILE_BORROWING, group=CLASS_OTHER_QUEUE)
        borrowing.offer_between(out, None, cut)
    # Units usable only within nominal: offered, or only counted when every attempt of
    # the search borrows (``VictimSearch.borrowing_only``: the search never takes them),
    # then from any list of the queue the candidate index holds (``any_class``).
    if cut is not None and (span[1] < cut or (high is not None and cut >= high)):
        return
    borrowing_only = assignment.borrowing_only
    within = queue_units(
        session, leaf, reason=IN_COHORT_RECLAIM, group=CLASS_OTHER_QUEUE, only_within_nominal=True,
        any_class=borrowing_only,
    )
    if borrowing_only:
        assignment.left_out += within.count_between(cut, high, assignment.needed, assignment.with_room)
    else:
        within.offer_between(out, cut, high)


def _read_part(
    session: Session,
    assignment: VictimSearch,
    leaf: QuotaNode,
    span: tuple[int, int],
    advantage: bool,
    high: int | None,
    cut: int | None,
    out: Offer,
    table: dict[int, _Part],
    seen: int,
    takes: Mapping[str, Sized],
) -> None:
    """:func:`_offer`, its part kept in ``table`` (one of :func:`_tables`, which holds what
    else it reads) at the queue's takes. A queue's lists change only when the session takes
    from one of its workloads (``queue_takes``): until then they are the same lists, and the
    part is the same runs of them and the same count, whatever is taken from other queues.
    :func:`_collect` hands a kept part while the session has taken nothing at all (``seen``,
    units taken, has not moved) or the queue's takes are those it was read at (``takes``,
    ``takes_by_queue``, read once per answer: nothing is taken while one is collected)."""
    size = len(out)
    start = len(out.runs)
    before = assignment.left_out
    _offer(session, assignment, leaf, span, advantage, high, cut, out)
    left_out = assignment.left_out - before
    # Tuples: a session keeps thousands of parts, many empty (one shared empty tuple).
    table[leaf.index] = _Part(len(takes.get(leaf.name, ())), seen, tuple(out[size:]), tuple(out.runs[start:]), left_out)
