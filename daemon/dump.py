"""``preemptd dump``: everything the scheduler sees, and its configuration, in one file.

A bug report needs the cluster as preemptd saw it, the configuration it ran with and
the moment it decided; ``preemptd dump --cluster`` writes them into one file (``dump
SNAPSHOT…`` does the same from snapshot files). The file is a scenario
(docs/simulation.md) whose cluster is all in ``objects``:

.. code-block:: yaml

    start: "2026-01-01T00:10:00Z"   # the moment of the dump
    duration: 1h                    # how long `simulate` runs on from it
    config: {scheduler: {...}, plugins: {...}}   # the configuration file's tables
    objects: [...]                  # every object the scheduler reads, as the API gives it

so the three commands read it as it is: ``simulate`` runs on from ``start``; ``cycle``
and ``explain`` read it as a snapshot taken at ``start`` (their default ``--now``) under
its ``config`` (a ``--config`` given as well overrides it key by key, as for a
scenario). Only such a *frozen* scenario is a snapshot: one that brings more (arrivals,
``nodeGroups``, ``objectFiles``, replica changes) is refused by ``cycle`` with a pointer
to ``simulate``. A scenario case of the test suite (``tests/scenarios/cases``: ``now``,
``config`` as TOML text, ``objects``, ``expect``) is read the same way.

``--as-test`` writes a scenario case instead: the objects, the configuration, the
moment, and as ``expect`` the decisions preemptd takes on them now, which the reporter
edits into the decisions it should take.

Pods are dumped as the daemon keeps them (name, labels, the annotations it reads, node,
priority, requests, phase): what the scheduler sees, and nothing else of the
cluster's (no environment variables, commands or secrets' names).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from preemptd.framework.objects import escape
from preemptd.framework.quantity import QuantityError, parse_timestamp

from .backends.files import Document, Loaded, LoadError
from .config import Config, ConfigProblem, parse_config
from .plugins import Plugins, resolve_plugins

__all__ = ["Frozen", "dump_document", "dump_setup", "read_dumps", "scenario_case"]

# What a frozen scenario may hold besides its objects (the keys a dump writes, and
# the settings that only matter to `simulate`).
_FROZEN = frozenset(
    {"start", "duration", "config", "objects", "cycleInterval", "cycle_interval",
     "terminationGrace", "seed", "runIdleCycles", "reportResource"}
)
_CASE = frozenset({"description", "now", "config", "objects", "expect"})
_SCENARIO = frozenset(
    {"duration", "workloads", "nodeGroups", "objectFiles", "replicaChanges", "objects",
     "cycleInterval", "terminationGrace"}
)


@dataclass(frozen=True, slots=True)
class Frozen:
    """A dump (or a scenario case) among the snapshot files."""

    source: str
    start: int | None  # epoch ms; None: the dump does not say
    config: dict[str, Any]  # the configuration's tables (TOML's shape)


def read_dumps(loaded: Loaded) -> tuple[Loaded, Frozen | None]:
    """``loaded`` with every dump replaced by its objects, and the dump; a scenario that
    is more than a frozen cluster is a :class:`LoadError` naming ``simulate``."""
    documents: list[tuple[str, Document]] = []
    frozen: list[Frozen] = []
    errors: list[str] = []
    for file, document in loaded:
        if not isinstance(document, dict) or "kind" in document:
            documents.append((file, document))
            continue
        keys = set(document)
        if "objects" in keys and (keys <= _FROZEN or keys <= _CASE):
            found = _frozen(file, document, errors)
            if found is not None:
                frozen.append(found)
            objects = document.get("objects")
            if isinstance(objects, list):
                documents += [(f"{file}: objects[{i}]", obj) for i, obj in enumerate(objects)]
            else:
                errors.append(f"{escape(file)}: objects: expected a list of objects")
        elif keys & _SCENARIO:
            errors.append(
                f"{escape(file)}: a simulation scenario, not a snapshot of objects: "
                f"run it with `preemptd simulate {escape(file)}`"
            )
        else:
            documents.append((file, document))
    if len(frozen) > 1:
        errors.append(f"more than one dump: {', '.join(escape(f.source) for f in frozen)}; give one")
    if errors:
        raise LoadError(errors)
    return Loaded(documents, loaded.texts, loaded.files), (frozen[0] if frozen else None)


def _frozen(file: str, document: Mapping[str, Any], errors: list[str]) -> Frozen | None:
    moment = document.get("start", document.get("now"))
    start = None
    if moment is not None:
        try:
            start = parse_timestamp(moment)
        except QuantityError as exc:
            errors.append(f"{escape(file)}: {'start' if 'start' in document else 'now'}: {exc}")
            return None
    config = document.get("config") or {}
    if isinstance(config, str):  # a scenario case: TOML text
        try:
            config = tomllib.loads(config)
        except tomllib.TOMLDecodeError as exc:
            errors.append(f"{escape(file)}: config: not TOML: {exc}")
            return None
    if not isinstance(config, dict):
        errors.append(f"{escape(file)}: config: expected a mapping of configuration tables")
        return None
    return Frozen(file, start, config)


def dump_setup(
    table: Mapping[str, Any], path: str | None, *, source: str = "<dump>"
) -> tuple[Config, Plugins, list[ConfigProblem]]:
    """The configuration of a dump: its tables, with the file at ``path`` (if any) over
    them key by key; problems name the dump's ``config`` (in ``source``) or the file."""
    from .config import read_config
    from .simulation.command import to_toml

    merged = dict(table)
    if path is not None:
        file_config, problems = read_config(path)
        if problems:
            return file_config, resolve_plugins(file_config)[0], problems
        with open(path, "rb") as stream:
            merged = _merge(table, tomllib.load(stream))
    try:
        text = to_toml(merged)
    except ValueError as exc:
        problem = ConfigProblem(path or f"{source}: config", None, "", str(exc))
        return Config(), resolve_plugins(Config())[0], [problem]
    config, problems = parse_config(text, source=path or f"{source}: config")
    plugins, more = resolve_plugins(config)
    problems = [ConfigProblem(p.file, None, p.key, p.message) for p in problems + more]
    return config, plugins, sorted(problems, key=ConfigProblem.sort_key)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        below = merged.get(key)
        merged[key] = _merge(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return merged


def config_tables(path: str | None) -> dict[str, Any]:
    """The tables of the configuration file (``{}`` for the built-in defaults)."""
    if path is None:
        return {}
    with open(path, "rb") as stream:
        return tomllib.load(stream)


def dump_document(objects: Sequence[Any], *, start: str, config: Mapping[str, Any], duration: str) -> dict[str, Any]:
    """The dump: a frozen scenario (see the module's docstring)."""
    return {"start": start, "duration": duration, "config": dict(config), "objects": list(objects)}


def scenario_case(
    objects: Sequence[Any], *, now: str, config: Mapping[str, Any], decisions: Mapping[str, Any], source: str
) -> dict[str, Any]:
    """A scenario case (``tests/scenarios/cases``) pinning ``decisions`` on ``objects``."""
    from .simulation.command import to_toml

    expect: dict[str, Any] = {}
    for section in ("admitted", "preempted", "podActions"):
        expect[section] = list(decisions.get(section, []))
    expect["pending"] = [
        {key: entry[key] for key in ("workload", "reason", "waitingFor")} for entry in decisions.get("pending", [])
    ]
    case: dict[str, Any] = {
        "description": (
            f"Captured by `preemptd dump --as-test` from {source} at {now}.\n"
            "expect holds what preemptd decided then; edit it into what it should decide, "
            "name the SEMANTICS section the case pins, and give the arithmetic behind "
            "each expected value.\n"
        ),
        "now": now,
    }
    if config:
        case["config"] = to_toml(config)
    case["objects"] = list(objects)
    case["expect"] = expect
    return case
