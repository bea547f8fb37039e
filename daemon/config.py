"""The TOML configuration (CONTRACT §4), checked key by key with file and line.

``tomllib`` reports no positions, so the loader indexes the text itself: every
table header and every ``key =`` line is recorded under its full dotted path,
and a problem is reported at the line of the deepest part of its path that the
index knows (a key inside an inline table points at the table's line).

Every table, the daemon's own and each plugin's, is checked the same way: a
dataclass describes it, and :func:`check_table` turns the TOML table into the
dataclass's arguments, reporting unknown keys, missing keys and values of the
wrong type.
A field whose metadata carries ``{"duration": True}`` takes a duration string
(``"90s"``) and holds milliseconds. Problems are collected, never raised one at
a time: a user fixes the whole file in one pass.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from preemptd.framework.quantity import QuantityError, parse_duration
from preemptd.framework.session import KNOWN_ACTIONS

__all__ = [
    "BackendConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "DaemonConfig",
    "LeaderElectionConfig",
    "SchedulerConfig",
    "WebhookConfig",
    "check_table",
    "describe",
    "load_config",
    "parse_config",
    "read_config",
    "split_address",
]

TablePath = tuple[str, ...]


def _duration(default: int) -> Any:
    return field(default=default, metadata={"duration": True})


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    actions: tuple[str, ...] = ("allocate", "preempt")
    cycle_interval: int = _duration(1000)


@dataclass(frozen=True, slots=True)
class BackendConfig:
    kind: Literal["kubernetes", "simulation", "files"] = "simulation"


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    http_address: str = "127.0.0.1:8080"
    log_format: Literal["json", "console", "auto"] = "auto"
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    # A cycle still running after this long is abandoned (and counted).
    cycle_deadline: int = _duration(20_000)
    # A watch down for this long makes the cache stale: sessions run without
    # preempt/reclaim until every watch is connected again.
    stale_after: int = _duration(10_000)
    # How long SIGTERM lets the cycle under way finish before abandoning it.
    shutdown_timeout: int = _duration(10_000)
    # How long a cycle waits at most, before its snapshot, for the owner reconciler to
    # catch up (the Workloads of Jobs just created); 0: not at all.
    owner_settle: int = _duration(1_000)
    # Which Kubernetes Events the backend posts: "changes" (what is notable about a
    # workload: a preemption, an unusable workload, a force delete) or "all" (also
    # routine creation, admission and the end of an eviction, on owners too).
    events: Literal["all", "changes"] = "changes"
    # /metrics over TLS: a PEM certificate (chain) and its key, reloaded when they change;
    # "" for plain HTTP. Both or neither.
    metrics_cert_file: str = ""
    metrics_key_file: str = ""
    # A file holding the bearer token /metrics requires ("Authorization: Bearer ..."),
    # re-read when it changes; "" for none.
    metrics_token_file: str = ""


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    enabled: bool = True
    lease_namespace: str = "preemptd-system"
    lease_name: str = "preemptd"
    lease_duration: int = _duration(15_000)
    renew_deadline: int = _duration(10_000)
    retry_period: int = _duration(2_000)


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """The mutating admission webhook (daemon/webhook.py); off unless enabled."""

    enabled: bool = False
    address: str = "0.0.0.0:9443"
    # "files": the certificate is read from cert_file/key_file (a mounted Secret);
    # "self-managed": preemptd makes it, keeps it in `secret`, writes it to those files
    # and sets the caBundle of the MutatingWebhookConfiguration `configuration`.
    certificate: Literal["files", "self-managed"] = "files"
    # A certificate and its key, PEM.
    cert_file: str = "/etc/preemptd/webhook-tls/tls.crt"
    key_file: str = "/etc/preemptd/webhook-tls/tls.key"
    # How often the two files are checked for a rotation.
    reload_interval: int = _duration(10_000)
    # Self-managed: the Service the API server calls (the certificate's names), the
    # namespace of the Service and the Secret, and the two objects' names.
    service: str = "preemptd-webhook"
    namespace: str = "preemptd-system"
    secret: str = "preemptd-webhook-tls"
    configuration: str = "preemptd"


_SECTIONS: dict[str, type] = {
    "scheduler": SchedulerConfig,
    "backend": BackendConfig,
    "daemon": DaemonConfig,
    "leader_election": LeaderElectionConfig,
    "webhook": WebhookConfig,
}


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    file: str
    line: int | None
    key: str  # dotted path, e.g. "plugins.min-runtime.reclaim_resolve_method"
    message: str

    def sort_key(self) -> tuple[str, int, str]:
        return (self.file, self.line or 0, self.key)

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(Exception):
    """The configuration is unusable; carries every problem found (exit 78)."""

    def __init__(self, problems: Sequence[ConfigProblem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(map(str, self.problems)))


@dataclass(frozen=True, slots=True)
class Config:
    scheduler: SchedulerConfig = SchedulerConfig()
    backend: BackendConfig = BackendConfig()
    daemon: DaemonConfig = DaemonConfig()
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    webhook: WebhookConfig = WebhookConfig()
    # The raw [plugins.<name>] tables in file order; plugins.py checks them against
    # the installed plugins' schemas.
    plugins: Mapping[str, Any] = field(default_factory=dict)
    # The raw [integrations.<name>] tables; the kubernetes backend's integrations registry
    # checks them against the installed integrations.
    integrations: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""  # the file read; "" = built-in defaults
    lines: Mapping[TablePath, int] = field(default_factory=dict)

    def locate(self, path: TablePath) -> int | None:
        """The line of ``path``, or of its deepest prefix the file spells out."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return None

    def problem(self, path: TablePath, message: str) -> ConfigProblem:
        return ConfigProblem(self.source or "<defaults>", self.locate(path), ".".join(path), message)


