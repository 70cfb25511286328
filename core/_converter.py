"""The one cattrs converter, strict about JSON types."""

from __future__ import annotations

import contextlib
import datetime
import functools
import uuid
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cattrs

__all__ = ("converter", "json_type")

_JSON_TYPES: dict[type, str] = {
    dict: "object",
    list: "array",
    tuple: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def json_type(value: Any) -> str:
    """The JSON name of a value's type (frozen JSON's too), else its class's name."""
    found = _JSON_TYPES.get(type(value))
    if found is not None:
        return found
    if isinstance(value, Mapping):
        return "object"
    for kind, name in _JSON_TYPES.items():  # subclasses; bool is listed before int
        if kind is not dict and isinstance(value, kind):
            return name
    return type(value).__name__


def _strict_int(value: Any, _: type) -> int:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)  # JSON Schema counts 2.0 as an integer
    raise TypeError(f"expected an integer, got {json_type(value)}")


def _strict_float(value: Any, _: type) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            digits = int(value.bit_length() * 0.30103) + 1
            raise ValueError(
                f"expected a number, got an integer of about {digits:,} digits, beyond the "
                "largest a number holds (about 1.8e308)"
            ) from None
    raise TypeError(f"expected a number, got {json_type(value)}")


def _strict_str(value: Any, _: type) -> str:
    if type(value) is str:
        return value
    raise TypeError(f"expected a string, got {json_type(value)}")


def _strict_bool(value: Any, _: type) -> bool:
    if type(value) is bool:
        return value
    raise TypeError(f"expected a boolean, got {json_type(value)}")


def _strict_none(value: Any, _: type) -> None:
    if value is not None:
        raise TypeError(f"expected null, got {json_type(value)}")


def _text(value: Any, kind: str) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string holding {kind}, got {json_type(value)}")
    return value


def _datetime(value: Any, _: type) -> datetime.datetime:
    text = _text(value, "an RFC 3339 date-time")
    if len(text) < 11 or text[10] not in "Tt ":
        raise ValueError(f"expected an RFC 3339 date-time like 2024-05-01T12:00:00Z, got {text!r}")
    return datetime.datetime.fromisoformat(text)


def _date(value: Any, _: type) -> datetime.date:
    text = _text(value, "a date")
    if len(text) != 10:
        raise ValueError(f"expected a date like 2024-05-01, got {text!r}")
    return datetime.date.fromisoformat(text)


def _uuid(value: Any, _: type) -> uuid.UUID:
    return uuid.UUID(_text(value, "a UUID"))


def _array(items: Iterable[Any]) -> list[Any]:
    # A set has no order; sorting makes the encoded output (and the content
    # serialized from it) the same on every run.
    listed = list(items)
    with contextlib.suppress(TypeError):  # elements that do not compare keep the set's order
        listed.sort()
    return listed


def _isoformat(value: datetime.date) -> str:
    return value.isoformat()


@functools.cache
def converter(*, detailed: bool = False) -> cattrs.Converter:
    """The one cattrs converter: strict primitives, unknown keys rejected.

    Built on first use, so importing pegboard stays cheap. Values reach it
    already validated against the schema, so detailed validation, which would
    only slow the common path, is used (``detailed=True``) just to say where a
    value the schema passed could not be decoded.
    """
    import cattrs
    from cattrs.strategies import configure_union_passthrough

    made = cattrs.Converter(
        forbid_extra_keys=True,
        detailed_validation=detailed,
        # JSON has arrays, not sets.
        unstruct_collection_overrides={AbstractSet: _array},
    )
    made.register_structure_hook(datetime.datetime, _datetime)
    made.register_structure_hook(datetime.date, _date)
    made.register_structure_hook(uuid.UUID, _uuid)
    made.register_unstructure_hook(datetime.datetime, _isoformat)
    made.register_unstructure_hook(datetime.date, _isoformat)
    made.register_unstructure_hook(uuid.UUID, str)
    made.register_structure_hook(int, _strict_int)
    made.register_structure_hook(float, _strict_float)
    made.register_structure_hook(str, _strict_str)
    made.register_structure_hook(bool, _strict_bool)
    made.register_structure_hook(type(None), _strict_none)
    configure_union_passthrough(int | float | str | bool | None, made)
    return made
