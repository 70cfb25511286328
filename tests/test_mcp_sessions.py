"""Signed, self-contained session IDs: any server holding the key answers any request."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from serving import wait_until_listening

import pegboard.mcp
from pegboard.mcp._sessions import SessionClaims, SessionKey, session_of

# uvicorn, which serves MCP's streamable HTTP, runs on asyncio only.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

KEY = b"k" * 32
TOKEN = "sessions-token"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "agent-7", "version": "1"},
    },
}


def claims() -> SessionClaims:
    return SessionClaims("abc", "2025-11-25", {"name": "a", "version": "1"}, {})


async def test_an_issued_id_loads_back_and_any_change_is_refused() -> None:
    """The signature covers every character; another key's IDs are not this key's."""
    key = SessionKey(KEY)
    issued = key.issue(claims())
    assert claims() == key.load(issued)
    assert "abc" == session_of(issued)
    for position in range(len(issued)):
        changed = (
            issued[:position] + ("A" if issued[position] != "A" else "B") + issued[position + 1 :]
        )
        assert key.load(changed) is None, position
    assert SessionKey(b"o" * 32).load(issued) is None
    assert key.load("not-a-pegboard-id") is None


async def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 32 bytes; this one has 31"):
        SessionKey(b"k" * 31)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def ask(input: object, context: pegboard.ToolContext) -> str:
    return context.agent + " " + context.session_id


Serving = Callable[[bytes | None], AbstractAsyncContextManager[str]]


@pytest.fixture
def serving(host: pegboard.Host, tmp_path: Path) -> Serving:
    host.tools.register({"who": pegboard.tool(description="Who asks.", execute=ask)})

    @asynccontextmanager
    async def serve(key: bytes | None) -> AsyncIterator[str]:
        port = free_port()
        async with (
            host.location(tmp_path, plugins=[]) as location,
            anyio.create_task_group() as group,
        ):
            group.start_soon(
                lambda: pegboard.mcp.serve(
                    location, transport="http", port=port, token=TOKEN, session_key=key
                )
            )
            url = f"http://127.0.0.1:{port}/mcp"
            await wait_until_listening(url)
            yield url
            group.cancel_scope.cancel()

    return serve


def call(name: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": name, "arguments": {}},
    }


def text_of(response: httpx.Response) -> Any:
    """The JSON-RPC message of a JSON or SSE response."""
    import json

    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads([item for item in data if item.strip()][-1])


async def initialize(http: httpx.AsyncClient, url: str) -> str:
    response = await http.post(url, headers=HEADERS, json=INITIALIZE)
    assert 200 == response.status_code, response.text
    return str(response.headers["mcp-session-id"])


async def test_a_session_from_one_server_is_answered_by_another_with_the_key(
    serving: Serving,
) -> None:
    """Initialize on one server, call on another: the second knows the client by its ID."""
    async with serving(KEY) as first, serving(KEY) as second, httpx.AsyncClient() as http:
        session = await initialize(http, first)
        headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        answered = await http.post(second, headers=headers, json=call("who"))
    assert 200 == answered.status_code, answered.text
    result = text_of(answered)["result"]
    assert f"agent-7 {session_of(session)}" == result["content"][0]["text"]


@pytest.mark.parametrize("key", [b"o" * 32, None], ids=["another-key", "no-key"])
async def test_a_server_without_the_key_says_session_not_found(
    serving: Serving, key: bytes | None
) -> None:
    """404, the answer that tells a 2025 client to initialize again."""
    async with serving(KEY) as first, serving(key) as second, httpx.AsyncClient() as http:
        session = await initialize(http, first)
        headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        refused = await http.post(second, headers=headers, json=call("who"))
    assert 404 == refused.status_code
    assert "Session not found" in refused.json()["error"]["message"]


async def test_a_session_request_with_a_bad_id_is_a_400_not_a_202(serving: Serving) -> None:
    """In a session, an id that is an object is an invalid request, not a notification."""
    async with serving(KEY) as url, httpx.AsyncClient() as http:
        session = await initialize(http, url)
        headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        bad = await http.post(url, headers=headers, json={**call("who"), "id": {"a": 1}})
        deep = await http.post(url, headers=headers, content="[" * 100_000 + "]" * 100_000)
    assert (400, -32600) == (bad.status_code, bad.json()["error"]["code"])
    assert (400, -32700) == (deep.status_code, deep.json()["error"]["code"])


async def test_a_2025_client_over_http_is_told_why_it_is_not_asked(
    host: pegboard.Host, tmp_path: Path
) -> None:
    """With client approval, an ask over stateless HTTP is refused, and the refusal says why."""

    async def launch(input: object, context: pegboard.ToolContext) -> str:
        await location.permissions.ask(
            pegboard.PermissionRequest(action="launch", resources=["rocket"])
        )
        return "ran"

    host.tools.register({"launch": pegboard.tool(description="Run make.", execute=launch)})
    approver = pegboard.mcp.ClientApprover(client_approval=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        host.location(tmp_path, plugins=[], approver=approver) as location,
        anyio.create_task_group() as group,
    ):
        group.start_soon(
            lambda: pegboard.mcp.serve(location, transport="http", port=port, token=TOKEN)
        )
        await wait_until_listening(url)
        async with httpx.AsyncClient() as http:
            session = await initialize(http, url)
            headers = {**HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            answered = await http.post(url, headers=headers, json=call("launch"))
        group.cancel_scope.cancel()
    result = text_of(answered)["result"]
    assert result["isError"]
    message = result["content"][0]["text"]
    assert "over stateless HTTP a client on protocol 2025-11-25 cannot be asked" in message
    assert "--allow launch:rocket" in message


def pegboard_command(*arguments: str, home: Path) -> subprocess.CompletedProcess[str]:
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None
    environment = {**os.environ, "XDG_DATA_HOME": str(home)}
    return subprocess.run(
        [command, *arguments], capture_output=True, text=True, env=environment, timeout=60
    )


@pytest.mark.parametrize(
    ("content", "transport", "expected"),
    [
        (
            "short\n",
            ["--http", "--port=8931"],
            "holds 5 bytes, and a session key needs 32 or more; write one with: "
            "openssl rand -hex 32 > ",
        ),
        ("k" * 64, [], "--session-key-file applies to HTTP; add --http"),
    ],
    ids=["short", "stdio"],
)
async def test_a_bad_session_key_file_is_a_usage_error(
    tmp_path: Path, content: str, transport: list[str], expected: str
) -> None:
    """One line naming the option and the fix, exit 2, before anything is served."""
    key = tmp_path / "session.key"
    key.write_text(content)
    key.chmod(0o600)
    result = pegboard_command(
        "serve", "-l", str(tmp_path), *transport, "--session-key-file", str(key), home=tmp_path
    )
    assert 2 == result.returncode
    assert expected in result.stderr
    assert 1 == len(result.stderr.strip().splitlines()), result.stderr


async def test_a_missing_session_key_file_is_made_private(tmp_path: Path) -> None:
    """A new key: 64 hex digits, mode 0600, and the same key on the next read."""
    from pegboard.cli._serve import _session_key

    path = tmp_path / "session.key"
    first = _session_key(path)
    assert first is not None
    assert 64 == len(first)
    assert 0o600 == stat.S_IMODE(path.stat().st_mode)
    assert first == _session_key(path)
