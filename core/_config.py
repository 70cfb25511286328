"""A Location's own configuration file, ``pegboard.toml`` at its root."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._codec import MAX_DEPTH, SchemaCodec
from ._errors import CodecError
from ._permissions import PermissionRule

__all__ = (
    "CONFIG_FILE",
    "ConfigError",
    "LocationConfig",
    "PluginSpec",
    "location_rules",
    "permission_rules",
    "plugin_specs",
)

CONFIG_FILE = "pegboard.toml"

_PLUGIN = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "options": {"type": "object"},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
    ]
}
_RULE = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "minLength": 1},
        "resource": {"type": "string", "minLength": 1},
        "effect": {"enum": ["allow", "deny", "ask"]},
    },
    "required": ["action", "effect"],
    "additionalProperties": False,
}
_SCHEMA = {
    "type": "object",
    "properties": {
        "plugins": {"type": "array", "items": _PLUGIN},
        "permissions": {"type": "array", "items": _RULE},
        "tool_output": {
            "type": "object",
            "properties": {
                "max_lines": {"type": "integer", "minimum": 8},
                "max_bytes": {"type": "integer", "minimum": 1024},
                "max_metadata_bytes": {"type": "integer", "minimum": 0},
            },
            "additionalProperties": False,
        },
    },
    # Any other table holds the options of the plugin it is named after.
    "additionalProperties": {"type": "object"},
}


@functools.cache
def _codec() -> SchemaCodec:
    return SchemaCodec(_SCHEMA)


class ConfigError(ValueError):
    """A Location's configuration (file or host arguments) is not usable."""


@attrs.frozen
class PluginSpec:
    """One enabled plugin: its name and its options."""

    name: str
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class LocationConfig:
    """What ``pegboard.toml`` says; ``None`` where it says nothing."""

    plugins: tuple[PluginSpec, ...] | None = None
    tool_output: Mapping[str, int] = attrs.field(factory=dict)
    #: Tables named after plugins: ``[tabular]`` holds the options of ``tabular``.
    options: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    #: ``deny`` and ``ask`` rules only: they narrow what the host allows.
    permissions: tuple[PermissionRule, ...] = ()
    path: Path | None = None

    @classmethod
    def read(cls, root: Path) -> LocationConfig:
        """Read ``root/pegboard.toml``; a missing file is an empty config."""
        path = root / CONFIG_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls()
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path}: cannot be read: {error}") from None
        import tomllib  # only a Location with a config file pays for the parser

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from None
        except RecursionError:
            # tomllib parses nested arrays and inline tables by recursion.
            raise ConfigError(
                f"{path}: arrays or tables nest too deeply to parse; "
                f"keep every value within {MAX_DEPTH} levels"
            ) from None
        deepest = _too_deep(data)
        if deepest is not None:
            raise ConfigError(
                f"{path}: {deepest}: nests deeper than {MAX_DEPTH} levels; "
                "flatten the arrays and tables within it"
            )
        if "trusted" in data or "trust" in data:
            raise ConfigError(
                f"{path}: a Location's config cannot grant trust; "
                "trust is granted by the host only (host.location(trusted=...))"
            )
        try:
            _codec().decode(data)
        except CodecError as error:
            where = error.path.removeprefix("$").removeprefix(".") or "(top level)"
            raise ConfigError(f"{path}: {where}: {error.message}") from None
        plugins = data.get("plugins")
        rules = permission_rules(data.get("permissions", ()), source=f"{path}: permissions")
        for index, rule in enumerate(rules):
            if rule.effect == "allow":
                raise ConfigError(
                    f"{path}: permissions[{index}]: a Location's config may only deny or ask; "
                    "rules that allow come from the host (host.location(permissions=...))"
                )
        return cls(
            plugins=None if plugins is None else plugin_specs(plugins, source=str(path)),
            tool_output=data.get("tool_output", {}),
            options={key: value for key, value in data.items() if key not in _SETTINGS},
            permissions=rules,
            path=path,
        )


_SETTINGS = ("plugins", "tool_output", "permissions")


