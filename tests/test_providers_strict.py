"""Strict mode: schemas in each provider's strict subset, and the model's input decoded back."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import attrs
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import schema_values

import pegboard
from pegboard.providers import CompatibilityError, anthropic, openai_chat, openai_responses

Context = Callable[..., pegboard.ToolContext]

# What OpenAI documents for strict function schemas; written out here, apart
# from the converter, so the test is an independent check of it.
_OPENAI_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
    "pattern",
    "format",
    "multipleOf",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
}
_ANTHROPIC_UNSUPPORTED = {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "allOf",
    "oneOf",
}


def _subschemas(schema: Any) -> list[Mapping[str, Any]]:
    found, stack = [], [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        found.append(node)
        stack.extend((node.get("properties") or {}).values())
        stack.extend((node.get("$defs") or {}).values())
        stack.extend(node.get("anyOf") or ())
        if "items" in node:
            stack.append(node["items"])
    return found


def assert_openai_strict(schema: Mapping[str, Any]) -> None:
    """OpenAI's strict rules: known keywords, closed objects, every property required."""
    assert "object" == schema["type"]
    for node in _subschemas(schema):
        assert set(node) <= _OPENAI_KEYWORDS, set(node) - _OPENAI_KEYWORDS
        assert "type" in node or "anyOf" in node or "$ref" in node
        assert "$ref" not in node or ["$ref"] == list(node)
        if "properties" in node:
            assert node["additionalProperties"] is False
            assert list(node["properties"]) == node["required"]


def assert_anthropic_strict(schema: Mapping[str, Any]) -> None:
    """Anthropic's strict rules: closed objects, no numeric or length constraints."""
    for node in _subschemas(schema):
        assert not set(node) & _ANTHROPIC_UNSUPPORTED
        if "properties" in node:
            assert node["additionalProperties"] is False


@functools.cache
def board() -> pegboard.Request:
    """A request over the built-in tools and the example plugin's (definitions are inert)."""

    async def prepare() -> pegboard.Request:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            async with pegboard.Host().location(
                root, plugins=["builtin", "tabular"], trusted=["tabular"], storage=root / "s"
            ) as location:
                assert location.plugin_errors == ()
                return location.prepare()

    return anyio.run(prepare)


def _definition(name: str) -> pegboard.ToolDefinition:
    return next(d for d in board().definitions if d.name == name)


def _converted(module: Any, name: str) -> dict[str, Any]:
    request = SimpleNamespace(definitions=(_definition(name),))
    rendered = module.tools(request, strict=True)[0]
    return _parameters(module, rendered)


def _parameters(module: Any, rendered: dict[str, Any]) -> dict[str, Any]:
    if module is openai_chat:
        return dict(rendered["function"]["parameters"])
    if module is openai_responses:
        return dict(rendered["parameters"])
    return dict(rendered["input_schema"])


_NAMES = sorted(d.name for d in board().definitions)


def test_the_board_has_the_builtin_and_example_tools() -> None:
    """The strict tests below cover all six built-ins and the four example tools."""
    assert 10 == len(_NAMES)
    assert {"bash", "edit", "glob", "grep", "read", "write"} < set(_NAMES)


@pytest.mark.parametrize("name", _NAMES)
def test_builtin_and_example_schemas_convert_to_openai_strict(name: str) -> None:
    """Each tool converts, and the result keeps OpenAI's strict rules."""
    converted = _converted(openai_chat, name)
    assert_openai_strict(converted)
    jsonschema.Draft202012Validator.check_schema(converted)
    assert converted == _converted(openai_responses, name)


@pytest.mark.parametrize("name", _NAMES)
def test_builtin_and_example_schemas_convert_to_anthropic_strict(name: str) -> None:
    """Each tool converts for Anthropic, optional properties staying optional."""
    converted = _converted(anthropic, name)
    assert_anthropic_strict(converted)
    original = _definition(name).input_schema
    assert list(original.get("required", ())) == converted.get("required", [])


def _strict_form(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """What a strict-mode model sends for ``value``: null for every property left out."""
    if isinstance(schema, Mapping) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if isinstance(value, dict) and isinstance(schema, Mapping):
        if "anyOf" in schema:
            schema = next(b for b in schema["anyOf"] if b.get("type") == "object")
        properties = schema.get("properties", {})
        return {
            key: _strict_form(value[key], child, root) if key in value else None
            for key, child in properties.items()
        }
    if isinstance(value, list) and isinstance(schema, Mapping):
        if "anyOf" in schema:
            schema = next(b for b in schema["anyOf"] if b.get("type") == "array")
        return [_strict_form(item, schema["items"], root) for item in value]
    return value


def _with_null_defaults(value: Any, schema: Any, root: Mapping[str, Any]) -> Any:
    """``value`` with left-out ``"default": null`` properties written as null."""
    if isinstance(schema, Mapping) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[-1]]
    if isinstance(value, dict) and isinstance(schema, Mapping):
        properties = schema.get("properties", {})
        filled = {
            key: _with_null_defaults(item, properties.get(key), root) for key, item in value.items()
        }
        for key, child in properties.items():
            if key not in filled and "default" in child and child["default"] is None:
                filled[key] = None
        return filled
    if isinstance(value, list) and isinstance(schema, Mapping):
        items = schema.get("items") or next(
            (b["items"] for b in schema.get("anyOf", ()) if b.get("type") == "array"), None
        )
        return [_with_null_defaults(item, items, root) for item in value]
    return value


