"""Questions a plugin's back end asks the user, and the host's answers (MCP's elicitation)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._json import FrozenDict, freeze

__all__ = ("Elicit", "Elicitation", "ElicitationAnswer")


def _frozen(value: Mapping[str, Any] | None) -> FrozenDict | None:
    return None if value is None else freeze(dict(value))


@attrs.frozen(kw_only=True)
class Elicitation:
    """What a back end (a mounted MCP server) asks the user.

    ``source`` names who asks, for the user's eyes (``"MCP server 'github'"``).
    A form has a ``schema``: a flat JSON Schema object whose properties are the
    fields to fill in (no properties: a plain confirmation). A link has a
    ``url`` the user should open instead; its answer carries no content.
    """

    source: str
    message: str
    schema: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen)
    url: str | None = None


def _check_action(_: object, __: attrs.Attribute[str], value: object) -> None:
    if value not in ("accept", "decline", "cancel"):
        raise ValueError(
            f"an elicitation's answer is 'accept', 'decline' or 'cancel', got {value!r}"
        )


@attrs.frozen
class ElicitationAnswer:
    """The user's answer: ``"accept"`` (a form's ``content`` filled in), ``"decline"``
    (said no) or ``"cancel"`` (dismissed the question without choosing).
    """

    action: Literal["accept", "decline", "cancel"] = attrs.field(validator=_check_action)
    content: Mapping[str, Any] | None = attrs.field(default=None, converter=_frozen)

    def __attrs_post_init__(self) -> None:
        if self.content is not None and self.action != "accept":
            raise ValueError(f"only an accepted elicitation has content, not {self.action!r}")


#: The host's handler: ``await elicit(Elicitation(...))`` returns the user's answer.
Elicit: TypeAlias = Callable[[Elicitation], Awaitable[ElicitationAnswer]]
