"""Waiting victims of a walk (``walk.py``): what the lender test may know without
taking them.

A victim the walk accepts waits, untaken, until a test reads the state it changes. The
lender test of a later candidate reads the usage of the candidate's queue and of the
cohorts above it, off the preemptor's path, so the waiting victims under the same top
could change its answer. Taking them is exact but costs a quota change (and its undo)
per victim. First the test is asked on a lower bound instead: every node's usage less
the needed usage of everything waiting under it, kept as running sums. Removing usage
passes up no more than it took at each level, so the usage left after taking them is
at least that bound, and the test only reads "usage above nominal": when it passes on
the bound, it passes after taking them, and they keep waiting. When it does not, the
walk takes them and asks the exact test.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from itertools import accumulate
from typing import Any

from ..model import FR
from ..quota import QuotaNode
from ..session import CLASS_SAME_QUEUE, Candidate

__all__ = ["WORTH", "Leading", "leading_run", "lender_gives_anyway", "remember", "walked"]

Pending = dict[QuotaNode, dict[FR, int]]
# A queue and the cohorts above it off the preemptor's path, up to its top (the last).
Chain = tuple[QuotaNode, ...]


def remember(chain: Chain, usage: Mapping[FR, int], held: list[FR], pending: Pending) -> None:
    """Add a waiting victim's needed usage (``held``: the needed flavor-resources it
    holds) to its queue and the cohorts above it up to its top."""
    amounts = [(fr, usage[fr]) for fr in held if usage[fr]]
    if not amounts:
        return
    for node in chain:
        sums = pending.get(node)
        if sums is None:
            pending[node] = dict(amounts)
        else:
            for fr, amount in amounts:
                sums[fr] = sums.get(fr, 0) + amount


def lender_gives_anyway(all_usage: list[dict[FR, int]], chain: Chain, held: list[FR], pending: Pending) -> bool:
    """:func:`~preemptd.framework.quota.lender_may_give` on the lower bound of the usage
    the waiting victims leave (see the module notes); ``False`` means "not known".
    ``all_usage``: the accounting's usage per node; ``held``: the needed
    flavor-resources the candidate holds."""
    for node in chain:
        used = all_usage[node.index]
        subtree = node.subtree
        less = pending.get(node)
        for fr in held:
            if used.get(fr, 0) - (less.get(fr, 0) if less else 0) > subtree.get(fr, 0):
                break
        else:
            return False
    return True


# -- the leading run of a lazy walk -------------------------------------------------------
#
# The leading candidates a lazy walk (no plugin that may refuse, no scenario filter)
# accepts while the running bound stays short of the request. Up to the first fit test
# the walk does nothing with a candidate but its lender test: one usable only within
# nominal is passed over in an attempt that may borrow, and an elastic remainder (whose
# test reads the victims so far) ends the run. The lender test is known to pass for
# every candidate of the run at once when it passes on the usage left after taking the
# *whole* run: each queue or cohort off the path keeps, on some needed flavor-resource
# the candidate holds, more usage than its nominal with every victim of the run under it
# taken (the step-by-step walk has taken at most those when it asks; taking only lowers
# usage, and the test reads "usage above nominal"). Else nothing is known and the walk
# goes step by step.
#
# What a run is made of reads only the candidates (identity and order), whether the
# attempt may borrow and the needed flavor-resources; where it stops reads the request
# and the headroom, and the lender test reads the state. The walks of one queue in one
# session mostly see the same leading candidates again (the victims chosen earlier come
# first, and each search adds few), so the first part is kept per (leaf, needed
# flavor-resources, borrowing) in ``Leading``: running sums over the accepted candidates,
# per flavor-resource and per queue. A later walk keeps the part its candidates share
# with the kept ones and extends it only as far as it stops; its stop is found by
# bisection, its run's usage read from the sums, and the lender test asked once per
# queue and set of flavor-resources held. A run the lender test is not known to pass for
# over its first ``WORTH`` candidates is known for no longer one (less is taken under each
# node of a shorter run): a walk reads that far first, and no further when it is not.
# When the lender test does not pass for the whole run, the longest run it is known to
# pass for is read from the lender queues' running sums where each is its own chain (its
# parent on the path: ``Leading._longest``), and else found by bisection, trying runs.


class Leading:
    """The kept leading run of one (leaf, needed flavor-resources, borrowing) in a session
    (see the notes above)."""

    __slots__ = (
        "accepted", "at", "cands", "end", "leaf_at", "leaf_sums", "misses", "needed", "patterns", "sums", "wait",
    )

    def __init__(self, needed: frozenset[FR]) -> None:
        self.needed = needed
        # How many walks of this key go step by step before one tries a run again (the
        # first does: see ``WORTH``), and how many runs in a row came out short.
        self.wait = 2
        self.misses = 0
        self.cands: list[Candidate] = []  # the candidates read so far, in walk order
        self.end = -1  # the place in ``cands`` of an elastic remainder (ends every run)
        self.accepted: list[Candidate] = []  # those the walk accepts, in order
        self.at: list[int] = []  # each accepted one's place in ``cands``
        self.sums: dict[FR, list[int]] = {}  # per flavor-resource: running usage of ``accepted``
        # Per queue: which of ``accepted`` are its (their places there), the running sums of
        # their whole usage per flavor-resource and, for a lender queue, the sets of
        # flavor-resources its candidates hold, each with the place of its first one.
        self.leaf_at: dict[QuotaNode, list[int]] = {}
        self.leaf_sums: dict[QuotaNode, dict[FR, list[int]]] = {}
        self.patterns: dict[QuotaNode, dict[tuple[FR, ...], int]] = {}

    def _keep_shared(self, candidates: list[Candidate]) -> None:
        """Drop what was read beyond the part ``candidates`` begins with."""
        cands = self.cands
        size = min(len(cands), len(candidates))
        if cands[:size] == candidates[:size]:  # identity first: no Candidate compares equal
            if size == len(cands):
                return
            shared = size
        else:
            low, high = 0, size - 1  # cands[:low] is shared, cands[:high + 1] is not
            while low < high:
                mid = (low + high + 1) // 2
                if cands[:mid] == candidates[:mid]:
                    low = mid
                else:
                    high = mid - 1
            shared = low
        del cands[shared:]
        if self.end >= shared:
            self.end = -1
        kept = bisect_left(self.at, shared)
        del self.accepted[kept:]
        del self.at[kept:]
        for sums in self.sums.values():
            del sums[kept:]
        for leaf, places in self.leaf_at.items():
            cut = bisect_left(places, kept)
            if cut == len(places):
                continue
            del places[cut:]
            for sums in self.leaf_sums[leaf].values():
                del sums[cut:]
            patterns = self.patterns.get(leaf)
            if patterns:
                for held in [h for h, first in patterns.items() if first >= kept]:
                    del patterns[held]

    def _track(self, fr: FR) -> list[int]:
        sums = self.sums[fr] = list(accumulate(c.usage.get(fr, 0) for c in self.accepted))
        return sums

    def _stop(self, need: list[tuple[FR, int]]) -> int:
        """The first accepted candidate after which no flavor-resource is short, as far as
        read (``len(accepted)`` when none is)."""
        stop = 0
        for fr, amount in need:
            sums = self.sums.get(fr)
            if sums is None:
                sums = self._track(fr)
            found = bisect_left(sums, amount)
            if found > stop:
                stop = found
        return stop

    def _read(
        self, candidates: list[Candidate], allow_borrowing: bool, need: list[tuple[FR, int]], most: int = 0
    ) -> None:
        """Read further candidates until one leaves no flavor-resource short, an elastic
        remainder, or the end; with ``most``, also once that many are accepted."""
        cands = self.cands
        accepted = self.accepted
        at = self.at
        sums = self.sums
        tracked = list(sums.items())
        last = [(sums[fr], amount) for fr, amount in need]
        leaf_at = self.leaf_at
        leaf_sums = self.leaf_sums
        all_patterns = self.patterns
        j = len(accepted)
        for i in range(len(cands), len(candidates)):
            candidate = candidates[i]
            cands.append(candidate)
            if allow_borrowing and candidate.only_within_nominal:
                continue
            if not candidate.single_pod and candidate.pod_set is not None:
                self.end = i
                return
            usage = candidate.usage
            accepted.append(candidate)
            at.append(i)
            for fr, running in tracked:
                running.append((running[-1] if running else 0) + usage.get(fr, 0))
            leaf = candidate.leaf
            places = leaf_at.get(leaf)
            if places is None:
                places = leaf_at[leaf] = []
                by_fr = leaf_sums[leaf] = {}
            else:
                by_fr = leaf_sums[leaf]
            count = len(places)
            places.append(j)
            for fr, running in by_fr.items():
                running.append((running[-1] if running else 0) + usage.get(fr, 0))
            for fr, amount in usage.items():
                if fr not in by_fr:
                    by_fr[fr] = [0] * count + [amount]
            if candidate.group != CLASS_SAME_QUEUE:
                patterns = all_patterns.get(leaf)
                if patterns is None:
                    patterns = all_patterns[leaf] = {}
                held = tuple(usage)
                if held not in patterns:
                    patterns[held] = j
            j += 1
            for running, amount in last:
                if running[-1] < amount:
                    break
            else:
                return
            if most and j >= most:
                return

    def run(
        self,
        candidates: list[Candidate],
        allow_borrowing: bool,
        need: list[tuple[FR, int]],
        chain_of: Callable[[QuotaNode], Chain],
        all_usage: list[dict[FR, int]],
    ) -> tuple[int, list[Candidate], dict[QuotaNode, dict[FR, int]]]:
        """The leading run of a walk over ``candidates`` that misses ``need`` (per requested
        flavor-resource, what the headroom lacks): how many candidates it covers, the
        victims among them and their whole usage per queue; ``(0, [], {})`` when it is not
        known or empty."""
        self._keep_shared(candidates)
        stop = self._stop(need)
        if stop == len(self.accepted) and self.end < 0 and len(self.cands) < len(candidates):
            if stop < WORTH:
                # First only as far as a run worth taking: when the lender test is not
                # known to pass for its first ``WORTH`` candidates, it is known for no
                # longer run (see the bisection below), and the rest is not read.
                self._read(candidates, allow_borrowing, need, WORTH)
                stop = self._stop(need)
                if stop == WORTH and not self._known(WORTH, chain_of, all_usage):
                    return self._missed()
            if stop == len(self.accepted) and self.end < 0 and len(self.cands) < len(candidates):
                self._read(candidates, allow_borrowing, need)
                stop = self._stop(need)
        ended = stop == len(self.accepted)  # no candidate read leaves the request short
        longest = self._longest(chain_of, all_usage) if LONGEST else None
        if longest is not None:
            # The same run as the bisection below finds, read at once.
            if stop > longest:
                ended = False
                stop = longest
            if stop < WORTH:
                return self._missed()
            return self._ran(stop, ended, len(candidates), self._by_leaf(stop))
        found = self._taken(stop, chain_of, all_usage) if stop >= WORTH else None
        if found is None and stop > WORTH:
            # A shorter run: the longest the lender test is known to pass for (a run
            # known to pass stays known when cut, as less is taken under each node), if
            # it is long enough.
            ended = False
            low, high = WORTH - 1, stop  # the run of ``high`` is not known
            while high - low > 1:
                mid = (low + high) // 2
                if self._taken(mid, chain_of, all_usage) is None:
                    high = mid
                else:
                    low = mid
            stop = low
            found = self._taken(stop, chain_of, all_usage) if stop >= WORTH else None
        if stop < WORTH or found is None:
            return self._missed()
        return self._ran(stop, ended, len(candidates), found)

    def _ran(
        self, stop: int, ended: bool, size: int, found: dict[QuotaNode, dict[FR, int]]
    ) -> tuple[int, list[Candidate], dict[QuotaNode, dict[FR, int]]]:
        """The run of the first ``stop`` accepted candidates (``size``: how many candidates
        the walk has), ``found`` their whole usage per queue."""
        self.misses = 0
        if not ended:
            return self.at[stop], self.accepted[:stop], found
        # The run ends at an elastic remainder, or with the candidates.
        return (self.end if self.end >= 0 else size), self.accepted[:stop], found

    def _missed(self) -> tuple[int, list[Candidate], dict[QuotaNode, dict[FR, int]]]:
        """No run: a short run saves less than it costs (the walk's later lender tests are
        then exact ones), and the walk goes step by step."""
        self.misses += 1
        self.wait = 1 << min(self.misses, 5)
        return 0, [], {}

    def _known(self, stop: int, chain_of: Callable[[QuotaNode], Chain], all_usage: list[dict[FR, int]]) -> bool:
        """Whether the lender test is known to pass for the first ``stop`` accepted candidates."""
        longest = self._longest(chain_of, all_usage) if LONGEST else None
        if longest is not None:
            return stop <= longest
        return self._taken(stop, chain_of, all_usage) is not None

    def _by_leaf(self, stop: int) -> dict[QuotaNode, dict[FR, int]]:
        """The whole usage per queue of the first ``stop`` accepted candidates."""
        by_leaf: dict[QuotaNode, dict[FR, int]] = {}
        for leaf, places in self.leaf_at.items():
            taken = bisect_left(places, stop)
            if taken:
                by_leaf[leaf] = {fr: sums[taken - 1] for fr, sums in self.leaf_sums[leaf].items()}
        return by_leaf

    def _longest(self, chain_of: Callable[[QuotaNode], Chain], all_usage: list[dict[FR, int]]) -> int | None:
        """The most accepted candidates the lender test is known to pass for (``_taken``
        answers for every run up to it, for none longer), read without trying runs: or
        ``None`` when a lender queue's chain goes above the queue (its cohorts sum the
        victims of several queues). Each queue that is its own chain reads only its own
        victims of the run: on some needed flavor-resource it holds, more usage than its
        nominal with them taken. Its running sums tell, per flavor-resource, how many of
        its victims it stays above nominal with (the first ``k`` sum to less than how far
        above it is now), so the longest run it allows ends at its next victim; a set of
        flavor-resources first held at ``first`` asks only of runs longer than ``first``.
        Every run the test is known for is as long as each of these allows (runs known to
        pass stay known when cut), so the longest is the least of them."""
        longest = len(self.accepted)
        needed = self.needed
        for leaf, patterns in self.patterns.items():
            if len(chain_of(leaf)) != 1:
                return None
            used = all_usage[leaf.index]
            subtree = leaf.subtree
            leaf_sums = self.leaf_sums[leaf]
            places = self.leaf_at[leaf]
            count = len(places)
            for holds, first in patterns.items():
                if first >= longest:
                    continue  # asks only of longer runs
                most = -1  # the most of the queue's victims the run may hold: none of -1
                for fr in needed:
                    if fr not in holds:
                        continue
                    above = used.get(fr, 0) - subtree.get(fr, 0)
                    if above <= 0:
                        continue
                    sums = leaf_sums.get(fr)
                    allowed = count if sums is None else bisect_left(sums, above)
                    if allowed > most:
                        most = allowed
                if most >= count:
                    continue
                allows = places[most] if most >= 0 else first
                if allows < first:
                    allows = first
                if allows < longest:
                    longest = allows
        return longest

    def _taken(
        self, stop: int, chain_of: Callable[[QuotaNode], Chain], all_usage: list[dict[FR, int]]
    ) -> dict[QuotaNode, dict[FR, int]] | None:
        """The whole usage per queue of the first ``stop`` accepted candidates, or ``None``
        when the lender test is not known to pass for all of them."""
        by_leaf = self._by_leaf(stop)
        under: Pending = {}
        needed = self.needed
        for leaf, summed in by_leaf.items():
            if leaf not in self.patterns:
                continue
            remember(chain_of(leaf), summed, [fr for fr in needed if fr in summed], under)
        for leaf, patterns in self.patterns.items():
            for holds, first in patterns.items():
                if first < stop:
                    held = [fr for fr in needed if fr in holds]
                    if not lender_gives_anyway(all_usage, chain_of(leaf), held, under):
                        return None
        return by_leaf


_LEADING = "_leading_runs"  # in ``session.state``: (leaf index, needed, borrowing) -> Leading

# A run pays for reading and proving it only when it is long. The first two walks of a key
# go step by step, and so does the next while the last one accepted fewer than ``WORTH``
# candidates before its first test; after a short run (the lender test cut it), the next
# 2, 4, ... 32 walks do. Which way a walk goes changes no answer.
WORTH = 32
# Whether a run's length is read at once where every lender queue is its own chain
# (``Leading._longest``); else it is found by trying runs.
LONGEST = True


def _leading(state: dict[str, Any], leaf: QuotaNode, needed: frozenset[FR], allow_borrowing: bool) -> Leading:
    kept: dict[tuple[int, frozenset[FR], bool], Leading] | None = state.get(_LEADING)
    if kept is None:
        kept = state[_LEADING] = {}
    key = (leaf.index, needed, allow_borrowing)
    leading = kept.get(key)
    if leading is None:
        leading = kept[key] = Leading(needed)
    return leading


def walked(state: dict[str, Any], leaf: QuotaNode, needed: frozenset[FR], allow_borrowing: bool, accepted: int) -> None:
    """A walk that took no leading run accepted ``accepted`` candidates before its first
    test (or its end): the next walk of its key tries a run when that is a long one."""
    if accepted < WORTH:
        leading = _leading(state, leaf, needed, allow_borrowing)
        if not leading.wait:
            leading.wait = 1


def leading_run(
    state: dict[str, Any],
    leaf: QuotaNode,
    candidates: list[Candidate],
    allow_borrowing: bool,
    request: tuple[tuple[FR, int], ...],
    room: Mapping[FR, int],
    needed: frozenset[FR],
    chain_of: Callable[[QuotaNode], Chain],
    all_usage: list[dict[FR, int]],
) -> tuple[int, list[Candidate], dict[QuotaNode, dict[FR, int]]]:
    """:meth:`Leading.run` of the session's kept run for this walk (``state``: the
    session's ``state``)."""
    need = [(fr, amount - room[fr]) for fr, amount in request]
    if all(miss <= 0 for _, miss in need):
        return 0, [], {}
    leading = _leading(state, leaf, needed, allow_borrowing)
    if leading.wait:
        leading.wait -= 1
        return 0, [], {}
    return leading.run(candidates, allow_borrowing, need, chain_of, all_usage)
