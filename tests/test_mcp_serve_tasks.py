"""pegboard serve runs a call as a task when a client asks: the 2025-11-25 task methods
(``params.task``, ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel``) and
the 2026-07-28 tasks extension (``resultType: "task"``, ``tasks/get``, ``tasks/update``,
``tasks/cancel``), in memory with the SDK's client, and over HTTP.
"""

from __future__ import annotations

import contextlib
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
        await context.progress(pegboard.Progress(message="adding"))
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
        updates: list[str | None] = []

        async def progress(current: float, total: float | None, message: str | None) -> None:
            updates.append(message)

        await mcp.call_tool("add", {"a": 1, "b": 1}, progress_callback=progress)
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
    # A call answered directly reports progress as usual, task or not.
    assert ["adding"] == updates
    # Each call settled once, through a task or not.
    assert ["add"] * 5 + ["nope"] * 2 + ["slow"] * 2 == sorted(tools.settled)


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
        replica, _, secret = real.partition("-")
        assert len(secret) >= 32  # 192 random bits
        guessed = f"{replica}-{'A' * 32}"
        for missing in (guessed, "nonsense"):
            with pytest.raises(MCPError, match="not found") as caught:
                await tasks.get(missing)
            assert types.INVALID_PARAMS == caught.value.code
        with pytest.raises(MCPError, match="not found"):
            await tasks.cancel(guessed)
        with pytest.raises(MCPError, match=r"needs params\.taskId"):
            await tasks.get("")
        if not tasks.modern:
            dispatcher = mcp.session._dispatcher  # type: ignore[attr-defined]
            with pytest.raises(MCPError, match=r"tools/call params are invalid: name: ") as bad:
                await dispatcher.send_raw_request("tools/call", {"name": 5, "task": {}}, {})
            assert types.INVALID_PARAMS == bad.value.code
        elsewhere = f"{'0' * len(replica)}-{real.partition('-')[2]}"
        with pytest.raises(MCPError, match="is not held by this replica: tasks need requests"):
            await tasks.get(elsewhere)
        assert "slept" == (await tasks.result(real)).content[0].text


async def test_law_per_call_rejection_a_client_past_the_bound_of_live_tasks_is_refused(
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


@pytest.mark.parametrize("era", ERAS)
async def test_law_host_authority_a_task_asks_no_client_for_approval(
    host: pegboard.Host, workspace: Path, era: str
) -> None:
    """Once a call is a task, a permission question has no request to ride: the call is
    refused with the rule to add, and the client, willing to approve, is never asked.
    """
    asked: list[str] = []
    runs: list[str] = []

    async def approve(context: object, params: types.ElicitRequestFormParams) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "always"})

    approver = pegboard.mcp.ClientApprover(client_approval=True)
    async with host.location(workspace, plugins=[], approver=approver) as location:

        async def launch(input: object, context: pegboard.ToolContext) -> str:
            await anyio.sleep(SLOW)
            request = pegboard.PermissionRequest(action="launch", resources=["moon"])
            await location.permissions.ask(request)
            runs.append("moon")
            return "launched"

        location.tools.register({"launch": pegboard.tool(description="Launch.", execute=launch)})
        handles = Handles()
        server = pegboard.mcp.build_server(location)
        async with Client(
            server, mode=era, extensions=[handles], elicitation_callback=approve
        ) as mcp:
            tasks = Era(mcp, handles)
            result = await tasks.result(await tasks.start("launch", {}))
    assert ([], []) == (asked, runs)
    assert result.is_error
    assert "a call that runs as a task cannot ask its client" in result.content[0].text
    assert "--allow launch:moon" in result.content[0].text


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


# --- Over HTTP: replicas, sessions, and pegboard's own mount as the client --------------

TOKEN = "tasks-token"
KEY = b"t" * 32


