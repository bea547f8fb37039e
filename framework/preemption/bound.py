"""What a victim walk (``walk.py``) knows of the quota test without running it.

The fit test of one preemptor: for every requested flavor-resource, the request fits
the leaf's Available and, when the attempt may not borrow, the leaf's usage plus the
request stays within its nominal (:func:`fits_quota`). Two facts about it:

* It is monotone: Available (and usage, for the test within nominal) only improves as
  usage is removed anywhere in the queue tree, and one flavor-resource's usage never
  changes another's Available.
* Removing ``x`` of usage anywhere raises the leaf's unclipped Available
  (:meth:`~preemptd.framework.quota.Accounting.headroom`) by at most ``x``, since each
  level of the tree passes up no more than it lost; putting ``x`` back, the exact
  mirror, lowers it by at most ``x``.

Searches that cannot succeed. The state at any step of an attempt is the committed
state less a subset of the candidates the attempt may take, so if the request does not
fit with *all* of them removed at once, no step fits and the attempt fails
(:func:`may_fit`, the bound). A cheaper necessary condition decides first: the headroom
plus the candidates' whole usage must reach the request; and for an attempt that
must end within nominal, the leaf's own candidates must bring the leaf there (only
they lower its usage). A search the bound proves
hopeless still walks its candidates in the same order for what the plugins are told
and answer — vetoes, their counts, min-runtime's notes — but runs no fit test and takes
nothing it does not have to (``Walk.attempt`` with ``hopeless``), which is exact under
the ``MEMO_SAFE`` promise that plugins answer from the state committed before the
search. A bound computed from other preemptors' failures instead ("a head that asks
for at least as much, with no higher priority, in the same queue and epoch, fails
too") holds for the fit, but not for the vetoes: a plugin may veto a candidate for the
weaker preemptor only, which changes its pending reason and message; so every search
asks its own questions.

Victims fill-back keeps without a test. Fill-back puts victims back one by one while
the request still fits. Its :func:`slack`, per flavor-resource, is how far the request
is from not fitting: the unclipped Available less the request, and the leaf's nominal
less its usage and the request. Putting back a victim that uses ``y`` lowers the first
by at most ``y`` (above) and the second by exactly ``y`` when the victim is of the
preemptor's own queue (a leaf: no other queue's usage is counted in it), else not at
all. So while the slack measured by the last test, less what was put back since,
covers a victim's usage, the request still fits with it back, and no test is run.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate, filterfalse, groupby
from operator import attrgetter, itemgetter
from typing import Any

from ..model import FR
from ..quota import Accounting, QuotaNode
from ..session import Candidate, Runs, Source

__all__ = [
    "FreedKept", "RunSums", "fits_quota", "lacking_of", "may_fit", "over_nominal", "session_kept", "short_of", "slack",
]

# A slack no usage reaches (a flavor-resource requested at 0 always fits Available):
# usage is far below 2**62 in any unit.
_ALWAYS = 1 << 62
_STRETCH = 32  # the candidates ``_Freed.reaches`` reads at a time

_LEAF = attrgetter("leaf")
_ONLY_WITHIN_NOMINAL = attrgetter("only_within_nominal")


def fits_quota(accounting: Accounting, leaf: QuotaNode, usage: Mapping[FR, int], allow_borrowing: bool) -> bool:
    """The fit test of the quota (see the module notes)."""
    return short_of(accounting, leaf, usage, allow_borrowing) < 0


def short_of(accounting: Accounting, leaf: QuotaNode, usage: Mapping[FR, int], allow_borrowing: bool) -> int:
    """:func:`fits_quota`, telling which flavor-resource fails: the place in ``usage`` of
    the first that does not fit, or -1 when all fit. Each flavor-resource's test reads
    only its own usage."""
    used = accounting.usage[leaf.index]
    subtree = leaf.subtree
    for i, (fr, amount) in enumerate(usage.items()):
        if amount > accounting.available(leaf, fr):
            return i
        if not allow_borrowing and used.get(fr, 0) + amount > subtree.get(fr, 0):
            return i
    return -1


def over_nominal(accounting: Accounting, leaf: QuotaNode, usage: Mapping[FR, int]) -> dict[FR, int]:
    """Per flavor-resource of the request whose test within nominal fails now, how far the
    leaf's usage with the request is above the leaf's nominal."""
    used = accounting.usage[leaf.index]
    subtree = leaf.subtree
    over = {}
    for fr, amount in usage.items():
        above = used.get(fr, 0) + amount - subtree.get(fr, 0)
        if above > 0:
            over[fr] = above
    return over


def lacking_of(
    request: tuple[tuple[FR, int], ...], room: dict[FR, int]
) -> tuple[list[int], tuple[tuple[int, FR], ...]]:
    """The running bound's start (see ``Walk.attempt``): per requested flavor-resource
    the room does not cover, how much more it needs (a row), and those flavor-resources
    with their places in the row. A flavor-resource the room covers stays covered
    (victims only add to it)."""
    lacking = [amount - room[fr] for fr, amount in request if room[fr] < amount]
    return lacking, tuple(enumerate(fr for fr, amount in request if room[fr] < amount))


def slack(accounting: Accounting, leaf: QuotaNode, usage: Mapping[FR, int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per flavor-resource of the request, in its order: how far the request is from not
    fitting Available (unclipped), and from leaving the leaf's nominal."""
    subtree = leaf.subtree
    used = accounting.usage[leaf.index]
    room = []
    nominal = []
    for fr, amount in usage.items():
        room.append(accounting.headroom(leaf, fr) - amount if amount > 0 else _ALWAYS)
        nominal.append(subtree.get(fr, 0) - used.get(fr, 0) - amount)
    return tuple(room), tuple(nominal)


