"""pegboard serve over HTTP: a bearer token, Host and Origin checks, cancel on disconnect."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from serving import wait_until_listening

import pegboard.mcp

# uvicorn, which serves MCP's streamable HTTP, runs on asyncio only.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

TOKEN = "s3cret-token"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class Slow:
    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

    async def __call__(self, input: object, context: pegboard.ToolContext) -> str:
        self.started.set()
        try:
            await anyio.sleep(60)
        except BaseException:
            self.cancelled.set()
            raise
        return "finished"


@pytest.fixture
def slow() -> Slow:
    return Slow()


@pytest.fixture
async def served(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    slow: Slow,
    request: pytest.FixtureRequest,
) -> AsyncIterator[str]:
    """A Location served over HTTP in this process; yields its URL."""
    address = getattr(request, "param", "127.0.0.1")
    host.tools.register({"slow": pegboard.tool(description="Take a minute.", execute=slow)})
    port = free_port(address)
    async with (
        host.location(workspace, plugins=[], storage=storage_dir) as location,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(
            lambda: pegboard.mcp.serve(
                location, transport="http", host=address, port=port, token=TOKEN
            )
        )
        url = f"http://{address}:{port}/mcp"
        await wait_until_listening(url)
        yield url
        tasks.cancel_scope.cancel()


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer", TOKEN],
    ids=["none", "wrong", "scheme", "longer", "empty", "no-scheme"],
)
async def test_law_host_authority_http_requests_need_the_token(
    served: str, authorization: str | None
) -> None:
    """Without the bearer token every request is 401 and never reaches the server."""
    headers = dict(ACCEPT)
    if authorization is not None:
        headers["Authorization"] = authorization
    async with httpx.AsyncClient() as http:
        response = await http.post(served, headers=headers, json=INITIALIZE)
        preflight = await http.get(served, headers=headers)
    assert (401, 401) == (response.status_code, preflight.status_code)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert "mcp-session-id" not in response.headers


async def test_an_mcp_client_with_the_token_calls_tools(served: str) -> None:
    """The SDK's client with Authorization: Bearer lists tools over HTTP."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"bearer {TOKEN}"}  # the scheme is case-insensitive
    async with (
        httpx.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(served, http_client=http)) as mcp,
    ):
        assert ["slow"] == [tool.name for tool in (await mcp.list_tools()).tools]


@pytest.mark.parametrize("served", ["127.0.0.2"], indirect=True)
@pytest.mark.parametrize(
    ("extra", "status"),
    [
        ({"Host": "evil.example"}, 421),
        ({"Origin": "http://evil.example"}, 403),
        ({}, 200),
    ],
    ids=["host", "origin", "good"],
)
async def test_host_and_origin_are_checked_on_any_address(
    served: str, extra: dict[str, str], status: int
) -> None:
    """Bound to 127.0.0.2, Host and Origin must name it: no DNS rebinding."""
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}", **extra}
    async with httpx.AsyncClient() as http:
        response = await http.post(served, headers=headers, json=INITIALIZE)
    assert status == response.status_code


@pytest.mark.parametrize(
    ("host", "hosts"),
    [
        ("192.0.2.7", ["192.0.2.7:*"]),
        ("fd00::7", ["[fd00::7]:*"]),
        ("pegboard.lan", ["pegboard.lan:*"]),
        ("127.0.0.2", ["127.0.0.2:*", "127.0.0.1:*", "localhost:*", "[::1]:*"]),
    ],
)
async def test_a_non_loopback_address_accepts_only_its_own_name(
    host: str, hosts: list[str]
) -> None:
    """Validation stays on for any address, and only a loopback one also answers to
    localhost: a LAN server is reachable under the name it was bound to alone.
    """
    from pegboard.mcp._http import transport_security

    settings = transport_security(host)
    assert settings.enable_dns_rebinding_protection
    assert hosts == settings.allowed_hosts
    assert [f"{scheme}://{name[:-2]}:*" for name in hosts for scheme in ("http", "https")] == (
        settings.allowed_origins
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "needs one way to authenticate clients"),
        ({"token": TOKEN, "host": "0.0.0.0"}, "bind the one address clients connect to"),
        ({"token": TOKEN, "host": "::"}, "bind the one address clients connect to"),
        ({"token": " padded "}, "without surrounding spaces"),
    ],
)
async def test_unguarded_http_is_refused(
    host: pegboard.Host, workspace: Path, options: dict[str, Any], message: str
) -> None:
    """No token, or an address no Host header can name, is an error before serving."""
    async with host.location(workspace, plugins=[]) as location:
        with pytest.raises(ValueError, match=message):
            await pegboard.mcp.serve(location, transport="http", port=free_port(), **options)


async def test_a_disconnected_client_cancels_its_call(served: str, slow: Slow) -> None:
    """A handshake-era client that drops its connection mid-call cancels the call."""
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient() as http:
        response = await http.post(served, headers=headers, json=INITIALIZE)
        headers["mcp-session-id"] = response.headers["mcp-session-id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(served, headers=headers, json=initialized)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow"}}
    async with httpx.AsyncClient() as http, anyio.create_task_group() as tasks:

        async def request() -> None:
            async with http.stream("POST", served, headers=headers, json=call) as stream:
                async for _ in stream.aiter_bytes():
                    pass

        tasks.start_soon(request)
        with anyio.fail_after(10):
            await slow.started.wait()
        tasks.cancel_scope.cancel()  # closes the connection
    with anyio.fail_after(10):
        await slow.cancelled.wait()