def read_config(path: str | Path | None) -> tuple[Config, list[ConfigProblem]]:
    """Read and check a configuration file (``None``: the defaults); never raises."""
    if path is None:
        return Config(), []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Config(source=str(path)), [ConfigProblem(str(path), None, "", f"cannot read: {reason}")]
    return parse_config(text, source=str(path))


def load_config(path: str | Path | None) -> Config:
    """Like :func:`read_config`, raising :class:`ConfigError` if anything is wrong."""
    config, problems = read_config(path)
    if problems:
        raise ConfigError(problems)
    return config


def parse_config(text: str, *, source: str) -> tuple[Config, list[ConfigProblem]]:
    """Check the daemon's own tables; plugin tables are kept raw for plugins.py."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = int(match[1]) if match else len(text.splitlines()) or 1  # "at end of document"
        return Config(source=source), [ConfigProblem(source, line, "", f"not valid TOML: {exc}")]
    base = Config(source=source, lines=index_lines(text))
    problems: list[ConfigProblem] = []
    sections: dict[str, Any] = {}
    broken: set[str] = set()
    for key, value in data.items():
        if key in ("plugins", "integrations"):
            continue
        if key not in _SECTIONS:
            known = ", ".join([*_SECTIONS, "plugins", "integrations"])
            problems.append(base.problem((key,), f"unknown key (known: {known})"))
            continue
        # The section is built from its right values (defaults for the rest), so the
        # checks below still run; checks across keys skip a section with problems, whose
        # defaults would make them report a mistake the user did not make.
        arguments, found = check_table(_SECTIONS[key], value, config=base, path=(key,))
        problems += found
        sections[key] = _SECTIONS[key](**arguments)
        if found:
            broken.add(key)
    plugins = data.get("plugins", {})
    if not isinstance(plugins, dict):
        problems.append(base.problem(("plugins",), f"expected a table, got {describe(plugins)}"))
        plugins = {}
    integrations = data.get("integrations", {})
    if not isinstance(integrations, dict):
        problems.append(base.problem(("integrations",), f"expected a table, got {describe(integrations)}"))
        integrations = {}
    config = dataclasses.replace(base, plugins=plugins, integrations=integrations, **sections)
    problems += _check_scheduler(config)
    problems += _check_daemon(config)
    if "leader_election" not in broken:
        problems += _check_leader_election(config)
    problems += _check_webhook(config)
    return config, sorted(problems, key=ConfigProblem.sort_key)


def _check_scheduler(config: Config) -> list[ConfigProblem]:
    problems = []
    actions = config.scheduler.actions
    path = ("scheduler", "actions")
    unknown = [a for a in actions if a not in KNOWN_ACTIONS]
    repeated = sorted({a for a in actions if actions.count(a) > 1})
    if not actions:
        problems.append(config.problem(path, "at least one action is needed"))
    elif unknown:
        known = ", ".join(map(repr, KNOWN_ACTIONS))
        problems.append(config.problem(path, f"unknown action {unknown[0]!r} (known: {known})"))
    elif repeated:
        problems.append(config.problem(path, f"action {repeated[0]!r} is listed twice"))
    if config.scheduler.cycle_interval <= 0:
        problems.append(config.problem(("scheduler", "cycle_interval"), "must be longer than 0s"))
    return problems


def _check_daemon(config: Config) -> list[ConfigProblem]:
    daemon = config.daemon
    problems = []
    try:
        split_address(daemon.http_address)
    except ValueError as exc:
        problems.append(config.problem(("daemon", "http_address"), str(exc)))
    for key in ("cycle_deadline", "stale_after", "shutdown_timeout"):
        if getattr(daemon, key) <= 0:
            problems.append(config.problem(("daemon", key), "must be longer than 0s"))
    if bool(daemon.metrics_cert_file) != bool(daemon.metrics_key_file):
        key = "metrics_key_file" if daemon.metrics_cert_file else "metrics_cert_file"
        problems.append(config.problem(("daemon", key), "metrics_cert_file and metrics_key_file go together"))
    if daemon.owner_settle < 0:
        problems.append(config.problem(("daemon", "owner_settle"), "must be 0s or longer"))
    elif 0 < daemon.cycle_deadline <= daemon.owner_settle:
        problems.append(config.problem(("daemon", "owner_settle"), "must be shorter than cycle_deadline"))
    return problems


def _check_webhook(config: Config) -> list[ConfigProblem]:
    webhook = config.webhook
    problems = []
    try:
        split_address(webhook.address)
    except ValueError as exc:
        problems.append(config.problem(("webhook", "address"), str(exc)))
    if webhook.reload_interval <= 0:
        problems.append(config.problem(("webhook", "reload_interval"), "must be longer than 0s"))
    for key in ("cert_file", "key_file"):
        if webhook.enabled and not getattr(webhook, key):
            problems.append(config.problem(("webhook", key), "must name a file when the webhook is enabled"))
    if webhook.certificate == "self-managed":
        for key in ("service", "namespace", "secret", "configuration"):
            if not getattr(webhook, key):
                problems.append(config.problem(("webhook", key), "must name an object when certificate is self-managed"))
    return problems


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``; an empty host is every interface) as (host, port)."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port such as '127.0.0.1:8080', got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "0.0.0.0", int(port)


def _check_leader_election(config: Config) -> list[ConfigProblem]:
    # client-go refuses these too: a leader must renew before its lease runs out,
    # and retry more often than it has to renew.
    election = config.leader_election
    problems = []
    if election.lease_duration <= election.renew_deadline:
        path = _written(config, "leader_election", ("renew_deadline", "lease_duration"))
        problems.append(config.problem(path, "renew_deadline must be shorter than lease_duration"))
    if election.renew_deadline <= election.retry_period:
        path = _written(config, "leader_election", ("retry_period", "renew_deadline"))
        problems.append(config.problem(path, "retry_period must be shorter than renew_deadline"))
    return problems


def _written(config: Config, table: str, keys: Sequence[str]) -> TablePath:
    """The first of ``keys`` the file spells out (a default is not where the mistake is)."""
    paths = [(table, key) for key in keys]
    return next((path for path in paths if path in config.lines), paths[0])


# --- tables -> dataclasses ---------------------------------------------------------------


def check_table(
    schema: type, table: object, *, config: Config, path: TablePath
) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """The keyword arguments for the dataclass ``schema`` that a TOML table gives.

    Returns the arguments whose values are right, and a problem for every unknown
    key, missing required key and value of the wrong type. Instantiating is left to
    the caller, which knows whose rules a ``ValueError`` of the dataclass enforces.
    """
    if not isinstance(table, dict):
        return {}, [config.problem(path, f"expected a table, got {describe(table)}")]
    fields = {f.name: f for f in dataclasses.fields(schema) if f.init}
    hints = _type_hints(schema)
    problems = []
    arguments: dict[str, Any] = {}
    for key, value in table.items():
        spec = fields.get(key)
        if spec is None:
            known = ", ".join(fields) or "none"
            problems.append(config.problem((*path, key), f"unknown key (known: {known})"))
            continue
        try:
            if spec.metadata.get("duration"):
                arguments[key] = parse_duration(value)
            else:
                arguments[key] = _coerce(value, hints.get(key, Any))
        except (QuantityError, TypeError) as exc:
            problems.append(config.problem((*path, key), str(exc)))
    for name, spec in fields.items():
        missing = spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        if missing and name not in table:
            problems.append(config.problem((*path, name), "missing key"))
    return arguments, problems


def _type_hints(schema: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(schema)
    except Exception:  # an unresolvable annotation: check what can be checked
        return {f.name: f.type for f in dataclasses.fields(schema) if not isinstance(f.type, str)}


def _coerce(value: object, hint: Any) -> Any:
    """``value`` as the type ``hint`` describes; ``TypeError`` naming the expectation if not."""
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if origin is Literal:
        if value in arguments and any(type(value) is type(choice) for choice in arguments):
            return value
        choices = ", ".join(repr(choice) for choice in arguments)
        raise TypeError(f"expected one of {choices}, got {value!r}")
    if origin in (typing.Union, types.UnionType):
        arms = [arm for arm in arguments if arm is not type(None)]
        for arm in arms:
            try:
                return _coerce(value, arm)
            except TypeError:
                continue
        raise TypeError(f"expected {_name(hint)}, got {describe(value)}")
    container = origin or hint
    if container in (list, tuple, set, frozenset, Sequence):
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {describe(value)}")
        item = arguments[0] if arguments else Any
        if container is tuple and arguments[1:] != (Ellipsis,):
            item = Any  # a fixed-length tuple: only the list itself is checked
        items = [_coerce(element, item) for element in value]
        return items if container in (list, Sequence) else container(items)
    if origin in (dict, Mapping) or hint is dict:
        if not isinstance(value, dict):
            raise TypeError(f"expected a table, got {describe(value)}")
        item = arguments[1] if len(arguments) == 2 else Any
        return {key: _coerce(element, item) for key, element in value.items()}
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise TypeError(f"expected a number, got {describe(value)}")
    if isinstance(hint, type):
        # bool is an int in Python, not in TOML: `count = true` is a mistake.
        if isinstance(value, hint) and not (isinstance(value, bool) and hint is not bool):
            return value
        raise TypeError(f"expected {_name(hint)}, got {describe(value)}")
    return value  # an annotation this checker does not understand: trust the dataclass


def _name(hint: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_name(arm) for arm in typing.get_args(hint) if arm is not type(None))
    return getattr(hint, "__name__", str(hint))


def describe(value: object) -> str:
    """How a message names a TOML value: its kind, and the value where it is short."""
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    kinds |= {list: "a list", dict: "a table"}
    kind = kinds.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if isinstance(value, bool | int | float | str) else kind


# --- where each key is written -----------------------------------------------------------

_KEY_PART = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_KEY_PATH = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = re.compile(rf"^\[\[?\s*({_KEY_PATH})\s*\]\]?")
_ASSIGNMENT = re.compile(rf"^({_KEY_PATH})\s*=(.*)$")
_PART = re.compile(_KEY_PART)


def _split_key(text: str) -> TablePath:
    parts = []
    for match in _PART.finditer(text):
        part = match[0]
        if part[0] == '"':
            part = part[1:-1].encode().decode("unicode_escape")
        elif part[0] == "'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def index_lines(text: str) -> dict[TablePath, int]:
    """Map every table header and key path of a TOML text to its first line (1-based)."""
    index: dict[TablePath, int] = {}
    table: TablePath = ()
    closing: str | None = None  # the delimiter of a multi-line string being skipped
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if closing is not None:
            if closing in line:
                closing = None
            continue
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header:
            table = _split_key(header[1])
            for end in range(1, len(table) + 1):
                index.setdefault(table[:end], number)
            continue
        assignment = _ASSIGNMENT.match(line)
        if assignment is None:
            continue
        path = table + _split_key(assignment[1])
        for end in range(len(table) + 1, len(path) + 1):
            index.setdefault(path[:end], number)
        for delimiter in ('"""', "'''"):
            if assignment[2].count(delimiter) % 2 == 1:
                closing = delimiter
    return index
