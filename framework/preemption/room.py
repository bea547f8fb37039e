"""The node room a walk's victims free (``walk.py``), kept beside the placements.

A victim search on a flavor with nodes takes victims until the quota fits and then until
the preemptor's pods fit the nodes. Giving each victim's room to the placements costs a
tentative change and its undo per pod, and every test would scan the flavor's nodes.

:class:`FreedRoom` keeps the freed room instead, per node, in ``extra``: the walk's room
is the placements' plus ``extra``. For each pod set placed on nodes it follows how many
of its pods the nodes take (a :class:`~..nodes.PodTally`): a sum over the nodes, so
freeing or taking back room on a node changes it by what that node takes after less
before, and only the victims' nodes whose room reaches the pods' GPUs and cpu (the
tally's first filters) are judged again. The count starts from one scan of the flavor
when the quota first fits; a pod set whose pods all fit then fits at every later step
(victims only free room; fill-back takes back only what they freed): not followed.

One pod set: its pods fit exactly when the count reaches them (``can_place`` is that
sum), so the count is the test. Several: the earlier pod sets' pods are placed best fit
before the last is counted (``Placements.fit_all``); each pod set fitting on its own is
necessary, so the counts are a bound, and only when each fits on its own is the test run
in full on the placements' room plus ``extra`` (``Placements.best_fit_beside`` and
``Placements.count``), in a copy of ``extra``. The placements are never changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..model import PodSet, Toleration
from ..nodes import GPU_KINDS, PodTally, pod_terms
from ..session import Candidate, Session
from .freedpods import pods_of, read_pods
from .givenroom import GivenRoom, begun, keep, kept_given

__all__ = ["FreedRoom"]

_GPU_ONE, _GPU_TWO = GPU_KINDS


class FreedRoom:
    """Node room freed by one walk's victims, and how many pods of each target it holds."""

    __slots__ = (
        "counted", "epoch", "exact", "extra", "free", "gpus", "known", "last", "live", "owned", "pending",
        "session", "started", "tallies", "targets", "terms", "took", "totals",
    )

    def __init__(self, session: Session, targets: Sequence[tuple[PodSet, int, str]], epoch: int | None = None) -> None:
        placements = session.placements
        assert placements is not None
        self.session = session
        self.targets = list(targets)
        self.free = placements.free
        self.gpus = placements.gpus  # per node of a flavor: its free GPUs, every kind
        # One pod set: the counts are the test (see the module notes).
        self.exact = len(self.targets) == 1
        self.extra: dict[str, dict[str, int]] = {}
        self.started = False
        self.tallies: list[PodTally] = []  # per target
        self.terms: list[tuple[Mapping[str, str], tuple[Toleration, ...]]] = []  # per target
        self.live: list[PodTally] = []  # the pod sets that did not fit at the start
        self.totals: list[int] = []  # per live pod set: the pods its nodes take now
        self.last = -1  # the place of the last target in ``live``, if it is there
        # One pod set: the pods each node touched takes now; what take_back changed (undo).
        self.known: dict[str, int] = {}
        self.took: list[tuple[str, Mapping[str, int], int]] = []
        # Several pod sets: per live pod set, the pods each node touched takes now.
        self.counted: list[dict[str, int]] = []
        # The node epoch when the placements hold its committed room, and (one pod set) the
        # nodes whose map is the walk's own: others are a kept first give's or a pod's, lent.
        self.epoch = epoch
        self.owned: set[str] = set()
        # One pod set: pods without GPUs on nodes short of them, added when read (_follow).
        self.pending: list[tuple[str, Mapping[str, int]]] = []

    def _start(self) -> None:
        """Count each pod set on the walk's starting room (nothing freed yet)."""
        self.started = True
        session = self.session
        placements = session.placements
        assert placements is not None
        flavors = session.snapshot.flavors
        last = len(self.targets) - 1
        for i, (spec, count, flavor) in enumerate(self.targets):
            selector, tolerations = pod_terms(flavors[flavor], spec)
            tally = placements.tally(flavor, spec.requests, count, selector, tolerations)
            assert tally is not None  # the walk keeps only targets on flavors with nodes
            self.tallies.append(tally)
            self.terms.append((selector, tolerations))
            found = placements.count(tally)
            if found < count:
                if i == last:
                    self.last = len(self.live)
                self.live.append(tally)
                self.totals.append(found)
                self.counted.append({})

    def give(self, victims: Sequence[Candidate]) -> None:
        """Free the room of ``victims``' pods."""
        if not self.started:
            if self.exact and self.epoch is not None and len(victims) > 1:
                self._give_first(list(victims))
                return
            self._start()
        live = self.live
        if self.exact:
            if live:  # else the pods fit from the start: nothing to follow
                self._follow(victims, self.known, False, True)
        elif len(live) == 1:
            self._follow(victims, self.counted[0], True, False)
        elif not live:
            self._keep(victims)
        else:
            change = self._change
            for victim in victims:
                for held in victim.room:
                    change(held.node_name, held.requests, 1)

    def _give_first(self, victims: list[Candidate]) -> None:
        """:meth:`give` of the first victims of a walk of one pod set on committed room:
        from the kept first give of the same pods with the most victims that ``victims``
        begin with, and kept for the next (``givenroom.py``)."""
        assert self.epoch is not None
        spec, count, flavor = self.targets[0]
        kept = kept_given(self.session.state, self.epoch)
        key = (flavor, count, id(spec))
        gives = kept.setdefault(key, [])
        found = begun(gives, spec, victims)
        rest: list[Candidate] = victims
        if found is not None:
            self.started = True
            self.tallies = found.tallies
            self.terms = found.terms
            self.live = found.live
            self.totals = list(found.totals)
            self.last = found.last
            self.counted = [{} for _ in found.live]
            self.known = dict(found.known)
            self.extra = dict(found.extra)  # no map its own (``owned``)
            rest = victims[len(found.victims) :]
            if not rest:
                return
        else:
            self._start()
        if self.live:
            self._follow(rest, self.known, False, False)  # kept: no pod waits
        extra = self.extra
        keep(gives, GivenRoom(
            spec, victims, self.tallies, self.terms, self.live, tuple(self.totals), self.last, dict(self.known),
            dict(extra),
        ))
        self.owned.clear()  # every map is shared with the kept give now

    def _own(self, node: str) -> dict[str, int]:
        """The room map of ``node``, about to change, made the walk's own: a map of a kept
        first give (``givenroom.py``) or a pod's requests lent by :meth:`_follow` stays."""
        extra = self.extra[node] = dict(self.extra[node])
        self.owned.add(node)
        return extra

    def _add_pending(self) -> None:
        """Add the room of the pods :meth:`_follow` left waiting to their nodes' maps (see there)."""
        all_extra = self.extra
        for node, requests in self.pending:
            extra = all_extra[node] if node in self.owned else self._own(node)
            for resource, amount in requests.items():
                extra[resource] = extra.get(resource, 0) + amount
        self.pending.clear()

    def _follow(self, victims: Sequence[Candidate], known: dict[str, int], keep_all: bool, wait: bool) -> None:
        """:meth:`give` when one pod set is followed (``known``: the pods each node the
        walk touched takes now). ``keep_all``: several pod sets, so the room of every node
        is kept; else only that of the followed pod set's nodes.

        Most freed room leaves its node short of the pods' GPUs (cpu-only victims of GPU
        nodes), and a node short of them takes none. Requests are never negative, so when
        a node's GPUs with the room added stay short, it took none before and takes none
        after: the count does not move and only the room is kept (a count it has is 0).
        ``wait`` (not in a first give kept): the room of a pod without GPUs there waits in
        ``pending`` until the node's map is read, when a node reaches the GPUs (fill-back
        reads only nodes that take some pods, and no waiting pod is on one)."""
        tally = self.live[0]
        members = tally.members
        short = tally.short
        takes = tally.takes_past_short
        gpus = tally.gpus
        all_free = self.free
        all_gpus = self.gpus
        all_extra = self.extra
        owned = self.owned
        total = self.totals[0]
        read = read_pods(self.session.state)  # each victim's pods, read once a session
        pending = self.pending
        for victim in victims:
            for node, requests, freed in pods_of(read, victim.room):
                if node not in members:
                    if keep_all:
                        self._keep_one(node, requests)
                    continue  # the pods never go there
                gpus_after = all_gpus[node] + freed
                if node not in all_extra:
                    # The first room freed there: the node took what its own room takes.
                    if gpus_after < gpus:
                        # Short of the GPUs (see above); one pod set: the pod's map, lent.
                        all_extra[node] = dict(requests) if keep_all else requests  # type: ignore[assignment]
                        continue
                    free = all_free[node]
                    extra = all_extra[node] = dict(requests)
                    owned.add(node)
                    before = 0 if short(free, None) else takes(node, free, None)
                else:
                    extra = all_extra[node]
                    if gpus_after + extra.get(_GPU_ONE, 0) + extra.get(_GPU_TWO, 0) < gpus:
                        # Short of the GPUs before and after (see above): a count it has is 0.
                        if wait and not freed:  # no GPUs: added when read
                            pending.append((node, requests))
                            continue
                        if not (keep_all or node in owned):
                            extra = self._own(node)
                        for resource, amount in requests.items():
                            extra[resource] = extra.get(resource, 0) + amount
                        continue
                    if pending:
                        self._add_pending()
                    extra = all_extra[node] if keep_all or node in owned else self._own(node)
                    free = all_free[node]
                    counted = known.get(node)
                    if counted is not None:
                        before = counted
                    else:
                        before = 0 if short(free, extra) else takes(node, free, extra)
                    for resource, amount in requests.items():
                        extra[resource] = extra.get(resource, 0) + amount
                if short(free, extra):
                    known[node] = 0
                    total -= before
                else:
                    after = known[node] = takes(node, free, extra)
                    total += after - before
        self.totals[0] = total

    def _keep(self, victims: Sequence[Candidate]) -> None:
        """:meth:`give` with several pod sets and none followed: the room is only kept."""
        keep = self._keep_one
        for victim in victims:
            for held in victim.room:
                keep(held.node_name, held.requests)

    def _keep_one(self, node: str, requests: Mapping[str, int]) -> None:
        if node not in self.free:
            return  # not a node of the snapshot: the placements ignore it too
        extra = self.extra.get(node)
        if extra is None:
            extra = self.extra[node] = {}
        for resource, amount in requests.items():
            extra[resource] = extra.get(resource, 0) + amount

    def take_back(self, victim: Candidate) -> None:
        """Take back the room ``victim`` freed (fill-back puts it back).

        One pod set: only the nodes that take some of its pods now are followed. Fill-back
        only takes room back (and undoes its own steps), so a node that takes none keeps
        taking none, whatever is taken back from it."""
        if not self.exact:
            if len(self.live) == 1:
                self._follow_back(victim)
                return
            change = self._change
            for held in victim.room:
                change(held.node_name, held.requests, -1)
            return
        took = self.took
        took.clear()
        if not self.live:
            return
        known = self.known
        total = self.totals[0]
        on = self.live[0].takes  # a node that takes some pods serves the flavor
        all_free = self.free
        all_extra = self.extra
        for held in victim.room:
            node, requests = held.node_name, held.requests
            if node not in known:
                continue
            before = known[node]
            if not before:
                continue
            extra = all_extra[node] if node in self.owned else self._own(node)
            for resource, amount in requests.items():
                extra[resource] -= amount
            after = known[node] = on(node, all_free[node], extra)
            total += after - before
            took.append((node, requests, before))
        self.totals[0] = total

    def _follow_back(self, victim: Candidate) -> None:
        """:meth:`take_back` with several pod sets, one followed (see :meth:`_change`)."""
        tally = self.live[0]
        members = tally.members
        short = tally.short
        takes_past_short = tally.takes_past_short
        takes = tally.takes
        all_free = self.free
        all_extra = self.extra
        seen = self.counted[0]
        total = self.totals[0]
        for held in victim.room:
            node, requests = held.node_name, held.requests
            free = all_free.get(node)
            if free is None:
                continue  # not a node of the snapshot: the placements ignore it too
            extra = all_extra.get(node)
            if extra is None:
                extra = all_extra[node] = {}
            was = seen.get(node)
            if was is None:
                was = 0
                if node in members and not short(free, extra):
                    was = takes_past_short(node, free, extra)
            for resource, amount in requests.items():
                extra[resource] = extra.get(resource, 0) - amount
            if not was:
                seen[node] = 0
                continue
            now = seen[node] = takes(node, free, extra)  # it took some: it serves the flavor
            total += now - was
        self.totals[0] = total

    def _change(self, node: str, requests: Mapping[str, int], sign: int) -> None:
        """Several pod sets: the room of every node is kept (the earlier pod sets are
        placed anywhere), and each live count follows it (one: :meth:`_follow` and
        :meth:`_follow_back`). Taking room back from a node that takes none of a pod
        set's pods leaves it taking none."""
        free = self.free.get(node)
        if free is None:
            return  # not a node of the snapshot: the placements ignore it too
        extra = self.extra.get(node)
        if extra is None:
            extra = self.extra[node] = {}
        live = self.live
        if not live:
            for resource, amount in requests.items():
                extra[resource] = extra.get(resource, 0) + sign * amount
            return
        totals = self.totals
        counted = self.counted
        before = []
        for i, tally in enumerate(live):
            known = counted[i].get(node)
            before.append(known if known is not None else tally.on(node, free, extra))
        for resource, amount in requests.items():
            extra[resource] = extra.get(resource, 0) + sign * amount
        for i, tally in enumerate(live):
            was = before[i]
            if sign < 0 and not was:
                counted[i][node] = 0
                continue
            now = counted[i][node] = tally.on(node, free, extra)
            totals[i] += now - was

    def saved(self) -> tuple[int, ...]:
        """The counts, for :meth:`undo`."""
        return tuple(self.totals)

    def undo(self, victim: Candidate, totals: tuple[int, ...]) -> None:
        """Undo :meth:`take_back` of ``victim`` (``totals``: :meth:`saved` before it)."""
        all_extra = self.extra
        if self.exact:
            known = self.known
            for node, requests, before in reversed(self.took):  # a node may come twice
                room = all_extra[node]
                for resource, amount in requests.items():
                    room[resource] += amount
                known[node] = before
            self.took.clear()
        else:
            # Every node the victim's room is on was counted by take_back: recount them.
            for held in victim.room:
                node, requests = held.node_name, held.requests
                extra = all_extra.get(node)
                if extra is not None:
                    for resource, amount in requests.items():
                        extra[resource] += amount
                    for counted in self.counted:
                        counted.pop(node, None)
        self.totals[:] = totals

    def may_fit(self) -> bool:
        """Every pod set's pods fit on their own: necessary for all of them together."""
        for tally, total in zip(self.live, self.totals, strict=True):
            if total < tally.count:
                return False
        return True

    def fits(self) -> bool:
        """Whether every pod of the targets fits the nodes of the walk's state."""
        if self.exact:  # :meth:`may_fit` of at most one pod set, which is the test
            live = self.live
            return not live or self.totals[0] >= live[0].count
        if not self.may_fit():
            return False
        return self._fit_all()

    def _fit_all(self) -> bool:
        """``Placements.fit_all`` on the walk's room: the earlier pod sets' pods placed
        best fit one at a time, each taking its room (in a copy of ``extra``, on the
        nodes it lands on), then the last pod set counted."""
        placements = self.session.placements
        assert placements is not None
        free = self.free
        extra = self.extra
        targets = self.targets
        if len(targets) == 2 and targets[0][1] == 1:
            # One pod first (a launcher): when some node of its own room fits it with fewer
            # free GPUs than the last pod set's pods ask, the best fit has no more, and those
            # pods never go where it lands: they fit as on the walk's room (may_fit counted).
            spec, _, flavor = targets[0]
            selector, tolerations = self.terms[0]
            found = placements.best_fit_unchanged(flavor, spec.requests, selector, tolerations, extra)
            if found is not None and found[0] < self.tallies[1].gpus:
                return True
        changed: dict[str, Mapping[str, int]] = dict(extra)
        placed: dict[str, dict[str, int]] = {}  # nodes the earlier pods took room on
        last = len(targets) - 1
        for i, (spec, count, flavor) in enumerate(targets):
            if i == last:
                break
            selector, tolerations = self.terms[i]
            requests = spec.requests
            for _ in range(count):
                node = placements.best_fit_beside(flavor, requests, selector, tolerations, changed)
                if node is None:
                    return False
                room = placed.get(node)
                if room is None:
                    room = placed[node] = dict(extra.get(node, {}))
                    changed[node] = room
                for resource, amount in requests.items():
                    room[resource] = room.get(resource, 0) - amount
        spec, count, flavor = targets[last]
        if count <= 0:
            return True
        tally = self.tallies[last]
        if self.last < 0:
            return placements.count(tally, changed) >= count
        # The last pod set's count on the walk's room, less what the earlier pods took.
        total = self.totals[self.last]
        on = tally.on
        for node, room in placed.items():
            total += on(node, free[node], room) - on(node, free[node], extra.get(node))
        return total >= count
