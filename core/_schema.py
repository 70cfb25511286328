"""JSON Schema: deriving it from attrs classes and checking it against 2020-12."""

from __future__ import annotations

import datetime
import enum
import functools
import types
import typing
import uuid
from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import attrs

from ._converter import converter
from ._errors import SchemaError

if TYPE_CHECKING:
    import jsonschema
from ._json import find_problem

__all__ = ("check_schema", "schema_for_attrs")

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    bool: {"type": "boolean"},
    int: {"type": "integer"},
    float: {"type": "number"},
    type(None): {"type": "null"},
    None: {"type": "null"},
    Any: {},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    uuid.UUID: {"type": "string", "format": "uuid"},
}

_BARE_COLLECTIONS = frozenset({list, tuple, set, frozenset, dict})


def check_schema(schema: object, *, where: str) -> None:
    """Raise `SchemaError` unless ``schema`` is valid JSON Schema 2020-12.

    The message names the offending keyword and its place in the schema.
    """
    if not isinstance(schema, Mapping | bool):
        raise SchemaError(
            f"{where} must be a JSON Schema object, got {type(schema).__name__}",
            keyword=None,
        )
    problem = find_problem(schema, max_depth=256)
    if problem is not None:
        raise SchemaError(f"{where} is not plain JSON: {problem}", path=problem.path)
    try:
        if _fast_meta_validator().is_valid(schema):
            return
    except ValueError:
        pass  # something jsonschema-rs cannot read; jsonschema decides and explains
    # jsonschema is the authority: it names the error, and a schema it accepts is accepted.
    import jsonschema.exceptions

    error = jsonschema.exceptions.best_match(_meta_validator().iter_errors(schema))
    if error is None:
        return
    keys = [str(part) for part in error.absolute_path]
    keyword = next((key for key in reversed(keys) if not key.isdigit()), error.validator)
    location = "/".join(keys) or "(root)"
    raise SchemaError(
        f"{where} is not valid JSON Schema 2020-12: keyword {keyword!r} at {location}: "
        f"{error.message}",
        keyword=str(keyword),
        path=location,
    )


@functools.cache
def _fast_meta_validator() -> Any:
    # The 2020-12 meta-schema compiled once by jsonschema-rs, which bundles it:
    # accepting a valid schema costs microseconds, not the milliseconds of a
    # pure-Python meta-schema walk.
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator({"$ref": _META_SCHEMA}, offline=True)


_META_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


@functools.cache
def _meta_validator() -> jsonschema.Draft202012Validator:
    # jsonschema is imported on first use: importing pegboard stays cheap.
    import jsonschema

    meta = jsonschema.Draft202012Validator.META_SCHEMA
    return jsonschema.Draft202012Validator(meta)


def schema_for_attrs(cls: type) -> dict[str, Any]:
    """Derive an object schema from an attrs class; nested classes go in ``$defs``."""
    defs: dict[str, dict[str, Any]] = {}
    schema = _Deriver(defs).object_schema(cls, top=True)
    if defs:
        schema["$defs"] = defs
    return schema


class _Deriver:
    def __init__(self, defs: dict[str, dict[str, Any]]) -> None:
        self.defs = defs
        self.names: dict[type, str] = {}

    def object_schema(self, cls: type, *, top: bool = False) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(cls)
        except (NameError, TypeError) as error:
            raise SchemaError(
                f"cannot resolve the field types of {cls.__qualname__}: {error}"
            ) from None
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            where = f"{cls.__qualname__}.{field.name}"
            prop = dict(self.type_schema(hints.get(field.name, field.type), where))
            description = field.metadata.get("description")
            if description is not None:
                prop["description"] = str(description)
            if field.default is attrs.NOTHING:
                required.append(field.name)
            else:
                default = _json_default(field.default)
                if default is not attrs.NOTHING:
                    prop["default"] = default
            properties[field.name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        if not top and cls.__doc__:
            schema["description"] = cls.__doc__.strip()
        return schema

    def type_schema(self, hint: Any, where: str) -> dict[str, Any]:
        if hint in _SCALARS:
            return dict(_SCALARS[hint])
        # A bare ``list`` or ``dict`` holds anything, as ``list[Any]`` would.
        origin = typing.get_origin(hint) or (hint if hint in _BARE_COLLECTIONS else None)
        args = typing.get_args(hint)
        if origin is typing.Annotated:
            return self.type_schema(args[0], where)
        if origin is typing.Literal:
            if not all(isinstance(arg, str | int | float | bool | None) for arg in args):
                raise SchemaError(f"{where}: Literal values must be JSON scalars")
            return {"const": args[0]} if len(args) == 1 else {"enum": list(args)}
        if origin is typing.Union or origin is types.UnionType:
            members = [self.type_schema(arg, where) for arg in args]
            simple = [m.get("type") for m in members if set(m) == {"type"}]
            if len(simple) == len(members):
                return {"type": simple}
            return {"anyOf": members}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            values = [member.value for member in hint]
            if not all(isinstance(value, str | int | float | bool | None) for value in values):
                raise SchemaError(f"{where}: enum {hint.__name__} must have JSON scalar values")
            return {"enum": values}
        if isinstance(hint, type) and attrs.has(hint):
            return {"$ref": f"#/$defs/{self.define(hint)}"}
        if origin in (list, Sequence, MutableSequence):
            return {"type": "array", "items": self.type_schema(_only(args), where)}
        if origin in (set, frozenset, AbstractSet):
            items = self.type_schema(_only(args), where)
            return {"type": "array", "items": items, "uniqueItems": True}
        if origin is tuple:
            if hint is tuple:
                return {"type": "array", "items": {}}
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.type_schema(args[0], where)}
            if not args:  # tuple[()]
                return {"type": "array", "maxItems": 0}
            prefix = [self.type_schema(arg, where) for arg in args]
            count = len(prefix)
            return {
                "type": "array",
                "prefixItems": prefix,
                "items": False,
                "minItems": count,
                "maxItems": count,
            }
        if origin in (dict, Mapping, MutableMapping):
            key, value = args or (str, Any)
            if key is not str:
                raise SchemaError(f"{where}: JSON object keys are strings, not {key!r}")
            return {"type": "object", "additionalProperties": self.type_schema(value, where)}
        raise SchemaError(
            f"{where}: {hint!r} has no JSON Schema; use str, int, float, bool, None, "
            "datetime, date, UUID, Literal, an Enum, list/tuple/set, dict[str, T], a union of "
            "these, or an attrs class"
        )

    def define(self, cls: type) -> str:
        name = self.names.get(cls)
        if name is not None:
            return name
        name = cls.__name__
        taken = set(self.names.values())
        suffix = 2
        while name in taken:
            name = f"{cls.__name__}{suffix}"
            suffix += 1
        self.names[cls] = name
        # Reserve the name before descending, so recursive classes terminate.
        self.defs[name] = {}
        self.defs[name] = self.object_schema(cls)
        return name


def _only(args: tuple[Any, ...]) -> Any:
    return args[0] if args else Any


def _json_default(default: Any) -> Any:
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return attrs.NOTHING
        default = default.factory()
    # Plain JSON needs no converter (building one is the dearer part of listing tools).
    value = default if type(default) in _PLAIN_DEFAULTS else converter().unstructure(default)
    return value if find_problem(value, max_depth=64) is None else attrs.NOTHING


_PLAIN_DEFAULTS = frozenset({str, int, float, bool, type(None)})
