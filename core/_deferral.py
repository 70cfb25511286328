"""Deferred tools: the budget that defers them and the ``search_tools`` tool that finds them."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import attrs
import orjson

from ._json import thaw
from ._tool import Tool, ToolContext, ToolDefinition, ToolResponse, tool

__all__ = (
    "MAX_SEARCH_LIMIT",
    "SEARCH_DEFINITION",
    "SEARCH_TOOLS",
    "ToolBudget",
    "definition_characters",
    "search_tool",
    "search_value",
)

#: The reserved name of the tool that searches a request's deferred tools.
SEARCH_TOOLS = "search_tools"
#: The most definitions one ``search_tools`` call returns.
MAX_SEARCH_LIMIT = 20


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ToolBudget.{attribute.name} must be a positive integer, got {value!r}")


@attrs.frozen
class ToolBudget:
    """How many tokens of tool definitions a request may advertise before
    ``prepare(defer="auto")`` defers its tools.

    A definition's tokens are estimated as its JSON characters (name,
    description and input schema) divided by ``characters_per_token``. Under the
    budget nothing is deferred; over it, every tool but the ``loaded`` ones is.

    .. versionadded:: 0.1
    """

    tokens: int = attrs.field(default=10_000, validator=_positive)
    characters_per_token: int = attrs.field(default=4, validator=_positive)

    @property
    def characters(self) -> int:
        """The budget in JSON characters."""
        return self.tokens * self.characters_per_token


_INPUT = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What you want to do, in a few words: an action and its object "
            "('create a pull request', 'screenshot of a web page').",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SEARCH_LIMIT,
            "default": 5,
            "description": "How many tools to return, best match first.",
        },
    },
    "required": ["query"],
    "additionalProperties": False,
}
_FOUND = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "input_schema": {"type": "object"},
    },
    "required": ["name", "description", "input_schema"],
}
_OUTPUT = {
    "type": "object",
    "properties": {"tools": {"type": "array", "items": _FOUND}},
    "required": ["tools"],
}
_DESCRIPTION = (
    "Find tools by what they do. More tools are available than are listed: describe the "
    "task and this returns the best matching tools (name, description and input schema), "
    "best first. Any tool it returns can be called right away, by its name, with "
    "arguments following its input schema."
)

#: The definition every request with deferred tools advertises; one value, so a
#: provider's cached prompt prefix holds it unchanged from request to request.
SEARCH_DEFINITION = ToolDefinition(SEARCH_TOOLS, _DESCRIPTION, _INPUT, _OUTPUT)


def search_value(definition: ToolDefinition) -> dict[str, Any]:
    """One search result as plain JSON: what a model needs to call the tool."""
    return {
        "name": definition.name,
        "description": definition.description,
        "input_schema": thaw(definition.input_schema),
    }


def search_tool(search: Callable[[str, int], tuple[ToolDefinition, ...]]) -> Tool:
    """The ``search_tools`` tool over one request's ``search``."""

    async def execute(input: dict[str, Any], context: ToolContext) -> ToolResponse[Any]:
        query = input["query"]
        # In a worker thread: the first search of a snapshot builds its index,
        # which takes a while over thousands of tools.
        matches = await anyio.to_thread.run_sync(search, query, input.get("limit", 5))
        found = [search_value(definition) for definition in matches]
        if not found:
            return ToolResponse(
                output={"tools": []},
                content=f"no tool matches {query!r}; describe the task in other words",
            )
        text = orjson.dumps(found).decode()
        return ToolResponse(output={"tools": found}, content=text)

    return tool(description=_DESCRIPTION, input=_INPUT, output=_OUTPUT, execute=execute)


# A tool's JSON size, less its name: tools are immutable, so it is measured once.
_SIZES: weakref.WeakKeyDictionary[Tool, int] = weakref.WeakKeyDictionary()


def definition_characters(name: str, tool: Tool) -> int:
    """The JSON characters of the definition ``name`` gives ``tool`` (name,
    description, input schema), as ``defer="auto"`` counts them.
    """
    size = _SIZES.get(tool)
    if size is None:
        body = {"name": "", "description": tool.description}
        body["input_schema"] = thaw(tool.input.json_schema)
        size = _SIZES[tool] = len(orjson.dumps(body).decode())
    return size + len(name)
