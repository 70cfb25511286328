"""Time building a tool: pegboard.tool against the MCP SDK's add_tool for the same function.

Run ``python benchmarks/bench_construction.py`` (``--quick`` for a smoke run).
Both sides build a tool for ``{a: int, b: int}`` in and ``{sum: int}`` out:
pegboard from attrs classes, MCPServer from the function's signature. pegboard
is timed twice: with the same classes each time (one codec per class, derived
once) and with fresh classes each time (every schema, check and cattrs hook
derived anew). The script prints a Markdown table and always exits 0;
``--json PATH`` also writes the two ratios against their target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import attrs
from _targets import add_json_option, ratio, write
from typing_extensions import TypedDict

import pegboard


class Sum(TypedDict):
    sum: int


async def add_mcp(a: int, b: int) -> Sum:
    """Add two integers."""
    return {"sum": a + b}


async def add(input: object, context: pegboard.ToolContext) -> object:
    raise NotImplementedError


def fresh_classes(n: int) -> list[tuple[type, type]]:
    def make(name: str, fields: dict[str, type]) -> type:
        return attrs.frozen(type(name, (), {"__annotations__": fields}))

    return [
        (make("AddInput", {"a": int, "b": int}), make("AddOutput", {"sum": int})) for _ in range(n)
    ]


#: The most pegboard.tool may take, as a multiple of MCP's add_tool.
TARGET = 0.5


def main(quick: bool, json: str | None) -> int:
    rounds, per_round = (3, 20) if quick else (15, 100)
    pairs = fresh_classes(rounds * per_round + 1)
    same = pairs[-1]
    pegboard.tool(description="Warm.", execute=add, input=same[0], output=same[1])
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        server = None
    else:
        server = MCPServer("bench")
        server.add_tool(add_mcp, name="warm")

    def timed(build: Callable[[int], None]) -> Callable[[int], float]:
        def run(round_: int) -> float:
            start = time.thread_time_ns()
            for index in range(per_round):
                build(round_ * per_round + index)
            return (time.thread_time_ns() - start) / per_round / 1000

        return run

    def same_classes(_: int) -> None:
        pegboard.tool(description="Add two integers.", execute=add, input=same[0], output=same[1])

    def new_classes(index: int) -> None:
        given, returned = pairs[index]
        pegboard.tool(description="Add two integers.", execute=add, input=given, output=returned)

    contestants = {"same": timed(same_classes), "fresh": timed(new_classes)}
    if server is not None:

        def mcp(index: int) -> None:
            server.add_tool(add_mcp, name=f"add_{index}", description="Add two integers.")

        contestants["mcp"] = timed(mcp)
    samples: dict[str, list[float]] = {key: [] for key in contestants}
    for round_ in range(rounds):
        for key, run in contestants.items():
            samples[key].append(run(round_))
    labels = {
        "same": "pegboard.tool, attrs in and out, the same classes each time",
        "fresh": "pegboard.tool, attrs in and out, new classes each time",
        "mcp": "MCP SDK MCPServer.add_tool, typed function",
    }
    print(f"## Tool construction ({'quick' if quick else 'full'} run; µs of thread CPU per tool)\n")
    print("| measurement | median | best |\n| --- | ---: | ---: |")
    for key, values in samples.items():
        print(f"| {labels[key]} | {statistics.median(values):,.1f} | {min(values):,.1f} |")
    readings = []
    if server is not None:
        for key in ("same", "fresh"):
            # Paired within each round; the best column holds the quietest round's ratio.
            reading = ratio(f"{labels[key]} / MCP add_tool", samples[key], samples["mcp"], TARGET)
            verdict = "met" if reading.met else "not met"
            label = f"ratio: {labels[key]} / MCP (target <= {TARGET:g})"
            print(f"| {label}: {verdict} | {reading.figure:.3f} | {reading.quietest:.3f} |")
            readings.append(reading)
    else:
        print("\nThe MCP SDK is not installed (pip install -e '.[bench]'): no MCP figures.")
    write(json, readings)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Time tool construction against MCP.")
    parser.add_argument("--quick", action="store_true", help="few tools: a smoke run")
    add_json_option(parser)
    arguments = parser.parse_args(sys.argv[1:])
    sys.exit(main(arguments.quick, arguments.json))