def may_fit(
    accounting: Accounting,
    leaf: QuotaNode,
    usage: Mapping[FR, int],
    candidates: list[Candidate],
    allow_borrowing: bool,
    runs: Runs | None = None,
    sums: RunSums | None = None,
    kept: FreedKept | None = None,
    exact: bool = True,
) -> bool:
    """The bound: whether the request fits the quota with every candidate this attempt
    may take evicted at once. When it does not, no step of the attempt fits.

    A candidate counted twice only makes the bound looser (the walk then runs as usual),
    never wrong. Only the preemptor's flavor-resources are summed. Usage is removed
    where it reaches the preemptor's path (:func:`_reaching`), and added back exactly.
    The cheaper test (see the module notes) looks only at the flavor-resources that do
    not fit now: the others fit already, and taking victims only adds to what is free.
    ``runs``: where ``candidates`` come from (``collect_runs``); each run is one queue's
    units of one class, and its sums are read from the running totals its source keeps
    (a short list's run from its units, :func:`_run_sums`), not candidate by candidate;
    for a run whose source keeps no units, its sum is kept in
    ``sums`` (a session's, see :data:`RunSums`). Each flavor-resource's usage is read
    once, for both tests (:class:`_Freed`); without runs, once a session for a list handed
    over again (``kept``, a session's, see :data:`FreedKept`); what they all hold only as far as the need.

    An attempt that must end within nominal is tested on the leaf's own nominal before
    the removals are worked out: only the leaf's own candidates lower its usage (no
    queue is below a leaf), by exactly their usage (the removal at the leaf is their
    sum), so when they cannot bring it within nominal the fit test fails after every
    removal, and nothing else is read."""
    short: list[FR] = []
    if kept is not None and runs is None and candidates:
        key = (allow_borrowing, len(candidates), id(candidates[0]))
        freed = kept.get(key)
        if freed is None or freed.candidates != candidates:  # the same candidates (``is``)
            freed = kept[key] = _Freed(list(candidates), allow_borrowing, runs, sums)
    else:
        freed = _Freed(candidates, allow_borrowing, runs, sums)
    for fr, amount in usage.items():
        room = accounting.headroom(leaf, fr)
        over = 0 if allow_borrowing else accounting.used(leaf, fr) + amount - leaf.subtree.get(fr, 0)
        if room >= amount and over <= 0:
            continue
        if over > 0 and freed.own(fr, leaf) < over:
            return False
        short.append(fr)
        if room < amount and not freed.reaches(fr, amount - room):
            return False
    if not short or not exact:
        return True  # without ``exact``: the tests per flavor-resource alone, none proving it hopeless
    path = set(leaf.lineage)
    arriving: dict[QuotaNode, dict[FR, int]] = {}
    for fr in short:
        for node, amount in _reaching(accounting, path, fr, freed.by_queue(fr)).items():
            into = arriving.get(node)
            if into is None:
                arriving[node] = {fr: amount}
            else:
                into[fr] = amount
    for node, amounts in arriving.items():
        accounting.remove_all(node, amounts)
    try:
        return fits_quota(accounting, leaf, usage, allow_borrowing)
    finally:
        for node, amounts in arriving.items():
            accounting.add_all(node, amounts)


