"""One preemptor's walk over its ordered candidates (SEMANTICS §4): mechanism only.

:class:`Walk` takes candidates in victim order with the session's statement until the
request fits, then fills back to a minimal set; every step is exact and undoable,
and everything is rolled back when the walk returns.

Searches that cannot succeed, and tests known without running them: ``bound.py``;
what fill-back knows without a test: ``fillback.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice

from ..model import FR, PodSet, Workload
from ..quota import QuotaNode
from ..session import CLASS_SAME_QUEUE, Candidate, ScenarioFilters, Session
from .bound import fits_quota, lacking_of, may_fit, over_nominal, short_of, slack
from .fillback import fill_back, singles_taken
from .margins import Margins, drop, gives, held_of, keep, margin_row
from .room import FreedRoom
from .waiting import leading_run, walked

__all__ = ["Walk"]

ALONE = True  # the lender test of a chain of the queue alone written out (tests turn it off)

_CHAINS = "_walk_chains"  # in ``session.state``: per preemptor leaf, its path and chains


class Walk:
    """One preemptor's attempts; remembers plugin verdicts across attempts."""

    __slots__ = (
        "chains", "filters", "leaf", "needed", "path", "preemptor", "session", "targets", "usage", "verdicts",
        "vetoed_by", "vetoes", "visits",
    )

    def __init__(
        self,
        session: Session,
        preemptor: Workload,
        leaf: QuotaNode,
        usage: dict[FR, int],
        needed: frozenset[FR],
        targets: Sequence[tuple[PodSet, int, str]],
        filters: ScenarioFilters,
    ) -> None:
        self.session = session
        self.preemptor = preemptor
        self.leaf = leaf
        self.usage = usage
        self.needed = needed
        self.targets = [
            t for t in targets if session.placements is not None and session.placements.has_nodes(t[2])
        ]
        self.filters = filters
        self.verdicts: dict[int, bool] = {}
        # The path and the chains read only the quota tree, which a session never changes:
        # kept per leaf for the session's walks (see _chain()).
        kept: dict[int, tuple[frozenset[QuotaNode], dict[QuotaNode, tuple[QuotaNode, ...]]]] | None
        kept = session.state.get(_CHAINS)
        if kept is None:
            kept = session.state[_CHAINS] = {}
        found = kept.get(leaf.index)
        if found is None:
            found = kept[leaf.index] = (frozenset(leaf.path()), {})
        self.path: frozenset[QuotaNode] = found[0]
        self.chains: dict[QuotaNode, tuple[QuotaNode, ...]] = found[1]
        self.vetoed_by: set[str] = set()
        self.vetoes: dict[str, str] = {}  # candidate key -> plugin that vetoed it
        self.visits: list[tuple[Candidate, bool]] | None = None  # when set, what _preemptible answers (hopeless.py)

    def attempt(
        self, candidates: list[Candidate], allow_borrowing: bool, *, hopeless: bool = False
    ) -> tuple[list[Candidate], int]:
        """Take candidates in order until the request fits; the minimal set found and
        its borrowing level, or nothing. The accounting is left as it was.

        When :meth:`may_skip_walk`, a victim accepted by the plugins is not taken from
        the quota and the nodes at once: it waits until a test reads that state. The
        fit test runs only once the running bound allows it (the unclipped Available at
        the start of the attempt plus the victims' usage so far, see
        :meth:`~preemptd.framework.quota.Accounting.headroom`: Available cannot have
        grown more), and then every waiting victim is taken first, so the test sees
        exactly the state of the step-by-step walk. The bound follows only the requested
        flavor-resources it found short, by how much (``bound.lacking_of``): one it covers
        stays covered, as victims only add to it. A failed test tightens the bound to the
        Available it read, and the test within nominal (an attempt that may not borrow) is
        known without running it: only victims of the preemptor's own queue lower the
        leaf's usage, each by exactly its own (:meth:`_over_nominal`). The lender test of
        a candidate reads the usage of its queue and of the cohorts above it up to (not
        including) the preemptor's path: all inside the subtree of the highest of them
        (its *top*, a child of a path node). A victim changes the usage of its own queue and
        ancestors only, so only the waiting victims under the same top can change what
        the test reads: the test is first asked on a lower bound of what they leave
        (``margins.py``), and only when that is not enough are they taken before it,
        unless the chain is the queue alone (its top): its bound is then exact, as
        taking a victim lowers the queue's usage by exactly its own, and the refusal
        stands; taking them leaves that margin as it is, so it is read once an attempt.
        The others (and the victims of the preemptor's own queue) keep waiting.
        Victims are taken from the quota first; their node room comes free only when the
        quota fits, before the pods' fit test reads it. Once the quota fits, it fits at
        every later step of the attempt (the state only loses usage, and the test is
        monotone: ``bound.py``), so it is not tested again: later victims wait for the
        quota until fill-back, and only their room comes free at once. Taking usage away
        is additive and order-free, so waiting victims taken together leave the quota as
        taking them one by one does. A victim a scenario filter rejects is never taken,
        as it is rolled back in the step-by-step walk.

        The lender test only turns from yes to no as an attempt goes on (usage is only
        taken away, and the test asks whether the lender's queue and cohorts are still
        above nominal), and it reads a candidate's queue and which of the needed
        flavor-resources the candidate holds: once it refuses a candidate, it refuses
        every later candidate of that queue holding the same flavor-resources, which are
        skipped without a test (and without taking the victims waiting under their top);
        a queue that is its own chain is asked its exact margin again instead, as cheap.

        ``hopeless``: :meth:`may_fit` proved that no step fits. The walk then tells only
        what it tells the plugins: the same candidates in the same order reach
        ``is_preemptible`` and the scenario filters with the same victims so far, so the
        vetoes, their counts and the plugins' notes are those of the full walk. It runs
        no fit test (false at every step), takes no node room (only the pods' fit reads
        it; ``MEMO_SAFE`` plugins answer from the committed state, see
        ``session/hooks.py``) and takes from the quota only the waiting victims a lender
        test needs."""
        session = self.session
        statement = session.statement
        start = statement.hold()  # everything is undone at the end: quota from copies
        victims: list[Candidate] = []
        nodes = bool(self.targets) and not hopeless
        room = self._headroom() if self.may_skip_walk() and not hopeless else None
        lazy = hopeless or room is not None
        # The node room of lazy victims, beside the placements (``room.py``); named by the
        # node epoch while the placements hold the committed room (``givenroom.py``).
        epoch = None if statement.ops else statement.node_epoch
        freed = FreedRoom(session, self.targets, epoch) if self.targets and lazy and not hopeless else None
        own: list[Candidate] = []  # waiting victims of the preemptor's queue
        others: dict[QuotaNode, list[Candidate]] = {}  # waiting victims of other queues, by top
        quota_fits = False  # the quota fit at a step of this (lazy) attempt
        # Per queue or cohort off the preemptor's path asked about: how far above its nominal
        # it is, less the needed usage of the victims waiting under it (``margins.py``).
        margins: Margins = {}
        # Per lender queue that is its own chain: its margin row by place, exact (``margins.py``, see above).
        alones: dict[QuotaNode, list[int]] = {}
        # Per queue of a chain holding a cohort, the flavor-resources of its candidates refused.
        refused: dict[QuotaNode, set[tuple[FR, ...]]] = {}
        ask = session.may_veto  # without a plugin that may refuse, every candidate passes
        filters = self.filters
        needed = self.needed
        # The needed flavor-resources with their places in a lender's margin row.
        places = tuple(enumerate(needed))
        chains = self.chains
        preemptor_leaf = self.leaf
        request = tuple(self.usage.items())
        all_usage = session.accounting.usage
        rest: Iterable[Candidate] = candidates
        # A walk that may take a leading run and did not: how far it goes before its first
        # test tells whether the next one of its key tries (``waiting.walked``).
        stepped = False
        try:
            if room is not None and not ask and not filters:
                count, run, by_leaf = leading_run(
                    session.state, preemptor_leaf, candidates, allow_borrowing, request, room, needed,
                    self._chain_of, all_usage,
                )
                stepped = not count
                if count:
                    # Taken at once, as the walk would take them all at its first test.
                    victims.extend(run)
                    for leaf, summed in by_leaf.items():
                        statement.remove_usage(leaf, summed)
                        for fr in room:
                            room[fr] += summed.get(fr, 0)
                    rest = islice(candidates, count, None)
            # Per requested flavor-resource the test within nominal fails on: how far over.
            over = self._over_nominal() if room is not None and not allow_borrowing else None
            # The running bound, on the requested flavor-resources it finds short (see above).
            lacking, short_frs = lacking_of(request, room) if room is not None else ([], ())
            for candidate in rest:
                if allow_borrowing and candidate.only_within_nominal:
                    continue
                queue = candidate.leaf
                usage = candidate.usage
                held: list[tuple[int, FR]] | None = None
                top: QuotaNode | None = None  # with its chain, once known
                alone: list[int] | None = None  # the margin row of a chain of the queue alone
                if candidate.group != CLASS_SAME_QUEUE:
                    alone = alones.get(queue)
                    if alone is None:
                        if refused and tuple(usage) in refused.get(queue, ()):
                            continue
                        found = chains.get(queue)
                        chain = found if found is not None else self._chain(queue)
                        top = chain[-1] if chain else queue
                        if lazy and len(chain) == 1 and ALONE:
                            alone = alones[queue] = margin_row(all_usage[queue.index], queue.subtree, places)
                    else:
                        top = queue
                    if alone is not None:
                        # ``margins.gives`` written out, on its exact margin (see above).
                        for place, fr in places:
                            if alone[place] > 0 and fr in usage:
                                break
                        else:
                            continue
                    else:
                        held = held_of(usage, places)
                        if not gives(all_usage, chain, held, places, margins if lazy else {}):
                            # Not known on the lower bound: the victims waiting under the top are
                            # taken, and the test with nothing waiting under the chain is exact
                            # (``quota.lender_may_give``), as is the first when nothing waited.
                            waiting = others.pop(top, None) if others else None
                            if waiting is not None:
                                drop(waiting, chains, margins)
                                self._take(waiting)
                            if waiting is None or not gives(all_usage, chain, held, places, margins):
                                refused.setdefault(queue, set()).add(tuple(usage))
                                continue
                if (
                    not candidate.single_pod
                    and candidate.pod_set is not None
                    and not self._singles_taken(candidate, victims)
                ):
                    continue
                if ask and not self._preemptible(candidate):
                    continue
                if not lazy:
                    mark = statement.checkpoint()
                    statement.evict(candidate, nodes=nodes)
                    victims.append(candidate)
                    if filters and not self._scenario_ok(victims):
                        statement.rollback(mark)
                        victims.pop()
                        continue
                else:
                    victims.append(candidate)
                    if filters and not self._scenario_ok(victims):
                        victims.pop()
                        continue
                    if queue is preemptor_leaf:
                        own.append(candidate)
                        if over:
                            for fr in list(over):
                                left = over[fr] - usage.get(fr, 0)
                                if left > 0:
                                    over[fr] = left
                                else:
                                    del over[fr]
                    else:
                        if top is None:
                            found = chains.get(queue)
                            chain = found if found is not None else self._chain(queue)
                            top = chain[-1] if chain else queue
                        waiting = others.get(top)
                        if waiting is None:
                            others[top] = [candidate]
                        else:
                            waiting.append(candidate)
                        if alone is not None:
                            for place, fr in places:  # ``margins.keep``, written out
                                amount = usage.get(fr)
                                if amount:
                                    alone[place] -= amount
                        else:
                            keep(all_usage, chain, usage, held or held_of(usage, places), places, margins)
                    if room is None:
                        continue  # hopeless: no fit test
                    if quota_fits:
                        # The quota fits at every later step: the victim waits for it,
                        # and only its room comes free now.
                        if freed is not None:
                            freed.give((candidate,))
                    else:
                        # The running bound (see above): may the request fit now?
                        short = False
                        for place, fr in short_frs:
                            more = usage.get(fr)
                            if more:
                                lacking[place] -= more
                            if lacking[place] > 0:
                                short = True
                        if short:
                            continue
                        if stepped:
                            # The first test: what a leading run would have covered.
                            walked(session.state, preemptor_leaf, needed, allow_borrowing, len(victims) - 1)
                            stepped = False
                        if over:
                            continue  # the test within nominal fails
                        self._take_all(own, others, margins)
                        if not self._fits_quota(allow_borrowing):
                            # Available now, exactly: the bound goes on from there.
                            lacking, short_frs = lacking_of(request, self._headroom())
                            continue
                        quota_fits = True
                        if freed is not None:
                            freed.give(victims)
                    if freed is not None and not freed.fits():
                        continue
                    self._take_all(own, others, margins)
                    self._fill_back(victims, allow_borrowing, freed)
                    level = self._level()
                    return victims, level
                if self._fits(allow_borrowing):
                    self._fill_back(victims, allow_borrowing)
                    level = self._level()
                    return victims, level
            if stepped:
                walked(session.state, preemptor_leaf, needed, allow_borrowing, len(victims))
            return [], 0
        finally:
            statement.release(start)

    def _chain(self, queue: QuotaNode) -> tuple[QuotaNode, ...]:
        """``queue`` and its ancestors off the preemptor's path, up to the highest of them
        (its *top*, the last; a queue on the path is its own top, with no chain)."""
        found = []
        path = self.path
        node: QuotaNode | None = queue
        while node is not None and node not in path:
            found.append(node)
            node = node.parent
        chain = self.chains[queue] = tuple(found)
        return chain

    def _chain_of(self, queue: QuotaNode) -> tuple[QuotaNode, ...]:
        chain = self.chains.get(queue)
        return chain if chain is not None else self._chain(queue)

    def _headroom(self) -> dict[FR, int]:
        accounting = self.session.accounting
        leaf = self.leaf
        return {fr: accounting.headroom(leaf, fr) for fr in self.usage}

    def _over_nominal(self) -> dict[FR, int]:
        return over_nominal(self.session.accounting, self.leaf, self.usage)

    def _take(self, waiting: list[Candidate]) -> None:
        """Take the waiting victims from the quota only, in one step per queue (taking
        usage away is additive). Nothing listens to the evictions (:meth:`may_skip_walk`)."""
        if not waiting:
            return
        remove = self.session.statement.remove_usage
        if len(waiting) == 1:
            victim = waiting[0]
            remove(victim.leaf, victim.usage)
        else:
            by_leaf: dict[QuotaNode, dict[FR, int]] = {}
            for victim in waiting:
                summed = by_leaf.get(victim.leaf)
                if summed is None:
                    by_leaf[victim.leaf] = dict(victim.usage)
                    continue
                for fr, amount in victim.usage.items():
                    summed[fr] = summed.get(fr, 0) + amount
            for leaf, summed in by_leaf.items():
                remove(leaf, summed)
        waiting.clear()

    def _take_all(
        self,
        own: list[Candidate],
        others: dict[QuotaNode, list[Candidate]],
        margins: Margins,
    ) -> None:
        """Take every waiting victim from the quota (the margins no longer hold)."""
        self._take(own)
        for waiting in others.values():
            self._take(waiting)
        others.clear()
        margins.clear()

    def may_skip_walk(self) -> bool:
        """Whether a walk may let victims wait, and one known to fail leave out what
        only its fit tests read (see :meth:`attempt`): the plugins keep the ``MEMO_SAFE`` contract
        (the memo is on) and nothing listens to the statement's evictions."""
        session = self.session
        return session.memo is not None and session.statement.on_evict is None

    def may_fit(self, candidates: list[Candidate], allow_borrowing: bool) -> bool:
        """The bound (``bound.py``): whether the request fits the quota with every
        candidate this attempt may take evicted at once. When it does not, no step of the
        attempt fits."""
        return may_fit(self.session.accounting, self.leaf, self.usage, candidates, allow_borrowing)

    _singles_taken = staticmethod(singles_taken)

    def _preemptible(self, candidate: Candidate) -> bool:
        verdict = self.verdicts.get(id(candidate))
        if verdict is None:
            action = "preempt" if candidate.leaf is self.leaf else "reclaim"
            vetoed = self.session.is_preemptible(action, self.preemptor, candidate)
            if vetoed is not None:
                self.vetoed_by.add(vetoed)
                self.vetoes.setdefault(candidate.key, vetoed)
            verdict = self.verdicts[id(candidate)] = vetoed is None
        if self.visits is not None:
            self.visits.append((candidate, verdict))
        return verdict

    def veto_lines(self, most: int = 10) -> list[str]:
        keys = sorted(self.vetoes)
        lines = [f"{key}: not preemptible (plugin {self.vetoes[key]})" for key in keys[:most]]
        if len(keys) > most:
            lines.append(f"... and {len(keys) - most} more vetoed candidate(s)")
        return lines

    def _scenario_ok(self, victims: list[Candidate], *, veto: bool = True) -> bool:
        """Every filter accepts the accumulated victims. The list is handed over as it
        is, not copied per step: filters read it and must not keep or change it.
        ``veto=False`` (fill-back) does not count a rejection as a plugin veto: the
        search has already succeeded."""
        if not self.filters:
            return True
        plugin = self.session.scenario_rejects(self.preemptor, self.filters, victims, veto=veto)
        if plugin is None:
            return True
        if veto:
            self.vetoed_by.add(plugin)
        return False

    def _fits(self, allow_borrowing: bool) -> bool:
        if not self._fits_quota(allow_borrowing):
            return False
        if self.targets:
            return self.session.pods_fit(self.targets)
        return True

    def _fits_quota(self, allow_borrowing: bool) -> bool:
        return fits_quota(self.session.accounting, self.leaf, self.usage, allow_borrowing)

    def _short(self, allow_borrowing: bool) -> int:
        """Which of the request's flavor-resources does not fit the quota (its place), or -1."""
        return short_of(self.session.accounting, self.leaf, self.usage, allow_borrowing)

    def _fill_back(
        self, victims: list[Candidate], allow_borrowing: bool, freed: FreedRoom | None = None
    ) -> None:
        """Put back every victim the preemptor does not need (``fillback.py``)."""
        fill_back(self, victims, allow_borrowing, freed)

    def _slack(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return slack(self.session.accounting, self.leaf, self.usage)

    def _level(self) -> int:
        return self.session.accounting.level_of(self.leaf, self.usage)
