"""Calls per second of one ``pegboard serve --http`` process against the SDK's and fastmcp's.

Run ``python benchmarks/bench_mcp_http.py`` (``--quick`` for a fast smoke run). The
same tool -- add two integers, return ``{"total": 3}`` -- is served over streamable
HTTP by three processes: ``pegboard serve --http`` (the tool comes from a plugin the
host trusts, so that it runs in the server's process as the others' tools do), the
official MCP SDK's ``MCPServer`` with ``stateless_http=True``, and fastmcp's
``FastMCP`` with ``stateless_http=True``; a fourth, ``pegboard serve --http`` with the
plugin confined in its sandboxed worker (pegboard's default for a plugin the host did
not trust), shows what confinement costs. The same client, the SDK's ``Client``, runs
CLIENTS concurrent clients of CALLS calls each against one server at a time, on both
protocol versions (2026-07-28, and 2025-11-25 with its handshake) unless ``--era``
picks one; the servers take turns for ROUNDS rounds, the order rotated each round, so
that machine noise hits all alike. For each run it records the calls per second and
the server's CPU time per call (its process and its children, from ``/proc``: what the
other processes of a busy machine do not inflate). It prints Markdown tables (the best
and the median round) and the ratios (target: pegboard at least 1.0x each), and always
exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs

try:
    import httpx2 as httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
except ImportError:  # pragma: no cover - the benchmark needs the mcp extra
    sys.exit("bench_mcp_http.py needs the MCP SDK: pip install -e '.[mcp]'")

from bench_mcp import PLUGIN  # beside this script on sys.path

TOKEN = "bench-token"
ARGUMENTS = {"a": 1, "b": 2}
TARGET = 1.0

SDK_SERVER = """
    import sys
    from typing import TypedDict

    from mcp.server.mcpserver import MCPServer

    # Warnings only, as the others log: no line per request.
    app = MCPServer("bench", log_level="WARNING")

    class AddTotal(TypedDict):
        total: int

    @app.tool()
    async def add(a: int, b: int) -> AddTotal:
        \"\"\"Add two integers.\"\"\"
        return {"total": a + b}

    app.run("streamable-http", port=int(sys.argv[1]), stateless_http=True)
"""

FASTMCP_SERVER = """
    import sys

    from fastmcp import FastMCP

    app = FastMCP("bench")

    @app.tool
    async def add(a: int, b: int) -> dict[str, int]:
        \"\"\"Add two integers.\"\"\"
        return {"total": a + b}

    app.run("http", port=int(sys.argv[1]), stateless_http=True, show_banner=False,
            log_level="warning")
