"""What the rounds tell a workload they leave pending, and who among their entries grows."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from ..decisions import Pending
from ..model import Workload
from ..objects.records import new_pending
from ..session import Assignment, Candidate, Session

__all__ = ["Relied", "grows", "noted", "record_scan"]

_RELIED_ON = "its victims are relied on by another workload of this session: "
_UNIT = attrgetter("unit")


def grows(workload: Workload) -> bool:
    """An entry of the rounds that is an admitted elastic workload growing back."""
    return workload.admission is not None and not workload.is_deployment


def noted(session: Session, key: str, message: str) -> str:
    """The pending message of a preemptor ``key`` without victims: ``message`` (or "no
    victims found") and the notes plugins added for it."""
    message = message or "no victims found"
    if session.notes_added:  # else no plugin added a note to anyone
        notes = session.notes(key)
        if notes:
            message = "; ".join([message, *notes])
    return message


def record_scan(session: Session, workload: Workload, assignment: Assignment) -> None:
    """Store ``workload``'s flavor scan when it has one, or had one to clear."""
    if assignment.flavor_scan or workload.flavor_scan:
        session.decisions.flavor_scans[workload.key] = dict(assignment.flavor_scan)


class Relied:
    """The verdicts of entries whose victims an earlier entry of their round relies on
    (SEMANTICS §2.4: ``WaitingForQuota``, naming each overlapping victim once, in name
    order), their message made only for the verdicts that stay. Such an entry is offered
    again in the next round, whose verdict mostly replaces this one, and the victims of a
    deep queue's searches are many: the overlap is kept as it was when the entry lost, and
    named by :meth:`settle` once the rounds are over."""

    __slots__ = ("_lost",)

    def __init__(self) -> None:
        self._lost: dict[str, tuple[Pending, tuple[Candidate, ...], set[tuple[object, ...]]]] = {}

    def lose(
        self, pending: dict[str, Pending], key: str, victims: Sequence[Candidate], relied_on: set[tuple[object, ...]]
    ) -> None:
        """Entry ``key`` lost to ``relied_on``: its verdict takes its place in ``pending``
        now, its message to come."""
        verdict = pending[key] = new_pending(key, "WaitingForQuota", "", ())
        self._lost[key] = (verdict, tuple(victims), relied_on.intersection(map(_UNIT, victims)))

    def settle(self, pending: dict[str, Pending]) -> None:
        """Name the overlapping victims in each verdict of :meth:`lose` still in ``pending``."""
        for key, (verdict, victims, overlap) in self._lost.items():
            if pending.get(key) is verdict:
                names = sorted({v.name for v in victims if v.unit in overlap})
                pending[key] = new_pending(key, "WaitingForQuota", _RELIED_ON + ", ".join(names), ())
        self._lost.clear()
