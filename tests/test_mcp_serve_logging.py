"""pegboard serve sends a tool's log messages to its MCP client, at the level asked for."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

import pegboard.mcp

pytestmark = pytest.mark.anyio


async def chatty(input: object, context: pegboard.ToolContext) -> str:
    await context.log("debug", "looking")
    await context.log("info", "found 3 files")
    await context.log("error", "one was unreadable", {"path": "c.txt"})
    return "done"


@pytest.fixture
async def served(host: pegboard.Host, workspace: Path) -> AsyncIterator[pegboard.Location]:
    host.tools.register({"chatty": pegboard.tool(description="Log a little.", execute=chatty)})
    async with host.location(workspace, plugins=[]) as location:
        yield location


def received() -> tuple[list[types.LoggingMessageNotificationParams], object]:
    seen: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(params)

    return seen, on_log


async def test_a_handshake_client_gets_every_level_until_it_sets_one(
    served: pegboard.Location,
) -> None:
    """Without logging/setLevel every message arrives; after it, only that level and up."""
    seen, on_log = received()
    server = pegboard.mcp.build_server(served)
    async with Client(server, mode="legacy", logging_callback=on_log) as mcp:  # type: ignore[arg-type]
        assert mcp.server_capabilities.logging is not None
        await mcp.call_tool("chatty", {})
        everything = [(entry.level, entry.data) for entry in seen]
        seen.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await mcp.set_logging_level("warning")
        await mcp.call_tool("chatty", {})
    assert [
        ("debug", "looking"),
        ("info", "found 3 files"),
        ("error", {"message": "one was unreadable", "data": {"path": "c.txt"}}),
    ] == everything
    assert [("error", "chatty")] == [(entry.level, entry.logger) for entry in seen]


async def test_one_clients_level_is_not_anothers(served: pegboard.Location) -> None:
    """logging/setLevel holds for the client that sent it alone."""
    quiet_seen, quiet_log = received()
    loud_seen, loud_log = received()
    server = pegboard.mcp.build_server(served)
    async with (
        Client(server, mode="legacy", logging_callback=quiet_log) as quiet,  # type: ignore[arg-type]
        Client(server, mode="legacy", logging_callback=loud_log) as loud,  # type: ignore[arg-type]
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await quiet.set_logging_level("emergency")
        await quiet.call_tool("chatty", {})
        await loud.call_tool("chatty", {})
    assert ([], 3) == (quiet_seen, len(loud_seen))


@pytest.mark.parametrize(("level", "expected"), [(None, []), ("info", ["info", "error"])])
async def test_a_2026_client_gets_what_each_request_opted_in_to(
    served: pegboard.Location, level: types.LoggingLevel | None, expected: list[str]
) -> None:
    """On 2026-07-28 a request's own log level decides; without one nothing is sent."""
    seen, on_log = received()
    server = pegboard.mcp.build_server(served)
    async with Client(server, logging_callback=on_log, log_level=level) as mcp:  # type: ignore[arg-type]
        result = await mcp.call_tool("chatty", {})
    assert not result.is_error
    assert expected == [entry.level for entry in seen]
