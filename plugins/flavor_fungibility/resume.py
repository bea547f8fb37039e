"""Where a flavor scan resumes, and when the stored position is outdated.

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

from preemptd.framework import QueueSpec, QuotaNode, Session, Workload

__all__ = ["CONTEXT_KEY", "NAME", "Config", "SessionState", "context_entry", "resume_at", "state_of"]

NAME = "flavor-fungibility"
CONTEXT_KEY = "preemptd.io/context"


@dataclass(frozen=True, slots=True)
class Config:
    """``[plugins.flavor-fungibility]``."""

    # KEP-582's feature gate FlavorFungibilityImplicitPreferenceDefault: without an
    # explicit preference, whenCanBorrow = TryNextFlavor means PreemptionOverBorrowing.
    implicit_preference_default: bool = False


class SessionState:
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


def state_of(session: Session) -> SessionState:
    state = session.state.get(NAME)
    if not isinstance(state, SessionState):
        config = session.plugin_config(NAME)
        state = SessionState(config if isinstance(config, Config) else Config())
        session.state[NAME] = state
    return state


def resume_at(
    session: Session, state: SessionState, workload: Workload, leaf: QuotaNode
) -> dict[str, Mapping[str, int]]:
    """The stored position, checked once per workload and session, then reused."""
    found = state.resume.get(workload.key)
    if found is not None:
        return found
    stored = workload.flavor_scan
    if not stored:  # nothing to resume from: nothing to check
        found = state.resume[workload.key] = {}
        return found
    context = stored.get(CONTEXT_KEY)
    why = None if context is None else _outdated(session, state, leaf, context)
    if why is None:
        found = {ps: positions for ps, positions in stored.items() if ps != CONTEXT_KEY}
    else:
        found = {}
        state.why_forgotten[workload.key] = f"flavorScan forgotten: {why}; scanning from the first flavor"
    state.resume[workload.key] = found
    return found


def _outdated(session: Session, state: SessionState, leaf: QuotaNode, context: Mapping[str, int]) -> str | None:
    since, quota, admitted = context.get("since"), context.get("quota"), context.get("admitted")
    if not (isinstance(since, int) and isinstance(quota, int) and isinstance(admitted, int)):
        return "its context entry is incomplete"
    if quota != _quota_fingerprint(state, leaf):
        return f"the quota of queue {leaf.name}'s tree changed"
    if admitted != _admitted_fingerprint(session, state, leaf, since):
        return f"a workload admitted to queue {leaf.name} left it"
    return None


def context_entry(session: Session, state: SessionState, leaf: QuotaNode) -> dict[str, int]:
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


def _quota_fingerprint(state: SessionState, leaf: QuotaNode) -> int:
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


def _admitted_fingerprint(session: Session, state: SessionState, leaf: QuotaNode, since: int) -> int:
    key = (leaf.name, since)
    found = state.admitted.get(key)
    if found is None:
        items = []
        for w in session.snapshot.admitted_by_queue.get(leaf.name, ()):
            admission = w.admission
            if admission is None or (w.admitted_at is not None and w.admitted_at >= since):
                continue
            pod_sets = admission.pod_sets
            # The count of the one podSet most workloads have, without a generator.
            count = pod_sets[0].count if len(pod_sets) == 1 else sum([ps.count for ps in pod_sets])
            items.append(f"{w.key}#{w.uid}#{count}")
        items.sort()
        found = state.admitted[key] = zlib.crc32(";".join(items).encode())
    return found
