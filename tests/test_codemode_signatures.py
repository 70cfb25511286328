"""Code Mode's tool stubs: typed Python signatures from JSON schemas."""

from __future__ import annotations

from typing import Any

import pytest

import pegboard
from pegboard.codemode._signatures import annotation, python_names, signature


def definition(
    name: str = "tool",
    input: dict[str, Any] | None = None,
    output: dict[str, Any] | None = None,
    description: str = "Does a thing.",
) -> pegboard.ToolDefinition:
    schema = input if input is not None else {"type": "object", "additionalProperties": False}
    return pegboard.ToolDefinition(name, description, schema, output)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({"type": ["string", "null"]}, "str | None"),
        ({"type": "array", "items": {"type": "integer"}}, "list[int]"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "dict[str, float]"),
        ({"enum": ["a", "b"]}, "Literal['a', 'b']"),
        ({"const": 3}, "Literal[3]"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "str | int"),
        ({"oneOf": [{"type": "string"}, {}]}, "Any"),
        ({"$ref": "#/$defs/thing"}, "Any"),
        (True, "Any"),
    ],
)
def test_annotations_follow_the_schema(schema: Any, expected: str) -> None:
    assert expected == annotation(schema)


def test_required_arguments_come_first_keyword_only_with_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "default": 10},
            "path": {"type": "string"},
            "flag": {"type": "boolean"},
        },
        "required": ["path"],
    }
    stub = signature("find", definition(input=schema))
    assert stub.startswith(
        "async def find(*, path: str, limit: int = 10, flag: bool = ...) -> str:\n"
    )


def test_the_output_schema_gives_the_return_type_and_shape() -> None:
    output = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string"}}},
            },
            "total": {"type": "integer"},
        },
        "required": ["total"],
    }
    stub = signature("list_them", definition(output=output))
    first = stub.splitlines()[0]
    assert (
        "async def list_them() -> dict[str, Any]:"
        "  # returns {'items': list[{'name': str (optional)}] (optional), 'total': int}"
    ) == first


def test_a_tool_without_input_takes_no_arguments() -> None:
    @pegboard.tool(description="Takes nothing.")
    async def nothing(input: Any, context: pegboard.ToolContext) -> str:
        return "ok"

    stub = signature("nothing", definition(input=dict(nothing.input.json_schema)))
    assert stub.startswith("async def nothing() -> str:")


def test_arguments_that_are_not_identifiers_become_keyword_mapping() -> None:
    schema = {"type": "object", "properties": {"old-name": {"type": "string"}}}
    assert signature("rename", definition(input=schema)).startswith(
        "async def rename(**arguments: Any) -> str:"
    )


def test_the_description_is_the_docstring_and_cannot_close_it() -> None:
    stub = signature("tool", definition(description='Line one.\n\nSays """hi""" \\ there.'))
    assert stub.endswith("    \"\"\"\n    Line one.\n\n    Says '''hi''' \\\\ there.\n    \"\"\"")
    compile(stub + "\n", "<stub>", "exec")


def test_python_names_avoid_keywords_builtins_dashes_and_collisions() -> None:
    names = python_names(
        definition(name) for name in ["read", "print", "class", "a-b", "a_b", "match"]
    )
    assert {
        "read": "read",
        "print_": "print",
        "class_": "class",
        "a_b": "a-b",
        "a_b2": "a_b",
        "match_": "match",
    } == names


async def test_builtin_tools_stubs_compile(
    host: pegboard.Host, workspace: Any, storage_dir: Any, anyio_backend: str
) -> None:
    """Every stub the built-in tools produce is valid Python."""
    async with host.location(workspace, plugins=["builtin"], storage=storage_dir) as location:
        description = location.prepare(code_mode=True).definitions[0].description
    stubs = description.split("```python\n", 1)[1].rsplit("```", 1)[0]
    compile("from typing import Any, Literal\n" + stubs, "<stubs>", "exec")
    for name in ("read", "glob", "grep", "write", "edit", "bash"):
        assert f"async def {name}(*, " in stubs
