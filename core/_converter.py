"""The one cattrs converter, strict about JSON types."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import cattrs

__all__ = ("converter", "json_type")

_JSON_TYPES = {
    dict: "object",
    list: "array",
    tuple: "array",
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def json_type(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _strict_int(value: Any, _: type) -> int:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)  # JSON Schema counts 2.0 as an integer
    raise TypeError(f"expected an integer, got {json_type(value)}")


def _strict_float(value: Any, _: type) -> float:
    if type(value) is float or type(value) is int:
        return float(value)
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


@functools.cache
def converter() -> cattrs.Converter:
    """The one cattrs converter: strict primitives, unknown keys rejected.

    Built on first use, so importing pegboard stays cheap.
    """
    import cattrs
    from cattrs.strategies import configure_union_passthrough

    # Values reach cattrs already validated against the schema, which explains
    # failures; detailed validation would only slow the common path.
    made = cattrs.Converter(forbid_extra_keys=True, detailed_validation=False)
    made.register_structure_hook(int, _strict_int)
    made.register_structure_hook(float, _strict_float)
    made.register_structure_hook(str, _strict_str)
    made.register_structure_hook(bool, _strict_bool)
    made.register_structure_hook(type(None), _strict_none)
    configure_union_passthrough(int | float | str | bool | None, made)
    return made
