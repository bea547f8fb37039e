"""What the rounds tell a workload they leave pending, and who among their entries grows."""

from __future__ import annotations

from ..model import Workload
from ..session import Assignment, Session

__all__ = ["grows", "noted", "record_scan"]


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
