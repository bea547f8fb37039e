"""protect-namespace: workloads in the configured namespaces are never victims."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from preemptd.framework import hookimpl

if TYPE_CHECKING:
    from preemptd.framework import Candidate, Session, Workload

NAME = "protect-namespace"  # the entry point's name in pyproject.toml

# The answer depends only on the victim's namespace and this plugin's configuration,
# so a session may remember victim searches while this plugin is enabled.
MEMO_SAFE = True


@dataclass(frozen=True)
class Config:
    """The table ``[plugins.protect-namespace]``."""

    protected_namespaces: list[str] = field(default_factory=list)


@hookimpl
def plugin_config_schema() -> type[Config]:
    return Config


@hookimpl
def session_open(session: Session) -> None:
    config: Config | None = session.plugin_config(NAME)
    if config is None or not config.protected_namespaces:
        session.never_vetoes(NAME)  # nothing to protect: every candidate is allowed


@hookimpl
def is_preemptible(
    session: Session, action: str, preemptor: Workload, preemptee: Candidate
) -> bool | None:
    # Vetoes combine as AND over plugins; None leaves the decision to the others.
    config: Config | None = session.plugin_config(NAME)
    if config is not None and preemptee.workload.namespace in config.protected_namespaces:
        return False
    return None
