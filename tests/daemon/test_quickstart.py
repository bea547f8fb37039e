"""The README's first command: `preemptd cycle examples/quickstart.yaml` shows a preemption,
its reason and what the preemptor waits for on the first screen of an 80x24 terminal
(issue 20, point 7); the README explains the tables and links the glossary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from preemptd.daemon.cli import main

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = str(REPO / "examples" / "quickstart.yaml")
NOW = "2026-01-01T01:00:00Z"


def test_the_quickstart_preempts_in_queue_and_the_preemptor_waits_for_its_victim(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """serving (4 cpu, withinQueue LowerPriority) is full with backfill (priority 0); api
    (priority 1000, 2 cpu) preempts it InQueue and is PendingPreemption until it is gone
    (SEMANTICS: within-queue preemption of lower priority; a preemptor is not admitted in
    the session of its preemptions)."""
    assert 0 == main(["cycle", QUICKSTART, "--now", NOW, "--output", "json"])
    decisions = json.loads(capsys.readouterr().out)
    assert [("prod/backfill", "prod/api", "InQueue", None)] == [
        (p["workload"], p["preemptor"], p["reason"], p["count"]) for p in decisions["preempted"]
    ]
    api = next(p for p in decisions["pending"] if p["workload"] == "prod/api")
    assert ("PendingPreemption", ["prod/backfill"]) == (api["reason"], api["waitingFor"])
    # The rest of the story is the research cohort's, as the file's comments tell it.
    assert {"team-a/a-train", "team-a/a-tiny", "team-a/a-eval", "team-b/b-web", "team-b/b-batch",
            "team-b/b-notebook", "team-b/b-late"} == {a["workload"] for a in decisions["admitted"]}


def test_the_first_screen_shows_the_preemption_its_reason_and_waiting_for(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    assert 0 == main(["cycle", QUICKSTART, "--now", NOW])
    # What an 80x24 terminal shows first: a longer line wraps onto the next rows.
    rows = [line[i : i + 80] for line in capsys.readouterr().out.splitlines() for i in range(0, max(len(line), 1), 80)]
    screen = rows[:24]
    preempted = [line.split() for line in screen if line.split()[:2] == ["prod/backfill", "prod/api"]]
    assert [["prod/backfill", "prod/api", "InQueue", "whole", "workload"]] == preempted
    waiting = [line.split() for line in screen if line.lstrip().startswith("prod/api")]
    assert 1 == len(waiting)
    assert "PendingPreemption" == waiting[0][1] and "prod/backfill" == waiting[0][-1]
    header = next(line for line in screen if "waiting for" in line)
    assert header.split()[-2:] == ["waiting", "for"]


def test_the_readme_explains_every_column_and_links_the_glossary() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Reading the output"):]
    section = section[: section.index("\n## ", 1)]
    for column in ("workload", "queue", "podSets", "borrowing", "preemptor", "reason", "taken", "pods",
                   "action", "message", "waiting for"):
        assert f"`{column}`" in section, column
    for column in ("admitted", "wait p50", "used", "nominal", "borrowed", "lent", "evicted/shrunk", "lost",
                   "pending", "capacity", "mean", "peak", "over time"):
        assert f"`{column}`" in section, column
    assert "(docs/glossary.md)" in section


def test_the_glossary_defines_the_words_the_output_uses() -> None:
    glossary = (REPO / "docs" / "glossary.md").read_text(encoding="utf-8")
    terms = re.findall(r"^\*\*(.+?)\*\*", glossary, flags=re.MULTILINE)
    for term in ("flavor", "cohort", "nominal quota", "borrowing", "lending", "reclaim", "flavor fungibility",
                 "min-runtime", "fill-back"):
        assert term in [t.lower() for t in terms], term
