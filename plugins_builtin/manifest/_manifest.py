"""Manifest files: tools declared as data (TOML), each running one command."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

import pegboard

__all__ = ("ManifestError", "ManifestTool", "read_manifest")

#: The shape of one manifest file; the schemas inside are checked when each tool is made.
MANIFEST_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "tools": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "description": {"type": "string", "minLength": 1},
                    "command": {
                        "type": "array",
                        "items": {"type": "string", "minLength": 1},
                        "minItems": 1,
                    },
                    "input": {"type": "object"},
                    "output": {"type": "object"},
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 3600},
                    "network": {"type": "boolean"},
                },
                "required": ["name", "description", "command"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["tools"],
    "additionalProperties": False,
}


class ManifestError(ValueError):
    """A manifest file that cannot be used, with where and why."""


@attrs.frozen(kw_only=True)
class ManifestTool:
    """One declared tool: its name, description, schemas and the argv it runs."""

    name: str
    description: str
    command: tuple[str, ...]
    input: Mapping[str, Any] | None = None
    output: Mapping[str, Any] | None = None
    timeout: float = 60.0
    #: Whether the command needs the network (asked as the action ``network``).
    network: bool = False


def read_manifest(path: Path) -> list[ManifestTool]:
    """The tools ``path`` declares, or `ManifestError` naming the file and the field."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ManifestError(f"{path}: cannot be read: {error.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ManifestError(f"{path}: not valid TOML: {error}") from None
    try:
        pegboard.SchemaCodec(MANIFEST_SCHEMA).decode(data)
    except pegboard.CodecError as error:
        where = error.path.removeprefix("$").removeprefix(".") or "(top level)"
        raise ManifestError(
            f"{path}: {where}: {error.message}; each [[tools]] entry has name, "
            "description and command (an argv list), and may have input, output, timeout "
            "and network"
        ) from None
    tools = [
        ManifestTool(
            name=entry["name"],
            description=entry["description"],
            command=tuple(entry["command"]),
            input=entry.get("input"),
            output=entry.get("output"),
            timeout=float(entry.get("timeout", 60.0)),
            network=bool(entry.get("network", False)),
        )
        for entry in data["tools"]
    ]
    names = [tool.name for tool in tools]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ManifestError(f"{path}: tool {twice[0]!r} is declared twice; rename one")
    return tools