class Recorder:
    """ASGI middleware: the JSON-RPC methods a server was sent; with ``handshake_only``,
    a 2026-07-28 request is refused, so that clients fall back to 2025-11-25.
    """

    def __init__(self, app: Any, *, handshake_only: bool = False) -> None:
        self.app = app
        self.handshake_only = handshake_only
        self.methods: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import json

        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        version = dict(scope["headers"]).get(b"mcp-protocol-version", b"")
        if self.handshake_only and version.startswith(b"2026"):
            body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"2025 only"}}'
            start = {"type": "http.response.start", "status": 400}
            await send({**start, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        with contextlib.suppress(ValueError):
            self.methods.append(json.loads(body).get("method"))
        sent = False

        async def replay() -> Any:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@contextlib.asynccontextmanager
async def replicas(
    location: pegboard.Location, count: int, *, handshake_only: bool = False
) -> AsyncIterator[list[tuple[str, Recorder]]]:
    """``count`` HTTP servers of ``location`` sharing a session key: their URLs."""
    from serving import wait_until_listening

    from pegboard.mcp._serve import _serve_http

    served = []
    async with anyio.create_task_group() as group:
        for _ in range(count):
            port = _free_port()
            app = pegboard.mcp.http_app(
                pegboard.mcp.build_server(location), token=TOKEN, session_key=KEY
            )
            recorder = Recorder(app, handshake_only=handshake_only)
            group.start_soon(_serve_http, recorder, "127.0.0.1", port)
            served.append((f"http://127.0.0.1:{port}/mcp", recorder))
        await wait_until_listening(*(url for url, _ in served))
        yield served
        group.cancel_scope.cancel()


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def _message(response: Any) -> Any:
    """The JSON-RPC message of a JSON or SSE response."""
    import json

    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads([item for item in data if item.strip()][-1])


@pytest.fixture
async def location(host: pegboard.Host, workspace: Path) -> AsyncIterator[pegboard.Location]:
    tools = Tools(workspace)
    host.tools.register({"slow": pegboard.tool(description="Take a while.", execute=tools.slow)})
    async with host.location(workspace, plugins=[]) as location:
        yield location


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio only
async def test_over_http_a_task_answers_its_own_session_on_its_own_replica(
    location: pegboard.Location,
) -> None:
    """Two 2025 sessions and two replicas sharing the session key: another session's task
    is not found, another replica says tasks need routing to theirs, the owner gets its
    result; a 2026 request that does not declare the extension is told it must.
    """
    import httpx2 as httpx

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "agent", "version": "1"},
        },
    }

    def request(method: str, **params: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}

    async with replicas(location, 2) as [(first, _), (second, _)], httpx.AsyncClient() as http:
        sessions = []
        for _ in range(2):
            answered = await http.post(first, headers=HEADERS, json=initialize)
            sessions.append(
                {
                    **HEADERS,
                    "Mcp-Session-Id": answered.headers["mcp-session-id"],
                    "MCP-Protocol-Version": "2025-11-25",
                }
            )
        mine, theirs = sessions
        created = _message(
            await http.post(
                first, headers=mine, json=request("tools/call", name="slow", arguments={}, task={})
            )
        )
        task = created["result"]["task"]["taskId"]
        borrowed = [
            _message(await http.post(first, headers=theirs, json=request(method, taskId=task)))
            for method in ("tasks/get", "tasks/result", "tasks/cancel")
        ]
        listed = _message(await http.post(first, headers=theirs, json=request("tasks/list")))
        elsewhere = _message(
            await http.post(second, headers=mine, json=request("tasks/get", taskId=task))
        )
        result = _message(
            await http.post(first, headers=mine, json=request("tasks/result", taskId=task))
        )
        modern = {
            **HEADERS,
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tasks/get",
            "Mcp-Name": task,
        }
        envelope = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        undeclared = _message(
            await http.post(
                first, headers=modern, json=request("tasks/get", taskId=task, _meta=envelope)
            )
        )
    assert "working" == created["result"]["task"]["status"]
    for refused in borrowed:
        assert types.INVALID_PARAMS == refused["error"]["code"]
        assert "not found" in refused["error"]["message"]
    assert [] == listed["result"]["tasks"]
    assert (
        "is not held by this replica: tasks need requests routed" in (elsewhere["error"]["message"])
    )
    assert "slept" == result["result"]["content"][0]["text"]
    assert types.MISSING_REQUIRED_CLIENT_CAPABILITY == undeclared["error"]["code"]
    assert {"extensions": {EXTENSION: {}}} == undeclared["error"]["data"]["requiredCapabilities"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio only
@pytest.mark.parametrize("handshake_only", [True, False], ids=["2025-11-25", "2026-07-28"])
async def test_pegboards_mount_runs_a_served_call_as_a_task(
    host: pegboard.Host,
    location: pegboard.Location,
    tmp_path: Path,
    handshake_only: bool,
    context: Any,
) -> None:
    """pegboard's mount, as the client of pegboard serve: the call runs as a task (polled
    to its end) and its outcome is the one the served Location gives directly.
    """
    mounting = tmp_path / "mounting"
    mounting.mkdir()
    direct = await location.prepare().execute(pegboard.ToolCall("slow", {}, context()))
    async with replicas(location, 1, handshake_only=handshake_only) as [(url, recorder)]:
        remote = {"url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        plugins = [{"name": "mcp", "options": {"servers": {"far": remote}}}]
        rules = [{"action": "mcp.*", "resource": "*", "effect": "allow"}]
        async with pegboard.Host().location(
            mounting, plugins=plugins, trusted=("mcp",), permissions=rules
        ) as mounted:
            assert not mounted.plugin_errors
            through = await mounted.prepare().execute(pegboard.ToolCall("far_slow", {}, context()))
    assert isinstance(through, pegboard.Completed)
    assert direct.content == through.content
    assert "tasks/get" in recorder.methods
    # The era the mount spoke: the handshake and tasks/result, or neither.
    assert handshake_only == ("initialize" in recorder.methods)
    assert handshake_only == ("tasks/result" in recorder.methods)