@st.composite
def _tool_inputs(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(_NAMES))
    schema = _definition(name).input_schema
    return name, draw(schema_values(schema))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(_tool_inputs())
def test_strict_form_input_validates_and_decodes_back(case: tuple[str, Any]) -> None:
    """Any input valid for a tool, sent in strict form, fits the strict schema, and
    strict_input gives back exactly that input (absent "default": null properties as null).
    """
    name, value = case
    schema = _definition(name).input_schema
    jsonschema.validate(value, schema)
    sent = _strict_form(value, schema, schema)
    jsonschema.validate(sent, _converted(openai_chat, name))
    returned = openai_chat.strict_input(board(), name, json.dumps(sent))
    assert isinstance(returned, str)
    assert _with_null_defaults(value, schema, schema) == json.loads(returned)
    assert openai_chat.strict_input(board(), name, sent) == openai_responses.strict_input(
        board(), name, sent
    )


# -- what converts, and how -------------------------------------------------------------


def _convert(schema: dict[str, Any], module: Any = openai_chat) -> dict[str, Any]:
    request = SimpleNamespace(definitions=(pegboard.ToolDefinition("probe", "P.", schema, None),))
    rendered = module.tools(request, strict=True)[0]
    return _parameters(module, rendered)


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def test_optional_properties_become_required_and_nullable() -> None:
    """Optional properties are listed as required and accept null; enums gain null too."""
    schema = {
        **_object(
            a={"type": "string"},
            b={"type": "integer", "default": 3, "description": "How many."},
            c={"enum": ["x", "y"]},
            d={"$ref": "#/$defs/D"},
            e={"const": 1},
        ),
        "required": ["a"],
        "$defs": {"D": _object(k={"type": "string"})},
    }
    converted = _convert(schema)
    assert_openai_strict(converted)
    properties = converted["properties"]
    assert {"type": "string"} == properties["a"]
    assert {
        "type": ["integer", "null"],
        "description": "How many. Optional: send null for the default, 3.",
    } == properties["b"]
    assert ["x", "y", None] == properties["c"]["enum"]
    assert [{"$ref": "#/$defs/D"}, {"type": "null"}] == properties["d"]["anyOf"]
    assert [{"type": "integer", "const": 1}, {"type": "null"}] == properties["e"]["anyOf"]
    assert ["a", "b", "c", "d", "e"] == converted["required"]
    for sent in (
        {"a": "s", "b": None, "c": None, "d": None, "e": None},
        {"a": "s", "b": 1, "c": "x", "d": {"k": "v"}, "e": 1},
    ):
        jsonschema.validate(sent, converted)


def test_openai_drops_what_it_does_not_enforce_and_keeps_what_it_does() -> None:
    """minLength, default and examples go; pattern, minimum and known formats stay."""
    converted = _convert(
        {
            **_object(
                s={"type": "string", "minLength": 2, "pattern": "^a", "examples": ["ab"]},
                n={"type": "number", "minimum": 0, "default": 1},
                f={"type": "string", "format": "uuid"},
                g={"type": "string", "format": "iri-reference"},
            ),
            "required": ["s", "n", "f", "g"],
        }
    )
    properties = converted["properties"]
    assert {"type": "string", "pattern": "^a"} == properties["s"]
    assert {"type": "number", "minimum": 0} == properties["n"]
    assert {"type": "string", "format": "uuid"} == properties["f"]
    assert {"type": "string"} == properties["g"]


def test_anthropic_keeps_optional_properties_and_defaults() -> None:
    """Anthropic's strict mode takes optional properties and defaults, not numeric bounds."""
    converted = _convert(
        {**_object(n={"type": "integer", "minimum": 1, "default": 2}), "required": []}, anthropic
    )
    assert {"type": "integer", "default": 2} == converted["properties"]["n"]
    assert [] == converted["required"]


