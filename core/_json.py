"""Strict JSON at the boundaries: parsing, checking, serializing and read-only views."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator, Mapping
from typing import Any, NoReturn

import orjson

from ._errors import CodecError

__all__ = (
    "FrozenDict",
    "FrozenList",
    "TooLarge",
    "copy_within",
    "dumps",
    "find_problem",
    "format_path",
    "freeze",
    "loads",
    "thaw",
)

#: JSON integers may have at most this many digits: enough for any identifier
#: or amount, and within what the interpreter converts to and from text.
MAX_INTEGER_DIGITS = 4000
# 2**13_288 is the smallest power of two with more than MAX_INTEGER_DIGITS digits.
_MAX_INTEGER_BITS = 13_288
# orjson reads integers outside 64 bits as floats; a run of 19 digits is the
# shortest literal that can be one, and only text holding such a run is read
# by the standard parser, which keeps every integer exact.
_LONG_DIGITS = re.compile(r"[0-9]{19,}")
_LONG_DIGITS_BYTES = re.compile(rb"[0-9]{19,}")

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
                return _lone_surrogate_in_string(path)
        elif kind is int:
            if item.bit_length() > _MAX_INTEGER_BITS:
                return _huge_integer(path)
        elif kind is bool or item is None:
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
                    return _key_not_a_string(key, path)
                if _has_lone_surrogate(key):
                    return _lone_surrogate_in_key(path)
                push((child, (path, key), depth + 1))
        elif isinstance(item, list | tuple):
            if depth >= max_depth:
                return _too_deep(path, max_depth)
            for index, child in enumerate(item):
                push((child, (path, index), depth + 1))
        elif kind is _HugeInteger:
            return _huge_integer(path)
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


class _HugeInteger:
    """Stands in, while parsing, for an integer literal too long to convert."""

    __slots__ = ()


_HUGE = _HugeInteger()


def _lone_surrogate_in_string(path: _Path) -> CodecError:
    return CodecError(
        "string contains a lone UTF-16 surrogate; send valid Unicode text",
        path=format_path(path),
        rule="unicode",
    )


def _lone_surrogate_in_key(path: _Path) -> CodecError:
    return CodecError(
        "object key contains a lone UTF-16 surrogate", path=format_path(path), rule="unicode"
    )


def _key_not_a_string(key: object, path: _Path) -> CodecError:
    return CodecError(f"object key {key!r} is not a string", path=format_path(path), rule="object")


def _huge_integer(path: _Path) -> CodecError:
    return CodecError(
        f"integer has more than {MAX_INTEGER_DIGITS:,} digits; send it as a string",
        path=format_path(path),
        rule="number",
    )


def _parse_int(digits: str) -> int | _HugeInteger:
    if len(digits) > MAX_INTEGER_DIGITS + 1:  # a sign may lead
        return _HUGE
    value = int(digits)
    return _HUGE if value.bit_length() > _MAX_INTEGER_BITS else value


def _too_deep(path: _Path, max_depth: int) -> CodecError:
    return CodecError(
        f"value nests deeper than {max_depth} levels", path=format_path(path), rule="depth"
    )


def loads(text: str | bytes, *, max_depth: int) -> Any:
    """Parse strict RFC 8259 JSON text, or raise `CodecError` naming where it broke.

    NaN, Infinity, numbers that overflow a double, integers of more than
    `MAX_INTEGER_DIGITS` digits, lone surrogates and nesting deeper than
    ``max_depth`` are all refused. Integers of any other size stay exact.
    """
    long_digits = _LONG_DIGITS if isinstance(text, str) else _LONG_DIGITS_BYTES
    if len(text) >= 19 and long_digits.search(text) is not None:  # type: ignore[arg-type]
        return _loads_exact(text, max_depth)
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


def _lenient(text: str | bytes) -> Any:
    # The standard parser accepts NaN, Infinity and lone surrogates, which the
    # walk after it names by path; integers stay exact or become _HUGE.
    if not isinstance(text, str):
        text = text.decode("utf-8")  # orjson's rule: JSON text is UTF-8
    return json.loads(text, parse_int=_parse_int)


def _loads_exact(text: str | bytes, max_depth: int) -> Any:
    try:
        value = _lenient(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise CodecError(f"input is not valid JSON: {error.msg} at {where}", rule="json") from None
    except UnicodeDecodeError as error:
        raise CodecError(f"input is not valid UTF-8 at byte {error.start}", rule="json") from None
    except RecursionError:
        raise _too_deep(None, max_depth) from None
    problem = find_problem(value, max_depth=max_depth)
    if problem is not None:
        raise problem
    return value


def _explain_bad_json(text: str | bytes, error: orjson.JSONDecodeError, max_depth: int) -> NoReturn:
    # orjson knows where the text broke but not which field holds the offending
    # value; a walk over the lenient parser's result can name the field.
    try:
        lenient = _lenient(text)
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
    """Serialize plain JSON compactly; the caller has already checked the value.

    Integers outside 64 bits, which orjson refuses, are written exactly.
    """
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return _dumps_exact(value)


def dumped_size(value: Any) -> int:
    """Bytes of ``value`` serialized compactly as UTF-8."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return len(_dumps_exact(value).encode("utf-8"))


