"""What one Code Mode program may use: wall time, memory, tool calls."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ("CodeModeLimits",)


def _positive(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(
            f"CodeModeLimits.{attribute.name} must be a positive number, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class CodeModeLimits:
    """The limits of one ``execute`` call: set per Location with
    ``host.location(root, code_mode=CodeModeLimits(...))``, or per request with
    ``location.prepare(code_mode=CodeModeLimits(...))``.

    ``wall_time`` (seconds) covers the whole program, its tool calls included;
    ``memory`` (bytes) is the sandbox heap; ``calls`` the number of tool calls
    one program may make. Hitting any of them fails the ``execute`` call with
    a message that says which limit and what to do instead.
    """

    wall_time: float = attrs.field(default=30.0, validator=_positive)
    memory: int = attrs.field(default=64 * 1024 * 1024, validator=_positive)
    calls: int = attrs.field(default=100, validator=_positive)
