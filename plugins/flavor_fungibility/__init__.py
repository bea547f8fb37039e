"""Plugin ``flavor-fungibility``: the flavor scan of KEP-582 (SEMANTICS §3).

For every podSet (in order, each seeing the usage of the earlier ones) and
every resource group it requests, the flavors of the group are tried in order
with :func:`~preemptd.framework.flavors.evaluate_flavor`, which gives one
option per flavor: its mode (the worst over the group's resources) and its
borrowing level. The scan goes on past a flavor that is ``NoFit`` or
``NoCandidates``, that needs preemption while ``whenCanPreempt`` is
``TryNextFlavor``, or that borrows while ``whenCanBorrow`` is
``TryNextFlavor``; any other flavor ends the scan and is taken. A scan that
reaches the end of the list takes the best flavor it saw, by the queue's
preference (``BorrowingOverPreemption``: mode, then level;
``PreemptionOverBorrowing``: level, then mode; ties: the earlier flavor).

Resumption
----------
The index of the last flavor examined is recorded per podSet and resource
(``-1`` once the scan reached the end of the list) in
``Assignment.flavor_scan``; the framework stores it in the workload's
``status.flavorScan`` and the next session starts the scan after it. Within a
session the start is fixed at the first nomination of each workload, so a
workload nominated again (after losing its flavor to an earlier entry of the
round, or with a smaller count for partial admission) rescans the same
flavors (SEMANTICS §2.5).

The position is forgotten when what it was computed against changed; how that
is detected (the context entry stored with it) is :mod:`.resume`'s subject.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from preemptd.framework import (
    FR,
    MODE_NAMES,
    NOCANDIDATES,
    NOFIT,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorFungibility,
    FlavorOption,
    PodSet,
    PodSetAssignment,
    QuotaNode,
    ResourceGroup,
    Session,
    Workload,
    evaluate_flavor,
    finish_assignment,
    fr_of,
    hookimpl,
    search_flavor,
)

from .resume import CONTEXT_KEY, NAME, Config, context_entry, resume_at, state_of

__all__ = [
    "BORROWING_OVER_PREEMPTION",
    "CONTEXT_KEY",
    "LAST_AT_ONCE",
    "MEMO_SAFE",
    "NAME",
    "PREEMPTION_OVER_BORROWING",
    "Config",
    "assign_flavors",
    "plugin_config_schema",
    "preference_of",
    "rank",
    "stop_reason",
]

MEMO_SAFE = True  # answers depend only on session state and the preemptor (framework/session/hooks.py)
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
_TRY_NEXT = "TryNextFlavor"
_NO_POSITIONS: Mapping[str, int] = MappingProxyType({})

LAST_AT_ONCE = True
"""Whether a scan searches its last flavor at once when nothing was put off and no flavor
seen fits (``_scan_group``); tests turn it off to compare with putting its search off."""


@dataclass(slots=True)
class _GroupScan:
    chosen: FlavorOption | None
    recorded: int
    nofit_messages: list[str]


@hookimpl
def plugin_config_schema() -> type:
    return Config


@hookimpl
def assign_flavors(session: Session, workload: Workload) -> Assignment | None:
    leaf = session.leaf(workload.queue)
    if leaf is None:
        return None
    state = state_of(session)
    fungibility = leaf.spec.fungibility
    preference = preference_of(fungibility, state.config)
    resume = resume_at(session, state, workload, leaf)
    assignment = Assignment(workload, leaf)
    tried = assignment.tried
    forgotten = state.why_forgotten.get(workload.key)
    if forgotten is not None:
        tried.append(forgotten)
    prior: dict[FR, int] = {}
    scan: dict[str, dict[str, int]] = {}
    options: list[FlavorOption] = []
    resource_groups = leaf.spec.resource_groups
    resumed = False  # some podSet recorded a position to resume from
    for pod_set in workload.pod_sets:
        requests = pod_set.requests
        groups: list[ResourceGroup] = []  # the groups it requests some amount of
        for group in resource_groups:
            for resource in group.covered:
                if requests.get(resource, 0):
                    groups.append(group)
                    break
        failure = _uncovered(pod_set, groups, leaf)
        flavors: dict[str, str] = {}
        positions: dict[str, int] = {}
        resumes = False
        at = resume.get(pod_set.name, _NO_POSITIONS)
        for group in groups if failure is None else ():
            result = _scan_group(
                session, workload, leaf, pod_set, group, prior, at, fungibility, preference, tried
            )
            chosen = result.chosen
            if chosen is None:
                failure = "; ".join(result.nofit_messages) or f"no flavor of queue {leaf.name} fits"
                break
            recorded = result.recorded
            if recorded >= 0:
                resumes = True
            for resource in group.covered:
                positions[resource] = recorded
                if requests.get(resource, 0):
                    flavors[resource] = chosen.flavor
            if chosen.vetoed_by:
                assignment.vetoed_by |= chosen.vetoed_by
            prior.update(chosen.usage)
            options.append(chosen)
        if failure is not None:
            # Kueue keeps no position for a podSet that found no flavor: it starts
            # over at the first flavor of every group next time.
            restart = {r: -1 for g in groups for r in g.covered}
            if restart:
                scan[pod_set.name] = restart
            assignment.mode = NOFIT
            assignment.message = failure
            break
        if positions:
            scan[pod_set.name] = positions
            resumed = resumed or resumes
        assignment.pod_sets.append(
            PodSetAssignment(pod_set.name, pod_set.count, flavors, _usage(pod_set, flavors), pod_set)
        )
    if resumed:
        # Only a position to resume from needs its context; -1 starts over anyway.
        scan[CONTEXT_KEY] = dict(context_entry(session, state, leaf))
    assignment.flavor_scan = scan
    # One podSet and one resource group: the option chosen is the whole request, and its
    # search is the one finish_assignment would run; it is asked again from the memo.
    only = options[0] if len(options) == 1 else None
    return finish_assignment(session, assignment, only, again=True, chosen=options)


def preference_of(fungibility: FlavorFungibility, config: Config) -> str:
    """The preference order a queue's scan uses (SEMANTICS §3)."""
    if fungibility.preference is not None:
        return fungibility.preference
    if config.implicit_preference_default and fungibility.when_can_borrow == _TRY_NEXT:
        return PREEMPTION_OVER_BORROWING
    return BORROWING_OVER_PREEMPTION


