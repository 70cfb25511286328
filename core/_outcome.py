"""Calls and the one outcome each settles into."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import attrs

from ._content import ContentItem, Text
from ._json import freeze
from ._tool import ToolContext

__all__ = (
    "CallIdentity",
    "Completed",
    "ErrorKind",
    "Failed",
    "Outcome",
    "ToolCall",
    "ToolError",
)

_new, _set = object.__new__, object.__setattr__

ErrorKind: TypeAlias = Literal[
    "unknown_tool",
    "unavailable",
    "final_step",
    "invalid_input",
    "tool_failure",
    "invalid_output",
    "rejected",
]


@attrs.frozen
class ToolCall:
    """One tool call from the model: the advertised name, raw input, runner context.

    ``input`` is the provider's raw JSON text (``str`` or ``bytes``) or an
    already parsed mapping.
    """

    name: str
    input: str | bytes | Mapping[str, Any]
    context: ToolContext


@attrs.frozen(kw_only=True)
class CallIdentity:
    """The durable IDs of one call, exactly as the runner supplied them."""

    session_id: str
    agent: str
    message_id: str
    call_id: str

    @classmethod
    def of(cls, context: ToolContext) -> CallIdentity:
        """The identity carried by a runner's context."""
        # Once per call: set the four fields directly (what attrs' __init__ does,
        # without its keyword handling). A subclass goes through its __init__.
        if cls is not CallIdentity:
            return cls(
                session_id=context.session_id,
                agent=context.agent,
                message_id=context.message_id,
                call_id=context.call_id,
            )
        identity = _new(cls)
        _set(identity, "session_id", context.session_id)
        _set(identity, "agent", context.agent)
        _set(identity, "message_id", context.message_id)
        _set(identity, "call_id", context.call_id)
        return identity


@attrs.frozen
class ToolError:
    """Why a call failed, in words for the model.

    ``kind`` is one of ``unknown_tool``, ``unavailable``, ``final_step``,
    ``invalid_input``, ``tool_failure``, ``invalid_output`` and ``rejected`` (the
    user rejected a permission the call needed, in `Request.execute_all`); ``metadata``
    comes from a `ToolFailure` that carried some, read-only like all outcome JSON.
    """

    kind: ErrorKind
    message: str
    metadata: Mapping[str, Any] | None = attrs.field(default=None, kw_only=True, converter=freeze)


@attrs.frozen
class Completed:
    """A successful call: machine ``output`` (``None`` for a tool without output),
    non-empty bounded model ``content``, optional ``metadata``.

    ``output`` and ``metadata`` are deeply read-only JSON (`pegboard.FrozenDict`
    and `pegboard.FrozenList`): a settled outcome cannot be edited in place.
    Copy one with `pegboard.thaw` to build a replacement.
    """

    output: Any = attrs.field(converter=freeze)
    content: tuple[ContentItem, ...]
    metadata: Mapping[str, Any] | None = attrs.field(default=None, converter=freeze)
    call: CallIdentity | None = attrs.field(default=None, kw_only=True)
    #: The effective name of the tool the call asked for (a provider needs it
    #: to answer the call); set by the pipeline.
    name: str | None = attrs.field(default=None, kw_only=True)
    #: Payloads a provider's protocol requires verbatim, keyed by provider
    #: module name (``"anthropic"``); never part of ``content`` or ``output``.
    provider_state: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, converter=freeze
    )


@attrs.frozen
class Failed:
    """A failed call: one ``error`` plus the final bounded snapshot of progress
    content, ``partial`` (empty when the tool reported none).
    """

    error: ToolError
    partial: tuple[ContentItem, ...] = ()
    call: CallIdentity | None = attrs.field(default=None, kw_only=True)
    #: The effective name of the tool the call asked for; set by the pipeline.
    name: str | None = attrs.field(default=None, kw_only=True)


Outcome: TypeAlias = Completed | Failed


def settled(output: Any, text: str, call: CallIdentity, name: str) -> Completed:
    """``Completed(output, (Text(text),), call=call, name=name)`` for the pipeline's short path.

    ``output`` is frozen as the converter would; ``text`` is a ``str`` by construction.
    """
    item = _new(Text)
    _set(item, "text", text)
    _set(item, "annotations", None)
    outcome = _new(Completed)
    _set(outcome, "output", freeze(output))
    _set(outcome, "content", (item,))
    _set(outcome, "metadata", None)
    _set(outcome, "call", call)
    _set(outcome, "name", name)
    _set(outcome, "provider_state", None)
    return outcome
