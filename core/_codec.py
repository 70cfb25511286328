"""Codecs: the boundary between JSON and the values a tool works with."""

from __future__ import annotations

import json
import re
import types
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

import attrs
import orjson

from ._converter import converter, json_type
from ._errors import CodecError, SchemaError
from ._json import find_problem, format_path, freeze
from ._schema import check_schema, schema_for_attrs

if TYPE_CHECKING:
    import jsonschema
    import jsonschema.exceptions

# jsonschema, jsonschema-rs and cattrs are imported when the first codec is
# built, not when pegboard is imported: a command that makes no tool stays fast.

__all__ = ("AttrsCodec", "Codec", "SchemaCodec", "as_codec", "check_encoded", "encode")

T = TypeVar("T")

#: Codecs check plain-JSON-ness before the schema; values nest at most this deep.
MAX_DEPTH = 64


@runtime_checkable
class Codec(Protocol[T]):
    """Turns raw JSON into a value (``decode``) and a value into JSON (``encode``).

    Both directions validate against ``json_schema`` and raise `pegboard.CodecError`
    (a ``ValueError``) for data that does not fit. A codec is self-contained:
    building or using one needs no service.
    """

    @property
    def json_schema(self) -> Mapping[str, Any]:
        """The JSON Schema (2020-12) of the encoded form."""
        ...

    def decode(self, raw: Any) -> T:
        """Validate raw JSON and turn it into a value."""
        ...

    def encode(self, value: T) -> Any:
        """Turn a value into JSON that is valid against ``json_schema``."""
        ...


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _describe(error: jsonschema.exceptions.ValidationError) -> str:
    # jsonschema's own messages embed the whole offending value; a model only
    # needs its type and a glimpse.
    keyword, instance, expected = error.validator, error.instance, error.validator_value
    if keyword == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        got = json_type(instance)
        if isinstance(instance, str | int | float) and not isinstance(instance, bool):
            got = f"{got} {_short(instance)}"
        return f"expected {wanted}, got {got}"
    if keyword == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, Mapping) else {}
        allowed = set(schema.get("properties", {}))
        extra = sorted(key for key in instance if key not in allowed)
        names = ", ".join(repr(key) for key in extra)
        hint = f"; allowed: {', '.join(sorted(allowed))}" if allowed else ""
        return f"unexpected propert{'y' if len(extra) == 1 else 'ies'} {names}{hint}"
    if keyword in ("enum", "const"):
        return f"{_short(instance)} is not one of {_short(expected, 120)}"
    message = error.message
    return message if len(message) <= 200 else f"{message[:199]}…"


@attrs.define(eq=False)
class _Validator:
    """Accepts quickly with jsonschema-rs; explains (and decides) with jsonschema."""

    schema: Mapping[str, Any]
    _fast: Any = attrs.field(init=False)
    # Built when a value is first refused: accepting never imports jsonschema.
    _slow: jsonschema.Draft202012Validator | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        import jsonschema_rs

        try:
            self._fast = jsonschema_rs.Draft202012Validator(dict(self.schema), offline=True)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as e:
            first = str(e).splitlines()[0]
            raise SchemaError(f"schema cannot be compiled: {first}", keyword="$ref") from None

    def check(self, value: Any) -> CodecError | None:
        try:
            if self._fast.is_valid(value):
                return None
        except ValueError:
            pass  # a type jsonschema-rs cannot read; the explanation names it
        return self.explain(value)

    def explain(self, value: Any) -> CodecError | None:
        problem = find_problem(value, max_depth=MAX_DEPTH)
        if problem is not None:
            return problem
        import jsonschema
        import jsonschema.exceptions

        if self._slow is None:
            self._slow = jsonschema.Draft202012Validator(dict(self.schema))
        try:
            error = jsonschema.exceptions.best_match(self._slow.iter_errors(value))
        except RecursionError:
            return CodecError("value nests too deeply to validate", rule="depth")
        if error is None:
            return None  # jsonschema is the authority: the value is valid
        path = format_path(_linked(error.absolute_path))
        return CodecError(_describe(error), path=path, rule=str(error.validator))


def _linked(parts: Any) -> Any:
    path: Any = None
    for part in parts:
        path = (path, part)
    return path


@attrs.define(eq=False)
class SchemaCodec:
    """A runtime JSON Schema codec: the decoded value is the validated JSON itself.

    This is what MCP and manifest tools use. ``encode`` returns a read-only copy
    so a tool that keeps mutating its value cannot change a settled outcome.
    """

    schema: Mapping[str, Any]
    _frozen: Mapping[str, Any] = attrs.field(init=False)
    _validator: _Validator = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        check_schema(self.schema, where="schema")
        plain = orjson.loads(orjson.dumps(self.schema))
        self._validator = _Validator(plain)
        self._frozen = freeze(plain)

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self._frozen

    def decode(self, raw: Any) -> Any:
        error = self._validator.check(raw)
        if error is not None:
            raise error
        return raw

    def encode(self, value: Any) -> Any:
        problem = find_problem(value, max_depth=MAX_DEPTH)
        if problem is not None:
            raise problem
        error = self._validator.check(value)
        if error is not None:
            raise error
        return freeze(value)


