"""What a plugin can reach from the objects it is handed, by attribute and reference."""

from __future__ import annotations

import functools
import types
from collections.abc import Iterator
from typing import Any

# The async runtime's own objects (a task group, an event) lead to every task's
# frame; following frames is introspection, which trust does not claim to stop.
_RUNTIMES = ("anyio", "asyncio", "_asyncio", "trio", "threading", "logging", "weakref")
_OPAQUE = (
    type,
    types.ModuleType,
    types.FrameType,
    types.CodeType,
    types.TracebackType,
    types.CoroutineType,
    types.GeneratorType,
    types.AsyncGeneratorType,
    str,
    bytes,
    int,
    float,
    complex,
    bool,
    type(None),
)


def referents(value: Any) -> Iterator[Any]:
    """The objects ``value`` holds: attributes, slots, items, closure cells, bound selves."""
    if isinstance(value, types.FunctionType):
        for cell in value.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:  # an empty cell
                continue
        yield from value.__defaults__ or ()
        yield from (value.__kwdefaults__ or {}).values()
        return
    if isinstance(value, types.MethodType):
        yield value.__self__
        yield value.__func__
        return
    if isinstance(value, functools.partial):
        yield value.func
        yield from value.args
        yield from value.keywords.values()
        return
    if isinstance(value, dict | types.MappingProxyType):
        yield from value.keys()
        yield from value.values()
        return
    if isinstance(value, list | tuple | set | frozenset):
        yield from value
        return
    yield from getattr(value, "__dict__", {}).values()
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__weakref__", "__dict__") and hasattr(value, slot):
                yield getattr(value, slot)


def reachable(*starts: Any) -> list[Any]:
    """Every object reachable from ``starts`` through `referents`."""
    seen: dict[int, Any] = {}
    stack = list(starts)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen[id(value)] = value
        module = (type(value).__module__ or "").split(".")[0]
        if isinstance(value, _OPAQUE) or module in _RUNTIMES:
            continue
        stack.extend(referents(value))
    return list(seen.values())


def reaches(starts: tuple[Any, ...], *targets: Any) -> list[Any]:
    """Those of ``targets`` (by identity) or of their types reachable from ``starts``."""
    found = reachable(*starts)
    kinds = tuple(target for target in targets if isinstance(target, type))
    wanted = {id(target) for target in targets if not isinstance(target, type)}
    return [value for value in found if id(value) in wanted or (kinds and isinstance(value, kinds))]
