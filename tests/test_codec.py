"""Codecs: schemas derived from attrs classes, strict decoding, runtime JSON Schema."""

from __future__ import annotations

import datetime
import enum
import json
import subprocess
import sys
import uuid
from typing import Any, ClassVar, Literal

import attrs
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pegboard
from pegboard._codec import _Validator


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


@attrs.frozen
class Point:
    """A point on the board."""

    x: int
    y: int


@attrs.frozen
class Everything:
    text: str = attrs.field(metadata={"description": "Some text"})
    count: int
    ratio: float
    flag: bool
    nothing: None
    maybe: int | None
    either: int | str
    mode: Literal["fast", "slow"]
    color: Color
    tags: list[str]
    pair: tuple[int, str]
    many: tuple[int, ...]
    unique: set[int]
    scores: dict[str, float]
    where: Point
    path: list[Point]
    limit: int = 10
    names: list[str] = attrs.field(factory=list)


def test_attrs_schema_covers_every_supported_type() -> None:
    """Every supported field type gets the JSON Schema a model needs."""
    schema = pegboard.AttrsCodec(Everything).json_schema
    expected = {
        "text": {"type": "string", "description": "Some text"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "nothing": {"type": "null"},
        "maybe": {"type": ["integer", "null"]},
        "either": {"type": ["integer", "string"]},
        "mode": {"enum": ["fast", "slow"]},
        "color": {"enum": ["red", "green"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
            "minItems": 2,
            "maxItems": 2,
        },
        "many": {"type": "array", "items": {"type": "integer"}},
        "unique": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "where": {"$ref": "#/$defs/Point"},
        "path": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        "limit": {"type": "integer", "default": 10},
        "names": {"type": "array", "items": {"type": "string"}, "default": []},
    }
    assert expected == schema["properties"]
    assert [name for name in expected if name not in ("limit", "names")] == schema["required"]
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
        "additionalProperties": False,
        "description": "A point on the board.",
    }


def test_attrs_codec_decodes_into_the_class() -> None:
    """Valid JSON decodes into instances, nested classes, enums, sets and tuples."""
    raw = {
        "text": "t",
        "count": 1,
        "ratio": 2,
        "flag": True,
        "nothing": None,
        "maybe": None,
        "either": "s",
        "mode": "fast",
        "color": "green",
        "tags": ["a"],
        "pair": [1, "b"],
        "many": [1, 2],
        "unique": [3, 4],
        "scores": {"a": 1.5},
        "where": {"x": 1, "y": 2},
        "path": [{"x": 3, "y": 4}],
    }
    value = pegboard.AttrsCodec(Everything).decode(raw)
    assert value == Everything(
        text="t",
        count=1,
        ratio=2.0,
        flag=True,
        nothing=None,
        maybe=None,
        either="s",
        mode="fast",
        color=Color.GREEN,
        tags=["a"],
        pair=(1, "b"),
        many=(1, 2),
        unique={3, 4},
        scores={"a": 1.5},
        where=Point(1, 2),
        path=[Point(3, 4)],
    )
    assert isinstance(value.ratio, float)


@pytest.mark.parametrize(
    ("raw", "path", "rule"),
    [
        ({"x": "1", "y": 2}, "$.x", "type"),
        ({"x": True, "y": 2}, "$.x", "type"),
        ({"x": 2.5, "y": 2}, "$.x", "type"),
        ({"x": None, "y": 2}, "$.x", "type"),
        ({"x": 1}, "$", "required"),
        ({"x": 1, "y": 2, "z": 3}, "$", "additionalProperties"),
        ([1, 2], "$", "type"),
        (None, "$", "type"),
    ],
)
def test_attrs_codec_is_strict(raw: Any, path: str, rule: str) -> None:
    """Strings, booleans and fractions are not integers; unknown keys are refused."""
    with pytest.raises(pegboard.CodecError) as caught:
        pegboard.AttrsCodec(Point).decode(raw)
    assert (path, rule) == (caught.value.path, caught.value.rule)


def test_integral_floats_are_integers_as_json_schema_says() -> None:
    """2.0 is an integer in JSON Schema, and decodes to the int 2."""
    value = pegboard.AttrsCodec(Point).decode({"x": 2.0, "y": 3})
    assert Point(2, 3) == value
    assert type(value.x) is int


def test_attrs_codec_encodes_only_instances_of_its_class() -> None:
    """Encoding takes an instance and checks what it holds against the schema."""
    codec = pegboard.AttrsCodec(Point)
    assert codec.encode(Point(1, 2)) == {"x": 1, "y": 2}
    with pytest.raises(pegboard.CodecError, match="expected a Point instance, got dict"):
        codec.encode({"x": 1, "y": 2})
    with pytest.raises(pegboard.CodecError) as caught:
        codec.encode(Point("1", 2))  # type: ignore[arg-type]
    assert caught.value.path == "$.x"


def test_nan_output_is_not_valid_json() -> None:
    """A float field holding NaN never encodes: JSON has no NaN."""

    @attrs.frozen
    class Measure:
        value: float

    with pytest.raises(pegboard.CodecError, match="NaN"):
        pegboard.AttrsCodec(Measure).encode(Measure(float("nan")))


@attrs.frozen
class Node:
    name: str
    children: list[Node] = attrs.field(factory=list)


@attrs.frozen
class Event:
    when: complex


def test_recursive_classes_use_defs() -> None:
    """A class that contains itself refers to its own definition."""
    codec = pegboard.AttrsCodec(Node)
    schema = codec.json_schema
    assert (schema["properties"]["children"]) == {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
        "default": [],
    }
    tree = codec.decode({"name": "a", "children": [{"name": "b"}]})
    assert Node("a", [Node("b")]) == tree


def test_unsupported_field_type_names_the_field() -> None:
    """A field type with no JSON Schema is refused when the tool is made."""
    with pytest.raises(pegboard.SchemaError, match=r"Event\.when"):
        pegboard.AttrsCodec(Event)


@attrs.frozen
class Loose:
    items: list
    mapping: dict
    pair: tuple
    tags: set
    empty: tuple[()] = ()


def test_bare_collections_hold_any_json() -> None:
    """A bare ``list``, ``dict``, ``tuple`` or ``set`` annotation means any items, as ``[Any]``."""
    codec = pegboard.AttrsCodec(Loose)
    properties = codec.json_schema["properties"]
    assert {"type": "array", "items": {}} == properties["items"] == properties["pair"]
    assert {"type": "object", "additionalProperties": {}} == properties["mapping"]
    assert {"type": "array", "items": {}, "uniqueItems": True} == properties["tags"]
    assert {"type": "array", "maxItems": 0, "default": []} == properties["empty"]
    raw = {"items": [1, "a", None], "mapping": {"k": [1]}, "pair": [1, "b"], "tags": ["x"]}
    assert Loose([1, "a", None], {"k": [1]}, (1, "b"), {"x"}) == codec.decode(raw)
    with pytest.raises(pegboard.CodecError, match=r"\$\.empty"):
        codec.decode({**raw, "empty": [1]})


@attrs.frozen
class Circle:
    radius: float


@attrs.frozen
class Ball:
    radius: float


@attrs.frozen
class Shapes:
    shape: Circle | Ball


def test_a_union_cattrs_cannot_tell_apart_is_refused_when_the_tool_is_made() -> None:
    """Two classes with the same fields make an ambiguous union: a SchemaError, not a TypeError."""
    with pytest.raises(pegboard.SchemaError, match=r"cannot decode Shapes: .*Literal tag"):
        pegboard.tool(description="Shapes.", execute=_never, input=Shapes)


@pytest.mark.parametrize(
    ("hint", "shown"),
    [
        (Circle | list[int], "Circle | list[int]"),
        (datetime.datetime | Circle, "datetime | Circle"),
        (dict[str, int] | list[str], "dict[str, int] | list[str]"),
    ],
)
def test_a_union_cattrs_cannot_decode_is_refused_when_the_tool_is_made(
    hint: Any, shown: str
) -> None:
    """A schema exists for any union, but a tool whose input cattrs cannot decode is refused."""
    spec = attrs.frozen(type("Holder", (), {"__annotations__": {"value": hint}}))
    with pytest.raises(pegboard.SchemaError) as caught:
        pegboard.tool(description="Holder.", execute=_never, input=spec)
    assert f"cannot decode Holder: cattrs has no way to decode {shown};" in str(caught.value)
    assert "wrap the other members in attrs classes" in str(caught.value)


async def _never(input: object, context: pegboard.ToolContext) -> None:
    raise AssertionError("never called")


def test_schema_codec_returns_the_validated_json() -> None:
    """A runtime schema codec decodes to the JSON itself, after validating it."""
    codec = pegboard.SchemaCodec(
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    )
    assert codec.decode({"q": "x"}) == {"q": "x"}
    with pytest.raises(pegboard.CodecError, match="'q' is a required property"):
        codec.decode({})


def test_schema_codec_encode_copies() -> None:
    """Encoding returns a copy, so later mutation cannot change a settled output."""
    codec = pegboard.SchemaCodec({"type": "object"})
    value = {"items": [1]}
    encoded = codec.encode(value)
    value["items"].append(2)
    assert encoded == {"items": [1]}


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "strin"}, "type"),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "type"),
        ({"type": "object", "required": "a"}, "required"),
        ({"type": "object", "properties": {"a": {"minimum": "3"}}}, "minimum"),
    ],
)
def test_bad_schema_names_the_keyword(schema: dict[str, Any], keyword: str) -> None:
    """A schema that breaks the 2020-12 meta-schema raises SchemaError naming the keyword."""
    with pytest.raises(pegboard.SchemaError) as caught:
        pegboard.tool(description="d", execute=lambda i, c: "x", input=schema)
    assert keyword == caught.value.keyword
    assert isinstance(caught.value, ValueError)
    assert repr(keyword) in str(caught.value)


