"""Python signatures for captured tools, generated from their JSON schemas."""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterable, Mapping
from typing import Any

from pegboard import ToolDefinition

__all__ = ("python_names", "signature")

_SCALARS = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
# Nested object shapes past this depth read as plain dicts: the model needs
# the outline, not a schema dump.
_DEPTH = 3


def python_names(definitions: Iterable[ToolDefinition]) -> dict[str, str]:
    """Map each tool's Python function name to its effective tool name.

    Tool names may hold ``-`` or be keywords or builtins (``print``, ``open``),
    which the program could not call; those get a ``_`` suffix, then a number
    if that is taken too.
    """
    names: dict[str, str] = {}
    for definition in definitions:
        base = definition.name.replace("-", "_")
        if keyword.iskeyword(base) or keyword.issoftkeyword(base) or hasattr(builtins, base):
            base = f"{base}_"
        candidate, number = base, 2
        while candidate in names:
            candidate, number = f"{base}{number}", number + 1
        names[candidate] = definition.name
    return names


def annotation(schema: object, depth: int = 0) -> str:
    """A Python type annotation for one JSON Schema (``Any`` where it cannot say)."""
    if not isinstance(schema, Mapping):
        return "Any"
    if "const" in schema:
        return f"Literal[{_literal(schema['const'])}]"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return f"Literal[{', '.join(_literal(value) for value in schema['enum'])}]"
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            return _union(annotation(option, depth) for option in options)
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union(annotation({**schema, "type": one}, depth) for one in kind)
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        return f"list[{annotation(schema.get('items'), depth + 1)}]"
    if kind == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return f"dict[str, {annotation(extra, depth + 1)}]"
        return "dict[str, Any]"
    return "Any"


def signature(function: str, definition: ToolDefinition) -> str:
    """``async def`` stub text for one tool: keyword-only arguments, the return
    type from the output schema (``str``, the content as text, without one) and
    the tool's description as the docstring.
    """
    schema = definition.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = set(schema.get("required") or ())
    if properties and all(str(key).isidentifier() for key in properties):
        parameters = [
            _parameter(key, properties[key], key in required)
            for key in sorted(properties, key=lambda key: key not in required)
        ]
        arguments = f"*, {', '.join(parameters)}"
    elif properties or schema.get("additionalProperties", True) is not False:
        arguments = "**arguments: Any"
    else:
        arguments = ""
    output = definition.output_schema
    returns = "str" if output is None else annotation(output)
    shape = None if output is None else _shape(output, 0)
    comment = "" if shape is None or shape == returns else f"  # returns {shape}"
    doc = definition.description.strip().replace('"""', "'''").replace("\\", "\\\\")
    body = "\n".join(f"    {line}" if line else "" for line in doc.splitlines())
    return f'async def {function}({arguments}) -> {returns}:{comment}\n    """\n{body}\n    """'


def _parameter(key: str, schema: object, required: bool) -> str:
    text = f"{key}: {annotation(schema, 1)}"
    if required:
        return text
    if isinstance(schema, Mapping) and "default" in schema:
        return f"{text} = {_literal(schema['default'])}"
    return f"{text} = ..."


def _shape(schema: object, depth: int) -> str | None:
    """The keys of an object schema, as ``{'key': type, ...}``; ``None`` if it names none."""
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or not properties or depth >= _DEPTH:
        items = schema.get("items") if schema.get("type") == "array" else None
        inner = None if items is None else _shape(items, depth + 1)
        return None if inner is None else f"list[{inner}]"
    required = set(schema.get("required") or ())
    fields = ", ".join(
        f"{key!r}: {_shape(value, depth + 1) or annotation(value)}"
        + ("" if key in required else " (optional)")
        for key, value in properties.items()
    )
    return f"{{{fields}}}"


def _union(parts: Iterable[str]) -> str:
    unique: list[str] = []
    for part in parts:
        if part == "Any":
            return "Any"
        if part not in unique:
            unique.append(part)
    return " | ".join(unique)


def _literal(value: Any) -> str:
    return repr(value)