def _too_deep(data: Mapping[str, Any]) -> str | None:
    """The top-level key whose value nests deeper than `MAX_DEPTH`, if any.

    Walked without recursion, so no depth the parser returned can overflow the
    stack here, and none reaches schema validation or a plugin's options.
    """
    for key, value in data.items():
        stack: list[tuple[Any, int]] = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if not isinstance(item, dict | list):
                continue
            if depth > MAX_DEPTH:
                return key
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return None


def permission_rules(entries: object, *, source: str) -> tuple[PermissionRule, ...]:
    """Turn a list of ``{action, resource, effect}`` tables into rules.

    ``resource`` defaults to ``*``. Raises `ConfigError` naming ``source`` and
    the entry that is wrong.
    """
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, Sequence):
        raise ConfigError(
            f"{source}: must be a list of {{action, resource, effect}} rules, "
            f"got {type(entries).__name__}"
        )
    rules: list[PermissionRule] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, PermissionRule):
            rules.append(entry)
            continue
        where = f"{source}[{index}]"
        if not isinstance(entry, Mapping):
            raise ConfigError(
                f"{where}: a rule is a table {{action, resource, effect}}, got {entry!r}"
            )
        unknown = sorted(set(entry) - {"action", "resource", "effect"})
        if unknown:
            raise ConfigError(
                f"{where}: unknown key {unknown[0]!r}; a rule has action, resource and effect"
            )
        action, resource, effect = (
            entry.get("action"),
            entry.get("resource", "*"),
            entry.get("effect"),
        )
        if not isinstance(action, str) or not action.strip():
            raise ConfigError(f"{where}: action must be a non-empty string, got {action!r}")
        if not isinstance(resource, str) or not resource:
            raise ConfigError(f"{where}: resource must be a non-empty string, got {resource!r}")
        if effect not in ("allow", "deny", "ask"):
            raise ConfigError(f"{where}: effect must be 'allow', 'deny' or 'ask', got {effect!r}")
        rules.append(PermissionRule(action, resource, effect))
    return tuple(rules)


@attrs.frozen
class _Narrowing(PermissionRule):
    """A Location's ``ask`` rule: it applies only where the host's rules do not deny.

    Rules are evaluated last-match-first, so a plain ``ask`` after the host's
    rules would turn a host ``deny`` into a question: a widening.
    """

    host: tuple[PermissionRule, ...] = attrs.field(default=(), repr=False)

    def matches(self, action: str, resource: str) -> bool:
        if not super().matches(action, resource):
            return False
        for rule in reversed(self.host):
            if rule.matches(action, resource):
                return rule.effect != "deny"
        return True


def location_rules(
    host: Sequence[PermissionRule], config: Sequence[PermissionRule]
) -> tuple[PermissionRule, ...]:
    """The host's rules, then the config's, which can narrow them and never widen them."""
    narrowed = [
        _Narrowing(rule.action, rule.resource, rule.effect, host=tuple(host))
        if rule.effect == "ask"
        else rule
        for rule in config
    ]
    if any(rule.effect == "allow" for rule in narrowed):
        raise ConfigError(
            "a Location's config may only deny or ask; rules that allow come from the host"
        )
    return (*host, *narrowed)


def plugin_specs(entries: Sequence[object], *, source: str) -> tuple[PluginSpec, ...]:
    """Turn ``["name", {"name": ..., "options": {...}}]`` into `PluginSpec` values."""
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
        raise ConfigError(f"{source}: plugins must be a list, got {type(entries).__name__}")
    specs: list[PluginSpec] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str) and entry:
            spec = PluginSpec(entry)
        elif (
            isinstance(entry, Mapping)
            and isinstance(entry.get("name"), str)
            and entry["name"]
            and isinstance(entry.get("options", {}), Mapping)
            and set(entry) <= {"name", "options"}
        ):
            spec = PluginSpec(entry["name"], dict(entry.get("options", {})))
        else:
            raise ConfigError(
                f"{source}: plugins[{index}] must be a plugin name or "
                f'{{"name": ..., "options": {{...}}}}, got {entry!r}'
            )
        if any(existing.name == spec.name for existing in specs):
            raise ConfigError(f"{source}: plugin {spec.name!r} is enabled twice")
        specs.append(spec)
    return tuple(specs)