@attrs.define(eq=False)
class AttrsCodec(Generic[T]):
    """An attrs class codec: schema derived from its fields, decoding by cattrs.

    Decoding is strict: ``"1"`` and ``true`` are not integers, unknown keys are
    refused. ``encode`` accepts only instances of the class.
    """

    cls: type[T]
    _frozen: Mapping[str, Any] = attrs.field(init=False)
    _schema: dict[str, Any] = attrs.field(init=False, repr=False)
    #: The schema's validator, compiled on first use: listing tools never needs it.
    _checker: _Validator | None = attrs.field(init=False, default=None)
    _structure: Any = attrs.field(init=False)
    _unstructure: Any = attrs.field(init=False)
    _failures: tuple[type[Exception], ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        import cattrs

        # Valid JSON Schema by construction (tests/test_codec.py holds every derived
        # schema to the meta-schema), so the meta-schema check is not paid here.
        self._schema = schema = schema_for_attrs(self.cls)
        self._frozen = freeze(schema)
        self._failures = (cattrs.BaseValidationError, ValueError, TypeError)
        # Deriving a hook generates and compiles code: the bulk of making a tool.
        # The unstructure hook, which never refuses, is derived on the first encode;
        # the structure hook on the first decode when cattrs certainly decodes every
        # field's type, else now, as that is where cattrs refuses a type: said when
        # the tool is made, not at its first call.
        self._unstructure = self._unstructure_first
        if plainly_decodable(self.cls):
            self._structure = self._structure_first
        else:
            self._structure = self._derive_structure()

    def _derive_structure(self) -> Any:
        import cattrs

        try:
            # Straight from the class: a new class is certain to miss the converter's
            # dispatch, and searching it costs as much again.
            return converter().gen_structure_attrs_fromdict(self.cls)
        except cattrs.StructureHandlerNotFoundError as error:
            # A schema exists for any union; cattrs decodes only some.
            raise SchemaError(
                f"cannot decode {self.cls.__qualname__}: cattrs has no way to decode "
                f"{_type_name(error.type_)}; a union may join str, int, float, bool, None and "
                "Literal values with one other type, or with attrs classes only: wrap the "
                "other members in attrs classes"
            ) from None
        except TypeError as error:  # cattrs cannot tell a union's attrs classes apart
            raise SchemaError(
                f"cannot decode {self.cls.__qualname__}: {error}; give each attrs class of "
                "the union a required field the others lack (a Literal tag field works)"
            ) from None

    def _structure_first(self, raw: Any, cls: type[T]) -> T:
        self._structure = self._derive_structure()
        value: T = self._structure(raw, cls)
        return value

    @property
    def _validator(self) -> _Validator:
        checker = self._checker
        if checker is None:
            checker = self._checker = _Validator(self._schema)
        return checker

    def _unstructure_first(self, value: T) -> Any:
        self._unstructure = converter().get_unstructure_hook(self.cls)
        return self._unstructure(value)

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self._frozen

    def decode(self, raw: Any) -> T:
        # _Validator.check inlined: this runs once per call.
        checker = self._checker or self._validator
        try:
            valid = checker._fast.is_valid(raw)
        except ValueError:
            valid = False  # a type jsonschema-rs cannot read; the explanation names it
        if not valid:
            invalid = checker.explain(raw)
            if invalid is not None:
                raise invalid
        try:
            value: T = self._structure(raw, self.cls)
        except self._failures:
            raise self._explain(raw) from None
        return value

    def _explain(self, raw: Any) -> CodecError:
        # The fast converter says what failed but not where; decoding again with
        # detailed validation names the field.
        import cattrs

        try:
            converter(detailed=True).structure(raw, self.cls)
        except (cattrs.BaseValidationError, ValueError, TypeError) as error:
            reasons = cattrs.transform_error(error, path="$", format_exception=_reason)
        else:  # pragma: no cover - both converters share their hooks
            reasons = ["the value cannot be decoded"]
        reason, _, path = reasons[0].rpartition(" @ ")
        return CodecError(reason or path, path=path if reason else "$", rule="decode")

    def encoded(self, value: T) -> Any:
        """``encode(value)`` for a valid value, else ``None``: no error is built."""
        raw = self._unstructure(value)
        try:
            valid = self._validator._fast.is_valid(raw)
        except ValueError:
            return None
        return raw if valid else None

    def encode(self, value: T) -> Any:
        if not isinstance(value, self.cls):
            raise CodecError(
                f"expected a {self.cls.__qualname__} instance, got {type(value).__name__}",
                rule="type",
            )
        raw = self._unstructure(value)
        error = self._validator.check(raw)
        if error is not None:
            raise error
        return raw


#: Types cattrs decodes whatever they hold (with `_plain_kinds` below).
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), Any})
_PLAIN_CONTAINERS = frozenset({list, tuple, set, frozenset, dict})


