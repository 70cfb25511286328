"""The in-memory transport: the MCP SDK's and fastmcp's clients on a Location, in process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client, ClientSession
from mcp.shared.message import SessionMessage

import pegboard.mcp

pytestmark = pytest.mark.anyio

#: How a client reaches the transport: the SDK's ClientSession on its streams, the
#: SDK's Client in either protocol era, and fastmcp's Client in either era.
SDK = ["sdk-session", "sdk-auto", "sdk-legacy"]
FASTMCP = ["fastmcp-auto", "fastmcp-legacy"]
#: Each client on each backend it runs on: fastmcp's Client needs asyncio.
CLIENTS = [
    *[
        pytest.param(kind, backend, id=f"{kind}-{backend}")
        for kind in SDK
        for backend in ("asyncio", "trio")
    ],
    *[pytest.param(kind, "asyncio", id=kind) for kind in FASTMCP],
]


@attrs.frozen
class Text:
    text: str


@attrs.frozen
class Shouted:
    shouted: str


class Calls:
    """The Location's tools, and what they saw."""

    def __init__(self) -> None:
        self.contexts: list[pegboard.ToolContext] = []
        self.launched: list[str] = []
        self.started = anyio.Event()
        self.cleaned_up = anyio.Event()

    async def shout(self, input: Text, context: pegboard.ToolContext) -> Shouted:
        self.contexts.append(context)
        return Shouted(input.text.upper())

    async def slow(self, input: object, context: pegboard.ToolContext) -> str:
        self.started.set()
        try:
            await anyio.sleep(60)
        finally:
            self.cleaned_up.set()
        return "never"

    def register(self, location: pegboard.Location) -> None:
        permissions = location.permissions

        async def launch(input: object, context: pegboard.ToolContext) -> str:
            await permissions.ask(pegboard.PermissionRequest(action="launch", resources=["moon"]))
            self.launched.append("moon")
            return "launched"

        location.tools.register(
            {
                "shout": pegboard.tool(
                    description="Shout.", execute=self.shout, input=Text, output=Shouted
                ),
                "slow": pegboard.tool(description="Never finish.", execute=self.slow),
                "launch": pegboard.tool(description="Launch, with permission.", execute=launch),
            }
        )


@attrs.frozen
class Result:
    """What any of the clients got back from one call."""

    is_error: bool
    text: str
    structured: Any


class Connected:
    """One client connected through the transport, seen the same way whatever it is."""

    def __init__(
        self,
        names: Callable[[], Awaitable[list[str]]],
        call: Callable[[str, dict[str, Any]], Awaitable[Result]],
    ) -> None:
        self.names = names
        self.call = call
        #: The permission questions the client was asked.
        self.asked: list[str] = []


def _result(content: list[Any], is_error: bool, structured: Any) -> Result:
    text = "".join(block.text for block in content if isinstance(block, types.TextContent))
    return Result(bool(is_error), text, structured)


@asynccontextmanager
async def connect(
    kind: str, transport: pegboard.mcp.InMemoryTransport, answer: dict[str, str] | None = None
) -> AsyncIterator[Connected]:
    """Connect a client of ``kind``; it answers permission questions with ``answer``."""

    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=answer)

    if kind.startswith("fastmcp"):
        import fastmcp

        async def handler(message: str, kind: object, params: object, context: object) -> Any:
            asked.append(message)
            return answer if answer is not None else types.ElicitResult(action="decline")

        client = fastmcp.Client(
            transport, mode=kind.removeprefix("fastmcp-"), elicitation_handler=handler
        )
        async with client:

            async def names() -> list[str]:
                return [tool.name for tool in await client.list_tools()]

            async def call(name: str, arguments: dict[str, Any]) -> Result:
                got = await client.call_tool(name, arguments, raise_on_error=False)
                return _result(got.content, got.is_error, got.structured_content)

            connected = Connected(names, call)
            connected.asked = asked
            yield connected
        return

    @asynccontextmanager
    async def session() -> AsyncIterator[Any]:
        if kind == "sdk-session":
            async with (
                transport as (read, write),
                ClientSession(read, write, elicitation_callback=elicit) as opened,
            ):
                await opened.initialize()
                yield opened
        else:
            mode = kind.removeprefix("sdk-")
            async with Client(transport, mode=mode, elicitation_callback=elicit) as opened:
                yield opened

    async with session() as opened:

        async def names() -> list[str]:
            return [tool.name for tool in (await opened.list_tools()).tools]

        async def call(name: str, arguments: dict[str, Any]) -> Result:
            got = await opened.call_tool(name, arguments)
            return _result(got.content, got.is_error, got.structured_content)

        connected = Connected(names, call)
        connected.asked = asked
        yield connected