def test_unresolvable_ref_is_a_schema_error() -> None:
    """A $ref that cannot be resolved offline is refused when the tool is made."""
    with pytest.raises(pegboard.SchemaError, match="cannot be compiled"):
        pegboard.SchemaCodec({"type": "object", "$ref": "https://example.invalid/schema.json"})


def test_input_schema_must_describe_an_object() -> None:
    """Models send arguments as an object, so an input schema must say so."""
    with pytest.raises(pegboard.SchemaError, match="JSON object"):
        pegboard.tool(description="d", execute=lambda i, c: "x", input={"type": "string"})


def test_custom_codec_is_used_as_is_and_checked() -> None:
    """Any object with json_schema, decode and encode is a Codec; its schema is checked."""

    class Upper:
        json_schema: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {"s": {"type": "string"}},
        }

        def decode(self, raw: Any) -> str:
            return str(raw["s"]).upper()

        def encode(self, value: Any) -> Any:
            return value

    codec = Upper()
    made = pegboard.tool(description="d", execute=lambda i, c: i, input=codec)
    assert made.input is codec

    class Broken(Upper):
        json_schema: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {"s": {"type": "text"}},
        }

    with pytest.raises(pegboard.SchemaError, match="'type'"):
        pegboard.tool(description="d", execute=lambda i, c: i, input=Broken())


