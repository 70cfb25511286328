"""pegboard serve runs a call as a task when a client asks: the 2025-11-25 task methods
(``params.task``, ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel``) and
the 2026-07-28 tasks extension (``resultType: "task"``, ``tasks/get``, ``tasks/update``,
``tasks/cancel``), in memory with the SDK's client, and over HTTP.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import pytest
from pydantic import ConfigDict

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client, MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

import pegboard.mcp
from pegboard.mcp import _tasks

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/tasks"
#: Long enough that a call becomes a task instead of a direct answer.
SLOW = _tasks.DIRECT_WINDOW + 0.6
ERAS = ["legacy", "auto"]


class Tools:
    """The served tools, and what settled."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.settled: list[str] = []

    async def add(self, input: dict[str, int], context: pegboard.ToolContext) -> int:
        return input["a"] + input["b"]

    async def slow(self, input: object, context: pegboard.ToolContext) -> str:
        await context.progress(pegboard.Progress(message="halfway"))
        await anyio.sleep(SLOW)
        return "slept"

    async def sleeper(self, input: dict[str, str], context: pegboard.ToolContext) -> str:
        async with await anyio.open_process(["sleep", "60"]) as process:
            (self.root / input["pid"]).write_text(str(process.pid))
            await process.wait()
        return "woke"

    async def hang(self, input: object, context: pegboard.ToolContext) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    @pegboard.hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> None:
        self.settled.append(event.name)


@pytest.fixture
async def served(host: pegboard.Host, workspace: Path) -> AsyncIterator[tuple[Any, Tools]]:
    tools = Tools(workspace)
    pair = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    pid = {"type": "object", "properties": {"pid": {"type": "string"}}, "required": ["pid"]}
    host.tools.register(
        {
            "add": pegboard.tool(
                description="Add.",
                execute=tools.add,
                input={**pair, "required": ["a", "b"]},
                output={"type": "integer"},
            ),
            "slow": pegboard.tool(description="Take a while.", execute=tools.slow),
            "sleeper": pegboard.tool(description="Run sleep.", execute=tools.sleeper, input=pid),
            "hang": pegboard.tool(description="Never end.", execute=tools.hang),
        }
    )
    host.add_plugin("watch", tools)
    async with host.location(workspace, plugins=["watch"]) as location:
        yield pegboard.mcp.build_server(location), tools


class Handles(ClientExtension):
    """The SDK client's side of the tasks extension: a task handle is kept, not followed."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.handles: list[TaskHandle] = []

    def claims(self) -> tuple[ResultClaim[Any], ...]:
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=self.keep),)

    async def keep(self, handle: TaskHandle, claim: ClaimContext) -> types.CallToolResult:
        self.handles.append(handle)
        return types.CallToolResult(content=[types.TextContent(text="task " + handle.task_id)])


class TaskHandle(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str


class TaskState(types.Result):
    model_config = ConfigDict(extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param: ClassVar[str | None] = "taskId"


class Era:
    """One client on one protocol era, speaking its era's task methods."""

    def __init__(self, mcp: Client, handles: Handles) -> None:
        self.mcp = mcp
        self.handles = handles
        self.modern = mcp.protocol_version == "2026-07-28"

    async def start(self, name: str, arguments: dict[str, Any], ttl: int | None = None) -> Any:
        """The task a call made (its ID), or the call's direct answer."""
        if self.modern:
            before = len(self.handles.handles)
            answer = await self.mcp.call_tool(name, arguments)
            if len(self.handles.handles) == before:
                return answer
            return self.handles.handles[-1].task_id
        params: dict[str, Any] = {"name": name, "arguments": arguments, "task": {}}
        if ttl is not None:
            params["task"]["ttl"] = ttl
        dispatcher = self.mcp.session._dispatcher  # type: ignore[attr-defined]
        raw = await dispatcher.send_raw_request("tools/call", params, {"timeout": 30})
        return types.CreateTaskResult.model_validate(raw).task.task_id

    async def get(self, task: str) -> TaskState:
        if self.modern:
            return await self.mcp.session.send_request(
                GetTask(params=TaskParams(task_id=task)), TaskState
            )
        got = await self.mcp.session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task)),
            types.GetTaskResult,
        )
        return TaskState(
            task_id=got.task_id,
            status=got.status,
            status_message=got.status_message,
            ttl_ms=got.ttl,
        )

    async def result(self, task: str) -> types.CallToolResult:
        """The task's result, once it has ended."""
        if not self.modern:
            result = await self.mcp.session.send_request(
                types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task)),
                types.CallToolResult,
            )
            assert {"taskId": task} == (result.meta or {})[_tasks.RELATED_TASK]
            return result.model_copy(update={"meta": None})
        with anyio.fail_after(10):
            while (state := await self.get(task)).status == "working":  # noqa: ASYNC110 - polling is the protocol
                await anyio.sleep(0.05)
        assert "completed" == state.status, state
        return types.CallToolResult.model_validate(state.result)

    async def cancel(self, task: str) -> Any:
        if self.modern:
            return await self.mcp.session.send_request(
                CancelTask(params=TaskParams(task_id=task)), types.EmptyResult
            )
        return await self.mcp.session.send_request(
            types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task)),
            types.CancelTaskResult,
        )