"""


#: The servers, by the name the tables give them; the first is pegboard's.
PEGBOARD = "pegboard serve --http"
CONFINED = "pegboard serve --http, plugin confined"
PEERS = ("MCP SDK", "fastmcp")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@attrs.frozen
class Served:
    """A server process under test."""

    url: str
    pid: int


@contextlib.contextmanager
def servers(directory: Path) -> Iterator[dict[str, Served]]:
    """Start the servers; yield them by name."""
    site, root = directory / "site", directory / "location"
    site.mkdir()
    root.mkdir()
    (site / "pegboard_bench.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "bench-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pegboard]\nbench = pegboard_bench\n")
    (root / "pegboard.toml").write_text('plugins = ["bench"]\n')
    token = directory / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    (directory / "sdk_server.py").write_text(textwrap.dedent(SDK_SERVER))
    (directory / "fastmcp_server.py").write_text(textwrap.dedent(FASTMCP_SERVER))
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent)) or "pegboard"
    environment = {
        **os.environ,
        "PYTHONPATH": str(site),
        "XDG_DATA_HOME": str(directory / "data"),
        "FASTMCP_LOG_LEVEL": "WARNING",
    }
    ports = {name: free_port() for name in (PEGBOARD, *PEERS, CONFINED)}
    serve = (command, "serve", "-l", str(root), "--http", "--token-file", str(token))
    commands = {
        PEGBOARD: [*serve, f"--port={ports[PEGBOARD]}", "--trust", "bench"],
        "MCP SDK": [sys.executable, str(directory / "sdk_server.py"), str(ports["MCP SDK"])],
        "fastmcp": [sys.executable, str(directory / "fastmcp_server.py"), str(ports["fastmcp"])],
        CONFINED: [*serve, f"--port={ports[CONFINED]}"],
    }
    processes = {
        name: subprocess.Popen(
            argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for name, argv in commands.items()
    }
    try:
        deadline = time.monotonic() + 60
        for port in ports.values():
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("a server did not start within 60 s")
                    time.sleep(0.1)
        yield {
            name: Served(f"http://127.0.0.1:{ports[name]}/mcp", process.pid)
            for name, process in processes.items()
        }
    finally:
        for process in processes.values():
            process.terminate()
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system) of process ``pid`` and its live descendants so far."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(child) for child in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue  # gone, or no /proc here: counted as nothing
    return total


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

#: The protocol eras a client can speak, with the SDK client's ``mode`` for each.
ERAS = {"2026-07-28": "auto", "2025-11-25": "legacy"}


async def one_client(url: str, calls: int, era: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), mode=ERAS[era]) as client,
    ):
        assert client.protocol_version == era, client.protocol_version
        for _ in range(calls):
            result = await client.call_tool("add", ARGUMENTS)
            # Time only the successful path.
            assert result.structured_content == {"total": 3}, result


@attrs.frozen
class Run:
    """One run against one server: its calls per second and CPU milliseconds per call."""

    rate: float
    cpu: float


async def run(served: Served, clients: int, calls: int, era: str) -> Run:
    used = cpu_seconds(served.pid)
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one_client, served.url, calls, era)
    elapsed = time.perf_counter() - start
    used = cpu_seconds(served.pid) - used
    return Run(clients * calls / elapsed, 1000 * used / (clients * calls))


async def measure(
    served: dict[str, Served], clients: int, calls: int, rounds: int, eras: list[str]
) -> dict[tuple[str, str], list[Run]]:
    """Runs by (era, server), round by round.

    Each round runs every era against every server, in an order rotated from
    round to round, so that a slow spell of the machine falls on each alike.
    """
    pairs = [(era, name) for era in eras for name in served]
    for era, name in pairs:  # warm-up
        await run(served[name], 1, 5, era)
    figures: dict[tuple[str, str], list[Run]] = {pair: [] for pair in pairs}
    names = list(served)
    for number in range(rounds):
        shift = number % len(names)
        for era in eras:
            for name in names[shift:] + names[:shift]:
                figures[era, name].append(await run(served[name], clients, calls, era))
    return figures


def report(figures: dict[tuple[str, str], list[Run]], eras: list[str]) -> None:
    print("| protocol | server | calls/s best | calls/s median | CPU ms/call best | median |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (era, name), runs in figures.items():
        rates, cpus = [r.rate for r in runs], [r.cpu for r in runs]
        print(
            f"| {era} | {name} | {max(rates):,.0f} | {statistics.median(rates):,.0f} "
            f"| {min(cpus):.2f} | {statistics.median(cpus):.2f} |"
        )
    print(
        "\n| protocol | pegboard / peer | calls/s best | calls/s median "
        "| CPU per call, peer / pegboard: best | median | target | verdict |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for era in eras:
        ours = figures[era, PEGBOARD]
        for other in PEERS:
            theirs = figures[era, other]
            best = max(r.rate for r in ours) / max(r.rate for r in theirs)
            median = statistics.median(r.rate for r in ours) / statistics.median(
                r.rate for r in theirs
            )
            cheaper = _ratio(min(r.cpu for r in theirs), min(r.cpu for r in ours))
            typical = _ratio(
                statistics.median(r.cpu for r in theirs), statistics.median(r.cpu for r in ours)
            )
            verdict = "met" if min(best, median) >= TARGET else "not met"
            print(
                f"| {era} | pegboard / {other} | {best:.2f}x | {median:.2f}x | {cheaper} "
                f"| {typical} | >= {TARGET} | {verdict} |"
            )


def _ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator > 0 else "n/a"


#: What a 2026-07-28 request says about its client, in place of a handshake.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
#: The layers ``--layers`` takes apart, from the whole served app down to the SDK's own.
LAYERS = (
    "pegboard http_app",
    "  without its guard (token, JSON-RPC gate, cancel)",
    "  and without signed sessions (the SDK's stateless 2025 path)",
    "MCP SDK MCPServer (stateless)",
)


async def _asgi(
    app: Any, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, bytes, dict[bytes, bytes]]:
    """One POST to the ASGI ``app``, as uvicorn would make it; its status, body and headers."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    answered = anyio.Event()
    pending = [{"type": "http.request", "body": body, "more_body": False}]
    answer: dict[str, Any] = {"status": 0, "body": b"", "headers": {}}

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop()
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = dict(message.get("headers", []))
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")
            if not message.get("more_body", False):
                answered.set()

    await app(scope, receive, send)
    return answer["status"], answer["body"], answer["headers"]