def transport_of(location: pegboard.Location, kind: str) -> pegboard.mcp.InMemoryTransport:
    if kind.startswith("fastmcp"):
        import fastmcp  # noqa: F401 - fastmcp recognises transports made once it is loaded
    return pegboard.mcp.InMemoryTransport(location)


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
async def served(
    host: pegboard.Host, workspace: Path, storage_dir: Path, calls: Calls
) -> AsyncIterator[pegboard.Location]:
    async with host.location(
        workspace, plugins=[], storage=storage_dir, approver=pegboard.mcp.ClientApprover()
    ) as location:
        calls.register(location)
        yield location


@pytest.mark.parametrize(("kind", "anyio_backend"), CLIENTS)
async def test_a_client_lists_and_calls_the_tools(
    served: pegboard.Location, calls: Calls, kind: str
) -> None:
    """Every client lists the Location's tools and calls them, with the call's identity."""
    async with connect(kind, transport_of(served, kind)) as client:
        names = await client.names()
        first = await client.call("shout", {"text": "hello"})
        second = await client.call("shout", {"text": "again"})
        invalid = await client.call("shout", {"text": 7})
    assert ["launch", "shout", "slow"] == sorted(names)
    assert Result(False, '{"shouted":"HELLO"}', {"shouted": "HELLO"}) == attrs.evolve(
        first, text=first.text.replace(" ", "")
    )
    assert {"shouted": "AGAIN"} == second.structured
    assert invalid.is_error
    assert "invalid input for tool 'shout'" in invalid.text
    one, two = calls.contexts
    assert one.session_id == two.session_id
    assert one.session_id.startswith("mcp-")
    assert one.call_id != two.call_id
    assert one.call_id == one.message_id


@pytest.mark.parametrize(("kind", "anyio_backend"), CLIENTS)
async def test_a_call_the_client_cancels_is_cancelled_and_settles_nothing(
    host: pegboard.Host, served: pegboard.Location, calls: Calls, kind: str
) -> None:
    """Cancelling a call in the client cancels the tool, while the connection goes on;
    no outcome is published for it.
    """
    settled: list[str] = []

    class Watch:
        @pegboard.hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            settled.append(event.name)

    host.add_plugin("watch", Watch())
    async with host.location(served.root, plugins=["watch"]) as location:
        calls.register(location)
        async with connect(kind, transport_of(location, kind)) as client:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call, "slow", {})
                with anyio.fail_after(10):
                    await calls.started.wait()
                tasks.cancel_scope.cancel()
            with anyio.fail_after(10):
                await calls.cleaned_up.wait()
            after = await client.call("shout", {"text": "still here"})
    assert (["shout"], False) == (settled, after.is_error)


async def test_leaving_the_connection_cancels_the_calls_in_flight(
    served: pegboard.Location, calls: Calls
) -> None:
    """A call in flight does not outlive the connection, even when the client leaves
    without closing its streams.
    """

    def message(method: str, id: int | None = None, **params: Any) -> SessionMessage:
        if id is None:
            return SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method))
        return SessionMessage(
            types.JSONRPCRequest(jsonrpc="2.0", id=id, method=method, params=params)
        )

    async with pegboard.mcp.InMemoryTransport(served) as (read, write):
        client = {"name": "raw", "version": "0"}
        await write.send(
            message(
                "initialize", 1, protocolVersion="2025-06-18", capabilities={}, clientInfo=client
            )
        )
        with anyio.fail_after(10):
            await read.receive()
        await write.send(message("notifications/initialized"))
        await write.send(message("tools/call", 2, name="slow"))
        with anyio.fail_after(10):
            await calls.started.wait()
    assert calls.cleaned_up.is_set()


