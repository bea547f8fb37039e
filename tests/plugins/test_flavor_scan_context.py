"""The context entry's ``admitted`` fingerprint over workloads of one and several podSets.

Each workload admitted to the queue before ``since`` (or without an admission time) is
``namespace/name#uid#count``, its count the sum of its admitted podSets' counts; the
items are sorted and joined by ``;`` (``resume.py``'s module notes). Written out by hand
here, so that a faster way of making them is held to the documented text.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

from preemptd.framework.model import Admission, PodSetAdmission
from preemptd.plugins.flavor_fungibility import CONTEXT_KEY

from tests.plugins.test_flavor_fungibility import NOW, assign, job, queue, session


def test_the_admitted_fingerprint_sums_every_podset_and_leaves_out_the_later_admissions() -> None:
    q = queue("q", {"a": 8, "b": 8, "c": 8})
    pending = job("p", "q", 1)
    single = job("zeta", "q", 1, on="a", uid="u1", admitted_at=NOW - 10)
    pair = replace(
        job("alpha", "q", 1, on="a", uid="u2", admitted_at=NOW - 20),
        admission=Admission("q", (PodSetAdmission("main", 1, {"cpu": "a"}), PodSetAdmission("side", 3, {"cpu": "a"}))),
    )
    unset = replace(job("mid", "q", 2, count=2, on="b", uid="u3"), admitted_at=None)
    at_since = job("late", "q", 1, on="b", uid="u4", admitted_at=NOW)  # since = now: left out
    found = assign(session([q], [single, pair, unset, at_since, pending]), pending)
    text = b"ml/alpha#u2#4;ml/mid#u3#2;ml/zeta#u1#1"
    assert found.flavor_scan[CONTEXT_KEY]["admitted"] == zlib.crc32(text)