def plainly_decodable(cls: type, seen: frozenset[type] = frozenset()) -> bool:
    """Whether cattrs certainly decodes every field of attrs class ``cls``.

    Only unions can be refused, so this is True for fields of plain JSON types,
    ``Literal``, ``X | None`` of such, containers of them and nested attrs
    classes like ``cls``; anything else (a union, an enum, a date) is derived
    when the tool is made.
    """
    try:
        fields = attrs.fields(attrs.resolve_types(cls))
    except Exception:  # noqa: BLE001 - unresolvable hints: let cattrs say what it says
        return False
    return all(_plain_kind(field.type, seen | {cls}) for field in fields)


def _plain_kind(hint: Any, seen: frozenset[type]) -> bool:
    import typing

    if hint in _PLAIN_TYPES:
        return True
    if attrs.has(hint) if isinstance(hint, type) else False:
        return hint in seen or plainly_decodable(hint, seen)
    origin = typing.get_origin(hint)
    arguments = typing.get_args(hint)
    if origin is typing.Literal:
        return True
    if origin in (typing.Union, types.UnionType):
        others = [argument for argument in arguments if argument is not type(None)]
        return len(others) == 1 and len(arguments) == 2 and _plain_kind(others[0], seen)
    if origin in _PLAIN_CONTAINERS:
        members = [argument for argument in arguments if argument is not Ellipsis]
        return all(_plain_kind(member, seen) for member in members)
    return False


_MODULE_PREFIX = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*)")


def _type_name(hint: Any) -> str:
    """``A | list[int]`` as written, without module prefixes."""
    return hint.__name__ if isinstance(hint, type) else _MODULE_PREFIX.sub("", repr(hint))


def _reason(error: BaseException, kind: type | None) -> str:
    if isinstance(error, ValueError | TypeError) and not isinstance(error, KeyError):
        return str(error)
    import cattrs.v

    return cattrs.v.format_exception(error, kind)


# Validators for custom codecs' schemas, built once per codec.
_CHECKS: weakref.WeakKeyDictionary[Any, _Validator] = weakref.WeakKeyDictionary()
_CHECKS_BY_ID: dict[int, tuple[Any, _Validator]] = {}


def _validator(codec: Codec[Any]) -> _Validator:
    if isinstance(codec, AttrsCodec | SchemaCodec):
        return codec._validator
    try:
        found = _CHECKS.get(codec)
    except TypeError:  # not weakly referenceable: kept alive, so its id stays its own
        kept = _CHECKS_BY_ID.get(id(codec))
        found = None if kept is None else kept[1]
        if found is None:
            found = _Validator(orjson.loads(orjson.dumps(codec.json_schema)))
            _CHECKS_BY_ID[id(codec)] = (codec, found)
        return found
    if found is None:
        found = _CHECKS[codec] = _Validator(orjson.loads(orjson.dumps(codec.json_schema)))
    return found


def check_encoded(codec: Codec[Any], value: Any) -> CodecError | None:
    """Why ``value`` is not plain JSON valid against ``codec.json_schema``, or ``None``."""
    problem = find_problem(value, max_depth=MAX_DEPTH)
    if problem is not None:
        return problem
    return _validator(codec).check(value)


def encode(codec: Codec[Any], value: Any) -> Any:
    """``codec.encode(value)``, validated: no codec can turn out invalid JSON.

    pegboard's own codecs validate as they encode; what a custom codec returns
    is checked against its own ``json_schema`` here.
    """
    if type(codec) is AttrsCodec or type(codec) is SchemaCodec:
        return codec.encode(value)
    encoded = codec.encode(value)
    problem = check_encoded(codec, encoded)
    if problem is not None:
        raise problem
    return encoded


_ATTRS_CODECS: weakref.WeakKeyDictionary[type, AttrsCodec[Any]] = weakref.WeakKeyDictionary()

_EMPTY_OBJECT = {"type": "object", "properties": {}, "additionalProperties": False}


def as_codec(spec: Any, *, role: str) -> Codec[Any]:
    """Turn what ``pegboard.tool`` accepts for ``input``/``output`` into a `Codec`."""
    if spec is None:
        codec: Codec[Any] = SchemaCodec(_EMPTY_OBJECT)
    elif isinstance(spec, type) and attrs.has(spec):
        # One codec per class: its schema, validators and cattrs hooks are derived once.
        cached = _ATTRS_CODECS.get(spec)
        if cached is None:
            cached = _ATTRS_CODECS[spec] = AttrsCodec(spec)
        codec = cached
    elif isinstance(spec, Mapping):
        codec = SchemaCodec(spec)
    elif isinstance(spec, Codec):
        check_schema(spec.json_schema, where=f"{role} codec's json_schema")
        codec = spec
    else:
        raise SchemaError(
            f"{role} must be an attrs class, a JSON Schema dict or a pegboard.Codec, "
            f"not {_short(spec)}"
        )
    if role == "input" and codec.json_schema.get("type") != "object":
        raise SchemaError(
            'input schema must describe a JSON object ({"type": "object", ...}): '
            "models send tool arguments as an object",
            keyword="type",
        )
    return codec
