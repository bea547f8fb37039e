"""Scenario cases: objects in, decisions out, through ``preemptd cycle`` in-process.

Each ``cases/<rule>.yaml`` pins one rule of SEMANTICS.md:

* ``description`` — the rule, its SEMANTICS § number, and the hand arithmetic
  behind every expected value;
* ``now`` — the session clock (RFC 3339);
* ``config`` — optional TOML text, passed with ``--config``;
* ``objects`` — CONTRACT §1 objects, written to one YAML snapshot file;
* ``expect`` — a subset of the decisions JSON (CONTRACT §3).

Matching: for each of ``admitted``, ``preempted``, ``podActions``, ``pending``
that ``expect`` names, the entries must be exactly the listed ones (keyed by
``workload``, or ``pod`` for ``podActions``; order is free). Within an entry
every given field must match; a mapping matches when each given key matches
(so ``flavors: {cpu: a}`` does not care about other resources), a list must
have the same length and match element by element, and ``messageContains``
(a string or a list of strings) must all occur in ``message``. Keys that
``expect`` leaves out are not checked.

Every case also checks that each victim search left the session's accounting and
node room exactly as it found it (Kueue's preemption tests assert the same of their
snapshot): a search takes victims on a statement and must roll every step back.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from preemptd.daemon.cli import main
from preemptd.framework import flavors
from preemptd.framework.actions import deployments
from preemptd.framework.session import Session

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))
LISTS = {
    "admitted": "workload",
    "preempted": "workload",
    "podActions": "pod",
    "pending": "workload",
    "shares": "queue",
}


def _text(value: Any) -> str:
    """A timestamp as RFC 3339, whether YAML kept it a string or made it a datetime."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value)


def _mismatches(expected: Any, actual: Any, where: str) -> list[str]:
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected a mapping, got {actual!r}"]
        found = []
        for key, want in expected.items():
            if key == "messageContains":
                message = actual.get("message", "")
                for part in [want] if isinstance(want, str) else want:
                    if part not in message:
                        found.append(f"{where}.message: {part!r} not in {message!r}")
            elif key not in actual:
                found.append(f"{where}.{key}: missing (expected {want!r})")
            else:
                found.extend(_mismatches(want, actual[key], f"{where}.{key}"))
        return found
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(expected) != len(actual):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        found = []
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            found.extend(_mismatches(want, got, f"{where}[{i}]"))
        return found
    if expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def compare(expect: dict[str, Any], decisions: dict[str, Any]) -> list[str]:
    """Every way ``decisions`` differs from ``expect`` (empty when they agree)."""
    found = []
    for section, key in LISTS.items():
        if section not in expect:
            continue
        wanted = {entry[key]: entry for entry in expect[section] or []}
        got = {entry[key]: entry for entry in decisions.get(section, [])}
        for name in sorted(wanted.keys() - got.keys()):
            found.append(f"{section}: {name} missing")
        for name in sorted(got.keys() - wanted.keys()):
            found.append(f"{section}: {name} not expected: {json.dumps(got[name])}")
        for name in sorted(wanted.keys() & got.keys()):
            found.extend(_mismatches(wanted[name], got[name], f"{section}[{name}]"))
    return found


def books(session: Session) -> tuple[Any, ...]:
    """What a victim search may change and must restore: the usage of every queue-tree
    node, the free room of every node, and the statement's undo log."""
    placements = session.placements
    return (
        [dict(usage) for usage in session.accounting.usage],
        None if placements is None else {node: dict(free) for node, free in placements.free.items()},
        len(session.statement.ops),
    )


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, Any]]:
    """Every victim search of the session: (name, books before, books after)."""
    seen: list[tuple[str, Any, Any]] = []

    def watch(module: Any, name: str, session_of: Any) -> None:
        original = getattr(module, name)

        def watched(*args: Any, **kwargs: Any) -> Any:
            session = session_of(*args)
            before = books(session)
            try:
                return original(*args, **kwargs)
            finally:
                seen.append((name, before, books(session)))

        monkeypatch.setattr(module, name, watched)

    watch(flavors, "find_victims", lambda session, *_: session)
    watch(deployments, "replica_victims", lambda session, *_: session)
    watch(deployments, "more_replicas", lambda search, *_: search.session)
    return seen


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_scenario(
    path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], searches: list[tuple[str, Any, Any]]
) -> None:
    """The session decides exactly what the case, worked out by hand from SEMANTICS, expects,
    and every victim search leaves the session's accounting as it found it."""
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert "§" in case["description"], "a case names the SEMANTICS section it pins"
    unknown = set(case["expect"]) - set(LISTS)
    assert not unknown, f"unknown expect keys {sorted(unknown)}"

    snapshot = tmp_path / "snapshot.yaml"
    snapshot.write_text(yaml.safe_dump_all(case["objects"], sort_keys=False), encoding="utf-8")
    argv = ["cycle", str(snapshot), "--output", "json", "--now", _text(case["now"])]
    if case.get("config"):
        config = tmp_path / "preemptd.toml"
        config.write_text(case["config"], encoding="utf-8")
        argv += ["--config", str(config)]

    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse and friends exit instead of returning
        code = exit_.code if isinstance(exit_.code, int) else 1
    captured = capsys.readouterr()
    assert code == 0, captured.err
    decisions = json.loads(captured.out)
    problems = compare(case["expect"], decisions)
    assert not problems, "\n".join([*problems, "decisions:", captured.out, captured.err])
    if decisions["preempted"] or decisions["podActions"]:
        assert searches, "victims were chosen, so some victim search ran"
    for i, (name, before, after) in enumerate(searches):
        assert before == after, f"search {i} ({name}) changed the session's accounting or node room"


def test_every_case_is_collected() -> None:
    """The cases folder is not empty (a glob that matches nothing would pass silently)."""
    assert len(CASES) >= 15