async def test_one_transport_connects_one_sdk_client_at_a_time(
    served: pegboard.Location,
) -> None:
    """Entering a connected transport again is refused; connect() opens more."""
    transport = pegboard.mcp.InMemoryTransport(served)
    async with transport:
        with pytest.raises(RuntimeError, match="already connected"):
            await transport.__aenter__()
        async with transport.connect() as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert (await session.list_tools()).tools
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()  # usable again once left


@pytest.mark.parametrize(("kind", "anyio_backend"), CLIENTS)
async def test_no_process_or_socket_is_opened(
    served: pegboard.Location, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Connecting, listing and calling open neither a subprocess nor a socket."""
    transport = transport_of(served, kind)

    def refuse(*args: object, **kwargs: object) -> Any:
        raise AssertionError("the in-memory transport opened a process or a socket")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
    monkeypatch.setattr(socket, "socket", refuse)
    async with connect(kind, transport) as client:
        assert "shout" in await client.names()
        assert not (await client.call("shout", {"text": "quiet"})).is_error


@pytest.mark.parametrize(("kind", "anyio_backend"), CLIENTS)
async def test_law_host_authority_in_memory_clients_do_not_approve_their_own_requests(
    served: pegboard.Location, calls: Calls, kind: str
) -> None:
    """In memory as over stdio, a client that would answer "always" is never asked:
    the request is refused, naming the rule the operator could add.
    """
    async with connect(kind, transport_of(served, kind), {"decision": "always"}) as client:
        result = await client.call("launch", {})
    assert (True, [], []) == (result.is_error, calls.launched, client.asked)
    assert "--allow launch:moon" in result.text


@pytest.mark.parametrize(("kind", "anyio_backend"), CLIENTS)
@pytest.mark.parametrize(
    ("approver", "rules", "asked", "ran"),
    [
        ("client-approval", [], ["Allow launch on moon?"], True),
        ("client-approval", [{"action": "launch", "resource": "*", "effect": "deny"}], [], False),
        ("none", [], [], False),
    ],
    ids=["client-approval", "denied", "no-approver"],
)
async def test_law_host_authority_in_memory_answers_only_what_the_host_lets_ask(
    host: pegboard.Host,
    workspace: Path,
    calls: Calls,
    kind: str,
    approver: str,
    rules: list[dict[str, str]],
    asked: list[str],
    ran: bool,
) -> None:
    """A client's "always" runs calls only when the host lets clients approve, holds in
    memory and is never saved; it cannot lift a deny rule, and with no approver at all
    the request is refused.
    """
    from pegboard._permissions import default_approvals_file

    async with host.location(
        workspace,
        plugins=[],
        permissions=rules,
        approver=pegboard.mcp.ClientApprover(client_approval=True)
        if approver == "client-approval"
        else None,
    ) as location:
        calls.register(location)
        async with connect(kind, transport_of(location, kind), {"decision": "always"}) as client:
            first = await client.call("launch", {})
            second = await client.call("launch", {})
    assert (not ran, not ran) == (first.is_error, second.is_error)
    assert (["moon", "moon"] if ran else [], asked) == (calls.launched, client.asked)
    assert not default_approvals_file(workspace).exists()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_fastmcp_mounts_the_location_in_its_own_server(
    served: pegboard.Location, calls: Calls
) -> None:
    """fastmcp proxies the transport into a FastMCP server, under a namespace."""
    fastmcp = pytest.importorskip("fastmcp")
    from fastmcp.server import create_proxy

    gateway = fastmcp.FastMCP("gateway")
    gateway.mount(create_proxy(pegboard.mcp.InMemoryTransport(served)), namespace="board")
    async with fastmcp.Client(gateway) as client:
        names = [tool.name for tool in await client.list_tools()]
        result = await client.call_tool("board_shout", {"text": "mounted"})
    assert {"board_launch", "board_shout", "board_slow"} <= set(names)
    assert {"shouted": "MOUNTED"} == result.structured_content


def test_pegboard_never_imports_fastmcp() -> None:
    """Making and using a transport loads no fastmcp, which would reconfigure the program."""
    program = """
import sys, anyio, mcp, pegboard, pegboard.mcp

async def main():
    async with pegboard.Host().location(".", plugins=[]) as location:
        async with mcp.Client(pegboard.mcp.InMemoryTransport(location)) as client:
            await client.list_tools()

anyio.run(main)
assert "fastmcp" not in sys.modules, "pegboard imported fastmcp"
"""
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
