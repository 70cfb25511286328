"""Strict JSON at the boundaries: parsing, checking, serializing and read-only views."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

import orjson

from ._errors import CodecError

__all__ = (
    "FrozenDict",
    "FrozenList",
    "dumps",
    "find_problem",
    "format_path",
    "freeze",
    "loads",
    "thaw",
)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# A path is built lazily as a linked list of (parent, key) so that walking a
# valid value never formats a string.
_Path = tuple[Any, str | int] | None


def format_path(path: _Path) -> str:
    """Render a lazily built path as ``$.a.b[2]["odd key"]``."""
    keys: list[str | int] = []
    while path is not None:
        path, key = path
        keys.append(key)
    out = ["$"]
    for key in reversed(keys):
        if isinstance(key, int):
            out.append(f"[{key}]")
        elif _IDENTIFIER.match(key):
            out.append(f".{key}")
        else:
            out.append(f"[{json.dumps(key)}]")
    return "".join(out)


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_problem(value: Any, *, max_depth: int) -> CodecError | None:
    """Return why ``value`` is not plain JSON, or ``None`` when it is.

    Plain JSON here means: dicts with ``str`` keys, lists (tuples pass as arrays),
    ``str`` without lone surrogates, finite numbers, booleans and ``None``, nested
    at most ``max_depth`` containers deep. The walk is iterative, so no depth can
    exhaust the interpreter's stack.
    """
    stack: list[tuple[Any, _Path, int]] = [(value, None, 0)]
    pop, push = stack.pop, stack.append
    while stack:
        item, path, depth = pop()
        kind = type(item)
        if kind is str:
            if _has_lone_surrogate(item):
                return CodecError(
                    "string contains a lone UTF-16 surrogate; send valid Unicode text",
                    path=format_path(path),
                    rule="unicode",
                )
        elif kind is int or kind is bool or item is None:
            continue
        elif kind is float:
            if not math.isfinite(item):
                shown = "NaN" if math.isnan(item) else ("Infinity" if item > 0 else "-Infinity")
                return CodecError(
                    f"{shown} is not a JSON number; JSON has no NaN or Infinity",
                    path=format_path(path),
                    rule="number",
                )
        elif isinstance(item, dict):
            if depth >= max_depth:
                return _too_deep(path, max_depth)
            for key, child in item.items():
                if type(key) is not str:
                    return CodecError(
                        f"object key {key!r} is not a string",
                        path=format_path(path),
                        rule="object",
                    )
                if _has_lone_surrogate(key):
                    return CodecError(
                        "object key contains a lone UTF-16 surrogate",
                        path=format_path(path),
                        rule="unicode",
                    )
                push((child, (path, key), depth + 1))
        elif isinstance(item, list | tuple):
            if depth >= max_depth:
                return _too_deep(path, max_depth)
            for index, child in enumerate(item):
                push((child, (path, index), depth + 1))
        elif isinstance(item, str | int | float):
            # Subclasses (enum members, numpy scalars) are not plain JSON.
            return CodecError(
                f"{kind.__name__} is a subclass of {kind.__mro__[1].__name__}; "
                "send the plain JSON value",
                path=format_path(path),
                rule="type",
            )
        else:
            return CodecError(
                f"{kind.__name__} is not a JSON type", path=format_path(path), rule="type"
            )
    return None


def _too_deep(path: _Path, max_depth: int) -> CodecError:
    return CodecError(
        f"value nests deeper than {max_depth} levels", path=format_path(path), rule="depth"
    )


def loads(text: str | bytes, *, max_depth: int) -> Any:
    """Parse strict RFC 8259 JSON text, or raise `CodecError` naming where it broke.

    NaN, Infinity, numbers that overflow a double, lone surrogates and nesting
    deeper than ``max_depth`` are all refused.
    """
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as error:
        _explain_bad_json(text, error, max_depth)
    if len(text) > max_depth and (
        not isinstance(text, str) or text.count("{") + text.count("[") > max_depth
    ):
        # Bracket count bounds the depth from above; only a text that could be
        # too deep pays for the walk.
        problem = find_problem(value, max_depth=max_depth)
        if problem is not None:
            raise problem
    return value


def _explain_bad_json(text: str | bytes, error: orjson.JSONDecodeError, max_depth: int) -> NoReturn:
    # orjson knows where the text broke but not which field holds the offending
    # value; the lenient standard parser accepts NaN, Infinity and lone
    # surrogates, so a walk over its result can name the field.
    try:
        lenient = json.loads(text)
    except (ValueError, RecursionError):
        lenient = None
    else:
        problem = find_problem(lenient, max_depth=max_depth)
        if problem is not None:
            raise problem from None
    where = f"line {error.lineno} column {error.colno}"
    reason = error.msg
    if "depth limit" in reason:
        reason = f"value nests deeper than {max_depth} levels"
    raise CodecError(f"input is not valid JSON: {reason} at {where}", rule="json") from None


def dumps(value: Any) -> str:
    """Serialize plain JSON compactly; the caller has already checked the value."""
    return orjson.dumps(value).decode()


def dumped_size(value: Any) -> int:
    """Bytes of ``value`` serialized compactly as UTF-8."""
    return len(orjson.dumps(value))


def _read_only(*_: object, **__: object) -> NoReturn:
    raise TypeError("this JSON value is shared and read-only; copy it with pegboard.thaw() first")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation, so shared schemas cannot be changed.

    It is still a ``dict`` for JSON serializers and provider SDKs; ``copy`` and
    ``deepcopy`` give plain, mutable values.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        thawed: dict[str, Any] = thaw(self)
        return thawed

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (thaw(self),)


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation; see `FrozenDict`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        thawed: list[Any] = thaw(self)
        return thawed

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (thaw(self),)


def freeze(value: Any) -> Any:
    """A deep read-only copy of plain JSON."""
    if isinstance(value, Mapping):
        frozen = FrozenDict()
        dict.update(frozen, ((key, freeze(item)) for key, item in value.items()))
        return frozen
    if isinstance(value, list | tuple):
        items = FrozenList()
        list.extend(items, (freeze(item) for item in value))
        return items
    return value


def thaw(value: Any) -> Any:
    """A deep mutable copy of plain JSON (undoes `freeze`)."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(item) for item in value]
    return value


def iter_strings(value: Any) -> Iterator[tuple[str, str]]:
    """Yield ``(path, string)`` for every string value, for error reports."""
    stack: list[tuple[Any, _Path]] = [(value, None)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            yield format_path(path), item
        elif isinstance(item, dict):
            stack.extend((child, (path, key)) for key, child in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((child, (path, index)) for index, child in enumerate(item))