def _usage(candidates: list[Candidate], fr: FR, allow_borrowing: bool) -> list[int]:
    """The usage of ``fr`` of each candidate an attempt may take (with borrowing: none only within nominal)."""
    if allow_borrowing:
        return [c.usage.get(fr, 0) for c in candidates if not c.only_within_nominal]
    return [c.usage.get(fr, 0) for c in candidates]


class _Freed:
    """What the candidates an attempt may take (:func:`_usage`) hold of each flavor-resource: in
    all, as far as a need (:meth:`reaches`), and per queue (:meth:`by_queue`). Each one's usage is
    read once per candidate, or per run from its source's running totals (:func:`_takeable_runs`). Candidates and
    runs come grouped by queue, each queue's together (a run is one queue's units of one
    class): a run's sum is its queue's part, and the candidates' stretches of one queue
    are found once and summed as differences of running totals; a queue that comes back
    later adds to its first sums."""

    __slots__ = ("allow_borrowing", "candidates", "held", "items", "per_fr", "queued", "runs", "stretches", "sums")

    def __init__(
        self, candidates: list[Candidate], allow_borrowing: bool, runs: Runs | None, sums: RunSums | None = None
    ) -> None:
        self.candidates = candidates
        self.allow_borrowing = allow_borrowing
        self.runs = runs
        self.sums = sums
        # The takeable runs, when read from runs (made when first needed).
        self.items: list[_Run] | None = None
        # Per flavor-resource: each item's usage of it.
        self.per_fr: dict[FR, list[int]] = {}
        self.held: dict[FR, tuple[int, int]] = {}  # without runs: how far :meth:`reaches` read, what it found
        # Without runs: each stretch of takeable candidates of one queue, as (queue, its
        # length), in order (made when first needed).
        self.stretches: list[tuple[QuotaNode, int]] | None = None
        # Without runs: per flavor-resource, what :meth:`by_queue` answered (the same
        # candidates free the same).
        self.queued: dict[FR, dict[QuotaNode, int]] = {}

    def _values(self, fr: FR) -> list[int]:
        found = self.per_fr.get(fr)
        if found is None:
            runs = self.runs
            if runs is not None:
                if self.items is None:
                    self.items = _takeable_runs(runs, self.allow_borrowing)
                found = _run_sums(runs, self.items, fr, self.sums)
            else:
                found = _usage(self.candidates, fr, self.allow_borrowing)
            self.per_fr[fr] = found
        return found

    def reaches(self, fr: FR, need: int) -> bool:
        """Whether the candidates hold at least ``need`` of ``fr``. Without runs, read in order a stretch at a
        time until they do (usage is never negative: the rest only adds to it), on from there when asked again."""
        if self.runs is not None or fr in self.per_fr:
            return sum(self._values(fr)) >= need
        start, held = self.held.get(fr, (0, 0))
        while held < need and start < len(self.candidates):
            held += sum(_usage(self.candidates[start : start + _STRETCH], fr, self.allow_borrowing))
            start += _STRETCH
        self.held[fr] = (start, held)
        return held >= need

    def own(self, fr: FR, leaf: QuotaNode) -> int:
        """What the candidates of ``leaf`` hold of ``fr`` (asked by an attempt that must end within
        nominal: it may take every candidate): from the runs' sums, or read from those alone."""
        if self.runs is not None:
            return self.by_queue(fr).get(leaf, 0)
        return sum([c.usage.get(fr, 0) for c in self.candidates if c.leaf is leaf])

    def by_queue(self, fr: FR) -> dict[QuotaNode, int]:
        """Per queue that frees some of ``fr``, in the order queues first come, how much
        its candidates free."""
        values = self._values(fr)
        freed: dict[QuotaNode, int] = {}
        if self.runs is not None:
            if self.items is None:
                self.items = _takeable_runs(self.runs, self.allow_borrowing)
            for queue, value in zip(map(_QUEUE, self.items), values, strict=True):
                if value:
                    freed[queue] = freed.get(queue, 0) + value
            return freed
        kept = self.queued.get(fr)
        if kept is not None:
            return kept
        stretches = self.stretches
        if stretches is None:
            candidates = self.candidates
            taken = filterfalse(_ONLY_WITHIN_NOMINAL, candidates) if self.allow_borrowing else candidates
            stretches = self.stretches = [
                (queue, len(list(stretch))) for queue, stretch in groupby(map(_LEAF, taken))
            ]
        totals = list(accumulate(values, initial=0))
        start = 0
        for queue, length in stretches:
            end = start + length
            value = totals[end] - totals[start]
            if value:
                freed[queue] = freed.get(queue, 0) + value
            start = end
        self.queued[fr] = freed
        return freed