def connect(server: Any, era: str) -> tuple[Client, Handles]:
    handles = Handles()
    return Client(server, mode=era, extensions=[handles]), handles


def outcome(result: types.CallToolResult) -> tuple[Any, ...]:
    return (result.is_error, result.content, result.structured_content)


@pytest.mark.parametrize("era", ERAS)
async def test_a_task_ends_with_the_outcome_of_the_same_call_made_directly(
    served: tuple[Any, Tools], era: str
) -> None:
    """Valid, invalid and unknown calls, quick and slow: one outcome either way. On
    2026-07-28 a call that ends within the window is answered directly; progress is the
    task's status message.
    """
    server, tools = served
    client, handles = connect(server, era)
    calls = [("add", {"a": 2, "b": 40}), ("add", {"a": "two"}), ("nope", {}), ("slow", {})]
    async with client as mcp:
        tasks = Era(mcp, handles)
        started = [await tasks.start(name, arguments) for name, arguments in calls]
        seen = await tasks.get(started[-1])
        through_tasks = [
            started[n] if not isinstance(started[n], str) else await tasks.result(started[n])
            for n in range(len(calls))
        ]
        # A client without the tasks extension: every call answered directly.
        async with Client(server, mode=era) as plain:
            directly = [await plain.call_tool(name, arguments) for name, arguments in calls]
    assert [outcome(result) for result in directly] == [outcome(result) for result in through_tasks]
    assert (False, {"result": 42}) == outcome(directly[0])[::2]
    assert "invalid input for tool 'add'" in directly[1].content[0].text
    # Quick calls are answered as usual on 2026-07-28; 2025 clients asked for tasks.
    kinds = [isinstance(task, str) for task in started]
    assert ([False, False, False, True] if tasks.modern else [True] * 4) == kinds
    assert ("working", "halfway") == (seen.status, seen.status_message)
    assert ["add", "add", "slow", "add", "add", "slow"] == [
        name for name in tools.settled if name != "nope"
    ]


async def test_each_era_is_told_what_it_can_ask(served: tuple[Any, Tools]) -> None:
    """2025-11-25: the tasks capability, and every tool's taskSupport 'optional';
    2026-07-28: the tasks extension, and no tasks capability of the old kind.
    """
    server, _ = served
    async with Client(server, mode="legacy") as legacy:
        capability = legacy.server_capabilities.tasks
        tools = (await legacy.list_tools()).tools
    assert capability is not None
    assert {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}} == (
        capability.model_dump(exclude_none=True)
    )
    assert {"optional"} == {tool.execution.task_support for tool in tools if tool.execution}
    assert 4 == len(tools)
    async with Client(server, mode="auto") as modern:
        assert {EXTENSION: {}} == modern.server_capabilities.extensions
        assert modern.server_capabilities.tasks is None


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_a_task_stops_its_process_and_settles_no_outcome(
    served: tuple[Any, Tools], era: str
) -> None:
    """tasks/cancel stops the call and the process it started; the task ends cancelled,
    with no result, and no outcome is published. Cancelling again changes nothing.
    """
    server, tools = served
    client, handles = connect(server, era)
    async with client as mcp:
        tasks = Era(mcp, handles)
        task = await tasks.start("sleeper", {"pid": "sleeper.pid"})
        pid = int((tools.root / "sleeper.pid").read_text())
        os.kill(pid, 0)  # running
        cancelled = await tasks.cancel(task)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        state = await tasks.get(task)
        if tasks.modern:
            assert isinstance(cancelled, types.EmptyResult)
            # A wish, acknowledged: the task stays as it ended.
            assert isinstance(await tasks.cancel(task), types.EmptyResult)
        else:
            assert "cancelled" == cancelled.status
            with pytest.raises(MCPError, match="was cancelled: it has no result"):
                await tasks.result(task)
            with pytest.raises(MCPError, match=r"has already ended \(cancelled\)"):
                await tasks.cancel(task)
        after = await mcp.call_tool("add", {"a": 1, "b": 1})
    assert "cancelled" == state.status
    assert not after.is_error
    assert "sleeper" not in tools.settled


