"""JSON documents: strict parsing and RFC 6901 JSON Pointers (no I/O)."""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from ._models import JsonType, JsonValue

__all__ = ("PointerError", "json_type", "parse_json", "resolve", "summarize")

#: Values larger than this (serialized) are described, not returned whole.
MAX_VALUE_BYTES = 16_384
_INDEX = re.compile(r"0|[1-9][0-9]*\Z")


class PointerError(ValueError):
    """The document or the pointer cannot be read; the message says how to fix the call."""


def _refuse_constant(name: str) -> NoReturn:
    raise PointerError(f"the file holds {name}, which is not JSON")


def parse_json(data: bytes) -> Any:
    """Parse strict JSON (no NaN or Infinity), naming the line and column of a mistake."""
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_refuse_constant)
    except UnicodeDecodeError as error:
        raise PointerError(f"the file is not UTF-8 text (byte {error.start} is not)") from None
    except json.JSONDecodeError as error:
        raise PointerError(
            f"the file is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from None


def resolve(document: Any, pointer: str) -> Any:
    """The value ``pointer`` names in ``document``."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise PointerError(
            f"a JSON Pointer starts with '/' (like /servers/0), not {pointer!r}; "
            "use '' for the whole document"
        )
    current, walked = document, ""
    for token in pointer[1:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        here = walked or "the document"
        if isinstance(current, dict):
            if key not in current:
                keys = ", ".join(repr(k) for k in list(current)[:20]) or "none"
                raise PointerError(f"{here} has no key {key!r}; its keys: {keys}")
            current = current[key]
        elif isinstance(current, list):
            if not _INDEX.match(key) or int(key) >= len(current):
                raise PointerError(
                    f"{here} is an array of {len(current)} items; {key!r} is not an index "
                    f"from 0 to {len(current) - 1}"
                )
            current = current[int(key)]
        else:
            raise PointerError(f"{here} is {json_type(current)}, which has no {key!r} inside")
        walked = f"{walked}/{token}"
    return current


def json_type(value: Any) -> JsonType:
    """The JSON type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def summarize(path: str, pointer: str, value: Any) -> JsonValue:
    """The value with its type, or, when it is too large, its shape without it."""
    kind = json_type(value)
    length = len(value) if isinstance(value, list | dict | str) else None
    keys = list(value)[:50] if isinstance(value, dict) else None
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_VALUE_BYTES:
        return JsonValue(path, pointer, kind, None, truncated=True, length=length, keys=keys)
    return JsonValue(path, pointer, kind, value, length=length, keys=keys)
