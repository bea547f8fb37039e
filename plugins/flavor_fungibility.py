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

Forgetting: the context entry
-----------------------------
Kueue forgets the position when its ClusterQueue's
``AllocatableResourceGeneration`` moves, i.e. when the quota of the queue's
cohort tree changes or an admitted workload of the queue is deleted
(pkg/cache/scheduler/clusterqueue.go ``deleteWorkload``, resource_node.go
``updateClusterQueueResourceNode``). preemptd has no generation counter that
survives between sessions, so the position is stored with a fingerprint of
what it was computed against, under a key no podSet can have (podSet names
are DNS labels, without ``.`` or ``/``)::

    flavorScan:
      main: {cpu: 0, memory: 0}
      preemptd.io/context: {since: <ms>, quota: <crc32>, admitted: <crc32>}

It is written only when some position is 0 or more (after -1 the scan starts
over anyway). It has the shape of every other entry (``{name: {name: int >= -1}}``), which
is what the objects layer accepts for ``status.flavorScan``.

* ``since``: the session clock (milliseconds since the epoch) when recorded.
* ``quota``: CRC-32 (``zlib.crc32``) of the UTF-8 text made of every queue and
  cohort of the queue's tree, sorted by name and joined by ``;``, each as
  ``name<parent>`` followed, per resource group in order, by ``[r1,r2]`` and
  per flavor in order by ``flavor(res=nominal/borrowingLimit/lendingLimit,…)``
  with resources sorted by name, amounts in the model's integer units (cpu in
  milli-units) and ``-`` for an unset limit. Example, a lone queue:
  ``team-a<>[cpu]a(cpu=4000/-/-)b(cpu=4000/-/-)``.
* ``admitted``: CRC-32 of the workloads admitted to the queue whose
  ``admittedAt`` is before ``since`` (or unset), each as
  ``namespace/name#uid#count`` (count = the sum of its admitted podSet
  counts), sorted and joined by ``;`` (nothing admitted: ``crc32("") = 0``).

The stored position is used only if both fingerprints, recomputed from the
snapshot, still match. This detects: any change of nominal quota, limits,
flavor lists, covered resources or parentage anywhere in the queue's tree;
an admitted workload of the queue that is gone (finished, deleted, or evicted
and requeued), re-created (new uid), or shrunk (elastic or Deployment victim).
Workloads admitted after ``since`` (including by the very session that
recorded the position) are left out, so admissions never reset the scan — an
admission only makes quota scarcer, as Kueue notes. Limits:

* a workload admitted at exactly ``since`` (only with a clock that does not
  advance, e.g. repeated ``--now``) that later leaves is not noticed;
* a workload whose committed count grows (a Deployment) resets the scan
  although nothing was freed (harmless: the scan restarts at the first flavor);
* workloads leaving *other* queues of the cohort are not noticed (as in
  Kueue, whose per-queue generation only moves on its own deletions);
* a CRC-32 collision (about one in four billion per change) goes unnoticed.

A ``flavorScan`` without the context entry (hand-written, or from an older
preemptd) is trusted as it is.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass

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
    QueueSpec,
    QuotaNode,
    ResourceGroup,
    Session,
    Workload,
    evaluate_flavor,
    finish_assignment,
    hookimpl,
)

__all__ = [
    "BORROWING_OVER_PREEMPTION",
    "CONTEXT_KEY",
    "NAME",
    "PREEMPTION_OVER_BORROWING",
    "Config",
    "assign_flavors",
    "plugin_config_schema",
    "preference_of",
    "rank",
    "stop_reason",
]

NAME = "flavor-fungibility"
CONTEXT_KEY = "preemptd.io/context"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
_TRY_NEXT = "TryNextFlavor"


@dataclass(frozen=True, slots=True)
class Config:
    """``[plugins.flavor-fungibility]``."""

    # KEP-582's feature gate FlavorFungibilityImplicitPreferenceDefault: without an
    # explicit preference, whenCanBorrow = TryNextFlavor means PreemptionOverBorrowing.
    implicit_preference_default: bool = False


