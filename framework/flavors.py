"""Flavor assignment primitives (SEMANTICS §3) and the default assigner.

:func:`evaluate_flavor` tells, for one podSet, one resource group and one
flavor, what trying that flavor would mean: ``NoFit``, ``Fit`` (with a
borrowing level), or needing victims (``Preempt`` / ``Reclaim`` /
``NoCandidates``, decided by a real victim search). The
``flavor-fungibility`` plugin builds its scan on it; without that plugin the
framework takes the first flavor that fits, else the best that can preempt.

What :func:`evaluate_flavor` finds before its victim search (the usage, the quota
checks, whether the pods fit the nodes: :class:`_Checks`) is measured on the state as
it stands at each call: a head asking the same of a queue tree that did not move is
judged by a kept head of its queue without a scan (``preemption/heads.py``), so a
later call on the same flavor and shape finds the tree moved. Whether pods of a shape
fit the nodes is kept across queues while node room stands (:func:`_pods_fit_now`; several
podSets placed together by :func:`finish_assignment`, :func:`_targets_fit_now`).
:func:`finish_assignment` takes over what the option whose search it reuses measured,
instead of measuring it again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from .model import FR, PodSet, ResourceGroup, Workload
from .nodes import flavor_taints_tolerated
from .nodes.witness import Witness, fit_witness, witness_holds
from .preemption import asked_again, find_victims
from .preemption.victims import search_targets
from .quantity import format_quantity
from .quota import QuotaNode, fr_of
from .session import (
    CLASS_SAME_QUEUE,
    FIT,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorOption,
    PodSetAssignment,
    SearchResult,
    Session,
)

__all__ = ["default_assign", "evaluate_flavor", "finish_assignment", "search_flavor"]


def _selector_conflict(pod_set: PodSet, node_labels: Mapping[str, str]) -> str | None:
    for key, value in node_labels.items():
        wanted = pod_set.node_selector.get(key)
        if wanted is not None and wanted != value:
            return f"nodeSelector {key}={wanted} does not match the flavor's {key}={value}"
    return None


@dataclass(slots=True)
class _Checks:
    """What :func:`evaluate_flavor` found before its victim search, for one podSet on one
    flavor of one leaf, on the state as it stood.

    ``mode``: ``NoFit`` or ``Fit`` when that is the whole answer (with ``message`` and
    ``level``), else ``-1``: a search is needed. Then the usage asked for, the
    flavor-resources the search needs, whether the nodes lack room, the borrowing level
    of what fits, and (once a search found no victims) the borrowing level on current
    usage."""

    mode: int
    usage: dict[FR, int]
    message: str = ""
    needed: frozenset[FR] = frozenset()
    node_short: bool = False
    level: int = 0
    current: int = -1


def evaluate_flavor(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    pod_set: PodSet,
    count: int,
    group: ResourceGroup,
    flavor_name: str,
    prior: Mapping[FR, int],
    *,
    defer: bool = False,
) -> FlavorOption:
    """Try ``flavor_name`` for ``count`` pods of ``pod_set`` on top of ``prior`` usage.

    ``defer``: a flavor that needs victims gets no search but ``unsearched`` set, with the
    best mode and level a search could give it; :func:`search_flavor` runs it later."""
    session.counters.flavors += 1
    kept = _check(session, leaf, pod_set, count, group, flavor_name, prior)
    usage = kept.usage
    if kept.mode >= 0:
        return FlavorOption(flavor_name, kept.mode, level=kept.level, usage=usage, message=kept.message)
    if defer:
        return FlavorOption(
            flavor_name,
            RECLAIM,
            level=kept.level,
            usage=usage,
            needed=kept.needed,
            node_short=kept.node_short,
            unsearched=(pod_set, count, kept),
        )
    return _searched(session, workload, leaf, pod_set, count, flavor_name, kept, usage)


def search_flavor(session: Session, workload: Workload, leaf: QuotaNode, option: FlavorOption) -> FlavorOption:
    """What :func:`evaluate_flavor` gives without ``defer``, on the state ``option`` was judged on."""
    assert option.unsearched is not None
    pod_set, count, kept = option.unsearched
    return _searched(session, workload, leaf, pod_set, count, option.flavor, kept, option.usage)


def _searched(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    pod_set: PodSet,
    count: int,
    flavor_name: str,
    kept: _Checks,
    usage: dict[FR, int],
) -> FlavorOption:
    node_short = kept.node_short
    # Evicting only adds room: the nodes matter to the search only when they are short now.
    targets = [(pod_set, count, flavor_name)] if node_short else []
    search = find_victims(session, workload, leaf, usage, kept.needed, targets)
    why = "the nodes of the flavor have no room" if node_short and not search.victims else ""
    if not search.victims:
        # SEMANTICS §2.3: without victims the level is measured on current usage (the
        # search left it as it was).
        current = kept.current
        if current < 0:
            current = kept.current = session.accounting.level_of(leaf, usage)
        return FlavorOption(
            flavor_name,
            NOCANDIDATES,
            level=current,
            usage=usage,
            needed=kept.needed,
            message=why or search.message,
            vetoed_by=search.vetoed_by,
            search=search,
            node_short=node_short,
        )
    mode = PREEMPT if any(v.group == CLASS_SAME_QUEUE for v in search.victims) else RECLAIM
    return FlavorOption(
        flavor_name,
        mode,
        level=max(kept.level, search.level),
        usage=usage,
        needed=kept.needed,
        victims=search.victims,
        vetoed_by=search.vetoed_by,
        message=f"{len(search.victims)} victim(s)",
        search=search,
        node_short=node_short,
    )


def _check(
    session: Session,
    leaf: QuotaNode,
    pod_set: PodSet,
    count: int,
    group: ResourceGroup,
    flavor_name: str,
    prior: Mapping[FR, int],
) -> _Checks:
    """Everything :func:`evaluate_flavor` decides before its search, on the state as it is."""
    flavor = session.snapshot.flavors.get(flavor_name)
    if flavor is None:
        return _Checks(NOFIT, {}, "flavor is not defined")
    if pod_set.node_selector:
        conflict = _selector_conflict(pod_set, flavor.node_labels)
        if conflict is not None:
            return _Checks(NOFIT, {}, conflict)
    if flavor.node_taints and not flavor_taints_tolerated(flavor, pod_set.tolerations):
        return _Checks(NOFIT, {}, "a NoSchedule/NoExecute taint of the flavor is not tolerated")
    accounting = session.accounting
    usage: dict[FR, int] = {}
    requests = pod_set.requests
    for resource in group.covered:
        amount = requests.get(resource, 0)
        if amount:
            fr = fr_of(flavor_name, resource)
            usage[fr] = amount * count + prior.get(fr, 0) if prior else amount * count
    needed: list[FR] = []
    level = 0
    potential = leaf.potential
    for fr, request in usage.items():
        resource = fr[1]
        if request > potential.get(fr, 0):
            message = (
                f"{resource} request {format_quantity(request, resource)} exceeds max quota "
                f"{format_quantity(potential.get(fr, 0), resource)} of queue {leaf.name} in flavor {flavor_name}"
            )
            return _Checks(NOFIT, usage, message)
        found = accounting.fit_level(leaf, fr, request)
        if found >= 0:
            if found > level:
                level = found
            continue
        may_search = (
            request <= leaf.subtree.get(fr, 0)
            or accounting.fits_ancestor(leaf, fr, request, below_root=True) is not None
            or leaf.spec.preemption.borrow_within_cohort != "Never"
            or (session.policy is not None and session.policy.may_search(leaf, fr, request))
        )
        if not may_search:
            message = (
                f"insufficient unused quota for {resource} in flavor {flavor_name}: "
                f"{format_quantity(request - accounting.available(leaf, fr), resource)} more needed"
            )
            return _Checks(NOFIT, usage, message)
        needed.append(fr)
    node_short = False
    placements = session.placements
    if placements is not None and placements.has_nodes(flavor_name):
        node_short = not _pods_fit_now(session, pod_set, count, flavor_name)
        if node_short:
            for fr in usage:  # a loop, without a generator's frame
                if fr not in needed:
                    needed.append(fr)
    if not needed:
        return _Checks(FIT, usage, level=level)
    return _Checks(-1, usage, "", frozenset(needed), node_short, level)


_FITS = "_pods_fit_by_shape"
"""Where a session keeps :func:`_targets_fit_now`'s answers (``session.state``): the node
epoch they hold for and, per pod shape, the answer; and per one-podSet shape, the nodes its
last "fits" answer counted on (``nodes/witness.py``), which keep it true across epochs."""


def _pods_fit_now(session: Session, pod_set: PodSet, count: int, flavor_name: str) -> bool:
    """``session.pods_fit`` of ``count`` pods of ``pod_set`` on the nodes of ``flavor_name``,
    kept as :func:`_targets_fit_now` keeps it (the flavor scan's: an answer of the epoch
    read here first)."""
    statement = session.statement
    kept = session.state.get(_FITS)
    if kept is not None and kept[0] == statement.node_epoch and not statement.ops and session.memo is not None:
        found: bool | None = kept[1].get(_shape(pod_set, count, flavor_name))
        if found is not None:
            return found
    return _targets_fit_now(session, [(pod_set, count, flavor_name)])


def _shape(pod_set: PodSet, count: int, flavor_name: str) -> tuple[object, ...]:
    """What ``session.pods_fit`` reads of one target: the flavor, the count and the pods'
    requests, node selector and tolerations. The requests as items: hashed in C; the same
    requests listed otherwise only miss."""
    return (flavor_name, count, tuple(pod_set.requests.items()), pod_set.node_selector or None, pod_set.tolerations)


def _targets_fit_now(session: Session, targets: list[tuple[PodSet, int, str]]) -> bool:
    """``session.pods_fit`` of ``targets`` (several podSets placed together, each seeing the
    room the earlier ones took). It reads the committed room and the pods' shapes, not the
    queue: on committed state it is kept per node epoch by the shapes in order (one table
    for one and several shapes: never equal), for the heads of every queue. A one-podSet
    "fits" keeps the nodes it counted on, and holds while they keep their room. Memo on only."""
    statement = session.statement
    if session.memo is None or statement.ops:
        return session.pods_fit(targets)
    kept: tuple[int, dict[tuple[object, ...], bool], dict[tuple[object, ...], Witness | None]] | None
    kept = session.state.get(_FITS)
    if kept is None or kept[0] != statement.node_epoch:
        kept = (statement.node_epoch, {}, kept[2] if kept else {})
        session.state[_FITS] = kept
    single = len(targets) == 1
    key = _shape(*targets[0]) if single else tuple([_shape(s, n, f) for s, n, f in targets])
    found = kept[1].get(key)
    if found is not None:
        return found
    placements = statement.placements
    if not single or placements is None or not placements.has_nodes(targets[0][2]):
        found = kept[1][key] = session.pods_fit(targets)
        return found
    spec, count, flavor = targets[0]
    witness = kept[2].get(key)
    if witness is None or not witness_holds(placements, witness):
        witness = kept[2][key] = fit_witness(placements, flavor, session.snapshot.flavors[flavor], spec, count)
    found = kept[1][key] = witness is not None
    return found


def default_assign(session: Session, workload: Workload, leaf: QuotaNode) -> Assignment:
    """First flavor that fits; if none does, the first of the best mode that can preempt."""
    assignment = Assignment(workload, leaf)
    prior: dict[FR, int] = {}
    worst = FIT
    chosen: list[FlavorOption] = []
    for pod_set in workload.pod_sets:
        count = pod_set.count
        flavors: dict[str, str] = {}
        for group in leaf.spec.resource_groups:
            if not any(pod_set.requests.get(r, 0) for r in group.covered):
                continue
            best: FlavorOption | None = None
            for flavor in group.flavors:
                option = evaluate_flavor(session, workload, leaf, pod_set, count, group, flavor.flavor, prior)
                assignment.tried.append(f"podSet {pod_set.name}: {option.describe()}")
                if best is None or option.mode > best.mode:
                    best = option
                if option.mode == FIT:
                    break
            if best is None:
                continue
            if best.mode == NOFIT:
                assignment.mode = NOFIT
                assignment.message = best.message
                return assignment
            worst = min(worst, best.mode)
            chosen.append(best)
            assignment.vetoed_by |= best.vetoed_by
            for resource in group.covered:
                if pod_set.requests.get(resource, 0):
                    flavors[resource] = best.flavor
            prior.update(best.usage)
        if not _covers(pod_set, flavors, leaf, assignment):
            return assignment
        assignment.pod_sets.append(
            PodSetAssignment(pod_set.name, count, flavors, _usage(pod_set, count, flavors), pod_set)
        )
    assignment.mode = worst
    return finish_assignment(session, assignment, chosen[0] if len(chosen) == 1 else None, chosen=chosen)


def _covers(pod_set: PodSet, flavors: Mapping[str, str], leaf: QuotaNode, assignment: Assignment) -> bool:
    for resource, amount in sorted(pod_set.requests.items()):
        if amount and resource not in flavors:
            assignment.mode = NOFIT
            assignment.message = f"resource {resource} is not covered by queue {leaf.name}"
            return False
    return True


def _usage(pod_set: PodSet, count: int, flavors: Mapping[str, str]) -> dict[FR, int]:
    # Each resource is its own flavor-resource: nothing to add up; keyed as the accounting is.
    return {fr_of(flavors[resource], resource): amount * count for resource, amount in pod_set.requests.items() if amount}


def finish_assignment(
    session: Session, assignment: Assignment, only: FlavorOption | None = None, *, again: bool = False,
    chosen: Sequence[FlavorOption] = (),
) -> Assignment:
    """Total usage, borrowing level and — when something does not fit — the victims for
    the whole assignment, measured against the session's accounting as it stands.

    ``only``: the single flavor option the assignment consists of (one podSet, one
    resource group); its victim search already covered the whole request and is reused,
    and one that fits is the assignment's answer as it is (mode and level).
    ``again``: the search is counted as asked once more, as the search memo answers an
    identical search (its vetoes counted again; ``memo_hits``), or run again when the
    memo does not keep it. ``flavor-fungibility`` hands its option over this way, so its
    counts are those of asking the search a second time, which it did before it handed
    the option over. ``chosen``: the options of every podSet, whose searches the search
    of the whole request may repeat (``preemption/victims.py``).
    """
    pod_sets = assignment.pod_sets
    if len(pod_sets) == 1:
        usage = dict(pod_sets[0].usage)
    else:
        usage = {}
        for ps in pod_sets:
            for fr, amount in ps.usage.items():
                usage[fr] = usage.get(fr, 0) + amount
    assignment.usage = usage
    if assignment.mode == NOFIT:
        return assignment
    accounting = session.accounting
    leaf = assignment.leaf
    reused: SearchResult | None = None
    if only is not None and only.search is not None and only.usage == usage:
        reused = asked_again(session, only.search, leaf, usage) if again else only.search
    needed: Collection[FR]
    if reused is not None:
        # The option was judged on the state the search is asked again in (the memo
        # checked its epochs): what it needed and whether the nodes lacked room then are
        # what this assignment needs now.
        assert only is not None
        search = reused
        needed = only.needed
        assignment.node_short = only.node_short
    elif only is not None and only.mode == FIT and only.usage == usage:
        # The option was judged on the state as it is (a search leaves it as it was): every
        # flavor-resource within the leaf's Available, the pods placed on the nodes, its
        # level the highest borrowing level of its flavor-resources, as ``level_of`` says.
        assignment.node_short = False
        assignment.mode = FIT
        assignment.level = only.level
        return assignment
    else:
        # Per flavor-resource its borrowing level within Available, else -1 (short): one walk.
        fits = [accounting.fit_level(leaf, fr, amount) for fr, amount in usage.items()]
        short = [fr for fr, found in zip(usage, fits, strict=True) if found < 0]
        targets = assignment.node_targets()
        placements = session.placements
        assignment.node_short = bool(targets) and not _targets_fit_now(session, targets)
        if assignment.node_short:
            assert placements is not None
            short.extend(fr for fr in usage if fr not in short and placements.has_nodes(fr[0]))
            # Targets that change no fit test of the search are left out (victims.py).
            targets = search_targets(session, assignment.workload, targets, partial(_targets_fit_now, session))
        else:
            targets = []
        if not short:
            assignment.mode = FIT
            assignment.level = max(fits, default=0)
            return assignment
        needed = short
        bases = [option.search for option in chosen if option.search is not None]
        search = find_victims(session, assignment.workload, leaf, usage, frozenset(short), targets, bases)
    assignment.tried.extend(search.lines)
    assignment.search = search
    assignment.needed = frozenset(needed)
    assignment.vetoed_by |= search.vetoed_by
    if not search.victims:
        assignment.mode = NOCANDIDATES
        assignment.message = search.message or _shortage(session, assignment, needed)
        # SEMANTICS §2.3: without victims the level is measured on current usage. The option
        # whose search is reused measured it on the same usage and the same state.
        if reused is not None and only is not None and only.mode == NOCANDIDATES:
            assignment.level = only.level
        else:
            assignment.level = accounting.level_of(leaf, usage)
        return assignment
    assignment.victims = search.victims
    assignment.allow_borrowing = search.allow_borrowing
    assignment.level = search.level
    assignment.mode = PREEMPT if any(v.group == CLASS_SAME_QUEUE for v in search.victims) else RECLAIM
    return assignment


def _shortage(session: Session, assignment: Assignment, needed: Collection[FR]) -> str:
    parts = []
    for fr in sorted(needed):
        flavor, resource = fr
        missing = assignment.usage[fr] - session.accounting.available(assignment.leaf, fr)
        if missing > 0:
            parts.append(f"{format_quantity(missing, resource)} more {resource} in flavor {flavor}")
        else:
            parts.append(f"room for its pods on the nodes of flavor {flavor}")
    return "insufficient unused quota: needs " + ", ".join(parts)
