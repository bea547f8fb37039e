"""What the simulator's sessions read once instead of once per session
(``actions/deployments.py``, ``session/session.py``, ``plugins/min_runtime``).

* The admitted workloads of a queue that may grow back (``growing_in``) are the ones
  ``growth_of`` names, in listing order, whether the listing was read before or not:
  a listing (a tuple) handed again is answered from what was found in it, any other
  listing is read afresh.
* A plugin's note may be an object whose ``str()`` is its text: the pending message
  reads that text, made when the message is written.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st
from preemptd.framework.actions.deployments import growing_in, growth_of
from preemptd.framework.model import Admission, PodSetAdmission, PreemptionPolicy, Workload
from preemptd.framework.run import run_session
from preemptd.framework.session import Registry, Session, hookimpl
from preemptd.framework.testing import inventory, queue, snapshot, workload
from preemptd.plugins import priority

# -- growing_in --------------------------------------------------------------------------


def _admitted(name: str, count: int, committed: int, min_count: int | None, evicted: bool) -> Workload:
    """An admitted workload of ``count`` pods with ``committed`` of them admitted."""
    made = workload(name, "q", 1, count=count, admitted=True, min_count=min_count, evicted=evicted)
    admission = Admission("q", (PodSetAdmission("main", committed, {"cpu": "default"}),))
    return replace(made, admission=admission)


_WORKLOAD = st.builds(
    _admitted,
    name=st.sampled_from(["a", "b", "c", "d"]),
    count=st.integers(2, 4),
    committed=st.integers(1, 4),
    min_count=st.sampled_from([None, 1]),
    evicted=st.booleans(),
)


@given(listings=st.lists(st.lists(_WORKLOAD, max_size=5), min_size=1, max_size=6), again=st.lists(st.integers(0, 5)))
@settings(max_examples=80, deadline=None)
def test_growing_in_names_what_growth_of_names(listings: list[list[Workload]], again: list[int]) -> None:
    tuples = [tuple(listing) for listing in listings]
    # Listings handed in turn, some of them again later (as a simulator hands a queue's
    # listing to every session while it stays the same), and as lists (never kept).
    order = list(range(len(tuples))) + [i % len(tuples) for i in again]
    for i in order:
        for listing in (tuples[i], listings[i]):
            expected = [w for w in listing if growth_of(w) is not None]
            found = growing_in("q", listing)
            assert [id(w) for w in found] == [id(w) for w in expected]


def test_growth_of_by_hand() -> None:
    """SEMANTICS §4 Growth: an admitted elastic workload below its count may grow; one at
    its count, an evicted one and a rigid one may not."""
    below = _admitted("below", 4, 2, 1, False)
    full = _admitted("full", 4, 4, 1, False)
    evicted = _admitted("evicted", 4, 2, 1, True)
    rigid = _admitted("rigid", 4, 2, None, False)
    listing = (rigid, below, full, evicted)
    assert growing_in("q-by-hand", listing) == [below]
    assert growing_in("q-by-hand", listing) == [below]  # read again: the kept answer
    assert growing_in("q-by-hand", (full, evicted)) == []  # another listing of the queue


# -- notes read when a message is written ---------------------------------------------------


class _Note:
    """A note whose text is made when it is read; counts how often it was."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.read = 0

    def __str__(self) -> str:
        self.read += 1
        return self.text


def test_note_object_is_read_as_its_text() -> None:
    """Queue q (1 core, in-queue LowerPriority) is full with ``running`` (priority 9):
    ``waiting`` (priority 1) has no candidate and is pending with the search's message
    and the last note added for it, as its text."""
    notes: list[_Note] = []

    def session_open(session: Session) -> None:
        for w in session.snapshot.pending:
            for text in ("first", "second", "held back by a note"):
                note = _Note(text)
                notes.append(note)
                session.add_note(w.key, "noting", note)

    noting = SimpleNamespace(MEMO_SAFE=True, session_open=hookimpl(session_open))
    within = PreemptionPolicy(within_queue="LowerPriority")
    snap = snapshot(
        inventory(
            [queue("q", cpu=1, preemption=within)],
            [workload("running", "q", 1, priority=9, admitted=True), workload("waiting", "q", 1, priority=1)],
        ),
        100_000,
    )
    decisions = run_session(snap, Registry([("priority", priority, None), ("noting", noting, None)]))
    (pending,) = [p for p in decisions.pending if p.workload == "ns/waiting"]
    assert pending.message.endswith("; held back by a note")
    assert pending.message == "no running workload that uses the needed quota may be preempted; held back by a note"
    # Only the last note was read, once.
    assert [n.read for n in notes] == [0, 0, 1]
