"""A Location's own configuration file, ``pegboard.toml`` at its root."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._codec import SchemaCodec
from ._errors import CodecError

__all__ = ("CONFIG_FILE", "ConfigError", "LocationConfig", "PluginSpec", "plugin_specs")

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
_SCHEMA = {
    "type": "object",
    "properties": {
        "plugins": {"type": "array", "items": _PLUGIN},
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
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"{path}: not valid TOML: {error}") from None
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
        return cls(
            plugins=None if plugins is None else plugin_specs(plugins, source=str(path)),
            tool_output=data.get("tool_output", {}),
            options={
                key: value for key, value in data.items() if key not in ("plugins", "tool_output")
            },
            path=path,
        )


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
