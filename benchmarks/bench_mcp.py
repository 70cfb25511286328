"""Time one MCP tool call through ``pegboard serve`` against the SDK's own server.

Run ``python benchmarks/bench_mcp.py`` (``--quick`` for a fast smoke run). The
same trivial tool -- add two integers, return structured ``{"total": 3}`` and
one text item -- is served over stdio twice: by ``pegboard serve --location DIR``
(the tool comes from a plugin) and by the official MCP SDK's ``MCPServer``. One
``mcp.Client`` per server, in one event loop, calls each in turn, round-robin so
machine noise hits both alike, for both protocol eras the SDK speaks (its
default, 2026-07-28, and the 2025 handshake). The script prints Markdown
tables with the ratio of the medians (target: at most 1.2) and always exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import shutil
import statistics
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from time import perf_counter_ns

import anyio
from _timing import collector_paused  # beside this script on sys.path

try:
    from mcp import Client, StdioServerParameters
except ImportError:  # pragma: no cover - the benchmark needs the mcp extra
    sys.exit("bench_mcp.py needs the MCP SDK: pip install -e '.[mcp]'")

PLUGIN = """
    import attrs
    import pegboard

    @attrs.frozen
    class AddInput:
        a: int
        b: int

    @attrs.frozen
    class AddOutput:
        total: int

    @pegboard.tool(description="Add two integers.", input=AddInput, output=AddOutput)
    async def add(input, context):
        return AddOutput(total=input.a + input.b)

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({"add": add})
"""

SDK_SERVER = """
    from typing import TypedDict

    from mcp.server.mcpserver import MCPServer

    app = MCPServer("bench")

    class AddTotal(TypedDict):
        total: int

    @app.tool()
    async def add(a: int, b: int) -> AddTotal:
        \"\"\"Add two integers.\"\"\"
        return {"total": a + b}

    if __name__ == "__main__":
        app.run()
"""

ARGUMENTS = {"a": 1, "b": 2}
#: pegboard serve may take at most this much longer than the SDK's own server.
TARGET = 1.2
ERAS = {"2026-07-28 (SDK default)": "auto", "2025 handshake": "legacy"}
PACKAGES = ("pegboard", "mcp", "anyio", "pydantic", "attrs", "cattrs")


def prepare(directory: Path) -> tuple[StdioServerParameters, StdioServerParameters]:
    """Write the plugin, a Location and the SDK server; return how to start each."""
    site, root = directory / "site", directory / "location"
    site.mkdir()
    root.mkdir()
    (site / "pegboard_bench.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "bench-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bench\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pegboard]\nbench = pegboard_bench\n")
    (root / "pegboard.toml").write_text('plugins = ["bench"]\n')
    script = directory / "sdk_server.py"
    script.write_text(textwrap.dedent(SDK_SERVER))
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent)) or "pegboard"
    environment = {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "XDG_DATA_HOME": str(directory / "data"),
    }
    pegboard = StdioServerParameters(
        command=command, args=["serve", "--location", str(root)], env=environment
    )
    sdk = StdioServerParameters(command=sys.executable, args=[str(script)])
    return pegboard, sdk


@contextlib.asynccontextmanager
async def connected(server: StdioServerParameters, mode: str) -> AsyncIterator[Client]:
    async with Client(server, mode=mode, cache=None) as client:
        result = await client.call_tool("add", ARGUMENTS)
        # Time only the successful path.
        assert result.structured_content == {"total": 3}, result
        assert not result.is_error, result
        yield client


async def batch(client: Client, calls: int) -> list[float]:
    """Microseconds per call, one sequential call after another."""
    samples = []
    for _ in range(calls):
        start = perf_counter_ns()
        await client.call_tool("add", ARGUMENTS)
        samples.append((perf_counter_ns() - start) / 1000)
    return samples


async def measure(
    servers: dict[str, StdioServerParameters], mode: str, rounds: int, calls: int, warmup: int
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in servers}
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(connected(server, mode))
            for name, server in servers.items()
        }
        for client in clients.values():
            await batch(client, warmup)
        with collector_paused():
            for _ in range(rounds):
                for name, client in clients.items():
                    samples[name].extend(await batch(client, calls))
    return samples


def table(samples: dict[str, list[float]]) -> str:
    rows = [
        "| server | calls | median µs | p10 µs | p90 µs | mean µs |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, values in samples.items():
        deciles = statistics.quantiles(values, n=10)
        rows.append(
            f"| {name} | {len(values)} | {statistics.median(values):,.0f} | "
            f"{deciles[0]:,.0f} | {deciles[-1]:,.0f} | {statistics.fmean(values):,.0f} |"
        )
    return "\n".join(rows)


def facts() -> str:
    lines = [
        f"- Python {platform.python_implementation()} {platform.python_version()} "
        f"on {platform.platform()}, {os.cpu_count()} cores",
    ]
    if hasattr(os, "getloadavg"):
        lines.append(
            "- load average (1 / 5 / 15 min) at the end: "
            + " / ".join(f"{value:.2f}" for value in os.getloadavg())
        )
    versions = []
    for package in PACKAGES:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    lines.append("- " + ", ".join(versions))
    return "\n".join(lines)


async def main(quick: bool) -> None:
    rounds, calls, warmup = (3, 100, 50) if quick else (20, 250, 200)
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as directory:
        pegboard, sdk = prepare(Path(directory))
        servers = {"pegboard serve": pegboard, "SDK MCPServer": sdk}
        print("# MCP round trip over stdio: `pegboard serve` and the SDK's `MCPServer`\n")
        print(f"{rounds} rounds of {calls} sequential calls per server, after {warmup} warm-up.\n")
        for era, mode in ERAS.items():
            samples = await measure(servers, mode, rounds, calls, warmup)
            ratio = statistics.median(samples["pegboard serve"]) / statistics.median(
                samples["SDK MCPServer"]
            )
            print(f"## {era}\n\n{table(samples)}\n")
            verdict = "within" if ratio <= TARGET else "over"
            print(f"Ratio of medians, pegboard / SDK: **{ratio:.2f}x** ({verdict} the target)\n")
    print(facts())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    anyio.run(main, parser.parse_args().quick)