def test_a_described_reference_keeps_its_description_without_siblings_for_openai() -> None:
    """OpenAI takes nothing beside $ref: the description moves to a one-branch anyOf."""
    schema = {
        **_object(a={"$ref": "#/$defs/A", "description": "The A."}),
        "required": ["a"],
        "$defs": {"A": _object(k={"type": "string"})},
    }
    converted = _convert(schema)
    assert_openai_strict(converted)
    assert {"anyOf": [{"$ref": "#/$defs/A"}], "description": "The A."} == converted["properties"][
        "a"
    ]
    assert {"$ref": "#/$defs/A", "description": "The A."} == _convert(schema, anthropic)[
        "properties"
    ]["a"]


def test_one_of_becomes_any_of() -> None:
    """oneOf is sent as anyOf: it only widens, and the pipeline still checks the original."""
    converted = _convert(
        {**_object(v={"oneOf": [{"type": "string"}, {"type": "integer"}]}), "required": ["v"]}
    )
    assert {"anyOf": [{"type": "string"}, {"type": "integer"}]} == converted["properties"]["v"]


def test_an_object_without_additional_properties_is_closed() -> None:
    """An object that lists its properties but says nothing of others is sent closed."""
    converted = _convert({"type": "object", "properties": {"a": {"type": "string"}}})
    assert converted["additionalProperties"] is False


def test_recursive_schemas_pass_for_openai_and_are_refused_for_anthropic() -> None:
    """OpenAI takes recursive definitions; Anthropic's strict mode does not."""
    schema = {
        **_object(root={"$ref": "#/$defs/Node"}),
        "required": ["root"],
        "$defs": {
            "Node": {
                **_object(children={"type": "array", "items": {"$ref": "#/$defs/Node"}}),
                "required": ["children"],
            }
        },
    }
    assert_openai_strict(_convert(schema))
    with pytest.raises(CompatibilityError) as raised:
        _convert(schema, anthropic)
    assert ("$.$defs.Node", "recursion") == (raised.value.path, raised.value.rule)


_REFUSED = [
    ({**_object(a={"allOf": [{"type": "string"}]})}, "$.properties.a.allOf", "allOf"),
    ({**_object(a={"type": "string", "not": {"const": ""}})}, "$.properties.a.not", "not"),
    (
        {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        "$.additionalProperties",
        "additionalProperties",
    ),
    ({"type": "object"}, "$", "additionalProperties"),
    (_object(a={"description": "anything"}), "$.properties.a", "type"),
    (_object(a={"type": "array"}), "$.properties.a", "items"),
    (
        _object(a={"type": ["string", "null"]}),
        "$.properties.a",
        "optional-null",
    ),
    (
        _object(a={"type": ["string", "null"], "default": "x"}),
        "$.properties.a",
        "optional-null",
    ),
    (_object(a={"$ref": "https://example.com/s.json"}), "$.properties.a.$ref", "$ref"),
    (_object(a={"$ref": "#/$defs/Missing"}), "$.properties.a.$ref", "$ref"),
    ({"anyOf": [{"type": "object"}]}, "$", "root-object"),
    (
        _object(
            a={
                "anyOf": [
                    _object(x={"type": "string"}),
                    _object(y={"type": "string"}),
                ]
            }
        ),
        "$.properties.a.anyOf",
        "anyOf",
    ),
    (
        {**_object(a={"type": "object", "patternProperties": {"^x": {}}}), "required": ["a"]},
        "$.properties.a.patternProperties",
        "patternProperties",
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "array", "prefixItems": [], "items": {"type": "string"}}},
        },
        "$.properties.a.prefixItems",
        "prefixItems",
    ),
    ({**_object(), "required": ["ghost"]}, "$.required", "required"),
]


@pytest.mark.parametrize(("schema", "path", "rule"), _REFUSED)
def test_what_strict_mode_cannot_express_is_refused_with_tool_path_and_rule(
    schema: dict[str, Any], path: str, rule: str
) -> None:
    """CompatibilityError names the tool, the JSON path in its schema and the rule."""
    with pytest.raises(CompatibilityError) as raised:
        _convert(schema)
    error = raised.value
    assert ("probe", path, rule) == (error.tool, error.path, error.rule)
    assert f"tool 'probe' cannot be sent to OpenAI strict mode: at {path}:" in str(error)
    assert f"(rule: {rule})" in str(error)


def test_non_strict_tools_send_schemas_strict_mode_refuses() -> None:
    """strict=False sends the tool's own schema, whatever strict mode would make of it."""
    schema = _object(a={"allOf": [{"type": "string"}]})
    request = SimpleNamespace(definitions=(pegboard.ToolDefinition("probe", "P.", schema, None),))
    assert schema == openai_chat.tools(request)[0]["function"]["parameters"]


def test_an_optional_nullable_property_with_a_null_default_keeps_its_null() -> None:
    """Null already means the default there, so the model's null passes through."""
    converted = _convert(_object(a={"type": ["string", "null"], "default": None}))
    assert {"type": ["string", "null"]} == converted["properties"]["a"]
    assert ["a"] == converted["required"]


