"""The definitions check: names, descriptions and schemas a model can rely on."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pegboard

from .._schema import check_schema
from ._bench import Bench
from ._report import Findings

__all__ = ("BUILTIN_TOOLS", "definitions", "schema_problem", "visible")

#: Every provider accepts these names (OpenAI, Anthropic, Gemini, Bedrock).
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
#: The longest tool description that passes, in characters.
DESCRIPTION_CAP = 1024
#: The built-in tools the contract names. Another plugin's tool under one of these
#: names replaces the built-in wherever both are enabled.
BUILTIN_TOOLS = frozenset({"bash", "edit", "glob", "grep", "read", "write"})

_SCHEMA_FIX = (
    "build the schema before pegboard.tool(...) checks it, and never change it afterwards: "
    "a Codec's json_schema must stay the schema the tool was made with"
)


async def definitions(bench: Bench, findings: Findings) -> None:
    """Every advertised definition of the plugin, one by one, in two activations."""
    async with bench.open("definitions") as opened:
        found = opened.tools()
    async with bench.open("definitions-again") as opened:
        again = opened.definitions()
    _compare(found, again, findings)
    _look_alike(found, findings)
    for name, definition in sorted(found.items()):
        if len(definition.description) > DESCRIPTION_CAP:
            findings.problem(
                f"tool {name!r} has a description of {len(definition.description):,} "
                f"characters (more than {DESCRIPTION_CAP:,}); every request pays for it in "
                "tokens, and models skim long ones",
                "say what the tool does and when to use it in a few sentences; put details "
                "in parameter descriptions or in the tool's results",
            )
        if not _NAME.match(name):
            findings.problem(
                f"tool name {name!r} is not accepted by every provider "
                "(^[A-Za-z][A-Za-z0-9_-]{0,63}$)",
                "register the tool under a name of letters, digits, '_' and '-'",
            )
        if name in BUILTIN_TOOLS and bench.name != "builtin":
            findings.problem(
                f"tool {name!r} takes the name of a built-in tool, which it would replace in "
                "every Location that enables both",
                "register with a namespace: tools.register({...}, namespace='<plugin>')",
            )
        if not visible(definition.description):
            findings.problem(
                f"tool {name!r} has no description a model can read: {definition.description!r}",
                "describe what the tool does and when to use it; a description read from a "
                "file must hold words, not only whitespace or a byte-order mark",
            )
        where = f"the input schema of tool {name!r}"
        problem = schema_problem(definition.input_schema, where)
        if problem is None and definition.input_schema.get("type") != "object":
            problem = f'{where} does not describe a JSON object ({{"type": "object", ...}})'
        if problem is not None:
            findings.problem(problem, _SCHEMA_FIX)
        if definition.output_schema is not None:
            where = f"the output schema of tool {name!r}"
            problem = schema_problem(definition.output_schema, where)
            if problem is not None:
                findings.problem(problem, _SCHEMA_FIX)


def _compare(
    first: Mapping[str, pegboard.ToolDefinition],
    second: Mapping[str, pegboard.ToolDefinition],
    findings: Findings,
) -> None:
    """A fresh Location gets the same tools with the same schemas, every time."""
    if set(first) != set(second):
        changed = sorted(set(first) ^ set(second))
        findings.problem(
            f"two activations got different tools: {', '.join(changed)}, each in only one",
            "register the same tools on every activation; a host caches and compares them",
        )
    for name in sorted(set(first) & set(second)):
        for part in ("input_schema", "output_schema", "description"):
            if getattr(first[name], part) != getattr(second[name], part):
                findings.problem(
                    f"the {part.replace('_', ' ')} of tool {name!r} differs between two "
                    "activations",
                    "build definitions from fixed data, not from the time, randomness or "
                    "state left over from an earlier Location",
                )


def _look_alike(found: Mapping[str, pegboard.ToolDefinition], findings: Findings) -> None:
    """Names that differ only by '-' and '_' confuse models and people: a note."""
    seen: dict[str, str] = {}
    for name in sorted(found):
        key = name.replace("-", "_")
        if key in seen:
            findings.note(
                f"tools {seen[key]!r} and {name!r} differ only by '-' and '_'; a model "
                "may call one for the other"
            )
        seen.setdefault(key, name)


def visible(text: object) -> bool:
    """Whether ``text`` is a string with at least one visible character."""
    return isinstance(text, str) and any(char.isprintable() and not char.isspace() for char in text)


def schema_problem(schema: Mapping[str, Any] | bool, where: str) -> str | None:
    """Why ``schema`` is not valid JSON Schema 2020-12, or ``None`` when it is."""
    try:
        check_schema(schema, where=where)
    except pegboard.SchemaError as error:
        return str(error)
    return None
