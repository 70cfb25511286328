"""Reading a provider's response for its tool calls, for each module's ``run_step``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import attrs

import pegboard

__all__ = ("Found", "plain", "settle")

logger = logging.getLogger("pegboard")

#: One tool call read from a response: call ID, tool name, raw input.
Found = tuple[str, str, object]


def plain(response: object, provider: str) -> Mapping[str, Any]:
    """The response as a mapping: an SDK object's ``model_dump()``, or the dict itself."""
    if isinstance(response, Mapping):
        return response
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        data = dump()
        if isinstance(data, Mapping):
            return data
    raise TypeError(
        f"run_step() takes the {provider} SDK's response object or its model_dump() dict, "
        f"got {type(response).__name__}"
    )


def field(data: Mapping[str, Any], key: str, where: str, provider: str) -> Any:
    """``data[key]``, or a one-line error naming what the response lacks."""
    value = data.get(key) if isinstance(data, Mapping) else None
    if value is None:
        raise ValueError(
            f"the {provider} response has no {where}; pass the whole response the SDK returned"
        )
    return value


async def settle(
    request: pegboard.Request,
    found: list[Found],
    *,
    session_id: str,
    agent: str,
    message_id: str,
    timeout: float | None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[pegboard.StepEvent], object] | None,
    result: Callable[[pegboard.Outcome], Any],
    interrupted: Callable[[pegboard.ToolCall, str], Any],
) -> list[Any]:
    """Every call's rendered answer, in call order."""
    if not isinstance(message_id, str) or not message_id:
        raise ValueError("the response carries no ID to use as the message_id of its calls")
    answered = await request.execute_step(
        found,
        session_id=session_id,
        agent=agent,
        message_id=message_id,
        timeout=timeout,
        on_event=on_event,
    )
    return [
        interrupted(call, answer) if isinstance(answer, str) else _rendered(answer, result)
        for call, answer in answered
    ]


def _rendered(outcome: pegboard.Outcome, result: Callable[[pegboard.Outcome], Any]) -> Any:
    """``result(outcome)``; provider state the provider cannot take is dropped, with a
    warning, so that one tool's state leaves no call of the step unanswered.
    """
    try:
        return result(outcome)
    except ValueError as error:
        if not isinstance(outcome, pegboard.Completed) or outcome.provider_state is None:
            raise
        call_id = outcome.call.call_id if outcome.call is not None else "?"
        logger.warning(
            "dropped the provider state of tool %r (call %s): %s", outcome.name, call_id, error
        )
        return result(attrs.evolve(outcome, provider_state=None))