def rank(option: FlavorOption, preference: str) -> tuple[int, int, int]:
    """Sort key of a flavor option that is not ``NoFit``: lower is better.

    ``NoCandidates`` ranks below every viable mode whatever the preference
    (Kueue's ``isPreferred``); among options of the same class the preference
    decides, and equal keys go to the earlier flavor (the caller keeps the first).
    """
    viable = 0 if option.mode > NOCANDIDATES else 1
    if preference == PREEMPTION_OVER_BORROWING:
        return (viable, option.level, -option.mode)
    return (viable, -option.mode, option.level)


def stop_reason(option: FlavorOption, fungibility: FlavorFungibility) -> str | None:
    """Why the scan stops at ``option``, or ``None`` when it goes on to the next flavor."""
    if option.mode in (NOFIT, NOCANDIDATES):
        return None
    preempts = option.mode in (PREEMPT, RECLAIM)
    if preempts and fungibility.when_can_preempt == _TRY_NEXT:
        return None
    if option.level > 0 and fungibility.when_can_borrow == _TRY_NEXT:
        return None
    if preempts and option.level > 0:
        return "it can preempt while borrowing and whenCanPreempt and whenCanBorrow are MayStopSearch"
    if preempts:
        return "it can preempt and whenCanPreempt is MayStopSearch"
    if option.level > 0:
        return "it fits by borrowing and whenCanBorrow is MayStopSearch"
    return "it fits without borrowing"