FreedKept = dict[tuple[bool, int, int], _Freed]
"""The last list of candidates handed to :func:`may_fit` without runs, per kind of attempt,
length and first candidate, with what its candidates hold (its ``_Freed``, holding a copy
of the list): a list equal to the copy holds the same candidates (``Candidate`` compares
by identity), whose usage, queue and class never change (a session's, see ``search.py``)."""


# A run an attempt may take: its queue, its source, its place in the source's kept units
# (``first``, ``last``), or its candidates where the source keeps none.
_Run = tuple[QuotaNode, Source, int, int, "list[Candidate] | None"]
_QUEUE = itemgetter(0)


def _takeable_runs(runs: Runs, allow_borrowing: bool) -> list[_Run]:
    """The runs of ``runs`` an attempt may take (one that may borrow takes no unit usable
    only within nominal; a run's units share their class), in order, with their queue."""
    needed = runs.needed
    with_room = runs.with_room
    out: list[_Run] = []
    for source, first, last, items in runs.parts:
        head = items[0] if items is not None else source.using(needed, with_room)[0][first]
        if not (allow_borrowing and head.only_within_nominal):
            out.append((head.leaf, source, first, last, items))
    return out


RunSums = dict[tuple[Source, frozenset[FR], bool, int, int, FR], int]
"""Per run of a source that keeps no units yet (named by its source, the request's needed
flavor-resources and ``with_room``, and its range of the source's units) and per
flavor-resource, the usage of its units: the same run of the same source has the same
units (a source's units never change), so a session sums it once. Under the range
(-1, -1), 0 for a source that keeps units and was read once (:func:`_run_sums`)."""


_KEPT = "_bound_kept"  # in ``session.state``: see :func:`session_kept`


def session_kept(state: dict[str, Any]) -> tuple[RunSums, FreedKept]:
    """A session's :data:`RunSums` and :data:`FreedKept`, for :func:`may_fit`."""
    kept: tuple[RunSums, FreedKept] | None = state.get(_KEPT)
    if kept is None:
        kept = state[_KEPT] = ({}, {})
    return kept


SUMMED = 24
"""The most units a source may keep for a request for its runs to be summed unit by unit
when it has no running totals for it yet (:func:`_run_sums`)."""


