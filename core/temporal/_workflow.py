"""The workflow side: one tool call as one activity, its outcome loaded back."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow

import pegboard

from ._activities import ACTIVITY
from ._payload import call_payload

if TYPE_CHECKING:
    from temporalio.common import RetryPolicy

__all__ = ("activity_id", "execute_tool")

#: How long a worker may go silent before its call is retried elsewhere.
HEARTBEAT_TIMEOUT = timedelta(seconds=30)


def activity_id(call_id: str) -> str:
    """The activity ID of a call: its call ID, so each call is one activity."""
    return f"pegboard-call:{call_id}"


async def execute_tool(
    call: pegboard.ToolCall,
    *,
    task_queue: str,
    start_to_close_timeout: timedelta,
    retry_policy: RetryPolicy | None = None,
    heartbeat_timeout: timedelta = HEARTBEAT_TIMEOUT,
) -> pegboard.Outcome:
    """Run ``call`` on a worker of ``task_queue`` and return its outcome; in a workflow only.

    The call becomes one activity whose ID is derived from the call ID. A
    `pegboard.Failed` outcome is a result, not an error. A worker that dies
    or stops heartbeating for ``heartbeat_timeout`` has the call retried,
    per ``retry_policy`` (Temporal's default when ``None``): the tool then
    sees ``context.attempt`` above 1 and the same ``idempotency_key``.
    Cancelling the workflow cancels the running tool, and this raises the
    cancellation once the worker confirmed it: the call has no outcome.
    A defect on the worker is retried; past the retries it raises
    ``temporalio.exceptions.ActivityError``.
    """
    payload = call_payload(call)
    result = await workflow.execute_activity(
        ACTIVITY,
        payload,
        task_queue=task_queue,
        activity_id=activity_id(call.context.call_id),
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )
    return pegboard.load_outcome(result)
