"""The JSON form of a call that crosses from a workflow to a worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pegboard

__all__ = ("VERSION", "call_payload", "load_call")

#: The version of the call form this pegboard writes and reads.
VERSION = 1

_CONTEXT = ("session_id", "agent", "message_id", "call_id")


def call_payload(call: pegboard.ToolCall) -> dict[str, Any]:
    """``call`` as plain JSON for a Temporal activity: name, raw input, runner context.

    Raw input text stays text (bytes are decoded as UTF-8), so the worker
    decodes and validates it exactly as a local call would; a mapping is
    copied as plain JSON. The progress callback does not cross: a worker
    reports progress as the activity's heartbeat details.
    """
    if not isinstance(call, pegboard.ToolCall) or not isinstance(
        call.context, pegboard.ToolContext
    ):
        raise TypeError("call_payload() takes a pegboard.ToolCall with a pegboard.ToolContext")
    raw = call.input
    value: Any
    if isinstance(raw, bytes):
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(
                f"call {call.context.call_id!r}: its input bytes are not UTF-8 ({error}); "
                "pass the provider's JSON text"
            ) from None
    elif isinstance(raw, str):
        value = raw
    else:
        value = pegboard.thaw(raw)
    context = call.context
    return {
        "pegboard_call": VERSION,
        "name": call.name,
        "input": value,
        "context": {field: getattr(context, field) for field in _CONTEXT},
    }


def load_call(
    payload: Mapping[str, Any], *, attempt: int = 1, progress: Any = None
) -> pegboard.ToolCall:
    """The call `call_payload` wrote, run as attempt number ``attempt``.

    Raises ``ValueError`` saying what is missing or wrong.
    """
    if not isinstance(payload, Mapping) or payload.get("pegboard_call") != VERSION:
        raise ValueError(
            "a pegboard call payload is the JSON object call_payload(call) makes "
            f"(with pegboard_call: {VERSION}); send it from pegboard.temporal.execute_tool"
        )
    name = payload.get("name")
    raw = payload.get("input")
    context = payload.get("context")
    if not isinstance(name, str):
        raise ValueError(f"call payload at $.name: a tool name is a string, got {name!r}")
    if not isinstance(raw, str | Mapping):
        raise ValueError(
            f"call payload at $.input: JSON text or an object, got {type(raw).__name__}"
        )
    if not isinstance(context, Mapping) or sorted(context) != sorted(_CONTEXT):
        raise ValueError(f"call payload at $.context: an object with exactly {', '.join(_CONTEXT)}")
    for field in _CONTEXT:
        if not isinstance(context[field], str):
            raise ValueError(f"call payload at $.context.{field}: a string, got {context[field]!r}")
    fields = {field: context[field] for field in _CONTEXT}
    if progress is not None:
        fields["progress"] = progress
    return pegboard.ToolCall(name, raw, pegboard.ToolContext(**fields, attempt=attempt))
