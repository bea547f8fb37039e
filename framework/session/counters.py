"""What one session did, counted: how often it nominated, searched and answered from memory.

Plain integer attributes, bumped in place, so counting costs no allocation in the
loops that do it. ``preemptd cycle --timings`` prints them beside the phase times;
``memo_off`` names why the search memo was off (empty when it was on).
"""

from __future__ import annotations

__all__ = ["Counters"]


class Counters:
    __slots__ = (
        "bounded",
        "candidates",
        "dominated",
        "flavors",
        "judged",
        "left",
        "memo_hits",
        "memo_off",
        "nominations",
        "searches",
    )

    def __init__(self) -> None:
        self.nominations = 0  # heads nominated (a re-offered head counts each time)
        self.flavors = 0  # flavors evaluated for a podSet's resource group
        self.searches = 0  # victim searches run
        # Victim searches answered from the memo instead. With flavor-fungibility this
        # includes, once per head of one podSet and one resource group whose scan
        # searched, finish_assignment asking the chosen option's search again (handed
        # over, answered from the memo without keying it anew: see ``memo.asked_again``).
        self.memo_hits = 0
        self.candidates = 0  # candidates examined by the searches run
        self.bounded = 0  # searches the quota bound proved fail: walked without fit tests
        self.dominated = 0  # searches answered by a failed search they are dominated by
        self.judged = 0  # heads given a judged head's assignment without a flavor scan
        # Flavors needing victims the scan left unsearched: their answer could not change
        # the flavor taken (flavor-fungibility, whenCanPreempt TryNextFlavor).
        self.left = 0
        self.memo_off = ""  # why the memo was off, or empty

    def as_dict(self) -> dict[str, int | str]:
        return {
            "nominations": self.nominations,
            "flavors-scanned": self.flavors,
            "victim-searches": self.searches,
            "memo-hits": self.memo_hits,
            "candidates-examined": self.candidates,
            "searches-bounded": self.bounded,
            "searches-dominated": self.dominated,
            "heads-judged": self.judged,
            "searches-left-out": self.left,
            "memo": f"off ({self.memo_off})" if self.memo_off else "on",
        }
