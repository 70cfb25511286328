"""What tracing and redaction cost per call.

Run from the repository root::

    .venv/bin/python benchmarks/bench_tracing.py [--quick]

One small tool (a short text result) is called through ``Request.execute`` in
three states, each timed round robin against the same call without the
tracing hook (``execute`` as it was before it, which ``_execute`` settles):
OpenTelemetry not imported at all, ``opentelemetry-api`` imported with no
provider configured (the two cases where pegboard must cost nothing
measurable: at most 0.3 µs), and the SDK with a span processor exporting to
memory and a metric reader (what a host pays for a span and a duration per
call). The look-up itself, ``_tracing.instruments()``, is also timed alone.
Redaction: a tool returning 50 KB of text holding each of 10 secrets once,
called in a Location without secrets and in one with the 10 (paired per
round), and ``Secrets.redact`` on that text alone. Times are per call, the
median over rounds, in thread CPU time (the calls never wait), which other
processes on a shared machine do not inflate; the garbage collector is paused.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from _timing import time_rounds

import pegboard
from pegboard import _tracing

SECRETS = {f"SECRET_{index}": f"s3cr3t-{index:02d}-" + "k" * 24 for index in range(10)}


def fifty_kilobytes() -> str:
    """About 50 KB of log-like text with each secret once, spread through it."""
    lines = [f"line {index:05d}: nothing to see here, just ordinary output" for index in range(900)]
    for index, value in enumerate(SECRETS.values()):
        lines[index * 90 + 45] += f" token={value}"
    return "\n".join(lines)


TEXT = fifty_kilobytes()
SCHEMA = {"type": "object", "properties": {}}


def tools() -> dict[str, pegboard.Tool]:
    async def short(input: Any, context: pegboard.ToolContext) -> str:
        return "ok"

    async def large(input: Any, context: pegboard.ToolContext) -> str:
        return TEXT

    return {
        "short": pegboard.tool(description="Short.", input=SCHEMA, execute=short),
        "large": pegboard.tool(description="Large.", input=SCHEMA, execute=large),
    }


def caller(request: pegboard.Request, name: str, *, traced: bool) -> Callable[[], Awaitable[Any]]:
    """A job making one call per run, its objects built in the loop as a runner's are.

    Untraced, it runs ``Request.execute`` as it was before the tracing hook: the same
    check of its argument, then the settling, in one coroutine.
    """

    async def untraced(call: pegboard.ToolCall) -> pegboard.Outcome:
        if not isinstance(call, pegboard.ToolCall) or not isinstance(
            call.context, pegboard.ToolContext
        ):
            raise TypeError("execute() takes a pegboard.ToolCall with a pegboard.ToolContext")
        return await request._execute(call)

    execute = request.execute if traced else untraced

    def job() -> Awaitable[Any]:
        context = pegboard.ToolContext(session_id="s", agent="bench", message_id="m", call_id="c")
        return execute(pegboard.ToolCall(name, {}, context))

    return job


def micro(value: float) -> str:
    return f"{value * 1e6:.3f} µs"


def difference(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a - b for a, b in zip(ours, theirs, strict=True))


async def overhead(request: pegboard.Request, rounds: int, calls: int) -> tuple[float, float]:
    """(median per-call time of execute, median per-call overhead over _execute)."""
    samples = await time_rounds(
        {
            "traced": caller(request, "short", traced=True),
            "bare": caller(request, "short", traced=False),
        },
        rounds,
        calls,
        clock=time.thread_time,
    )
    return statistics.median(samples["traced"]), difference(samples["traced"], samples["bare"])


def lookup_seconds() -> float:
    number = 200_000
    return (
        min(timeit.repeat(_tracing.instruments, number=number, repeat=5, timer=time.thread_time))
        / number
    )


async def main(quick: bool) -> None:
    rounds, calls = (5, 2_000) if quick else (31, 20_000)
    host = pegboard.Host()
    host.tools.register(tools())
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        async with (
            host.location(root, plugins=[], storage=root / "plain") as plain,
            host.location(root, plugins=[], storage=root / "secret", secrets=SECRETS) as secret,
        ):
            request = plain.prepare()
            assert "opentelemetry.trace" not in sys.modules, "imported before its time"
            per_call, extra = await overhead(request, rounds, calls)
            rows.append(("OpenTelemetry not imported", micro(per_call), micro(extra)))
            rows.append(("— the look-up alone, not imported", "", micro(lookup_seconds())))

            from opentelemetry import trace  # the API only: no provider configured

            assert _tracing.instruments() is None
            per_call, extra = await overhead(request, rounds, calls)
            rows.append(("opentelemetry-api, no provider", micro(per_call), micro(extra)))
            rows.append(("— the look-up alone, no provider", "", micro(lookup_seconds())))

            from opentelemetry import metrics
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)
            metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
            assert _tracing.instruments() is not None
            per_call, extra = await overhead(request, rounds, max(calls // 10, 200))
            exporter.clear()
            rows.append(("SDK, in-memory span exporter and metric reader", micro(per_call),
                         micro(extra)))  # fmt: skip
            redacting = await time_rounds(
                {
                    "without secrets": caller(plain.prepare(), "large", traced=False),
                    "with 10 secrets": caller(secret.prepare(), "large", traced=False),
                },
                rounds,
                max(calls // 20, 50),
                clock=time.thread_time,
            )
    secrets = pegboard.Secrets(SECRETS)
    assert "s3cr3t" not in secrets.redact(TEXT)
    number = 50 if quick else 500
    alone = (
        min(
            timeit.repeat(
                lambda: secrets.redact(TEXT), number=number, repeat=5, timer=time.thread_time
            )
        )
        / number
    )
    print("## Tracing: per-call cost of Request.execute\n")
    print(f"{rounds} rounds of {calls:,} calls (fewer with the SDK); medians.\n")
    print("| state | per call | over the untraced call |")
    print("| --- | --- | --- |")
    for state, whole, added in rows:
        print(f"| {state} | {whole} | {added} |")
    without = statistics.median(redacting["without secrets"])
    with_secrets = statistics.median(redacting["with 10 secrets"])
    added = difference(redacting["with 10 secrets"], redacting["without secrets"])
    print(f"\n## Redaction: 10 secrets, a {len(TEXT.encode()):,}-byte result\n")
    print("| measured | per call |")
    print("| --- | --- |")
    print(f"| execute, no secrets | {micro(without)} |")
    print(f"| execute, 10 secrets | {micro(with_secrets)} |")
    print(f"| added by redaction (paired per round) | {micro(added)} |")
    print(f"| `Secrets.redact` alone on the text | {micro(alone)} |")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    anyio.run(main, arguments.quick)