def test_schemas_are_read_only_but_still_dicts() -> None:
    """Advertised schemas cannot be mutated in place, yet serialize like dicts."""
    import copy
    import json

    schema = pegboard.AttrsCodec(Point).json_schema
    assert isinstance(schema, dict)
    with pytest.raises(TypeError, match="read-only"):
        schema["type"] = "array"  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        schema["required"].append("z")
    assert json.loads(json.dumps(schema)) == schema
    thawed = copy.deepcopy(schema)
    thawed["required"].append("z")
    assert thawed["required"] == ["x", "y", "z"]
    assert pegboard.thaw(schema)["required"] == ["x", "y"]


# The fast validator (jsonschema-rs) only ever accepts early; jsonschema stays the
# authority. These properties show the two agree on the schemas pegboard derives.
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["text", "count", "x", "y", "name", "children"]), children
        )
    ),
    max_leaves=10,
)


_SCHEMAS = {
    cls: pegboard.thaw(pegboard.AttrsCodec(cls).json_schema) for cls in (Everything, Point, Node)
}
_VALIDATORS = {
    cls: (_Validator(schema)._fast, jsonschema.Draft202012Validator(schema))
    for cls, schema in _SCHEMAS.items()
}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_VALIDATORS, key=repr)), _json)
def test_fast_and_authoritative_validators_agree(cls: type, value: Any) -> None:
    """jsonschema-rs and jsonschema give the same verdict on arbitrary JSON."""
    fast, authority = _VALIDATORS[cls]
    assert authority.is_valid(value) == fast.is_valid(value)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["x", "y", "z"]), _json, max_size=3))