def _run_sums(runs: Runs, parts: list[_Run], fr: FR, sums: RunSums | None = None) -> list[int]:
    """Per run of ``parts``, the usage of ``fr`` of its units, from its source's running
    totals (or, where it keeps none, summed, or read from ``sums``).

    A source's totals are made for its whole list (``QueueUnits.totals``: spliced from the
    list's before a take, or read unit by unit) and kept until the next take from its
    queue. Where the list is short, making them costs more than reading one run's units,
    and most such lists are read once before that take: the first read of a short list
    (marked in ``sums`` under the range (-1, -1)) sums the run's units, a second makes the
    totals. The sum is the same: the totals are the running sum of the same units' usage."""
    needed = runs.needed
    with_room = runs.with_room
    out = []
    kept_key = (needed, with_room, fr)
    for _, source, first, last, items in parts:
        if items is not None:
            if sums is None:
                out.append(sum([c.usage.get(fr, 0) for c in items]))
                continue
            place = (source, needed, with_room, first, last, fr)
            found = sums.get(place)
            if found is None:
                found = sums[place] = sum([c.usage.get(fr, 0) for c in items])
            out.append(found)
        else:
            totals = source.sums.get(kept_key)
            if totals is None:
                if sums is not None:
                    read = (source, needed, with_room, -1, -1, fr)  # read once already
                    if read not in sums:
                        units = source.using(needed, with_room)[0]
                        if len(units) <= SUMMED:
                            sums[read] = 0
                            out.append(sum([c.usage.get(fr, 0) for c in units[first:last]]))
                            continue
                totals = source.totals(needed, with_room, fr)
            out.append(totals[last] - totals[first])
    return out


def _reaching(
    accounting: Accounting, path: set[QuotaNode], fr: FR, freed: dict[QuotaNode, int]
) -> dict[QuotaNode, int]:
    """Where removing ``freed`` (usage of ``fr`` per queue) reaches the preemptor's
    ``path`` (its lineage), and how much: only the path's usage is read by the fit test.
    Removing usage from a queue passes up to its parent what it had stored there (its
    usage beyond its local reserve); removals are additive, and several removals below
    one node pass up together ``min(their sum, what it stored)``, as they would one by
    one. So the queues off the path are summed bottom up without being changed, and
    each path node gets, as one removal of its own, the sum of what reaches it from
    below. One flavor-resource's removal never changes another's."""
    out: dict[QuotaNode, int] = {}
    # Per depth, the queues and cohorts off the path and what leaves them from below.
    levels: dict[int, dict[QuotaNode, int]] = {}
    for node, amount in freed.items():
        if node in path:
            out[node] = out.get(node, 0) + amount
        else:
            level = levels.get(node.depth)
            if level is None:
                levels[node.depth] = {node: amount}
            else:
                level[node] = level.get(node, 0) + amount
    all_usage = accounting.usage
    for depth in range(max(levels, default=0), 0, -1):
        level = levels.get(depth)
        if level is None:
            continue
        for node, amount in level.items():
            parent = node.parent
            if parent is None or amount <= 0:
                continue  # another queue tree: nothing reaches the preemptor's
            guaranteed = node.guaranteed  # most nodes keep no local reserve
            stored = all_usage[node.index].get(fr, 0)
            if guaranteed:
                stored -= guaranteed.get(fr, 0)
            if stored <= 0:
                continue
            passed = amount if amount < stored else stored
            if parent in path:
                out[parent] = out.get(parent, 0) + passed
            else:
                above = levels.get(depth - 1)
                if above is None:
                    levels[depth - 1] = {parent: passed}
                else:
                    above[parent] = above.get(parent, 0) + passed
    return out


def _arriving(
    accounting: Accounting, leaf: QuotaNode, freed: dict[QuotaNode, dict[FR, int]]
) -> list[tuple[QuotaNode, dict[FR, int]]]:
    """:func:`_reaching` of every flavor-resource of ``freed`` (usage per queue): per path
    node, what reaches it, as one removal of its own; what :func:`may_fit` removes."""
    path = set(leaf.lineage)
    by_fr: dict[FR, dict[QuotaNode, int]] = {}
    for node, amounts in freed.items():
        for fr, amount in amounts.items():
            into = by_fr.setdefault(fr, {})
            into[node] = into.get(node, 0) + amount
    out: dict[QuotaNode, dict[FR, int]] = {}
    for fr, per_queue in by_fr.items():
        for node, amount in _reaching(accounting, path, fr, per_queue).items():
            out.setdefault(node, {})[fr] = amount
    return list(out.items())
