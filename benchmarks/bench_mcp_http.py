"""Calls per second of one ``pegboard serve --http`` process against the SDK's and fastmcp's.

Run ``python benchmarks/bench_mcp_http.py`` (``--quick`` for a fast smoke run). The
same tool -- add two integers, return ``{"total": 3}`` -- is served over streamable
HTTP by three processes: ``pegboard serve --http`` (the tool comes from a plugin), the
official MCP SDK's ``MCPServer`` with ``stateless_http=True``, and fastmcp's
``FastMCP`` with ``stateless_http=True``. The same client, the SDK's ``Client`` on
its default protocol (2026-07-28), runs CLIENTS concurrent clients of CALLS calls
each against one server at a time, the servers taking turns for ROUNDS rounds, so
that machine noise hits all alike. It prints a Markdown table of calls per second
(the best and the median round) and the ratios (target: pegboard at least 1.0x
each), and always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
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

import anyio

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

    app = MCPServer("bench")

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def servers(directory: Path) -> Iterator[dict[str, str]]:
    """Start the three servers; yield their URLs by name."""
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
    ports = {name: free_port() for name in ("pegboard serve --http", "MCP SDK", "fastmcp")}
    commands = {
        "pegboard serve --http": [
            *(command, "serve", "-l", str(root), "--http"),
            *(f"--port={ports['pegboard serve --http']}", "--token-file", str(token)),
        ],
        "MCP SDK": [sys.executable, str(directory / "sdk_server.py"), str(ports["MCP SDK"])],
        "fastmcp": [sys.executable, str(directory / "fastmcp_server.py"), str(ports["fastmcp"])],
    }
    processes = [
        subprocess.Popen(
            argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for argv in commands.values()
    ]
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
        yield {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


async def one_client(url: str, calls: int) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        for _ in range(calls):
            result = await client.call_tool("add", ARGUMENTS)
            # Time only the successful path.
            assert result.structured_content == {"total": 3}, result


async def calls_per_second(url: str, clients: int, calls: int) -> float:
    start = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one_client, url, calls)
    return clients * calls / (time.perf_counter() - start)


async def measure(
    urls: dict[str, str], clients: int, calls: int, rounds: int
) -> dict[str, list[float]]:
    for url in urls.values():  # warm-up
        await calls_per_second(url, 1, 5)
    figures: dict[str, list[float]] = {name: [] for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            figures[name].append(await calls_per_second(url, clients, calls))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    if options.quick:
        options.clients, options.calls, options.rounds = 2, 5, 1
    with tempfile.TemporaryDirectory() as directory, servers(Path(directory)) as urls:
        figures = anyio.run(measure, urls, options.clients, options.calls, options.rounds)
    print(
        f"## One process over streamable HTTP: {options.clients} concurrent clients x "
        f"{options.calls} calls, {options.rounds} rounds (calls per second)\n"
    )
    print("| server | best | median |")
    print("| --- | --- | --- |")
    for name, values in figures.items():
        print(f"| {name} | {max(values):,.0f} | {statistics.median(values):,.0f} |")
    ours = figures["pegboard serve --http"]
    print("\n| ratio | best | median | target | verdict |")
    print("| --- | --- | --- | --- | --- |")
    for other in ("MCP SDK", "fastmcp"):
        best = max(ours) / max(figures[other])
        median = statistics.median(ours) / statistics.median(figures[other])
        verdict = "met" if median >= TARGET else "not met"
        print(f"| pegboard / {other} | {best:.2f}x | {median:.2f}x | >= {TARGET} | {verdict} |")


if __name__ == "__main__":
    main()
