"""Which integrations the backend runs, from the configuration and the installed entry points.

Integrations are found like policy plugins (``daemon.plugins``), through their own
entry-point group, ``preemptd.integrations``; the entry point's name is the
integration's name and its table's (``[integrations.<name>]``). The built-ins are
all on unless ``enabled = false``: those whose kind is a custom resource (JobSet,
the Kubeflow, Ray and LeaderWorkerSet kinds) cost nothing while their CRD is not
installed (the kind is watched as empty until it appears), so a cluster gains a kind
by installing its operator, with no configuration change. A third-party integration
is off unless ``enabled = true``: installing a package never changes what the daemon
manages by itself.

Every problem is collected (an unknown name, a non-boolean ``enabled``, an unknown
key, an entry point that does not load or is not an :class:`Integration`, two
integrations for one kind), never raised, each located in the configuration file.
Only enabled integrations are imported.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from ....config import Config, ConfigProblem, describe
from ....plugins import EntryPoint, choose_entry_points
from . import Integration

__all__ = ["BUILTIN_INTEGRATIONS", "ENTRY_POINT_GROUP", "Integrations", "builtins", "resolve_integrations"]

ENTRY_POINT_GROUP = "preemptd.integrations"


def builtins() -> dict[str, Integration]:
    """A fresh instance of every built-in integration, by name, in their fixed order."""
    from ..deployments import DeploymentIntegration
    from ..jobs import JobIntegration
    from .jobset import JobSetIntegration
    from .kubeflow import PyTorchJobIntegration
    from .lws import LeaderWorkerSetIntegration
    from .podgroup import PodGroupIntegration
    from .ray import RayClusterIntegration, RayJobIntegration
    from .statefulset import StatefulSetIntegration
    from .trainjob import TrainJobIntegration

    found: list[Integration] = [
        JobIntegration(),
        DeploymentIntegration(),
        JobSetIntegration(),
        StatefulSetIntegration(),
        PodGroupIntegration(),
        PyTorchJobIntegration(),
        TrainJobIntegration(),
        RayJobIntegration(),
        RayClusterIntegration(),
        LeaderWorkerSetIntegration(),
    ]
    return {integration.name: integration for integration in found}


BUILTIN_INTEGRATIONS = (
    "job", "deployment", "jobset", "statefulset", "pod-group", "pytorchjob", "trainjob", "rayjob",
    "raycluster", "leaderworkerset",
)


@dataclass(frozen=True, slots=True)
class Integrations:
    """The enabled integrations, by owner kind, in order (built-ins first)."""

    enabled: tuple[Integration, ...]

    def by_kind(self) -> dict[str, Integration]:
        return {integration.resource.kind: integration for integration in self.enabled}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(integration.name for integration in self.enabled)


def installed_entry_points() -> list[EntryPoint]:
    return choose_entry_points(metadata.entry_points(group=ENTRY_POINT_GROUP))


def resolve_integrations(
    config: Config, *, entry_points: Iterable[EntryPoint] | None = None, extra: Iterable[Integration] = ()
) -> tuple[Integrations, list[ConfigProblem]]:
    """Decide and load the integrations; ``extra`` are offered as if installed (tests, embedding)."""
    installed: dict[str, EntryPoint | Integration] = {}
    for entry_point in installed_entry_points() if entry_points is None else choose_entry_points(entry_points):
        installed[entry_point.name] = entry_point
    for offered in extra:
        installed[offered.name] = offered
    own = builtins()
    problems: list[ConfigProblem] = []
    wanted: dict[str, bool] = dict.fromkeys(own, True)
    for name, table in config.integrations.items():
        path = ("integrations", name)
        if name not in own and name not in installed:
            problems.append(config.problem(path, "unknown integration (not installed)"))
            continue
        if not isinstance(table, dict):
            problems.append(config.problem(path, f"expected a table, got {describe(table)}"))
            continue
        for key in table:
            if key != "enabled":
                problems.append(config.problem((*path, key), "unknown key (known: enabled)"))
        enabled = table.get("enabled", name in own)
        if not isinstance(enabled, bool):
            problems.append(config.problem((*path, "enabled"), f"expected a boolean, got {describe(enabled)}"))
            enabled = False
        wanted[name] = enabled
    order = [*own, *(n for n in config.integrations if n not in own and n in installed)]
    chosen: list[Integration] = []
    integration: Integration | None
    kinds: dict[str, str] = {}
    problem = ""
    for name in order:
        if not wanted.get(name):
            continue
        integration = own.get(name)
        if integration is None:
            integration, problem = _load(name, installed[name])
        if integration is None:
            problems.append(config.problem(("integrations", name), problem))
            continue
        kind = integration.resource.kind
        if kind in kinds:
            message = f"integration {name!r} manages {kind}, which {kinds[kind]!r} already does"
            problems.append(config.problem(("integrations", name), message))
            continue
        kinds[kind] = name
        chosen.append(integration)
    return Integrations(tuple(chosen)), problems


def _load(name: str, source: EntryPoint | Integration) -> tuple[Integration | None, str]:
    try:
        loaded: Any = source.load() if not isinstance(source, Integration) else source
        if isinstance(loaded, type) and issubclass(loaded, Integration):
            loaded = loaded()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # whatever a third-party import raises
        return None, f"cannot load integration {name!r}: {type(exc).__name__}: {exc}"
    if not isinstance(loaded, Integration):
        return None, f"integration {name!r} is not an Integration (got {type(loaded).__name__})"
    if getattr(loaded, "resource", None) is None or loaded.name != name:
        return None, f"integration {name!r} must set resource and name = {name!r}"
    return loaded, ""