@pytest.mark.parametrize("era", ERAS)
async def test_a_task_id_that_is_not_this_clients_is_not_found(
    served: tuple[Any, Tools], era: str
) -> None:
    """A task that never existed, one guessed, one of another replica: each an error that
    says which; the server answers the next request as usual.
    """
    server, _ = served
    client, handles = connect(server, era)
    async with client as mcp:
        tasks = Era(mcp, handles)
        real = await tasks.start("slow", {})
        replica = real.partition("-")[0]
        guessed = f"{replica}-{'A' * 32}"
        for missing in (guessed, "nonsense"):
            with pytest.raises(MCPError, match="not found") as caught:
                await tasks.get(missing)
            assert types.INVALID_PARAMS == caught.value.code
        with pytest.raises(MCPError, match="not found"):
            await tasks.cancel(guessed)
        with pytest.raises(MCPError, match=r"needs params\.taskId"):
            await tasks.get("")
        elsewhere = f"{'0' * len(replica)}-{real.partition('-')[2]}"
        with pytest.raises(MCPError, match="is not held by this replica: tasks need requests"):
            await tasks.get(elsewhere)
        assert "slept" == (await tasks.result(real)).content[0].text


async def test_a_client_past_the_bound_of_live_tasks_is_refused(
    served: tuple[Any, Tools],
) -> None:
    """10,000 tasks asked at once: the server runs its bound, refuses the rest with a
    reason, and keeps answering; tasks/list shows only the caller's own.
    """
    server, _ = served
    accepted: list[str] = []
    refused: list[str] = []
    async with Client(server, mode="legacy") as mcp:
        tasks = Era(mcp, Handles())

        async def ask() -> None:
            try:
                accepted.append(await tasks.start("hang", {}))
            except MCPError as error:
                refused.append(error.message)

        for _ in range(100):
            async with anyio.create_task_group() as group:
                for _ in range(100):
                    group.start_soon(ask)
        listed = await mcp.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        answered = await mcp.call_tool("add", {"a": 1, "b": 2})
        for task in accepted:
            await tasks.cancel(task)
        again = await tasks.start("add", {"a": 1, "b": 1})
    assert _tasks.MAX_LIVE_TASKS == len(accepted) == len(listed.tasks)
    assert 10_000 - _tasks.MAX_LIVE_TASKS == len(refused)
    assert refused[0].startswith("this server already runs 64 tasks, its limit: wait")
    assert {"working"} == {task.status for task in listed.tasks}
    assert not answered.is_error
    assert isinstance(again, str)
    async with Client(server, mode="legacy") as other:
        others = await other.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
    assert [] == others.tasks


async def test_a_task_lives_as_long_as_its_ttl_allows(served: tuple[Any, Tools]) -> None:
    """The client's ttl is honoured up to a cap; a call outliving it fails; an ended task
    past it is gone.
    """
    server, _ = served
    async with Client(server, mode="legacy") as mcp:
        tasks = Era(mcp, Handles())
        capped = await tasks.start("add", {"a": 1, "b": 1}, ttl=10**12)
        usual = await tasks.start("add", {"a": 1, "b": 1})
        short = await tasks.start("add", {"a": 1, "b": 1}, ttl=300)
        outlived = await tasks.start("hang", {}, ttl=1500)
        assert _tasks.MAX_TTL_MS == (await tasks.get(capped)).ttl_ms
        assert _tasks.DEFAULT_TTL_MS == (await tasks.get(usual)).ttl_ms
        with pytest.raises(MCPError, match=r"outlived its task's time to live \(1500 ms\)"):
            await tasks.result(outlived)
        assert "failed" == (await tasks.get(outlived)).status
        await anyio.sleep(0.3)
        with pytest.raises(MCPError, match="not found"):
            await tasks.get(short)
