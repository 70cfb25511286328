"""A server's tool listing as it sent it, and the input codec of a mounted tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from pydantic import ConfigDict

import pegboard

if TYPE_CHECKING:
    from mcp import Client

__all__ = ("ServerInput", "definition_extra", "read_listing")

#: The fields of an MCP tool that pegboard's own definition carries.
_UNDERSTOOD = frozenset({"name", "title", "description", "inputSchema", "outputSchema"})
#: The annotations pegboard's `ToolAnnotations` (and the definition's title) carry.
_UNDERSTOOD_HINTS = frozenset(
    {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
)
#: At most this many problems are listed in one invalid-input message.
_MOST_PROBLEMS = 20


class _Hints(types.ToolAnnotations):
    model_config = ConfigDict(extra="allow")


class _Tool(types.Tool):
    """A listed tool that keeps the fields the SDK's model does not know."""

    model_config = ConfigDict(extra="allow")
    annotations: _Hints | None = None


class _Listing(types.ListToolsResult):
    model_config = ConfigDict(extra="allow")
    tools: list[_Tool]  # type: ignore[assignment]


async def read_listing(client: Client) -> tuple[list[types.Tool], dict[str, dict[str, Any]]]:
    """The server's tools, and for each the fields of its definition pegboard does not
    understand (``execution``, ``icons``, ``_meta``, unknown annotations, fields of
    later revisions), exactly as the server sent them.
    """
    # The SDK's own listing primes what it needs to call the tools; the second,
    # read with models that keep unknown fields, is what the server really said.
    listing = await client.list_tools()
    as_sent = await client.session.send_request(types.ListToolsRequest(), _Listing)
    extras = {tool.name: extra for tool in as_sent.tools if (extra := definition_extra(tool))}
    return listing.tools, extras


def definition_extra(tool: types.Tool) -> dict[str, Any]:
    """``tool``'s definition less what pegboard's `ToolDefinition` carries itself."""
    data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    extra = {key: value for key, value in data.items() if key not in _UNDERSTOOD}
    hints = extra.pop("annotations", None) or {}
    unknown = {key: value for key, value in hints.items() if key not in _UNDERSTOOD_HINTS}
    if unknown:
        extra["annotations"] = unknown
    return extra


class ServerInput:
    """A mounted tool's input schema as a codec whose refusal lists every problem.

    Invalid input never reaches the server, and the model learns all it must fix
    at once rather than one error per attempt.
    """

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._codec = pegboard.SchemaCodec(schema)
        self._every: Any = None

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self._codec.json_schema

    def decode(self, raw: Any) -> Any:
        try:
            return self._codec.decode(raw)
        except pegboard.CodecError as first:
            problems = self._problems(raw)
            if len(problems) < 2:
                raise
            raise pegboard.CodecError(
                f"{len(problems)} problems: "
                + "; ".join(problems[:_MOST_PROBLEMS])
                + ("; …" if len(problems) > _MOST_PROBLEMS else ""),
                rule=first.rule,
            ) from None

    def encode(self, value: Any) -> Any:
        return self._codec.encode(value)

    def _problems(self, raw: Any) -> list[str]:
        """Every way ``raw`` breaks the schema, each with where, in document order."""
        import jsonschema

        if self._every is None:
            self._every = jsonschema.Draft202012Validator(pegboard.thaw(self.json_schema))
        try:
            errors = sorted(
                self._every.iter_errors(raw), key=lambda error: list(map(str, error.absolute_path))
            )
        except RecursionError:
            return []
        return [f"{_path(error.absolute_path)}: {_said(error)}" for error in errors]


def _path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _said(error: Any) -> str:
    if error.validator == "type":
        expected = error.validator_value
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return f"expected {wanted}, got {_json_type(error.instance)}"
    if error.validator == "required":
        return str(error.message).replace(" is a required property", " is required")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = (
            set(error.schema.get("properties", {})) if isinstance(error.schema, dict) else set()
        )
        extra = sorted(key for key in error.instance if key not in allowed)
        return f"unexpected propert{'y' if len(extra) == 1 else 'ies'} " + ", ".join(
            map(repr, extra)
        )
    message: str = error.message
    return message if len(message) <= 200 else f"{message[:199]}…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, Mapping) else type(value).__name__