class _SessionState:
    """What the plugin remembers during one session (``session.state[NAME]``)."""

    __slots__ = ("admitted", "config", "context", "quota", "resume", "why_forgotten")

    def __init__(self, config: Config) -> None:
        self.config = config
        self.quota: dict[str, int] = {}  # root of a tree -> quota fingerprint
        self.admitted: dict[tuple[str, int], int] = {}  # (leaf, since) -> fingerprint
        self.context: dict[str, dict[str, int]] = {}  # leaf -> context entry to record
        # Workload key -> the position its first nomination of the session started from.
        self.resume: dict[str, dict[str, Mapping[str, int]]] = {}
        self.why_forgotten: dict[str, str] = {}


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
    state = _state(session)
    fungibility = leaf.spec.fungibility
    preference = preference_of(fungibility, state.config)
    resume = _resume(session, state, workload, leaf)
    assignment = Assignment(workload, leaf)
    forgotten = state.why_forgotten.get(workload.key)
    if forgotten is not None:
        assignment.tried.append(forgotten)
    prior: dict[FR, int] = {}
    scan: dict[str, dict[str, int]] = {}
    for pod_set in workload.pod_sets:
        groups = [g for g in leaf.spec.resource_groups if any(pod_set.requests.get(r, 0) for r in g.covered)]
        failure = _uncovered(pod_set, groups, leaf)
        flavors: dict[str, str] = {}
        positions: dict[str, int] = {}
        for group in groups if failure is None else ():
            result = _scan_group(
                session, workload, leaf, pod_set, group, prior, resume.get(pod_set.name, {}),
                fungibility, preference, assignment.tried,
            )
            chosen = result.chosen
            if chosen is None:
                failure = "; ".join(result.nofit_messages) or f"no flavor of queue {leaf.name} fits"
                break
            for resource in group.covered:
                positions[resource] = result.recorded
                if pod_set.requests.get(resource, 0):
                    flavors[resource] = chosen.flavor
            assignment.vetoed_by |= chosen.vetoed_by
            prior.update(chosen.usage)
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
        assignment.pod_sets.append(
            PodSetAssignment(pod_set.name, pod_set.count, flavors, _usage(pod_set, flavors), pod_set)
        )
    if any(index >= 0 for positions in scan.values() for index in positions.values()):
        # Only a position to resume from needs its context; -1 starts over anyway.
        scan[CONTEXT_KEY] = dict(_context(session, state, leaf))
    assignment.flavor_scan = scan
    return finish_assignment(session, assignment)


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
    start = _start(resume, group)
    prefix = f"podSet {pod_set.name}"
    if start:
        tried.append(
            f"{prefix}: resuming the scan of [{', '.join(group.covered)}] at flavor "
            f"{flavors[start].flavor}, after flavor {flavors[start - 1].flavor} (flavorScan {start - 1})"
        )
    best: FlavorOption | None = None
    best_rank: tuple[int, int, int] | None = None
    last = size - 1
    stopped: str | None = None
    nofit: list[str] = []
    for index in range(start, size):
        option = evaluate_flavor(
            session, workload, leaf, pod_set, pod_set.count, group, flavors[index].flavor, prior
        )
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
            best, best_rank = option, option_rank
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
    covered = {r for g in groups for r in g.covered}
    for resource, amount in sorted(pod_set.requests.items()):
        if amount and resource not in covered:
            return f"resource {resource} is not covered by queue {leaf.name}"
    return None


def _usage(pod_set: PodSet, flavors: Mapping[str, str]) -> dict[FR, int]:
    usage: dict[FR, int] = {}
    for resource, amount in pod_set.requests.items():
        if amount:
            fr = (flavors[resource], resource)
            usage[fr] = usage.get(fr, 0) + amount * pod_set.count
    return usage


# -- per-session state and the context entry ---------------------------------


def _state(session: Session) -> _SessionState:
    state = session.state.get(NAME)
    if not isinstance(state, _SessionState):
        config = session.plugin_config(NAME)
        state = _SessionState(config if isinstance(config, Config) else Config())
        session.state[NAME] = state
    return state


def _resume(
    session: Session, state: _SessionState, workload: Workload, leaf: QuotaNode
) -> dict[str, Mapping[str, int]]:
    """The stored position, checked once per workload and session, then reused."""
    found = state.resume.get(workload.key)
    if found is not None:
        return found
    stored = workload.flavor_scan
    context = stored.get(CONTEXT_KEY)
    why = None if context is None else _outdated(session, state, leaf, context)
    if why is None:
        found = {ps: positions for ps, positions in stored.items() if ps != CONTEXT_KEY}
    else:
        found = {}
        state.why_forgotten[workload.key] = f"flavorScan forgotten: {why}; scanning from the first flavor"
    state.resume[workload.key] = found
    return found


def _outdated(session: Session, state: _SessionState, leaf: QuotaNode, context: Mapping[str, int]) -> str | None:
    since, quota, admitted = context.get("since"), context.get("quota"), context.get("admitted")
    if not (isinstance(since, int) and isinstance(quota, int) and isinstance(admitted, int)):
        return "its context entry is incomplete"
    if quota != _quota_fingerprint(state, leaf):
        return f"the quota of queue {leaf.name}'s tree changed"
    if admitted != _admitted_fingerprint(session, state, leaf, since):
        return f"a workload admitted to queue {leaf.name} left it"
    return None


def _context(session: Session, state: _SessionState, leaf: QuotaNode) -> dict[str, int]:
    found = state.context.get(leaf.name)
    if found is None:
        since = session.now
        found = {
            "since": since,
            "quota": _quota_fingerprint(state, leaf),
            "admitted": _admitted_fingerprint(session, state, leaf, since),
        }
        state.context[leaf.name] = found
    return found


def _quota_text(spec: QueueSpec) -> str:
    """One queue's part of the quota fingerprint (format: module docstring)."""
    parts = [f"{spec.name}<{spec.parent or ''}>"]
    for group in spec.resource_groups:
        parts.append(f"[{','.join(group.covered)}]")
        for quotas in group.flavors:
            resources = ",".join(
                f"{name}={quota.nominal}/{_limit(quota.borrowing_limit)}/{_limit(quota.lending_limit)}"
                for name, quota in sorted(quotas.resources.items())
            )
            parts.append(f"{quotas.flavor}({resources})")
    return "".join(parts)


def _limit(value: int | None) -> str:
    return "-" if value is None else str(value)


def _quota_fingerprint(state: _SessionState, leaf: QuotaNode) -> int:
    root = leaf.root
    found = state.quota.get(root.name)
    if found is None:
        nodes = []
        stack = [root]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children)
        text = ";".join(_quota_text(node.spec) for node in sorted(nodes, key=lambda n: n.name))
        found = state.quota[root.name] = zlib.crc32(text.encode())
    return found


def _admitted_fingerprint(session: Session, state: _SessionState, leaf: QuotaNode, since: int) -> int:
    key = (leaf.name, since)
    found = state.admitted.get(key)
    if found is None:
        items = sorted(
            f"{w.key}#{w.uid}#{sum(ps.count for ps in w.admission.pod_sets)}"
            for w in session.snapshot.admitted_by_queue.get(leaf.name, ())
            if w.admission is not None and (w.admitted_at is None or w.admitted_at < since)
        )
        found = state.admitted[key] = zlib.crc32(";".join(items).encode())
    return found
