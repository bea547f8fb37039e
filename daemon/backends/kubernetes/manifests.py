"""``preemptd manifests``: the daemon's ClusterRole, generated from the enabled integrations.

What the daemon may do is what its code does: the core rules below (its own kinds,
pods, nodes, Events, PriorityClasses) plus, for each enabled integration, the
rules it declares (``Integration.rules``). ``config/kubernetes/20-rbac.yaml`` holds
this output for the default configuration, and a test keeps the two equal; a
configuration that turns integrations on or off prints the role it needs.

With ``--webhook`` it prints instead the ``rules`` of the admission webhook's
MutatingWebhookConfiguration (``deploy/webhook/webhook.yaml``): a CREATE of every
enabled kind with a suspend switch, and of Pods while the pod-group integration is
enabled — the kinds the webhook serves (``daemon/webhook.py``), so that the API
server calls it for those and no others. The component holds the output for the
default configuration, and a test keeps the two equal.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from .integrations import Integration

__all__ = ["CORE_RULES", "cluster_role", "render", "render_webhook_rules", "run", "webhook_rules"]

# (group, resources, verbs); each owner kind's rules come from its integration.
CORE_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("preemptd.io", ("queues",), ("get", "list", "watch")),
    ("preemptd.io", ("queues/status",), ("patch",)),
    ("preemptd.io", ("resourceflavors",), ("list", "watch")),
    ("preemptd.io", ("localqueues",), ("list", "watch")),
    ("preemptd.io", ("workloadpriorityclasses",), ("list", "watch")),
    ("preemptd.io", ("workloads",), ("create", "delete", "get", "list", "patch", "watch")),
    ("preemptd.io", ("workloads/status",), ("patch",)),
)
CORE_RULES_AFTER: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("pods",), ("delete", "get", "list", "patch", "watch")),
    ("", ("nodes",), ("list", "watch")),
    ("", ("namespaces",), ("list", "watch")),
    ("", ("events",), ("create", "patch")),
    ("scheduling.k8s.io", ("priorityclasses",), ("list", "watch")),
)


def cluster_role(rules: Iterable[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> dict[str, object]:
    """The ClusterRole granting ``rules`` (core first, then the integrations', then core)."""
    merged: dict[tuple[str, str], set[str]] = {}
    for group, resources, verbs in (*CORE_RULES, *rules, *CORE_RULES_AFTER):
        for resource in resources:
            merged.setdefault((group, resource), set()).update(verbs)
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "preemptd"},
        "rules": [
            {"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
            for (group, resource), verbs in merged.items()
        ],
    }


def render(role: dict[str, object]) -> str:
    """The role as YAML in the manifests' compact style (one rule in three lines)."""
    lines = ["apiVersion: rbac.authorization.k8s.io/v1", "kind: ClusterRole", "metadata:", "  name: preemptd", "rules:"]
    rules = role["rules"]
    assert isinstance(rules, list)
    for rule in rules:
        group = rule["apiGroups"][0] or '""'
        lines.append(f"- apiGroups: [{group}]")
        lines.append(f"  resources: [{', '.join(rule['resources'])}]")
        lines.append(f"  verbs: [{', '.join(rule['verbs'])}]")
    return "\n".join(lines) + "\n"


def webhook_rules(integrations: Iterable[Integration]) -> list[dict[str, object]]:
    """The admission webhook's rules for the enabled ``integrations`` (see the module docstring)."""
    from .integrations.podgroup import PodGroupIntegration

    rules: list[dict[str, object]] = []
    for integration in integrations:
        if integration.suspend_path is not None:
            resource = integration.resource
            group, version, plural = resource.group, resource.version, resource.plural
        elif isinstance(integration, PodGroupIntegration):
            group, version, plural = "", "v1", "pods"
        else:
            continue
        rules.append({
            "apiGroups": [group], "apiVersions": [version], "operations": ["CREATE"],
            "resources": [plural], "scope": "Namespaced",
        })
    return rules


def render_webhook_rules(rules: list[dict[str, object]]) -> str:
    """The rules in the compact style of ``deploy/webhook/webhook.yaml`` (indented as there)."""
    lines = ["  rules:"]
    for rule in rules:
        groups = rule["apiGroups"]
        assert isinstance(groups, list)
        group = groups[0] or '""'
        lines.append(f"  - apiGroups: [{group}]")
        for key in ("apiVersions", "operations", "resources"):
            values = rule[key]
            assert isinstance(values, list)
            lines.append(f"    {key}: [{', '.join(values)}]")
        lines.append(f"    scope: {rule['scope']}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from ...config import ConfigError, read_config
    from .integrations.registry import resolve_integrations

    config, problems = read_config(args.config)
    integrations, more = resolve_integrations(config)
    if problems or more:
        raise ConfigError([*problems, *more])
    if getattr(args, "webhook", False):
        print(render_webhook_rules(webhook_rules(integrations.enabled)), end="")
        return 0
    rules = [(r.group, r.resources, r.verbs) for i in integrations.enabled for r in i.rules()]
    print(render(cluster_role(rules)), end="")
    return 0