def test_validators_agree_on_point_shaped_values(value: dict[str, Any]) -> None:
    """Near-miss objects get the same verdict from both validators."""
    fast, authority = _VALIDATORS[Point]
    assert authority.is_valid(value) == fast.is_valid(value)


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 2


@attrs.frozen
class Appointment:
    """When and with whom."""

    when: datetime.datetime
    day: datetime.date
    id: uuid.UUID
    size: Size
    color: Color
    mode: Literal["online", "in person"]
    where: Point | None
    guests: frozenset[str]
    rooms: set[int]
    note: str | None = None


APPOINTMENT = Appointment(
    when=datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC),
    day=datetime.date(2024, 5, 1),
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    size=Size.LARGE,
    color=Color.GREEN,
    mode="online",
    where=Point(1, 2),
    guests=frozenset({"ada"}),
    rooms={7, 9},
)


def test_law_codec_boundary_rich_attrs_types_round_trip() -> None:
    """datetime, date, UUID, enums, Literal, Optional, nested classes and sets round-trip."""
    codec = pegboard.AttrsCodec(Appointment)
    properties = codec.json_schema["properties"]
    assert {"type": "string", "format": "date-time"} == properties["when"]
    assert {"type": "string", "format": "date"} == properties["day"]
    assert {"type": "string", "format": "uuid"} == properties["id"]
    assert {"enum": [1, 2]} == properties["size"]
    assert {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]} == properties["where"]
    encoded = codec.encode(APPOINTMENT)
    assert {
        "when": "2024-05-01T12:30:00+00:00",
        "day": "2024-05-01",
        "id": "12345678-1234-5678-1234-567812345678",
        "size": 2,
        "color": "green",
        "mode": "online",
        "where": {"x": 1, "y": 2},
        "guests": ["ada"],
        "rooms": [7, 9],
        "note": None,
    } == encoded
    jsonschema.validate(encoded, codec.json_schema)
    assert APPOINTMENT == codec.decode(encoded)
    assert APPOINTMENT == codec.decode(json.loads(json.dumps(encoded)))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("when", "yesterday", "expected an RFC 3339 date-time"),
        ("when", "2024-05-01", "expected an RFC 3339 date-time"),
        ("day", "2024-13-01", "month must be in 1..12"),
        ("id", "not-a-uuid", "badly formed hexadecimal UUID string"),
    ],
)
def test_decoding_errors_name_the_field(field: str, value: str, message: str) -> None:
    """A value the schema passes but the class cannot take names its field and the reason."""
    raw = pegboard.AttrsCodec(Appointment).encode(APPOINTMENT)
    with pytest.raises(pegboard.CodecError) as caught:
        pegboard.AttrsCodec(Appointment).decode({**raw, field: value})
    assert f"$.{field}" == caught.value.path
    assert message in caught.value.message


class Tolerant:
    """A custom codec without a __weakref__ slot, returning what it is given."""

    __slots__ = ()

    @property
    def json_schema(self) -> Any:
        return {"type": "object", "properties": {"n": {"type": "integer"}}}

    def decode(self, raw: Any) -> Any:
        return raw

    def encode(self, value: Any) -> Any:
        return value


class WeaklyHeld(Tolerant):
    """The same codec, weakly referenceable."""

    __slots__ = ("__weakref__",)


@pytest.mark.parametrize("make", [Tolerant, WeaklyHeld])
def test_a_custom_codec_is_held_to_its_own_schema(make: type[Tolerant]) -> None:
    """What a custom codec encodes is checked against its own schema and for plain JSON."""
    from pegboard._codec import encode

    codec = make()
    for _ in range(2):  # the second time uses the validator built the first
        assert {"n": 2**80} == encode(codec, {"n": 2**80})
        with pytest.raises(pegboard.CodecError, match="expected integer"):
            encode(codec, {"n": "1"})
        with pytest.raises(pegboard.CodecError, match="NaN"):
            encode(codec, {"n": float("nan")})


def test_one_codec_per_attrs_class() -> None:
    """Tools sharing an attrs class share its codec: the schema and hooks are derived once."""

    @attrs.frozen
    class Shared:
        a: int

    async def run(input: Shared, context: pegboard.ToolContext) -> str:
        return "ok"

    first = pegboard.tool(description="First.", execute=run, input=Shared)
    second = pegboard.tool(description="Second.", execute=run, input=Shared, output=Shared)
    assert first.input is second.input is second.output


