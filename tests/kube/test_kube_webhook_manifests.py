"""The webhook's kustomize components (deploy/webhook, deploy/webhook-cert-manager), checked
structurally: what they name exists, agrees with the code and the configuration, and grants
what the certificate keeper uses, no more."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

import yaml
from preemptd.daemon import webhook_certs
from preemptd.daemon.backends.kubernetes.integrations.registry import resolve_integrations
from preemptd.daemon.backends.kubernetes.manifests import render_webhook_rules, webhook_rules
from preemptd.daemon.backends.kubernetes.workloads import QUEUE_LABEL
from preemptd.daemon.config import Config, parse_config, split_address
from preemptd.daemon.webhook import PATH, suspend_fields

from .cluster import MANIFESTS, REPO

WEBHOOK = REPO / "deploy" / "webhook"
CERT_MANAGER = REPO / "deploy" / "webhook-cert-manager"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return found


def base_toml() -> dict[str, Any]:
    config_map = one(documents(MANIFESTS / "30-daemon.yaml"), "ConfigMap")
    return tomllib.loads(config_map["data"]["preemptd.toml"])


def component_toml(component: Path) -> tuple[str, dict[str, Any]]:
    text = one(documents(component / "config-patch.yaml"), "ConfigMap")["data"]["preemptd.toml"]
    return text, tomllib.loads(text)


def test_every_file_a_component_names_exists_and_the_components_are_components() -> None:
    for component in (WEBHOOK, CERT_MANAGER):
        kustomization = yaml.safe_load((component / "kustomization.yaml").read_text())
        assert "Component" == kustomization["kind"]
        for name in kustomization.get("resources", []) + [p["path"] for p in kustomization["patches"] if "path" in p]:
            assert (component / name).is_file(), f"{component.name}/{name}"
        for other in kustomization.get("components", []):
            assert (component / other / "kustomization.yaml").is_file()
    overlay = yaml.safe_load((REPO / "deploy" / "with-webhook" / "kustomization.yaml").read_text())
    assert ["../../config/kubernetes"] == overlay["resources"] and ["../webhook"] == overlay["components"]


def test_the_configuration_calls_the_service_that_reaches_the_webhook_port() -> None:
    docs = documents(WEBHOOK / "webhook.yaml")
    (hook,) = one(docs, "MutatingWebhookConfiguration", "preemptd")["webhooks"]
    service = one(docs, "Service", "preemptd-webhook")
    called = hook["clientConfig"]["service"]
    assert (called["name"], called["namespace"]) == (service["metadata"]["name"], service["metadata"]["namespace"])
    assert PATH == called["path"]
    (port,) = service["spec"]["ports"]
    assert called["port"] == port["port"]
    daemon = one(documents(MANIFESTS / "30-daemon.yaml"), "Deployment")
    assert service["spec"]["selector"] == daemon["spec"]["template"]["metadata"]["labels"]
    (container,) = one(documents(WEBHOOK / "deployment-patch.yaml"), "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    _, toml = component_toml(WEBHOOK)
    assert ports[port["targetPort"]] == split_address(toml["webhook"]["address"])[1]
    # The self-managed certificate is made for this Service and given to this configuration.
    assert (toml["webhook"]["service"], toml["webhook"]["namespace"]) == (called["name"], called["namespace"])
    assert toml["webhook"]["configuration"] == "preemptd"


def test_the_webhook_is_called_only_for_creates_of_served_kinds_carrying_the_queue_label() -> None:
    (hook,) = one(documents(WEBHOOK / "webhook.yaml"), "MutatingWebhookConfiguration")["webhooks"]
    assert ["v1"] == hook["admissionReviewVersions"]
    assert "None" == hook["sideEffects"]
    assert "Fail" == hook["failurePolicy"]  # the trade-off is written beside it, and in the README
    assert hook["timeoutSeconds"] <= 10
    served = {(group, resource) for rule in hook["rules"] for group in rule["apiGroups"] for resource in rule["resources"]}
    enabled = resolve_integrations(Config())[0].enabled
    # Every kind the default configuration suspends at creation, and Pods (the pod groups).
    by_kind = {i.resource.kind: i.resource.plural for i in enabled}
    assert {(group, by_kind[kind]) for group, kind in suspend_fields(enabled)} | {("", "pods")} == served
    assert webhook_rules(enabled) == hook["rules"]
    assert all(["CREATE"] == rule["operations"] for rule in hook["rules"])
    assert [{"key": QUEUE_LABEL, "operator": "Exists"}] == hook["objectSelector"]["matchExpressions"]
    (excluded,) = hook["namespaceSelector"]["matchExpressions"]
    assert ("kubernetes.io/metadata.name", "NotIn") == (excluded["key"], excluded["operator"])
    assert {"preemptd-system", "kube-system"} == set(excluded["values"])
    assert "caBundle" not in hook["clientConfig"]  # set by preemptd or by cainjector


def test_the_component_configurations_are_the_base_with_the_webhook_on() -> None:
    base = base_toml()
    for component, mode in ((WEBHOOK, "self-managed"), (CERT_MANAGER, "files")):
        text, toml = component_toml(component)
        webhook = toml.pop("webhook")
        assert base == toml, component.name
        config, problems = parse_config(text, source=str(component / "config-patch.yaml"))
        assert [] == problems
        assert config.webhook.enabled and mode == config.webhook.certificate
        mounts = _mounts(component)
        for key in ("cert_file", "key_file"):
            assert str(Path(webhook[key]).parent) in mounts, (component.name, key)


def _mounts(component: Path) -> dict[str, str]:
    """mountPath -> volume name, for the component's Deployment patch (and what it includes)."""
    patch = one(documents(component / "deployment-patch.yaml"), "Deployment")
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    volumes = {v["name"] for v in patch["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert set(mounts.values()) <= volumes
    return mounts


def test_the_self_managed_certificate_lives_in_memory_and_cert_manager_s_comes_from_its_secret() -> None:
    (volume,) = one(documents(WEBHOOK / "deployment-patch.yaml"), "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert "Memory" == volume["emptyDir"]["medium"]
    cert_manager = documents(CERT_MANAGER / "certificate.yaml")
    certificate = one(cert_manager, "Certificate")
    issuer = one(cert_manager, "Issuer")
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    (replaced,) = one(documents(CERT_MANAGER / "deployment-patch.yaml"), "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert replaced["name"] == volume["name"] and replaced["emptyDir"] is None
    assert certificate["spec"]["secretName"] == replaced["secret"]["secretName"]
    service = one(documents(WEBHOOK / "webhook.yaml"), "Service")
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in certificate["spec"]["dnsNames"]
    annotations = one(documents(CERT_MANAGER / "inject-ca.yaml"), "MutatingWebhookConfiguration")["metadata"]["annotations"]
    meta = certificate["metadata"]
    assert f"{meta['namespace']}/{meta['name']}" == annotations["cert-manager.io/inject-ca-from"]
    # Renewed a third of its life before it ends (as the self-managed one is).
    hours = {key: int(certificate["spec"][key].removesuffix("h")) for key in ("duration", "renewBefore")}
    assert 3 * hours["renewBefore"] == hours["duration"]


def _keeper_verbs() -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> verbs the certificate keeper's source calls on ``self.kube``."""
    names = {"SECRETS": webhook_certs.SECRETS, "WEBHOOK_CONFIGURATIONS": webhook_certs.WEBHOOK_CONFIGURATIONS}
    verbs: dict[tuple[str, str], set[str]] = {}
    for node in ast.walk(ast.parse(Path(webhook_certs.__file__).read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            first = node.args[0]
            if ast.unparse(node.func.value) == "self.kube" and isinstance(first, ast.Name) and first.id in names:
                resource = names[first.id]
                verb = {"replace": "update"}.get(node.func.attr, node.func.attr)
                verbs.setdefault((resource.group, resource.plural), set()).add(verb)
    return verbs


def test_the_self_managed_rbac_grants_what_the_keeper_uses_on_its_own_objects_only() -> None:
    docs = documents(WEBHOOK / "webhook.yaml")
    granted: dict[tuple[str, str], set[str]] = {}
    for role in (one(docs, "Role"), one(docs, "ClusterRole")):
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
                    if "resourceNames" not in rule:
                        assert ["create"] == rule["verbs"], rule  # the one verb RBAC cannot limit by name
    assert _keeper_verbs() == granted
    _, toml = component_toml(WEBHOOK)
    named = {n for role in (one(docs, "Role"), one(docs, "ClusterRole")) for r in role["rules"] for n in r.get("resourceNames", [])}
    assert {toml["webhook"]["secret"], toml["webhook"]["configuration"]} == named
    for binding in (one(docs, "RoleBinding"), one(docs, "ClusterRoleBinding")):
        assert [{"kind": "ServiceAccount", "name": "preemptd", "namespace": "preemptd-system"}] == binding["subjects"]
    kustomization = yaml.safe_load((CERT_MANAGER / "kustomization.yaml").read_text())
    deleted = {(d["kind"], d["metadata"]["name"]) for p in kustomization["patches"] if "patch" in p
               for d in [yaml.safe_load(p["patch"])]}
    assert {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"].endswith(("Role", "RoleBinding"))} == deleted


def test_the_components_webhook_rules_are_what_preemptd_manifests_prints_for_the_defaults() -> None:
    enabled = resolve_integrations(Config())[0].enabled
    assert render_webhook_rules(webhook_rules(enabled)) in (WEBHOOK / "webhook.yaml").read_text()