#: A bash command that starts a long process and records its ID.
SLEEPER = "sleep 60 & echo $! > sleeper.pid; wait"
#: What a 2026-07-28 request says about its client, in place of a handshake.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def started_process(workspace: Path) -> int:
    """The ID of the process `SLEEPER` started, once it has written it."""
    recorded = workspace / "sleeper.pid"
    with anyio.fail_after(20):
        # Written by a process of another program: nothing to wait on but the file.
        for _ in iter(lambda: recorded.exists() and bool(recorded.read_text().strip()), True):
            await anyio.sleep(0.05)
    return int(recorded.read_text())


async def ended(pid: int) -> bool:
    """Whether process ``pid`` ends within a few seconds."""
    with anyio.move_on_after(10):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            await anyio.sleep(0.05)
    os.kill(pid, 9)
    return False


@pytest.mark.parametrize("era", ["handshake", "2026-07-28"])
async def test_a_disconnected_client_stops_the_process_its_call_started(
    host: pegboard.Host, workspace: Path, storage_dir: Path, era: str
) -> None:
    """A client that drops its connection while the built-in bash runs stops the process
    bash started, on a session (Mcp-Session-Id) and on 2026-07-28 (one POST per call).
    """
    rules = [{"action": action, "resource": "*", "effect": "allow"} for action in ("bash", "edit")]
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    call: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": SLEEPER}},
    }
    # The command writes its host process ID ($$): outside a PID namespace, so unconfined.
    async with (
        host.location(
            workspace, plugins=["builtin"], storage=storage_dir, permissions=rules, sandbox="off"
        ) as location,
        anyio.create_task_group() as server,
    ):
        server.start_soon(
            lambda: pegboard.mcp.serve(location, transport="http", port=port, token=TOKEN)
        )
        await wait_until_listening(url)
        async with httpx.AsyncClient() as http:
            if era == "handshake":
                response = await http.post(url, headers=headers, json=INITIALIZE)
                headers["mcp-session-id"] = response.headers["mcp-session-id"]
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, headers=headers, json=initialized)
            else:
                headers["mcp-protocol-version"] = "2026-07-28"
                headers.update({"mcp-method": "tools/call", "mcp-name": "bash"})
                call["params"]["_meta"] = MODERN_META
        async with httpx.AsyncClient() as http, anyio.create_task_group() as client:

            async def request() -> None:
                async with http.stream("POST", url, headers=headers, json=call) as stream:
                    async for _ in stream.aiter_bytes():
                        pass

            client.start_soon(request)
            pid = await started_process(workspace)
            client.cancel_scope.cancel()  # closes the connection
        assert await ended(pid), "the process the call started outlived its client"
        server.cancel_scope.cancel()


def pegboard_command() -> str:
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    return command


async def serve_process(
    workspace: Path, tmp_path: Path, *extra: str
) -> tuple[subprocess.Popen[str], str, int]:
    port = free_port()
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    process = subprocess.Popen(  # noqa: ASYNC220 - a server that outlives this call
        [pegboard_command(), "serve", "-l", str(workspace), "--http", "--port", str(port), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert process.stderr is not None
    line = await anyio.to_thread.run_sync(process.stderr.readline)
    await wait_until_listening(f"http://127.0.0.1:{port}/mcp")
    return process, line, port


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.terminate()  # SIGTERM, as a client stops the server it started
    return process.communicate(timeout=30)


async def test_law_host_authority_serve_writes_a_new_token_file(
    workspace: Path, tmp_path: Path
) -> None:
    """Without --token-file a token is made, written to a new 0600 file whose path (not
    the token) is printed, and removed when the server stops.
    """
    process, line, port = await serve_process(workspace, tmp_path)
    try:
        path = Path(line.split("the token in ", 1)[1].rstrip(">\n"))
        token = path.read_text().strip()
        assert 0o600 == stat.S_IMODE(path.stat().st_mode)
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, headers=ACCEPT, json=INITIALIZE)
            auth = {**ACCEPT, "Authorization": f"Bearer {token}"}
            accepted = await http.post(url, headers=auth, json=INITIALIZE)
        assert (401, 200) == (refused.status_code, accepted.status_code)
    finally:
        out, err = stop(process)
    assert token not in line + out + err
    assert not path.exists()


async def test_serve_reads_the_token_file(workspace: Path, tmp_path: Path) -> None:
    """--token-file PATH holds the token clients must send; the file is kept."""
    path = tmp_path / "site.token"
    path.write_text("from-the-file\n")
    path.chmod(0o600)
    process, line, port = await serve_process(workspace, tmp_path, "--token-file", str(path))
    try:
        assert str(path) in line
        auth = {**ACCEPT, "Authorization": "Bearer from-the-file"}
        async with httpx.AsyncClient() as http:
            accepted = await http.post(
                f"http://127.0.0.1:{port}/mcp", headers=auth, json=INITIALIZE
            )
        assert 200 == accepted.status_code
    finally:
        stop(process)
    assert path.exists()