async def _asgi_in_task(app: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    # Each request in a task of its own, as uvicorn runs it.
    async with anyio.create_task_group() as group:
        group.start_soon(_asgi, app, headers, body)


async def _session_headers(app: Any, era: str) -> list[tuple[bytes, bytes]]:
    """The headers of a client's calls on ``era``, after its handshake where it has one."""
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"authorization", f"Bearer {TOKEN}".encode()),
        (b"mcp-protocol-version", era.encode()),
    ]
    if era == "2026-07-28":
        return [*headers, (b"mcp-method", b"tools/call"), (b"mcp-name", b"add")]
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": era,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    status, _, answer = await _asgi(app, headers[:-1], json.dumps(initialize).encode())
    assert status == 200, status
    session = answer.get(b"mcp-session-id")
    return headers if session is None else [*headers, (b"mcp-session-id", session)]


async def measure_layers(era: str, requests: int, rounds: int) -> dict[str, list[float]]:
    """Server CPU microseconds per ``tools/call``, each layer's app driven in this process."""
    from _add import ADD_TOOL  # beside this script on sys.path
    from mcp.server.mcpserver import MCPServer

    import pegboard
    import pegboard.mcp
    from pegboard.mcp._http import transport_security
    from pegboard.mcp._sessions import SessionKey, StatelessSessions

    async def sdk_add(a: int, b: int) -> dict[str, int]:
        """Add two integers."""
        return {"sum": a + b}

    arguments = {"name": "add", "arguments": ARGUMENTS}
    if era == "2026-07-28":
        arguments["_meta"] = MODERN_META
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": arguments})
    host = pegboard.Host()
    host.tools.register({"add": ADD_TOOL})
    apps: dict[str, tuple[Any, list[tuple[bytes, bytes]]]] = {}
    async with contextlib.AsyncExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        (directory / "location").mkdir()
        location = await stack.enter_async_context(
            host.location(directory / "location", plugins=[], storage=directory / "storage")
        )
        for layer in LAYERS:
            if layer == LAYERS[-1]:
                sdk = MCPServer("bench", log_level="WARNING")
                sdk.add_tool(sdk_add, name="add")
                app, manager = sdk.streamable_http_app(stateless_http=True), sdk.session_manager
            else:
                server = pegboard.mcp.build_server(location)
                if layer == LAYERS[0]:
                    app = pegboard.mcp.http_app(server, token=TOKEN)
                else:
                    security = transport_security("127.0.0.1")
                    app = server.streamable_http_app(transport_security=security)
                    if layer == LAYERS[1]:
                        StatelessSessions(server.session_manager, SessionKey(b"k" * 32)).install()
                    else:
                        server.session_manager.stateless = True
                manager = server.session_manager
            await stack.enter_async_context(manager.run())
            headers = await _session_headers(app, era)
            status, answer, _ = await _asgi(app, headers, body.encode())
            assert status == 200, (layer, answer)
            assert b'"sum":3' in answer.replace(b" ", b""), (layer, answer)
            apps[layer] = (app, headers)
        figures: dict[str, list[float]] = {layer: [] for layer in LAYERS}
        encoded = body.encode()
        for number in range(rounds + 1):  # the first round warms up
            for layer, (app, headers) in apps.items():
                used = time.process_time()
                for _ in range(requests):
                    await _asgi_in_task(app, headers, encoded)
                if number:
                    figures[layer].append(1e6 * (time.process_time() - used) / requests)
    return figures


def report_layers(figures: dict[str, dict[str, list[float]]], requests: int) -> None:
    print(
        f"## Layer by layer, in this process: {requests} calls a round "
        "(CPU microseconds per call)\n"
    )
    print("| protocol | app | best | median |")
    print("| --- | --- | --- | --- |")
    for era, layers in figures.items():
        for layer, values in layers.items():
            name = layer.strip().replace("|", "/")
            print(f"| {era} | {name} | {min(values):.0f} | {statistics.median(values):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--era",
        choices=[*ERAS, "both"],
        default="both",
        help="the protocol version the clients speak (default: both, each in every round)",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="instead, take the server apart in this process: CPU per call of each layer",
    )
    options = parser.parse_args()
    if options.quick:
        options.clients, options.calls, options.rounds = 2, 5, 1
    eras = list(ERAS) if options.era == "both" else [options.era]
    if options.layers:
        import logging

        logging.disable(logging.INFO)  # the SDK's session manager announces each start
        requests = 20 * options.calls
        report_layers(
            {era: anyio.run(measure_layers, era, requests, options.rounds) for era in eras},
            requests,
        )
        return
    with tempfile.TemporaryDirectory() as directory, servers(Path(directory)) as served:
        figures = anyio.run(measure, served, options.clients, options.calls, options.rounds, eras)
    print(
        f"## One process over streamable HTTP: {options.clients} concurrent clients x "
        f"{options.calls} calls, {options.rounds} rounds\n"
    )
    report(figures, eras)


if __name__ == "__main__":
    main()