def test_valid_schemas_are_accepted_without_jsonschema() -> None:
    """Accepting valid schemas and values uses jsonschema-rs; jsonschema only explains."""
    script = """
import sys, attrs, anyio, pegboard

@attrs.frozen
class Pair:
    a: int
    b: list[str]

async def run(input, context):
    return Pair(input.a, input.b)

tool = pegboard.tool(description="Echo.", execute=run, input=Pair, output=Pair)
schema = pegboard.tool(description="Any.", execute=run, input={"type": "object"})
assert tool.input.decode({"a": 1, "b": ["x"]}) == Pair(1, ["x"])
assert tool.output.encode(Pair(2, [])) == {"a": 2, "b": []}
print(sorted(name for name in sys.modules if name.split(".")[0] == "jsonschema"))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert "[]" == result.stdout.strip()


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"type": "strin"}, "type"),
        ({"minLength": -1}, "minLength"),
        ({"properties": {"a": {"type": 3}}}, "type"),
        ({"items": [{"type": "string"}]}, "items"),
        ({"required": "a"}, "required"),
    ],
)
def test_fast_meta_check_still_refuses_invalid_schemas(
    schema: dict[str, Any], keyword: str
) -> None:
    """A schema the meta-schema refuses is refused, named by jsonschema's explanation."""
    with pytest.raises(pegboard.SchemaError, match=f"keyword '{keyword}'"):
        pegboard.tool(description="Bad.", execute=lambda i, c: "", input=schema)


def test_every_derived_schema_is_valid_json_schema_2020_12() -> None:
    """AttrsCodec skips the meta-schema check: what it derives must pass it anyway."""
    import jsonschema

    from pegboard._schema import schema_for_attrs
    from pegboard.plugins_builtin import _files, _search, _shell

    classes = [Everything, Point, Shapes, Circle, Ball]
    for module in (_files, _search, _shell):
        classes += [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and attrs.has(value)
            and value.__module__ == module.__name__
            and value.__name__.endswith("Input")
        ]
    assert len(classes) > 8
    for cls in classes:
        jsonschema.Draft202012Validator.check_schema(schema_for_attrs(cls))


def test_a_plainly_decodable_class_gets_its_decoder_at_the_first_decode() -> None:
    """Listing tools pays for no decoder; a class cattrs may refuse is judged at once."""
    from pegboard._codec import plainly_decodable

    @attrs.frozen
    class Later:
        name: str
        where: Point | None = None
        tags: tuple[str, ...] = ()
        mode: Literal["a", "b"] = "a"

    codec = pegboard.AttrsCodec(Later)
    assert codec._checker is None  # the validator waits for a value too
    assert plainly_decodable(Later)
    assert Later("x", Point(1, 2)) == codec.decode({"name": "x", "where": {"x": 1, "y": 2}})
    assert codec._checker is not None
    assert not plainly_decodable(Shapes)  # a union of classes: derived when made
    assert not plainly_decodable(Everything)  # int | str, an enum


def test_messages_name_json_types_of_frozen_json_and_subclasses() -> None:
    """A value's JSON type is named for frozen JSON and subclasses as for plain JSON."""
    from types import MappingProxyType

    from pegboard._converter import json_type

    class Word(str):
        pass

    class Flag(enum.IntEnum):
        ON = 1

    values = [MappingProxyType({}), {}, (), [], Word("a"), True, Flag.ON, 1.5, None, b"x"]
    assert [
        "object", "object", "array", "array", "string", "boolean", "integer", "number", "null",
        "bytes",
    ] == [json_type(value) for value in values]  # fmt: skip


@pytest.mark.parametrize("big", [10**400, -(10**1000)], ids=["400 digits", "negative"])
def test_an_integer_beyond_a_float_is_invalid_input_where_a_number_is_wanted(big: int) -> None:
    """A JSON integer too large for a float, where the class wants a float, is invalid input
    naming the field, not an OverflowError out of the codec."""

    @attrs.frozen
    class Wait:
        seconds: float

    with pytest.raises(pegboard.CodecError) as raised:
        pegboard.AttrsCodec(Wait).decode({"seconds": big})
    assert "$.seconds" == raised.value.path
    assert "beyond the largest a number holds (about 1.8e308)" in str(raised.value)