def _dumps_exact(value: Any) -> str:
    # Only values holding an integer beyond 64 bits come here: the walk names
    # one too long for JSON (MAX_INTEGER_DIGITS), where the interpreter would
    # only say it cannot convert it. Depth was bounded where the value was made.
    problem = find_problem(value, max_depth=sys.maxsize)
    if problem is not None:
        raise problem
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def copy_within(value: Any, *, max_depth: int, max_bytes: int) -> Any:
    """A plain copy of the JSON ``value``, refused as soon as it outgrows ``max_bytes``.

    One iterative walk checks what `find_problem` checks, copies every
    container (tuples become lists) and counts a lower bound of the serialized
    size, so an oversized value is refused after reading about ``max_bytes`` of
    it, however large it is. The caller measures the copy exactly.
    """
    root: list[Any] = [None]
    # (value, container to fill, key in it, path, depth)
    stack: list[tuple[Any, Any, Any, _Path, int]] = [(value, root, 0, None, 0)]
    pop, push = stack.pop, stack.append
    size = 0  # a lower bound of the compact serialized size, in bytes
    longest: tuple[int, _Path] = (-1, None)
    while stack:
        item, parent, slot, path, depth = pop()
        kind = type(item)
        if kind is str:
            size += len(item) + 2  # UTF-8 takes at least a byte per character
            if len(item) > longest[0]:
                longest = (len(item), path)
            if _has_lone_surrogate(item):
                raise _lone_surrogate_in_string(path)
        elif kind is int:
            size += 1
            if item.bit_length() > _MAX_INTEGER_BITS:
                raise _huge_integer(path)
        elif kind is bool or item is None:
            size += 4
        elif kind is float and math.isfinite(item):
            size += 3
        elif isinstance(item, dict):
            if depth >= max_depth:
                raise _too_deep(path, max_depth)
            # Brackets, separators, and at least one byte per value.
            size += 1 + 2 * len(item)
            copied: dict[str, Any] = {}
            for key, child in item.items():
                if type(key) is not str:
                    raise _key_not_a_string(key, path)
                if _has_lone_surrogate(key):
                    raise _lone_surrogate_in_key(path)
                size += len(key) + 3
                if size > max_bytes:
                    raise TooLarge(size, longest[0], longest[1])
                copied[key] = None
                push((child, copied, key, (path, key), depth + 1))
            size -= len(item)  # the children count their own bytes
            item = copied
        elif isinstance(item, list | tuple):
            if depth >= max_depth:
                raise _too_deep(path, max_depth)
            size += 1 + len(item)  # brackets and separators
            if size + len(item) > max_bytes:  # every value is at least a byte
                raise TooLarge(size + len(item), longest[0], longest[1])
            listed: list[Any] = [None] * len(item)
            for index, child in enumerate(item):
                push((child, listed, index, (path, index), depth + 1))
            item = listed
        else:
            problem = find_problem(item, max_depth=max_depth)
            assert problem is not None
            problem.path = format_path(path)
            raise problem
        if size > max_bytes:
            raise TooLarge(size, longest[0], longest[1])
        parent[slot] = item
    return root[0]


class TooLarge(CodecError):  # noqa: N818 - a CodecError, named for what it says
    """A value outgrew its byte budget while `copy_within` walked it.

    ``size`` is a lower bound of its serialized size; ``longest`` the length of
    the longest string seen and ``longest_path`` where it is (``None`` if none).
    """

    def __init__(self, size: int, longest: int, path: _Path) -> None:
        super().__init__(f"value is at least {size:,} bytes", rule="size")
        self.size = size
        self.longest = longest
        self.longest_path = None if longest < 0 else format_path(path)


def _read_only(*_: object, **__: object) -> NoReturn:
    raise TypeError("this JSON value is shared and read-only; copy it with pegboard.thaw() first")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation, so shared schemas and outcomes cannot change.

    It is still a ``dict`` for JSON serializers and provider SDKs; ``copy`` and
    ``deepcopy`` give plain, mutable values. Building one freezes what it is
    given, all the way down.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        dict.update(self, ((key, freeze(item)) for key, item in dict(*args, **kwargs).items()))

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

    def __init__(self, items: Any = ()) -> None:
        super().__init__()
        list.extend(self, (freeze(item) for item in items))

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        thawed: list[Any] = thaw(self)
        return thawed

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (thaw(self),)


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})
_new_dict, _update, _set_key = dict.__new__, dict.update, dict.__setitem__
_new_list, _extend, _set_index = list.__new__, list.extend, list.__setitem__


def freeze(value: Any) -> Any:
    """A deep read-only copy of plain JSON; frozen values and scalars come back as they are."""
    kind = type(value)
    if kind in _IMMUTABLE or kind is FrozenDict or kind is FrozenList:
        return value  # scalars, and containers frozen all the way down when built
    # Every outcome is frozen, so this is on the per-call path: copy in C first,
    # then replace the few nested containers (__init__ would freeze twice).
    if kind is dict or isinstance(value, Mapping):
        frozen = _new_dict(FrozenDict)
        _update(frozen, value)
        for key, item in value.items():
            if type(item) not in _IMMUTABLE:
                _set_key(frozen, key, freeze(item))
        return frozen
    if isinstance(value, list | tuple):
        items = _new_list(FrozenList)
        _extend(items, value)
        for index, item in enumerate(value):
            if type(item) not in _IMMUTABLE:
                _set_index(items, index, freeze(item))
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
