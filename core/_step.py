"""One model step's calls, each answered whatever happens: the engine of ``run_step``."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias

import anyio
import attrs

from ._outcome import Outcome, ToolCall
from ._permissions import PermissionRequest, question_watch
from ._tool import Progress, ToolContext

__all__ = ("StepEvent", "StepEventKind", "run_calls")

logger = logging.getLogger("pegboard")

StepEventKind: TypeAlias = Literal[
    "started", "progress", "approval_asked", "approval_withdrawn", "outcome", "defect"
]


@attrs.frozen(kw_only=True)
class StepEvent:
    """What happened to one call of a step, as a step runner's ``on_event`` hears it.

    ``kind`` is ``"started"``, ``"progress"`` (with ``progress``),
    ``"approval_asked"`` (with ``request``, the `PermissionRequest` put to the
    approver), ``"approval_withdrawn"`` (the call was cancelled while that
    question was open), ``"outcome"`` (with ``outcome``) or ``"defect"`` (with
    ``error``: the tool raised an unexpected exception, and the call is answered
    as interrupted). ``call_id`` and ``name`` say which call.

    .. versionadded:: 0.1
    """

    kind: StepEventKind
    call_id: str
    name: str
    progress: Progress | None = None
    request: PermissionRequest | None = None
    outcome: Outcome | None = None
    error: Exception | None = None


#: A call that settled into no outcome: why, in words for the model.
Interrupted: TypeAlias = str


async def run_calls(
    request: object,
    calls: Sequence[tuple[str, str, object]],
    *,
    session_id: str,
    agent: str,
    message_id: str,
    timeout: float | None = None,  # noqa: ASYNC109 - each call's limit, not this function's
    on_event: Callable[[StepEvent], object] | None = None,
) -> list[tuple[ToolCall, Outcome | Interrupted]]:
    """Run ``calls`` (call ID, tool name, raw input) concurrently; each gets an answer.

    An outcome, or why the call has none: it ran past ``timeout`` seconds and
    was cancelled, or its tool raised (reported as a ``"defect"`` event).
    Cancelling this cancels every call and propagates. An exception from
    ``on_event`` is logged on the ``pegboard`` logger and the step goes on.
    """
    from ._request import Request

    if not isinstance(request, Request):
        raise TypeError(f"run_step() takes a pegboard.Request, got {type(request).__name__}")
    if timeout is not None and (not isinstance(timeout, int | float) or not timeout > 0):
        raise ValueError(f"run_step() timeout is a number of seconds > 0 or None, got {timeout!r}")
    for label, value in (("session_id", session_id), ("agent", agent)):
        if not isinstance(value, str):
            raise TypeError(f"run_step() {label} is a str, got {type(value).__name__}")

    def emit(event: StepEvent) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:
            # The host's listener failing must not leave a call unanswered.
            logger.exception(
                "on_event raised for the %r event of call %s", event.kind, event.call_id
            )

    def made(call_id: str, name: str, raw: object) -> ToolCall:
        async def progress(update: Progress) -> None:
            emit(StepEvent(kind="progress", call_id=call_id, name=name, progress=update))

        context = ToolContext(session_id, agent, message_id, call_id, progress=progress)
        return ToolCall(name, raw, context)  # type: ignore[arg-type]

    batch = [made(call_id, name, raw) for call_id, name, raw in calls]
    answers: list[Outcome | Interrupted] = ["it did not run"] * len(batch)
    limit = math.inf if timeout is None else float(timeout)

    async def one(index: int, call: ToolCall) -> None:
        call_id, name = call.context.call_id, call.name

        def watch(what: str, asked: PermissionRequest) -> None:
            kind: StepEventKind = "approval_asked" if what == "asked" else "approval_withdrawn"
            emit(StepEvent(kind=kind, call_id=call_id, name=name, request=asked))

        token = question_watch.set(watch)
        emit(StepEvent(kind="started", call_id=call_id, name=name))
        try:
            with anyio.move_on_after(limit) as scope:
                outcome = await request.settle(call)
            if scope.cancelled_caught:
                answers[index] = (
                    f"it ran past the step's {timeout:g}-second limit and was cancelled"
                )
                return
        except Exception as error:  # noqa: BLE001 - a defect: reported, answered as interrupted
            emit(StepEvent(kind="defect", call_id=call_id, name=name, error=error))
            answers[index] = f"it failed unexpectedly ({type(error).__name__})"
            return
        finally:
            question_watch.reset(token)
        answers[index] = outcome
        emit(StepEvent(kind="outcome", call_id=call_id, name=name, outcome=outcome))

    async with anyio.create_task_group() as group:
        for index, call in enumerate(batch):
            group.start_soon(one, index, call)
    return list(zip(batch, answers, strict=True))
