"""Calls a server runs as tasks: create (2025-11-25) or receive (the 2026-07-28 tasks
extension) the task, poll it to its end, and cancel it if the call ends first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, ValidationError

import pegboard

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ClientSession

    from ._mount import Call

__all__ = (
    "EXTENSION",
    "TaskHandle",
    "TasksExtension",
    "elicitation_of",
    "follow_task",
    "poll_interval",
    "run_task",
    "runs_as_task",
)

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
                if task.status in ("failed", "cancelled"):
                    ended = True
                    raise _ended(server, tool, task.status, task.status_message)
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


def _ended(server: str, tool: str, status: str, why: str | None) -> pegboard.ToolFailure:
    """The failure of a call whose task ``status`` is ``failed`` or ``cancelled``."""
    if status == "cancelled":
        return pegboard.ToolFailure(
            f"the MCP server {server!r} cancelled its task for {tool!r}"
            + (f": {why}" if why else "")
        )
    return pegboard.ToolFailure(
        f"the MCP server {server!r} could not finish {tool!r}: "
        f"{why or 'its task failed without saying why'}"
    )


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


#: The tasks extension of the 2026-07-28 protocol.
EXTENSION = "io.modelcontextprotocol/tasks"
#: A server question that is not an elicitation has no one here to answer it.
_ELICIT = "elicitation/create"


class TaskHandle(types.Result):
    """A 2026-07-28 server's answer to ``tools/call`` that made a task instead."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None


class _TaskState(types.Result):
    """``tasks/get``: the task, with its result, error or questions inlined."""

    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class _TaskParams(types.RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, Any]


class _GetTask(types.Request[_TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskParams
    name_param: ClassVar[str | None] = "taskId"


class _UpdateTask(types.Request[_UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateParams
    name_param: ClassVar[str | None] = "taskId"


class _CancelTask(types.Request[_TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskParams
    name_param: ClassVar[str | None] = "taskId"


#: Answers one question a task asks (an ``inputRequests`` entry): its response as JSON.
Answer = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]


async def follow_task(
    session: ClientSession,
    server: str,
    tool: str,
    handle: TaskHandle,
    call: Call,
    answer: Answer,
    *,
    within: float,
) -> types.CallToolResult:
    """Follow a task a 2026-07-28 server made for a call until it ends, answering its
    questions (``tasks/update``) on the way; cancel it if the call ends first.
    """
    call.task = handle.task_id
    task = _TaskState.model_validate(handle.model_dump(by_alias=True))
    answered: set[str] = set()
    ended = False
    try:
        with anyio.fail_after(within):
            said: str | None = None
            while True:
                if task.status_message and task.status_message != said:
                    said = task.status_message
                    await call.context.progress(pegboard.Progress(message=said))
                if task.status == "completed":
                    ended = True
                    return types.CallToolResult.model_validate(task.result or {})
                if task.status == "failed":
                    ended = True
                    why = (task.error or {}).get("message") or task.status_message
                    raise _ended(server, tool, "failed", why)
                if task.status == "cancelled":
                    ended = True
                    raise _ended(server, tool, "cancelled", task.status_message)
                if task.status == "input_required":
                    asked = {
                        key: request
                        for key, request in (task.input_requests or {}).items()
                        if key not in answered
                    }
                    if asked:
                        responses = {key: await answer(server, asked[key]) for key in asked}
                        update = _UpdateTask(
                            params=_UpdateParams(task_id=task.task_id, input_responses=responses)
                        )
                        await session.send_request(update, types.EmptyResult, within)
                        answered |= set(asked)
                await anyio.sleep(poll_interval(task.poll_interval_ms))
                get = _GetTask(params=_TaskParams(task_id=task.task_id))
                task = await session.send_request(get, _TaskState, within)
    except TimeoutError:
        raise pegboard.ToolFailure(
            f"the MCP server {server!r} did not finish {tool!r} within {within:g} s; "
            "its task is cancelled"
        ) from None
    finally:
        if not ended:
            cancel = _CancelTask(params=_TaskParams(task_id=task.task_id))
            with (
                anyio.CancelScope(shield=True),
                anyio.move_on_after(_CANCEL_GRACE),
                contextlib.suppress(MCPError),
            ):
                await session.send_request(cancel, types.EmptyResult, _CANCEL_GRACE)


class TasksExtension(ClientExtension):
    """The client side of the tasks extension: a ``tools/call`` answered with a task
    is followed to its end by ``follow``, which the mount supplies.
    """

    identifier = EXTENSION

    def __init__(
        self, follow: Callable[[TaskHandle, ClaimContext], Awaitable[types.CallToolResult]]
    ) -> None:
        self._follow = follow

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=self._follow),)


def elicitation_of(request: Mapping[str, Any]) -> types.ElicitRequestParams:
    """The elicitation a task asks for, or ``ValueError`` for any other question."""
    if request.get("method") != _ELICIT:
        raise ValueError(
            f"it asks for {request.get('method')!r}, which pegboard does not answer for a "
            "mounted server"
        )
    params = request.get("params") or {}
    if params.get("mode") == "url":
        return types.ElicitRequestURLParams.model_validate(params)
    return types.ElicitRequestFormParams.model_validate(params)
