"""Three pegboard serve --http replicas behind a round-robin proxy answer any client."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

# uvicorn serves the replicas; the proxy and the clients run on asyncio.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

TOKEN = "replica-token"
CLIENTS = 20
CALLS = 50
#: Seconds one call may take under the whole suite's load.
CALL_TIMEOUT = 20
ERAS = {"2026-07-28": "auto", "2025-11-25": "legacy"}
PLUGIN = """
    import pegboard

    async def add(input, context):
        return str(input["a"] + input["b"])

    @pegboard.hookimpl
    def activate_location(tools):
        schema = {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
        tools.register(
            {"add": pegboard.tool(description="Add two integers.", execute=add, input=schema)}
        )
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RoundRobin:
    """A TCP proxy that sends each new connection to the next live backend.

    Clients open one connection per request (no keep-alive), so requests are
    spread one by one. A backend that refuses the connection is skipped.
    """

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self._next = itertools.cycle(range(len(ports)))
        self._open: set[asyncio.StreamWriter] = set()

    def close(self) -> None:
        """End every connection, so that each handler returns on its own."""
        for writer in self._open:
            writer.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        for _ in self.ports:
            port = self.ports[next(self._next)]
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
            self._open.add(upstream_writer)
            await asyncio.gather(
                self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
            )
            return
        writer.close()

    @staticmethod
    async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while chunk := await source.read(65536):
                sink.write(chunk)
                await sink.drain()
        except OSError:
            pass
        finally:
            sink.close()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[subprocess.Popen[str]]]:
    """Three pegboard serve --http processes sharing one token and one session key."""
    directory = tmp_path_factory.mktemp("replicas")
    site, root = directory / "site", directory / "location"
    site.mkdir()
    root.mkdir()
    (site / "pegboard_replica.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "replica-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: replica\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pegboard]\nreplica = pegboard_replica\n")
    (root / "pegboard.toml").write_text('plugins = ["replica"]\n')
    token = directory / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    key = directory / "session.key"
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None
    environment = {
        **os.environ,
        "PYTHONPATH": str(site),
        "XDG_DATA_HOME": str(directory / "data"),
    }
    ports = [free_port() for _ in range(3)]
    processes = []
    for port in ports:
        arguments = ["serve", "-l", str(root), "--http", f"--port={port}"]
        arguments += ["--token-file", str(token), "--session-key-file", str(key)]
        processes.append(
            subprocess.Popen(
                [command, *arguments],
                env=environment,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )
    try:
        deadline = time.monotonic() + 60
        for port in ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "a replica did not start"
                    time.sleep(0.1)
        for process, port in zip(processes, ports, strict=True):
            process.port = port  # type: ignore[attr-defined]
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
async def proxy(replicas: list[subprocess.Popen[str]]) -> AsyncIterator[str]:
    """A round-robin proxy over the live replicas; yields the MCP URL through it."""
    balancer = RoundRobin([process.port for process in replicas])  # type: ignore[attr-defined]
    server = await asyncio.start_server(balancer.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/mcp"
        server.close()
        balancer.close()
        await asyncio.sleep(0.1)


async def one_client(url: str, mode: str, client: int) -> int:
    """CALLS calls in order through the proxy; how many were answered right."""
    # A new connection per request: the proxy spreads requests, not clients.
    limits = httpx.Limits(max_keepalive_connections=0)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    answered = 0
    async with (
        httpx.AsyncClient(headers=headers, limits=limits, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as mcp,
    ):
        for call in range(CALLS):
            with anyio.fail_after(CALL_TIMEOUT):
                result = await mcp.call_tool("add", {"a": client, "b": call})
            assert not result.is_error, result
            assert str(client + call) == result.content[0].text  # type: ignore[union-attr]
            answered += 1
    return answered


@pytest.mark.parametrize("era", list(ERAS))
async def test_every_call_succeeds_through_three_replicas(proxy: str, era: str) -> None:
    """20 clients x 50 calls, each request to the next replica: 0 errors on both protocols."""
    with anyio.fail_after(50):
        answered = await asyncio.gather(*(one_client(proxy, ERAS[era], n) for n in range(CLIENTS)))
    assert [CALLS] * CLIENTS == answered