# -- strict_input ---------------------------------------------------------------------


_NESTED = {
    "type": "object",
    "properties": {
        "rows": {"type": "array", "items": {"$ref": "#/$defs/Row"}},
        "pick": {"anyOf": [{"$ref": "#/$defs/Row"}, {"type": "string"}]},
        "note": {"type": ["string", "null"], "default": None},
    },
    "required": ["rows"],
    "additionalProperties": False,
    "$defs": {
        "Row": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "tag": {"type": "string"}},
            "required": ["id"],
            "additionalProperties": False,
        }
    },
}


def _request(schema: Mapping[str, Any]) -> Any:
    return SimpleNamespace(definitions=(pegboard.ToolDefinition("nest", "N.", schema, None),))


def test_strict_input_drops_nulls_only_for_left_out_optional_properties() -> None:
    """Nested, behind $ref, inside anyOf; a null the schema accepts is kept."""
    request = _request(_NESTED)
    sent = {
        "rows": [{"id": 1, "tag": None}, {"id": 2, "tag": "b"}],
        "pick": {"id": 3, "tag": None},
        "note": None,
    }
    jsonschema.validate(sent, _convert(dict(_NESTED)))
    assert {
        "rows": [{"id": 1}, {"id": 2, "tag": "b"}],
        "pick": {"id": 3},
        "note": None,
    } == json.loads(openai_chat.strict_input(request, "nest", json.dumps(sent)))
    assert {"rows": [{"id": 1}]} == openai_chat.strict_input(
        request, "nest", {"rows": [{"id": 1, "tag": None}]}
    )
    untouched = {"rows": [], "pick": "p", "note": None}
    assert openai_chat.strict_input(request, "nest", untouched) is untouched
    text = '{"rows": [],   "note": null}'
    assert openai_chat.strict_input(request, "nest", text) is text


def test_strict_input_leaves_a_required_null_for_the_pipeline_to_refuse() -> None:
    """A null where the tool requires a value is not removed: the call still fails clearly."""
    sent = {"rows": None, "pick": None, "note": None}
    assert {"rows": None, "note": None} == openai_chat.strict_input(_request(_NESTED), "nest", sent)


@pytest.mark.parametrize(
    "arguments",
    ["{not json", "[1, 2]", b"\xff", '"text"', "[" * 100_000 + "]" * 100_000],
    ids=["broken", "array", "bytes", "string", "deep"],
)
def test_strict_input_returns_what_it_cannot_read_unchanged(arguments: str | bytes) -> None:
    """Bad JSON or a non-object goes to the pipeline as it came, to fail as invalid input."""
    assert openai_chat.strict_input(_request(_NESTED), "nest", arguments) is arguments


def test_strict_input_leaves_unknown_tools_alone() -> None:
    """An unknown name is the pipeline's to reject; the arguments pass unchanged."""
    sent = {"tag": None}
    assert openai_chat.strict_input(_request(_NESTED), "ghost", sent) is sent


@attrs.frozen
class _Range:
    start: int
    step: int = 1


@attrs.frozen
class _Query:
    term: str
    limit: int = 10
    since: str | None = None
    ranges: list[_Range] = attrs.field(factory=list)


@pytest.mark.anyio
async def test_strict_mode_calls_execute_exactly_as_the_originals(
    location: pegboard.Location, context: Context
) -> None:
    """A strict-form call run through strict_input reaches the tool as the original input."""
    seen: list[_Query] = []

    @pegboard.tool(description="Search.", input=_Query)
    async def search(input: _Query, context: pegboard.ToolContext) -> str:
        seen.append(input)
        return "ok"

    location.tools.register({"search": search})
    request = location.prepare()
    assert_openai_strict(openai_chat.tools(request, strict=True)[0]["function"]["parameters"])
    originals = [
        {"term": "a"},
        {"term": "b", "limit": 3, "ranges": [{"start": 1}, {"start": 2, "step": 5}]},
        {"term": "c", "since": None},
        {"term": "d", "since": "2024"},
    ]
    for original in originals:
        sent = _strict_form(original, search.input.json_schema, search.input.json_schema)
        await request.execute(
            pegboard.ToolCall(
                "search", openai_chat.strict_input(request, "search", json.dumps(sent)), context()
            )
        )
        await request.execute(pegboard.ToolCall("search", original, context()))
    assert seen[0::2] == seen[1::2]
    assert len(seen) == 8
    unconverted = await request.execute(
        pegboard.ToolCall("search", {"term": "x", "limit": None}, context())
    )
    assert isinstance(unconverted, pegboard.Failed)
    assert "invalid_input" == unconverted.error.kind
