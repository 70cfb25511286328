"""Time a call that ``pegboard serve`` runs as a task against the same call made directly.

Run ``python benchmarks/bench_mcp_tasks.py`` (``--quick`` for a fast smoke run). One
Location serves one trivial tool (add two integers) in memory to the SDK's ``Client``
on the 2025-11-25 protocol. A direct call is one ``tools/call``; a task is a
``tools/call`` with ``task`` (answered ``CreateTaskResult`` once the call has ended,
since a quick call ends within pegboard's window) and a ``tasks/result``. The two take
turns for a few rounds in one event loop, so that machine noise hits both alike; the
script prints a Markdown table of calls per second and their ratio, and exits 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from time import perf_counter

import anyio

try:
    import mcp_types as types
    from mcp import Client
except ImportError:  # pragma: no cover - the benchmark needs the mcp extra
    sys.exit("bench_mcp_tasks.py needs the MCP SDK: pip install -e '.[mcp]'")

import pegboard
import pegboard.mcp


async def add(input: dict[str, int], context: pegboard.ToolContext) -> int:
    return input["a"] + input["b"]


async def measure(calls: int, rounds: int) -> dict[str, list[float]]:
    host = pegboard.Host()
    host.tools.register({"add": pegboard.tool(description="Add two integers.", execute=add)})
    rates: dict[str, list[float]] = {"direct": [], "task": []}
    with tempfile.TemporaryDirectory() as root:
        async with (
            host.location(Path(root), plugins=[]) as location,
            Client(pegboard.mcp.build_server(location), mode="legacy") as client,
        ):
            # The SDK checks a tools/call result against CallToolResult, which a
            # task is not: the task-augmented call goes to its JSON-RPC dispatcher.
            dispatcher = client.session._dispatcher  # type: ignore[attr-defined]
            arguments = {"a": 1, "b": 2}

            async def direct() -> None:
                await client.call_tool("add", arguments)

            async def task() -> None:
                params = {"name": "add", "arguments": arguments, "task": {}}
                created = await dispatcher.send_raw_request("tools/call", params, {"timeout": 30})
                payload = types.GetTaskPayloadRequestParams(task_id=created["task"]["taskId"])
                await client.session.send_request(
                    types.GetTaskPayloadRequest(params=payload), types.CallToolResult
                )

            await direct()
            await task()
            for _ in range(rounds):
                for name, once in (("direct", direct), ("task", task)):
                    started = perf_counter()
                    for _ in range(calls):
                        await once()
                    rates[name].append(calls / (perf_counter() - started))
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--calls", type=int, default=300, help="calls per round and kind")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each kind")
    options = parser.parse_args()
    calls, rounds = (20, 1) if options.quick else (options.calls, options.rounds)
    rates = anyio.run(measure, calls, rounds)
    best = {name: max(values) for name, values in rates.items()}
    print("## A served call as a task against the same call made directly (2025-11-25)\n")
    print(f"{calls} calls x {rounds} rounds of each kind, in memory, one client.\n")
    print("| call | best calls/s |\n| --- | --- |")
    for name, label in (("direct", "tools/call"), ("task", "tools/call with task + tasks/result")):
        print(f"| {label} | {best[name]:.0f} |")
    print(f"\ntask / direct: {best['task'] / best['direct']:.2f}x calls per second")


if __name__ == "__main__":
    main()
