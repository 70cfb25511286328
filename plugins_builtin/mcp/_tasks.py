"""Calls a server runs as tasks (MCP 2025-11-25): create, poll to the end, cancel if cancelled."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

import pegboard

if TYPE_CHECKING:
    from mcp import Client

    from ._mount import Call

__all__ = ("poll_interval", "run_task", "runs_as_task")

#: Bounds on the wait between two polls, in seconds, whatever the server suggests.
_SOONEST, _LATEST, _USUAL = 0.05, 5.0, 0.5
#: How long a cancelled call waits for the server to take note of its task's cancellation.
_CANCEL_GRACE = 5.0


def runs_as_task(client: Client, listed: types.Tool) -> bool:
    """Whether a call of ``listed`` is made as a task: always when the tool requires
    one, and when it offers one and the server runs tool calls as tasks.
    """
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False  # the tasks extension: the server decides, and the claim resolves it
    support = None if listed.execution is None else listed.execution.task_support
    if support == "required":
        return True
    if support != "optional":
        return False
    tasks = client.server_capabilities.tasks
    requests = None if tasks is None else tasks.requests
    return requests is not None and requests.tools is not None and requests.tools.call is not None


def poll_interval(milliseconds: int | None) -> float:
    """Seconds to wait before the next poll: the server's suggestion, within bounds."""
    if milliseconds is None:
        return _USUAL
    return min(max(milliseconds / 1000, _SOONEST), _LATEST)


async def run_task(
    client: Client,
    server: str,
    tool: str,
    arguments: dict[str, Any],
    call: Call,
    *,
    within: float,
) -> types.CallToolResult:
    """Call ``tool`` as a task and return its result once the task has ended.

    Each new status message is the call's progress. A cancelled call (or one past
    ``within`` seconds) cancels the task on the server before it ends.
    """
    session = client.session
    params = types.CallToolRequestParams(
        name=tool, arguments=arguments, task=types.TaskMetadata(ttl=int(within * 1000))
    )
    created = await _create(client, params, within)
    task: types.Task = created.task
    call.task = task.task_id
    ended = False
    try:
        with anyio.fail_after(within):
            said: str | None = None
            while True:
                if task.status_message and task.status_message != said:
                    said = task.status_message
                    await call.context.progress(pegboard.Progress(message=said))
                if task.status in ("completed", "input_required"):
                    # tasks/result waits for the end, and carries the server's
                    # questions to the user meanwhile.
                    payload = types.GetTaskPayloadRequest(
                        params=types.GetTaskPayloadRequestParams(task_id=task.task_id)
                    )
                    result = await session.send_request(payload, types.CallToolResult, within)
                    ended = True
                    return result
                if task.status == "failed":
                    ended = True
                    raise pegboard.ToolFailure(
                        f"the MCP server {server!r} could not finish {tool!r}: "
                        f"{task.status_message or 'its task failed without saying why'}"
                    )
                if task.status == "cancelled":
                    ended = True
                    raise pegboard.ToolFailure(
                        f"the MCP server {server!r} cancelled its task for {tool!r}"
                        + (f": {task.status_message}" if task.status_message else "")
                    )
                await anyio.sleep(poll_interval(task.poll_interval))
                get = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id))
                task = await session.send_request(get, types.GetTaskResult, within)
    except TimeoutError:
        raise pegboard.ToolFailure(
            f"the MCP server {server!r} did not finish {tool!r} within {within:g} s; "
            "its task is cancelled"
        ) from None
    finally:
        if not ended:
            await _cancel(client, task.task_id)


async def _create(
    client: Client, params: types.CallToolRequestParams, within: float
) -> types.CreateTaskResult:
    """Send a task-augmented ``tools/call`` and read the task the server made.

    The SDK's own request path checks a ``tools/call`` result against
    ``CallToolResult``, which a task is not, so this request goes to the
    session's JSON-RPC dispatcher as the session would send it.
    """
    dispatcher = getattr(client.session, "_dispatcher", None)
    if dispatcher is None:
        raise pegboard.ToolFailure(
            "this version of the MCP SDK cannot make the task-augmented calls "
            f"{params.name!r} needs; install one that pegboard supports"
        )
    options = {
        "timeout": within,
        "headers": {MCP_PROTOCOL_VERSION_HEADER: client.protocol_version},
    }
    raw = await dispatcher.send_raw_request(
        "tools/call", params.model_dump(mode="json", by_alias=True, exclude_none=True), options
    )
    try:
        return types.CreateTaskResult.model_validate(raw)
    except ValidationError:
        raise pegboard.ToolFailure(
            f"the MCP server answered a task-augmented call to {params.name!r} without a task"
        ) from None


async def _cancel(client: Client, task: str) -> None:
    """Ask the server to cancel ``task``, even from a cancelled call; it may refuse."""
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task))
    # A task that already ended cannot be cancelled: the server may say so.
    with (
        anyio.CancelScope(shield=True),
        anyio.move_on_after(_CANCEL_GRACE),
        contextlib.suppress(MCPError),
    ):
        await client.session.send_request(request, types.EmptyResult, _CANCEL_GRACE)
