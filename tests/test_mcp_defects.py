"""pegboard serve keeps defects to itself and answers malformed requests with JSON-RPC errors."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from mcp import Client, MCPError
from serving import wait_until_listening

import pegboard.mcp
from pegboard.mcp._server import DEFECT_MESSAGE

pytestmark = pytest.mark.anyio

SECRET = "postgres://admin:hunter2@db.internal/prod"
TOKEN = "defects-token"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


async def crash(input: object, context: pegboard.ToolContext) -> str:
    raise RuntimeError(f"cannot connect to {SECRET}")


class Crashing:
    """An execute_after hook that fails with a secret in its message."""

    @pegboard.hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> None:
        raise ValueError(f"audit store {SECRET} is down")


def tools(host: pegboard.Host) -> None:
    host.tools.register(
        {
            "crash": pegboard.tool(description="Always crash.", execute=crash),
            "fine": pegboard.tool(description="Answer.", execute=_fine),
        }
    )


async def _fine(input: object, context: pegboard.ToolContext) -> str:
    return "fine"


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_crashing_tools_text_reaches_no_client_and_is_logged(
    host: pegboard.Host, workspace: Path, era: str, caplog: pytest.LogCaptureFixture
) -> None:
    """On both protocol eras the client reads a fixed message; the log has the exception."""
    tools(host)
    async with (
        host.location(workspace, plugins=[]) as location,
        Client(pegboard.mcp.build_server(location), mode=era) as mcp,
    ):
        with (
            caplog.at_level(logging.ERROR, logger="pegboard.mcp"),
            pytest.raises(MCPError) as raised,
        ):
            await mcp.call_tool("crash", {})
    assert DEFECT_MESSAGE == raised.value.error.message
    assert SECRET not in repr(raised.value.error)
    assert any(SECRET in str(record.exc_info[1]) for record in caplog.records if record.exc_info)


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_failing_hook_is_named_but_its_text_stays_on_the_server(
    host: pegboard.Host, workspace: Path, era: str
) -> None:
    """A PluginError tells the client which plugin failed, not what it said."""
    tools(host)
    host.add_plugin("audit", Crashing())
    async with (
        host.location(workspace, plugins=["audit"]) as location,
        Client(pegboard.mcp.build_server(location), mode=era) as mcp,
    ):
        with pytest.raises(MCPError) as raised:
            await mcp.call_tool("fine", {})
    message = raised.value.error.message
    assert "plugin 'audit' failed (hook)" in message
    assert SECRET not in message


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
async def served(host: pegboard.Host, workspace: Path) -> AsyncIterator[str]:
    tools(host)
    port = free_port()
    async with (
        host.location(workspace, plugins=[]) as location,
        anyio.create_task_group() as group,
    ):
        group.start_soon(
            lambda: pegboard.mcp.serve(location, transport="http", port=port, token=TOKEN)
        )
        url = f"http://127.0.0.1:{port}/mcp"
        await wait_until_listening(url)
        yield url
        group.cancel_scope.cancel()


def call(request_id: Any) -> str:
    params = '"params": {"name": "fine", "arguments": {}}'
    return f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", {params}}}'


LIST = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/list",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}

LIST_HEADERS = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}

MALFORMED = {
    "nested 100,000 deep": ("[" * 100_000 + "]" * 100_000, -32700, "not JSON"),
    "nested in params": (
        '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": '
        + "[" * 100_000
        + "]" * 100_000
        + "}}",
        -32700,
        "not JSON",
    ),
    "id NaN": (call("NaN"), -32700, "not JSON"),
    "id Infinity": (call("Infinity"), -32700, "not JSON"),
    "id object": (call('{"a": 1}'), -32600, "not an object"),
    "id array": (call("[1]"), -32600, "not an array"),
    "id fraction": (call("1.5"), -32600, "not a fraction"),
    "id true": (call("true"), -32600, "not a boolean"),
    "id null": (call("null"), -32600, "not null"),
    "a number": ("7", -32600, "is an object"),
    "a batch with a bad id": ("[" + call('{"a": 1}') + "]", -32600, "not an object"),
}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_request_gets_a_jsonrpc_error(
    served: str, case: str, protocol: str
) -> None:
    """Never a 500 nor a silent 202: a 400 with the JSON-RPC error and what was wrong."""
    body, code, words = MALFORMED[case]
    headers = {**HEADERS, "MCP-Protocol-Version": protocol}
    async with httpx.AsyncClient() as http:
        response = await http.post(served, headers=headers, content=body)
        # The server is unharmed: a good request still gets its answer.
        good = await http.post(served, headers={**HEADERS, **LIST_HEADERS}, json=LIST)
    assert 400 == response.status_code, response.text
    error = response.json()["error"]
    assert code == error["code"]
    assert words in error["message"]
    assert good.status_code == 200, good.text


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_json_nested_within_the_limit_is_not_a_defect(served: str) -> None:
    """Arguments nested 1,000 deep pass the gate and get an answer, not a 500."""
    body = (
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", '
        '"params": {"name": "fine", "arguments": {"x": ' + "[" * 1000 + "]" * 1000 + "}}}"
    )
    headers = {**HEADERS, "MCP-Protocol-Version": "2026-07-28"}
    async with httpx.AsyncClient() as http:
        response = await http.post(served, headers=headers, content=body)
    assert response.status_code < 500, response.text
