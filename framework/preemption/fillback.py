"""Fill-back of a victim walk (``walk.py``): put back every victim the preemptor does not
need, from the second-to-last to the first (SEMANTICS §4; Kueue keeps the last victim
added: it made the request fit).

Most victims of a long walk are needed, and each one put back costs a quota change, a
test and its undo. Three facts tell many answers without the test:

* **Failures carry over.** As fill-back goes on the state only gains usage (victims are
  put back, never taken), and the fit test is monotone in usage (``bound.py``). It is a
  test per requested flavor-resource, and each reads only that flavor-resource's usage
  of the preemptor's path (its queue and the cohorts above it). A victim's usage reaches
  the path at one node, its *entry*: the queue itself when it is the preemptor's, else
  the parent of its top (the highest of its queue and cohorts off the path). When no
  queue or cohort between the victim's queue and its entry keeps a local reserve
  (``lendingLimit``) of any requested flavor-resource, putting ``y`` back adds exactly
  ``y`` at the entry (usage passes up whole where there is no reserve), whatever the
  queue. So once putting back a victim failed the test of one flavor-resource, every
  later victim with the same entry (or, with a reserve on the way, of the same queue)
  that uses no less of that flavor-resource fails it too: it adds no less at the same
  node of a state with no less usage. Per entry and flavor-resource only the least
  usage that failed is kept.
* **Slack.** A victim the quota does not need is known while the slack of the last test
  covers its usage (putting back ``x`` lowers the unclipped Available by at most ``x``;
  the slack within nominal is exact, ``bound.py``).
* **Within nominal.** A victim of the preemptor's own queue that the test within nominal
  needs is known by that slack, which is exact.
* **Exact slack.** When no node of the preemptor's lineage keeps a reserve of a requested
  flavor-resource, and none below the root has a borrowing limit of it, its Available is
  the root's quota less the root's usage, and what a victim put back adds to the path
  reaches the root whole: Available drops by exactly that amount, which is the victim's
  usage when its entry is on the path, else what passes its queue's reserves (read, as
  putting it back would pass it, from the usage of the nodes on the way). The slack then
  answers the test both ways without running it: it fails at the first flavor-resource
  whose drop exceeds its slack (the test within nominal passes there: an own victim it
  needs is known above, and another queue's victim leaves the leaf's usage as it is),
  and the slack after a victim put back is the slack less its drop.

Only quota answers are known this way; node room and scenario filters are asked as the
step-by-step fill-back asks them (nothing a plugin is asked depends on a skipped step).

**Put back at the end.** In an exact fill-back the quota is read only where a victim's
usage passes a local reserve on its way (``_arriving``: nodes keeping a reserve of a
requested flavor-resource, off the path) and, after fill-back, by the walk's level. A
victim whose entry is on the path has no such node on its way, so putting it back changes
nothing a later step reads: when no scenario filter is asked (the only plugin hook
fill-back calls), such victims are added to the quota once per queue at the end, summed
(adding usage is additive: the same values as adding them one by one).
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import ge, sub
from typing import Any, Protocol

from ..model import FR, PodSet
from ..pods import NORMAL
from ..quota import QuotaNode
from ..session import Candidate, ScenarioFilters, Session
from .room import FreedRoom

__all__ = ["Entries", "FillingWalk", "entries_of", "fill_back", "singles_taken"]


class FillingWalk(Protocol):
    """What fill-back reads of the walk (``walk.Walk``)."""

    @property
    def session(self) -> Session: ...

    @property
    def leaf(self) -> QuotaNode: ...

    @property
    def usage(self) -> Mapping[FR, int]: ...

    @property
    def path(self) -> frozenset[QuotaNode]: ...

    @property
    def targets(self) -> list[tuple[PodSet, int, str]]: ...

    @property
    def filters(self) -> ScenarioFilters: ...

    def _slack(self) -> tuple[tuple[int, ...], tuple[int, ...]]: ...

    def _short(self, allow_borrowing: bool) -> int: ...

    def _scenario_ok(self, victims: list[Candidate], *, veto: bool = True) -> bool: ...


def fill_back(walk: FillingWalk, victims: list[Candidate], allow_borrowing: bool, freed: FreedRoom | None = None) -> None:
    """Put back, in place, every victim of ``victims`` the preemptor does not need (see the
    module notes). ``freed``: the victims' node room is kept beside the placements
    (``room.py``); a victim put back takes its room back there, and a step that fails
    gives it again."""
    session = walk.session
    statement = session.statement
    targets = walk.targets
    leaf = walk.leaf
    # Workloads whose remainder (a victim that is not a single pod) is in the set: counted
    # when a single pod is first met (most sets have none), from the victims left then.
    remainders: dict[int, int] | None = None
    frs = tuple(walk.usage)
    zeros = (0,) * len(frs)
    entries = entries_of(session.state, walk.path, leaf, frs)
    # Per entry, each flavor-resource of the request (its place in the request) whose
    # putting back failed the test, with the least usage that failed it: see the module
    # notes. Per victim queue, the list of its entry (the same object). Only the failed
    # flavor-resources are listed: a victim is checked against those alone.
    failed: dict[QuotaNode, list[tuple[int, int]]] = {}
    least_of: dict[QuotaNode, list[tuple[int, int]]] = {}
    slack, nominal = walk._slack()
    # The slack answers every quota test (see the module notes), and stays exact.
    exact = _exact_slack(leaf, walk.usage)
    path = walk.path
    # Per victim queue: whether its entry is on the path (its usage reaches it whole).
    direct: dict[QuotaNode, bool] = {}
    # Victims put back whose usage is added only at the end, summed per queue (see the
    # module notes): only in an exact fill-back, which no scenario filter reads.
    back: dict[QuotaNode, dict[FR, int]] | None = {} if _adds_at_end(walk, exact) else None
    all_usage = session.accounting.usage
    saved: tuple[int, ...] = ()
    for i in range(len(victims) - 2, -1, -1):
        victim = victims[i]
        if victim.single_pod:
            if remainders is None:
                remainders = _remainders(victims)
            if remainders.get(id(victim.workload)):
                continue  # its remainder is gone: the pod cannot stay on its own
        usage = victim.usage
        least = least_of.get(victim.leaf)
        if least is None:
            entry = entries.of(victim.leaf)
            least = failed.get(entry)
            if least is None:
                least = failed[entry] = []
            least_of[victim.leaf] = least
            direct[victim.leaf] = entry in path
        known = False
        for place, amount in least:
            if usage.get(frs[place], 0) >= amount:
                known = True  # it fails that flavor-resource's test (no less than a failure)
                break
        if known:
            continue
        shape = tuple(map(usage.get, frs, zeros))
        own = victim.leaf is leaf
        if own and not allow_borrowing and not covers(nominal, shape):
            # The test within nominal fails: its slack is exact (``bound.py``).
            _remember(least, shape, [put > room for put, room in zip(shape, nominal, strict=True)].index(True))
            continue
        drop = shape
        later = False  # its usage is added at the end
        if exact:
            if direct[victim.leaf]:
                later = back is not None
            else:
                drop = _arriving(all_usage, victim.leaf, path, frs, shape)
            # The first flavor-resource (its place) whose drop exceeds its slack, or -1.
            for short, put in enumerate(drop):
                if put > slack[short]:
                    break
            else:
                short = -1
            if short >= 0:
                _remember(least, shape, short)
                continue
            sure = True
        else:
            sure = covers(slack, shape)
        mark = statement.checkpoint()
        if not later:
            statement.add_usage(victim.leaf, usage)
        # The quota is tested before the room is taken back: a victim the quota
        # still needs (most of them) costs no node change.
        if sure:
            kept = (
                tuple(map(sub, slack, drop)),
                tuple(map(sub, nominal, shape)) if own else nominal,
            )
        else:
            short = walk._short(allow_borrowing)
            if short >= 0:
                statement.rollback(mark)
                _remember(least, shape, short)
                continue
            kept = walk._slack()
        if freed is not None:
            saved = freed.saved()
            freed.take_back(victim)
            if not freed.fits():
                freed.undo(victim, saved)
                statement.rollback(mark)
                continue
        elif targets:
            for held in victim.room:
                node, requests = held.node_name, held.requests
                statement.take_room(node, requests)
            if not session.pods_fit(targets):
                statement.rollback(mark)
                continue
        if not walk.filters or walk._scenario_ok(victims[:i] + victims[i + 1 :], veto=False):
            del victims[i]
            if remainders is not None and not victim.single_pod:
                remainders[id(victim.workload)] -= 1
            slack, nominal = kept
            if later:
                assert back is not None
                summed = back.get(victim.leaf)
                if summed is None:
                    back[victim.leaf] = dict(usage)
                else:
                    for fr, amount in usage.items():
                        summed[fr] = summed.get(fr, 0) + amount
            continue
        if freed is not None:
            freed.undo(victim, saved)
        statement.rollback(mark)
    if back:
        for queue, summed in back.items():
            statement.add_usage(queue, summed)


_ENTRIES = "_fill_back_entries"  # in ``session.state``: see :func:`entries_of`


def entries_of(
    state: dict[str, Any], path: frozenset[QuotaNode], leaf: QuotaNode, frs: tuple[FR, ...]
) -> Entries:
    """The :class:`Entries` of fill-backs for a request of ``frs`` in ``leaf`` (``path``: its
    lineage), kept for the session: an entry reads only the quota tree's shape and local
    reserves, which a session never changes, so every fill-back of the same queue and
    requested flavor-resources finds the same entries, and each is found once."""
    kept: dict[tuple[QuotaNode, tuple[FR, ...]], Entries] | None = state.get(_ENTRIES)
    if kept is None:
        kept = state[_ENTRIES] = {}
    found = kept.get((leaf, frs))
    if found is None:
        found = kept[(leaf, frs)] = Entries(path, leaf, frs)
    return found


class Entries:
    """Where each victim queue's usage enters the preemptor's path, for sharing failures
    (see the module notes): the path node it reaches when nothing on the way keeps a
    local reserve of a requested flavor-resource, else the queue itself."""

    __slots__ = ("frs", "known", "path")

    def __init__(self, path: frozenset[QuotaNode], leaf: QuotaNode, frs: tuple[FR, ...]) -> None:
        self.path = path
        self.frs = frs
        self.known: dict[QuotaNode, QuotaNode] = {leaf: leaf}

    def of(self, queue: QuotaNode) -> QuotaNode:
        found = self.known.get(queue)
        if found is None:
            found = self.known[queue] = self._find(queue)
        return found

    def _find(self, queue: QuotaNode) -> QuotaNode:
        path = self.path
        frs = self.frs
        node: QuotaNode | None = queue
        while node is not None and node not in path:
            guaranteed = node.guaranteed
            if guaranteed and any(guaranteed.get(fr, 0) > 0 for fr in frs):
                return queue
            node = node.parent
        return queue if node is None else node


def _adds_at_end(walk: FillingWalk, exact: bool) -> bool:
    """Whether victims put back that enter the path whole are added to the quota only at
    the end (see the module notes): in an exact fill-back that no scenario filter reads."""
    return exact and not walk.filters


def _exact_slack(leaf: QuotaNode, request: Mapping[FR, int]) -> bool:
    """Whether the slack of a fill-back for ``request`` in ``leaf`` is exact (see the
    module notes): no node of the leaf's lineage keeps a reserve of a requested
    flavor-resource, and none below the root has a borrowing limit of it."""
    for fr, amount in request.items():
        if amount <= 0:
            continue  # always fits: its slack is never reached
        for node in leaf.lineage:
            if node.guaranteed.get(fr, 0) > 0:
                return False
            if node.parent is not None and node.borrowing_limit.get(fr) is not None:
                return False
    return True


def _arriving(
    all_usage: list[dict[FR, int]],
    queue: QuotaNode,
    path: frozenset[QuotaNode],
    frs: tuple[FR, ...],
    shape: tuple[int, ...],
) -> tuple[int, ...]:
    """What of ``shape``, put back in ``queue``, reaches the preemptor's ``path``: at each
    node on the way, the part its local reserve keeps (the reserve less its usage) stays
    there, as ``Accounting.add_all`` passes it up. Nothing reaches a path in another tree."""
    left = list(shape)
    node: QuotaNode | None = queue
    while node is not None and node not in path:
        guaranteed = node.guaranteed
        if guaranteed:
            used = all_usage[node.index]
            for place, fr in enumerate(frs):
                amount = left[place]
                if amount > 0:
                    headroom = guaranteed.get(fr, 0) - used.get(fr, 0)
                    if headroom > 0:
                        left[place] = amount - headroom if amount > headroom else 0
        node = node.parent
    if node is None:
        return (0,) * len(frs)
    return tuple(left)


def covers(shape: tuple[int, ...], smaller: tuple[int, ...]) -> bool:
    """Whether ``shape`` uses at least ``smaller`` of every flavor-resource (both have one
    place per flavor-resource of the request)."""
    return all(map(ge, shape, smaller))


def singles_taken(rest: Candidate, victims: list[Candidate]) -> bool:
    """The remainder of an elastic workload goes only after all its single pods (the
    walk's test, ``Walk._singles_taken``)."""
    spec = next(ps for ps in rest.workload.pod_sets if ps.name == rest.pod_set)
    admission = rest.workload.admission
    assert admission is not None and spec.min_count is not None
    count = next(psa.count for psa in admission.pod_sets if psa.name == spec.name)
    taken = sum(
        1 for v in victims if v.workload is rest.workload and v.single_pod and v.pod_class == NORMAL
    )
    return taken >= count - spec.min_count


def _remainders(victims: list[Candidate]) -> dict[int, int]:
    """Per workload (by id), how many of ``victims`` are not single pods."""
    counts: dict[int, int] = {}
    for v in victims:
        if not v.single_pod:
            counts[id(v.workload)] = counts.get(id(v.workload), 0) + 1
    return counts


def _remember(least: list[tuple[int, int]], shape: tuple[int, ...], short: int) -> None:
    """Putting back ``shape`` failed the test of flavor-resource ``short`` (its place in the
    request): keep the least usage that failed it in ``least``, the entry's failures. A
    usage of 0 cannot fail a test the state passed before: it is not kept (nothing would
    be known from it that the state does not tell)."""
    put = shape[short]
    if put <= 0:
        return
    for i, (place, amount) in enumerate(least):
        if place == short:
            if put < amount:
                least[i] = (short, put)
            return
    least.append((short, put))