def _scan_group(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    pod_set: PodSet,
    group: ResourceGroup,
    prior: Mapping[FR, int],
    resume: Mapping[str, int],
    fungibility: FlavorFungibility,
    preference: str,
    tried: list[str],
) -> _GroupScan:
    flavors = group.flavors
    size = len(flavors)
    start = _start(resume, group) if resume else 0
    prefix = f"podSet {pod_set.name}"
    if start:
        tried.append(
            f"{prefix}: resuming the scan of [{', '.join(group.covered)}] at flavor "
            f"{flavors[start].flavor}, after flavor {flavors[start - 1].flavor} (flavorScan {start - 1})"
        )
    best: FlavorOption | None = None
    best_rank: tuple[int, int, int] | None = None
    best_line = -1
    last = size - 1
    stopped: str | None = None
    nofit: list[str] = []
    # With whenCanPreempt TryNextFlavor, what a flavor's victim search finds never ends the
    # scan: it only matters if no other flavor beats it. Such searches are put off until
    # the scan is over, and run only where the answer could still win.
    defer = fungibility.when_can_preempt == _TRY_NEXT
    put_off: list[tuple[int, FlavorOption]] = []  # its line in tried, the option
    for index in range(start, size):
        # The last flavor, with nothing put off and nothing seen that fits, is searched at
        # once: ``_settle`` would search it first and take it, whatever it finds (a searched
        # option is never ``NoFit``, and with ``defer`` no search's answer stops the scan).
        option = evaluate_flavor(
            session, workload, leaf, pod_set, pod_set.count, group, flavors[index].flavor, prior,
            defer=defer and (index < last or best is not None or bool(put_off) or not LAST_AT_ONCE),
        )
        if option.unsearched is not None:
            put_off.append((len(tried), option))
            tried.append("")  # written once the search is run or known not to be needed
            continue
        tried.append(f"{prefix}: {option.describe()}")
        if option.mode == NOFIT:
            nofit.append(option.message or f"flavor {option.flavor} does not fit")
            continue
        stopped = stop_reason(option, fungibility)
        if stopped is not None:
            # Kueue's findFlavorForPodSets takes the flavor the scan stops at
            # (bestAssignment = assignments; break): KEP-582 story 2 relies on it.
            best, last = option, index
            break
        option_rank = rank(option, preference)
        if best_rank is None or option_rank < best_rank:
            best, best_rank, best_line = option, option_rank, len(tried) - 1
    if put_off:
        best = _settle(session, workload, leaf, prefix, preference, put_off, best, best_line, stopped, tried)
    # Kueue records lastTriedIdx, or -1 once the last flavor was tried, and resumes at
    # lastTriedIdx + 1 up to the end of the list, never wrapping within one scan
    # (flavorassigner.go findFlavorForPodSets, workload.go NextFlavorToTryForPodSetResource).
    recorded = -1 if last >= size - 1 else last
    if stopped is not None and best is not None:
        tried.append(f"{prefix}: stopped the scan at flavor {best.flavor}: {stopped}")
    elif best is not None:
        level = f", borrowing level {best.level}" if best.level else ""
        tried.append(
            f"{prefix}: scanned to the end of the flavor list; took flavor {best.flavor} "
            f"({MODE_NAMES[best.mode]}{level}), the best by {preference}"
        )
    else:
        tried.append(f"{prefix}: scanned to the end of the flavor list; no flavor fits")
    return _GroupScan(best, recorded, nofit)


def _settle(
    session: Session,
    workload: Workload,
    leaf: QuotaNode,
    prefix: str,
    preference: str,
    put_off: list[tuple[int, FlavorOption]],
    best: FlavorOption | None,
    best_line: int,
    stopped: str | None,
    tried: list[str],
) -> FlavorOption | None:
    """The best option of a scan once the searches it put off are run where needed, and
    their lines written.

    The best is the least (rank, flavor order); an unsearched option ranks as the best its
    search could give, so one that is not below the best so far cannot become it. The
    most promising are searched first: a later flavor that needs no borrowing may settle
    the scan before an earlier one that would borrow is searched."""
    if stopped is None:
        best_key = (rank(best, preference), best_line) if best is not None else None
        for line, option in sorted(put_off, key=lambda item: (rank(item[1], preference), item[0])):
            if best_key is not None and (rank(option, preference), line) > best_key:
                break  # neither this one nor any after it can win
            option = search_flavor(session, workload, leaf, option)
            tried[line] = f"{prefix}: {option.describe()}"
            key = (rank(option, preference), line)
            if best_key is None or key < best_key:
                best, best_key = option, key
    assert best is not None
    why = "the scan stopped at" if stopped is not None else f"by {preference} it cannot beat"
    for line, option in put_off:
        if not tried[line]:
            session.counters.left += 1
            tried[line] = f"{prefix}: flavor {option.flavor}: needs victims, not searched ({why} flavor {best.flavor})"
    return best


def _start(resume: Mapping[str, int], group: ResourceGroup) -> int:
    """First index to try: after the remembered one; from the top when it was the last
    one, -1, or no longer inside the list."""
    for resource in group.covered:
        last = resume.get(resource)
        if last is not None:
            start = last + 1
            return start if 0 < start < len(group.flavors) else 0
    return 0


def _uncovered(pod_set: PodSet, groups: list[ResourceGroup], leaf: QuotaNode) -> str | None:
    if len(groups) == 1:
        covered: tuple[str, ...] | set[str] = groups[0].covered
    else:
        covered = {r for g in groups for r in g.covered}
    for resource, amount in pod_set.requests.items():
        if amount and resource not in covered:
            break
    else:
        return None  # the usual case: nothing to sort
    for resource, amount in sorted(pod_set.requests.items()):
        if amount and resource not in covered:
            return f"resource {resource} is not covered by queue {leaf.name}"
    return None


def _usage(pod_set: PodSet, flavors: Mapping[str, str]) -> dict[FR, int]:
    # Each resource is its own flavor-resource: nothing to add up. Keyed by the shared
    # tuples, as the accounting's maps are (``fr_of``).
    count = pod_set.count
    usage: dict[FR, int] = {}
    for resource, amount in pod_set.requests.items():  # a loop, without a comprehension's frame
        if amount:
            usage[fr_of(flavors[resource], resource)] = amount * count
    return usage
