"""The victim search a plugin's ``victim_strategy`` drives (hook ``victim_strategy``).

The plugin picks the victims; :class:`StrategyWalk` takes them on the session's
statement, tests the fit and fills back, as :class:`~.walk.Walk` does for the
framework's own order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..model import PodSet
from ..session import (
    Candidate,
    ScenarioFilters,
    SearchResult,
    Session,
    VictimSearch,
    collect_candidates,
    order_for,
    sort_candidates,
    with_vetoes,
)
from .walk import Walk

__all__ = ["StrategyWalk", "by_strategy"]


def by_strategy(
    session: Session,
    request: VictimSearch,
    targets: Sequence[tuple[PodSet, int, str]],
    strategy: tuple[str, Callable[[Any], bool]],
) -> SearchResult:
    """The search a plugin's ``victim_strategy`` drives (see the hook): the plugin picks,
    the walk takes, tests the fit and fills back."""
    preemptor = request.preemptor
    walk = StrategyWalk(session, request, targets, session.scenario_filters(preemptor))
    statement = session.statement
    start = statement.checkpoint()
    name, run = strategy
    try:
        try:
            found = run(walk) is True and bool(walk.victims) and walk.fits()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            session.registry.record_failure(name, "victim_strategy", exc)
            message = f"no victims: the victim strategy of plugin {name} failed"
            return SearchResult(message=message, lines=[message])
        lines = list(walk.lines)
        if found:
            victims = walk.victims
            walk._fill_back(victims, True)
            level = walk._level()
            lines.extend(walk.veto_lines())
            lines.append("minimal set of victims: " + ", ".join(f"{v.key} ({v.reason})" for v in victims))
            return SearchResult(list(victims), True, level, frozenset(walk.vetoed_by), lines=lines)
    finally:
        statement.rollback(start)
    lines.extend(walk.veto_lines())
    message = with_vetoes("no set of preemptible victims frees enough room", walk.vetoed_by)
    lines.append(message)
    return SearchResult(vetoed_by=frozenset(walk.vetoed_by), message=message, lines=lines)


class StrategyWalk(Walk):
    """The :class:`~preemptd.framework.session.hooks.VictimWalk` a strategy drives."""

    __slots__ = ("_order", "lines", "request", "victims")

    def __init__(
        self,
        session: Session,
        request: VictimSearch,
        targets: Sequence[tuple[PodSet, int, str]],
        filters: ScenarioFilters,
    ) -> None:
        super().__init__(
            session, request.preemptor, request.leaf, request.usage, request.needed, targets, filters
        )
        self.request = request
        self.victims: list[Candidate] = []
        self.lines: list[str] = []
        self._order = order_for(session, request.preemptor)

    def candidates(self) -> list[Candidate]:
        found = collect_candidates(self.session, self.preemptor, self.request, with_room=bool(self.targets))
        sort_candidates(found, self._order)
        return found

    def order(self, candidate: Candidate) -> Sequence[Any]:
        return self._order(candidate)

    def preemptible(self, candidate: Candidate) -> bool:
        return self._preemptible(candidate)

    def take(self, candidate: Candidate, reason: str | None = None) -> bool:
        victims = self.victims
        if any(v.unit == candidate.unit for v in victims) or not self._preemptible(candidate):
            return False
        if not candidate.single_pod and candidate.pod_set is not None and not self._singles_taken(candidate, victims):
            return False
        statement = self.session.statement
        mark = statement.checkpoint()
        statement.evict(candidate, nodes=bool(self.targets))
        victims.append(candidate if reason is None or reason == candidate.reason else replace(candidate, reason=reason))
        if not self._scenario_ok(victims):
            statement.rollback(mark)
            victims.pop()
            return False
        return True

    def fits(self) -> bool:
        return self._fits(True)
