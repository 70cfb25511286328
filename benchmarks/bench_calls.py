"""Time pegboard's per-call overhead against its peers, request snapshots and output bounding.

Run ``python benchmarks/bench_calls.py`` (``--quick`` for a fast smoke run,
``--profile`` to add a cProfile of ``Request.execute``). One small tool,
``{a: int, b: int}`` in and ``{sum: int}`` out, is called in the same event
loop, round-robin so machine noise hits each alike: a direct ``await`` of its
function, pegboard's ``Request.execute`` and every peer that is installed
(openai-agents, the MCP SDK's ``MCPServer`` with an untyped and a typed
return, fastmcp, pydantic-ai, LangChain, llm); a missing peer is left out and said
so. Every contestant builds its per-call objects (context, call, call id) in
the timed loop, as a real runner must. Per-call rounds are timed in thread
CPU time, which other processes on a shared machine do not inflate. The
script prints Markdown tables and always exits 0; ``--json PATH`` also writes
the targets of the performance summary and the peers beside them (see
``bench_targets.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import importlib.metadata
import io
import operator
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
import attrs
from _add import ADD_TOOL, AddInput, AddOutput, add  # beside this script on sys.path
from _targets import Reading, add_json_option, command_line, paired, quietest, within, write
from _timing import collector_paused
from typing_extensions import TypedDict  # pydantic refuses typing.TypedDict before 3.12

import pegboard

TOOLS_IN_SNAPSHOT = 10_000
HUNDRED_KB_TEXT = "x" * 99 + "\n"
PACKAGES = (
    "pegboard",
    "attrs",
    "cattrs",
    "anyio",
    "orjson",
    "jsonschema-rs",
    "openai-agents",
    "mcp",
    "fastmcp",
    "pydantic-ai-slim",
    "langchain-core",
    "pydantic",
)
TEN_KB_TEXT = "".join(
    f"{index:04d} a line of a ten kilobyte text result, padded to 64\n" for index in range(160)
)

CONTEXT = pegboard.ToolContext(
    session_id="session-1", agent="build", message_id="message-1", call_id="call-1"
)
ARGUMENTS_TEXT = '{"a": 1, "b": 2}'
ARGUMENTS = {"a": 1, "b": 2}


async def ten_kb(input: object, context: pegboard.ToolContext) -> str:
    return TEN_KB_TEXT


async def short_text(input: object, context: pegboard.ToolContext) -> str:
    return "done"


TEXT_TOOLS = {
    "ten_kb": pegboard.tool(description="Return 10 KB of text.", execute=ten_kb),
    "short": pegboard.tool(description="Return a short text.", execute=short_text),
}


class Sum(TypedDict):
    sum: int


async def add_typed(a: int, b: int) -> Sum:
    """Add two integers."""
    return {"sum": a + b}


async def add_untyped(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


#: Runs ``n`` calls and returns the elapsed nanoseconds.
Timer = Callable[[int], Awaitable[int]]


@attrs.frozen
class Settings:
    name: str
    rounds: int
    calls_per_round: int
    prepare_rounds: int
    prepare_repeats: int
    bounding_rounds: int
    #: Sizes of the large results bounded, in MiB.
    bounding_mib: tuple[int, ...]
    #: Calls of 100 KB results run one after another, then all at once.
    concurrent_calls: int


FULL = Settings(
    "full",
    30,
    1000,
    prepare_rounds=7,
    prepare_repeats=5,
    bounding_rounds=5,
    bounding_mib=(50, 200),
    concurrent_calls=1000,
)
QUICK = Settings(
    "quick",
    3,
    200,
    prepare_rounds=2,
    prepare_repeats=2,
    bounding_rounds=1,
    bounding_mib=(8,),
    concurrent_calls=50,
)


@attrs.frozen
class Figure:
    """One measured quantity over several rounds."""

    label: str
    samples: tuple[float, ...]
    unit: str

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def best(self) -> float:
        return min(self.samples)


def machine_facts() -> list[tuple[str, str]]:
    facts = [
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("platform", platform.platform()),
        ("CPU", _cpu_model()),
        ("cores (os.cpu_count)", str(os.cpu_count())),
        ("calibration: one empty function call", f"{empty_call_ns():.0f} ns"),
    ]
    if hasattr(os, "getloadavg"):
        # Other processes on the machine widen the gap between median and best.
        load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
        facts.append(("load average (1 / 5 / 15 min) at the end", load))
    for package in PACKAGES:
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        facts.append((package, version))
    return facts


def empty_call_ns() -> float:
    """Best time of an empty Python call here, to compare machines by."""

    def nothing() -> None:
        return None

    best = float("inf")
    with collector_paused():
        for _ in range(50):
            start = perf_counter_ns()
            for _ in range(10_000):
                nothing()
            best = min(best, (perf_counter_ns() - start) / 10_000)
    return best


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or "unknown"


# --- per-call overhead ---------------------------------------------------------


def direct_timer() -> Timer:
    value = AddInput(a=1, b=2)

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            await add(value, CONTEXT)
        return thread_ns() - start

    return run


def context(index: int) -> pegboard.ToolContext:
    return pegboard.ToolContext(
        session_id="session-1", agent="build", message_id="message-1", call_id=f"call-{index}"
    )


def pegboard_timer(request: pegboard.Request, name: str, raw: Any) -> Timer:
    execute, tool_call, make_context = request.execute, pegboard.ToolCall, pegboard.ToolContext

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            context = make_context(
                session_id="session-1", agent="build", message_id="message-1", call_id="call-1"
            )
            await execute(tool_call(name, raw, context))
        return thread_ns() - start

    return run


def thread_ns() -> int:
    return time.thread_time_ns()


@attrs.frozen
class Peer:
    """One peer's contestant: a label, its timer, and a check that it really added."""

    label: str
    timer: Timer
    check: Callable[[], Awaitable[None]]


def agents_peer() -> Peer | None:
    try:
        from agents import function_tool
        from agents.tool_context import ToolContext
    except ImportError:
        return None
    tool = function_tool(add_typed)

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            ctx = ToolContext(
                context=None,
                tool_name="add_typed",
                tool_call_id="call-1",
                tool_arguments=ARGUMENTS_TEXT,
            )
            await tool.on_invoke_tool(ctx, ARGUMENTS_TEXT)
        return thread_ns() - start

    async def check() -> None:
        ctx = ToolContext(
            context=None, tool_name="add_typed", tool_call_id="c", tool_arguments=ARGUMENTS_TEXT
        )
        assert await tool.on_invoke_tool(ctx, ARGUMENTS_TEXT) == {"sum": 3}

    return Peer("openai-agents FunctionTool.on_invoke_tool, JSON text", run, check)


def mcp_peer(function: Callable[..., Any], form: str) -> Peer | None:
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        return None
    server = MCPServer("bench")
    server.add_tool(function, name="add", description="Add two integers.")

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            await server.call_tool("add", {"a": 1, "b": 2})
        return thread_ns() - start

    async def check() -> None:
        result = await server.call_tool("add", ARGUMENTS)
        assert not result.is_error, result
        assert "3" in str(result.content), result

    return Peer(f"MCP SDK MCPServer.call_tool, {form}, dict input", run, check)


def fastmcp_peer() -> Peer | None:
    try:
        from fastmcp import FastMCP
    except ImportError:
        return None
    server = FastMCP("bench")
    server.tool(add_typed, name="add")

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            await server.call_tool("add", {"a": 1, "b": 2})
        return thread_ns() - start

    async def check() -> None:
        result = await server.call_tool("add", ARGUMENTS)
        assert result.structured_content == {"sum": 3}, result

    return Peer("fastmcp FastMCP.call_tool, typed return, dict input", run, check)


def pydantic_ai_peer() -> Peer | None:
    try:
        from pydantic_ai import Tool
    except ImportError:
        return None
    schema = Tool(add_typed).function_schema
    validate, call = schema.validator.validate_json, schema.call

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            await call(validate(ARGUMENTS_TEXT), None)  # type: ignore[arg-type]
        return thread_ns() - start

    async def check() -> None:
        assert await call(validate(ARGUMENTS_TEXT), None) == {"sum": 3}  # type: ignore[arg-type]

    return Peer("pydantic-ai input validation + FunctionSchema.call (output unchecked)", run, check)


def langchain_peer() -> Peer | None:
    try:
        from langchain_core.tools import StructuredTool
    except ImportError:
        return None
    tool = StructuredTool.from_function(
        coroutine=add_typed, name="add", description="Add two integers."
    )

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            call = {"name": "add", "args": {"a": 1, "b": 2}, "id": "call-1", "type": "tool_call"}
            await tool.ainvoke(call)
        return thread_ns() - start

    async def check() -> None:
        call = {"name": "add", "args": ARGUMENTS, "id": "call-1", "type": "tool_call"}
        message = await tool.ainvoke(call)
        assert '"sum": 3' in str(message.content), message

    return Peer("LangChain StructuredTool.ainvoke, tool-call dict", run, check)


def llm_peer() -> Peer | None:
    try:
        import llm
        from llm.models import AsyncResponse, Prompt
    except ImportError:
        return None

    class Scripted(llm.AsyncModel):  # type: ignore[misc]
        """A model that is never prompted: llm runs tools on a response of one."""

        model_id = "scripted"
        supports_tools = True

        async def execute(self, *args: object) -> AsyncIterator[str]:
            return
            yield ""

    model = Scripted()
    tool = llm.Tool.function(add_typed)
    tools = [tool]
    response = AsyncResponse(Prompt("", model=model, tools=tools), model, stream=False)
    execute, tool_call = response.execute_tool_calls, llm.ToolCall

    async def run(n: int) -> int:
        start = thread_ns()
        for _ in range(n):
            calls = [tool_call(name="add_typed", arguments={"a": 1, "b": 2}, tool_call_id="c")]
            await execute(tool_calls_list=calls, tools=tools)
        return thread_ns() - start

    async def check() -> None:
        calls = [tool_call(name="add_typed", arguments=ARGUMENTS, tool_call_id="c")]
        (result,) = await execute(tool_calls_list=calls, tools=tools)
        assert result.exception is None, result
        assert '"sum": 3' in result.output, result

    return Peer("llm AsyncResponse.execute_tool_calls, dict arguments", run, check)


#: Peers by key, each optional (pip install -e '.[bench]' installs them all).
PEERS: dict[str, Callable[[], Peer | None]] = {
    "agents": agents_peer,
    "mcp": lambda: mcp_peer(add_untyped, "untyped dict return"),
    "mcp_typed": lambda: mcp_peer(add_typed, "typed return"),
    "fastmcp": fastmcp_peer,
    "pydantic_ai": pydantic_ai_peer,
    "langchain": langchain_peer,
    "llm": llm_peer,
}


async def check_calls(request: pegboard.Request, peers: dict[str, Peer]) -> None:
    """Make sure every contestant does the real work, not an error path."""
    assert await add(AddInput(a=1, b=2), CONTEXT) == AddOutput(sum=3)
    for raw in (ARGUMENTS_TEXT, ARGUMENTS):
        outcome = await request.execute(pegboard.ToolCall("add", raw, CONTEXT))
        assert isinstance(outcome, pegboard.Completed), outcome
        assert outcome.output == {"sum": 3}, outcome
    for name in TEXT_TOOLS:
        outcome = await request.execute(pegboard.ToolCall(name, "{}", CONTEXT))
        assert isinstance(outcome, pegboard.Completed), outcome
    for peer in peers.values():
        await peer.check()


async def bench_calls(
    request: pegboard.Request, peers: dict[str, Peer], settings: Settings
) -> dict[str, Figure]:
    contestants: dict[str, tuple[str, Timer]] = {
        "direct": ("call: direct await of the tool function", direct_timer()),
        "text": (
            "call: pegboard Request.execute, JSON text input",
            pegboard_timer(request, "add", ARGUMENTS_TEXT),
        ),
        "dict": (
            "call: pegboard Request.execute, parsed dict input",
            pegboard_timer(request, "add", ARGUMENTS),
        ),
        "short": (
            "call: pegboard, a tool returning a short text",
            pegboard_timer(request, "short", "{}"),
        ),
        "ten_kb": (
            "call: pegboard, a tool returning 10 KB of text",
            pegboard_timer(request, "ten_kb", "{}"),
        ),
    }
    for key, peer in peers.items():
        contestants[key] = (f"call: {peer.label}", peer.timer)
    keys = list(contestants)
    samples: dict[str, list[float]] = {key: [] for key in keys}
    for _, timer in contestants.values():
        await timer(settings.calls_per_round // 4)  # warm caches and lazy imports
    for round_ in range(settings.rounds):
        # Rotate the order so no contestant always runs first or last.
        shift = round_ % len(keys)
        gc.collect()
        for key in keys[shift:] + keys[:shift]:
            with collector_paused():
                elapsed = await contestants[key][1](settings.calls_per_round)
            samples[key].append(elapsed / settings.calls_per_round / 1000)
    return {key: Figure(contestants[key][0], tuple(samples[key]), "µs") for key in keys}


async def cprofile(timer: Timer, calls: int, order: str) -> str:
    """A cProfile of ``calls`` calls through ``timer``, top 20 entries by ``order``."""
    profiler = cProfile.Profile()
    profiler.enable()
    await timer(calls)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(20)
    return out.getvalue()


# --- request snapshots ---------------------------------------------------------


async def bench_prepare(location: pegboard.Location, settings: Settings) -> dict[str, Figure]:
    location.tools.register({f"tool_{index:05d}": ADD_TOOL for index in range(TOOLS_IN_SNAPSHOT)})
    first: list[float] = []
    again: list[float] = []
    for _ in range(settings.prepare_rounds):
        gc.collect()
        with location.tools.register({"extra": ADD_TOOL}):
            with collector_paused():
                start = perf_counter_ns()
                request = location.prepare()
                first.append((perf_counter_ns() - start) / 1e6)
            assert len(request.definitions) > TOOLS_IN_SNAPSHOT
            for _ in range(settings.prepare_repeats):
                with collector_paused():
                    start = perf_counter_ns()
                    location.prepare()
                    again.append((perf_counter_ns() - start) / 1e6)
    count = f"{TOOLS_IN_SNAPSHOT:,}"
    return {
        "prepare_first": Figure(
            f"prepare(), {count} tools, first after a registration change", tuple(first), "ms"
        ),
        "prepare_again": Figure(f"prepare(), {count} tools, boards unchanged", tuple(again), "ms"),
    }


# --- bounding large output -----------------------------------------------------


def big_text(size: int) -> str:
    """``size`` bytes of ASCII log-like lines, 80 bytes each."""
    block = "".join(
        f"{index:06d} the quick brown fox jumps over the lazy dog, again and again and\n"
        for index in range(1000)
    )
    return (block * (size // len(block) + 1))[:size]


def emitter(text: str) -> pegboard.Tool:
    async def emit(input: object, context: pegboard.ToolContext) -> str:
        return text

    return pegboard.tool(description="Emit a large text.", execute=emit)


@attrs.frozen
class Bounding:
    figures: dict[str, Figure]
    peak_ratio: float
    longest_stall_ms: float


async def bench_bounding(
    request: pegboard.Request, text: str, storage: Path, scratch: Path, rounds: int
) -> Bounding:
    """Bound ``text`` (returned by the tool ``emit``) against writing it with Python.

    The peer is what a user's own code pays to put a ``str`` in a file,
    ``Path.write_text`` (encode + write); writing bytes already encoded and the
    same write followed by ``fsync`` (managed files are fsynced) are shown too.
    """
    call = pegboard.ToolCall("emit", "{}", CONTEXT)
    data = text.encode("utf-8")
    size = len(data)
    plain = scratch / "plain.txt"
    samples: dict[str, list[float]] = {key: [] for key in ("bound", "write", "write_text", "fsync")}

    def write_bytes() -> None:
        with plain.open("wb") as file:
            file.write(data)

    def write_text() -> None:
        plain.write_text(text, encoding="utf-8")

    def write_text_fsync() -> None:
        with plain.open("w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())

    check_bounded(await request.execute(call), storage, size)  # creates the storage directory
    baselines = (("write", write_bytes), ("write_text", write_text), ("fsync", write_text_fsync))
    for _ in range(rounds):
        settle()
        with collector_paused():
            start = perf_counter_ns()
            outcome = await request.execute(call)
            samples["bound"].append((perf_counter_ns() - start) / 1e6)
        check_bounded(outcome, storage, size)
        for key, baseline in baselines:
            settle()
            with collector_paused():
                start = perf_counter_ns()
                baseline()
                samples[key].append((perf_counter_ns() - start) / 1e6)
            plain.unlink()
    data = b""  # released: the peak below counts only what the call allocates
    # Peak of what the call allocates on top of the text the tool already holds.
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    outcome = await request.execute(call)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    check_bounded(outcome, storage, size)
    stall = await longest_stall(request, call)
    check_bounded(None, storage, size)
    mib = f"{size // 2**20} MiB"
    labels = {
        "bound": f"bounding {mib}: execute() of a tool returning it as text",
        "write": f"bounding {mib}: plain write of the bytes, already encoded",
        "write_text": f"bounding {mib}: Path.write_text of the str (encode + write)",
        "fsync": f"bounding {mib}: the same write_text, then fsync",
    }
    return Bounding(
        {f"{key}_{mib}": Figure(labels[key], tuple(samples[key]), "ms") for key in labels},
        (peak - before) / size,
        stall,
    )


async def bench_concurrent(
    request: pegboard.Request, storage: Path, calls: int, rounds: int
) -> dict[str, Figure]:
    """``calls`` tools each returning 100 KB, one after another and all at once.

    Each result is retained (a file written and fsynced) and previewed.
    """
    batch = [pegboard.ToolCall("hundred_kb", "{}", context(index)) for index in range(calls)]
    samples: dict[str, list[float]] = {"sequential": [], "concurrent": []}

    async def sequential() -> list[pegboard.Outcome]:
        return [await request.execute(call) for call in batch]

    runs = {"sequential": sequential, "concurrent": lambda: request.execute_all(batch)}
    for round_ in range(rounds):
        for key in sorted(runs, reverse=bool(round_ % 2)):
            settle()
            with collector_paused():
                start = perf_counter_ns()
                outcomes = await runs[key]()
                samples[key].append((perf_counter_ns() - start) / 1e6)
            assert all(isinstance(outcome, pegboard.Completed) for outcome in outcomes)
            remove_retained(storage, calls)
    label = f"{calls:,} calls each returning 100 KB of text (retained)"
    return {
        key: Figure(f"bounding: {label}, {key}", tuple(values), "ms")
        for key, values in samples.items()
    }


def remove_retained(storage: Path, expected: int) -> None:
    files = list(storage.iterdir())
    assert len(files) == expected, len(files)
    for path in files:
        path.unlink()


def settle() -> None:
    """Start a timed write with no garbage and no earlier write still being flushed."""
    gc.collect()
    # Dirty pages left by the previous round would throttle whichever write came next.
    if hasattr(os, "sync"):
        os.sync()


async def longest_stall(request: pegboard.Request, call: pegboard.ToolCall) -> float:
    """The longest time (ms) the event loop could run no other task during ``call``."""
    tick = 0.001
    longest = 0
    done = anyio.Event()

    async def watch() -> None:
        nonlocal longest
        last = perf_counter_ns()
        while not done.is_set():
            await anyio.sleep(tick)
            now = perf_counter_ns()
            longest = max(longest, now - last)
            last = now

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        await anyio.sleep(tick * 3)
        await request.execute(call)
        done.set()
    return max(longest / 1e6 - tick * 1000, 0.0)


def check_bounded(outcome: pegboard.Outcome | None, storage: Path, size: int) -> None:
    """Check the preview and the one retained file, then delete the file."""
    files = list(storage.iterdir())
    if outcome is not None:
        assert isinstance(outcome, pegboard.Completed), outcome
        preview = outcome.content[0]
        assert isinstance(preview, pegboard.Text)
        assert len(preview.text.encode("utf-8")) <= pegboard.OutputLimits().max_bytes
        assert len(files) == 1, files
        assert files[0].stat().st_size == size, files
    for path in files:
        path.unlink()


# --- report --------------------------------------------------------------------


def number(value: float) -> str:
    """Two decimals, or three below one so small figures keep a digit."""
    return f"{value:,.3f}" if abs(value) < 1 else f"{value:,.2f}"


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        padded = (
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join("-" * (w + 1) + (":" if i else "-") for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


@attrs.frozen
class Target:
    """A derived quantity, its limit, and how to print it.

    ``summary`` marks the targets of the performance summary and the peers shown
    beside them: those ``--json`` writes, under ``title`` if it has one.
    """

    label: str
    median: float
    best: float
    limit: float | None
    unit: str
    strict: bool = False
    summary: bool = False
    title: str | None = None

    def cells(self) -> tuple[str, ...]:
        if self.limit is None:
            return (self.label, self.show(self.median), self.show(self.best), "-", "-")
        relation = "<" if self.strict else "<="
        verdicts = " / ".join(self.verdict(value) for value in (self.median, self.best))
        target = f"{relation} {self.show(self.limit)}"
        return (self.label, self.show(self.median), self.show(self.best), target, verdicts)

    def show(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        return f"{number(value)} {self.unit}".rstrip()

    def verdict(self, value: float) -> str:
        return "met" if within(value, self.limit, strict=self.strict) else "MISSED"

    def reading(self, command: str) -> Reading:
        """The target as ``--json`` writes it; ``met`` reads the median."""
        return Reading(
            quantity=self.title or self.label,
            figure=self.median,
            unit=self.unit or "x",
            quietest=self.best,
            limit=self.limit,
            met=within(self.median, self.limit, strict=self.strict),
            command=command,
        )


def compared(
    label: str,
    ours: Figure,
    theirs: Figure,
    combine: Callable[[float, float], float],
    limit: float | None,
    unit: str,
    *,
    strict: bool = False,
    summary: bool = False,
    title: str | None = None,
) -> Target:
    """``ours`` against ``theirs``, paired round by round; the best is the quietest round's."""
    median = paired(ours.samples, theirs.samples, combine)
    best = quietest(ours.samples, theirs.samples, combine)
    return Target(label, median, best, limit, unit, strict, summary, title)


def call_targets(figures: dict[str, Figure]) -> list[Target]:
    ratio, gap = operator.truediv, operator.sub
    targets: list[Target] = []
    limits = {"agents": 0.8, "mcp": 0.4}
    for key, form in (("text", "JSON text"), ("dict", "parsed dict")):
        ours, direct = figures[key], figures["direct"]
        for peer in PEERS:
            if peer in figures:
                limit = limits.get(peer) if key == "text" else None
                label = f"pegboard ({form}) / {peer}"
                title = f"per call, {form}: pegboard / {figures[peer].label.removeprefix('call: ')}"
                targets.append(
                    compared(
                        label,
                        ours,
                        figures[peer],
                        ratio,
                        limit,
                        "",
                        summary=key == "text",
                        title=title,
                    )
                )
        targets.append(compared(f"pegboard ({form}) - direct", ours, direct, gap, 10, "µs"))
    ten_kb = compared(
        "10 KB text result - short text result",
        figures["ten_kb"],
        figures["short"],
        gap,
        3.6,
        "µs",
        summary=True,
        title="per call: a 10 KB text result - a short text result (counting its newlines)",
    )
    targets.append(ten_kb)
    return targets


def against_targets(figures: dict[str, Figure], bounds: dict[str, Bounding]) -> list[Target]:
    ratio = operator.truediv
    targets: list[Target] = []
    if "text" in figures:
        targets += call_targets(figures)
    for key in ("prepare_first", "prepare_again"):
        if key in figures:
            figure = figures[key]
            targets.append(Target(figure.label, figure.median, figure.best, 1, "ms", strict=True))
    for mib, bound in bounds.items():
        bounding = figures[f"bound_{mib}"]
        targets += [
            compared(
                f"bounding {mib}: execute() / Path.write_text (encode + write)",
                bounding,
                figures[f"write_text_{mib}"],
                ratio,
                2,
                "x",
                summary=True,
            ),
            compared(
                f"bounding {mib}: execute() / write of encoded bytes",
                bounding,
                figures[f"write_{mib}"],
                ratio,
                None,
                "x",
                summary=True,
            ),
            compared(
                f"bounding {mib}: execute() / write_text + fsync",
                bounding,
                figures[f"fsync_{mib}"],
                ratio,
                None,
                "x",
            ),
            Target(
                f"bounding {mib}: peak allocation / text size",
                bound.peak_ratio,
                bound.peak_ratio,
                3,
                "x",
            ),
            Target(
                f"bounding {mib}: longest event-loop stall",
                bound.longest_stall_ms,
                bound.longest_stall_ms,
                None,
                "ms",
            ),
        ]
    if "concurrent" not in figures:
        return targets
    targets.append(
        compared(
            "bounding 100 KB results: all at once / one after another",
            figures["concurrent"],
            figures["sequential"],
            ratio,
            1,
            "x",
            strict=True,
            summary=True,
        )
    )
    return targets


async def main(settings: Settings, profile: bool, only: str | None, json: str | None) -> int:
    host = pegboard.Host()
    peers = {key: peer for key, make in PEERS.items() if (peer := make()) is not None}
    profiles: list[str] = []
    bounds: dict[str, Bounding] = {}
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        storage = scratch / "managed"
        roots = [scratch / name for name in ("calls", "snapshot", "bounding")]
        for root in roots:
            root.mkdir()
        async with (
            host.location(roots[0], plugins=[], storage=storage) as calls,
            host.location(roots[1], plugins=[], storage=storage) as snapshot,
            host.location(roots[2], plugins=[], storage=storage) as bounding,
        ):
            calls.tools.register({"add": ADD_TOOL, **TEXT_TOOLS})
            request = calls.prepare()
            await check_calls(request, peers)
            figures: dict[str, Figure] = {}
            if only in (None, "calls"):
                figures |= await bench_calls(request, peers, settings)
            if only in (None, "prepare"):
                figures |= await bench_prepare(snapshot, settings)
            for mib in settings.bounding_mib if only in (None, "bounding") else ():
                text = big_text(mib * 2**20)
                with bounding.tools.register({"emit": emitter(text)}):
                    bound = await bench_bounding(
                        bounding.prepare(),
                        text,
                        bounding.storage.directory,
                        scratch,
                        settings.bounding_rounds,
                    )
                del text
                bounds[f"{mib} MiB"] = bound
                figures |= bound.figures
            with bounding.tools.register({"hundred_kb": emitter(HUNDRED_KB_TEXT * 1024)}):
                if only in (None, "bounding"):
                    figures |= await bench_concurrent(
                        bounding.prepare(),
                        bounding.storage.directory,
                        settings.concurrent_calls,
                        max(settings.bounding_rounds, 2),
                    )
            if profile:
                n = 10 * settings.calls_per_round
                timer = pegboard_timer(request, "add", ARGUMENTS_TEXT)
                profiles.append(await cprofile(timer, n, "tottime"))
                if "mcp" in peers:
                    profiles.append(await cprofile(peers["mcp"].timer, n, "cumulative"))
    print("## Machine\n")
    print(table(("fact", "value"), machine_facts()))
    print(
        f"\n## Measurements ({settings.name} run; median and best of the rounds; "
        f"{settings.calls_per_round} calls a round)\n"
    )
    rows = [
        (f.label, f"{number(f.median)} {f.unit}", f"{number(f.best)} {f.unit}", str(len(f.samples)))
        for f in figures.values()
    ]
    print(table(("measurement", "median", "best", "rounds"), rows))
    missing = sorted(set(PEERS) - set(peers))
    if missing:
        print(f"\nNot installed (pip install -e '.[bench]'), left out: {', '.join(missing)}.")
    print(
        "\n## Against the targets (ratios and differences paired within each round; "
        "quietest: the round nearest both bests, or the best for a single figure)\n"
    )
    header = ("quantity", "median", "quietest", "target", "verdict (median / quietest)")
    targets = against_targets(figures, bounds)
    print(table(header, [target.cells() for target in targets]))
    command = command_line()
    write(json, [target.reading(command) for target in targets if target.summary])
    titles = ("Request.execute, JSON text input, by own time", "MCPServer.call_tool, cumulative")
    for title, report in zip(titles, profiles, strict=False):
        print(f"\n## cProfile of {title}\n")
        print(report)
    return 0


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Time pegboard against a direct call and MCP.")
    parser.add_argument("--quick", action="store_true", help="few iterations: a smoke run")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of execute()")
    parser.add_argument(
        "--only", choices=("calls", "prepare", "bounding"), help="run one part of the benchmark"
    )
    add_json_option(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse_arguments(sys.argv[1:])
    settings = QUICK if arguments.quick else FULL
    sys.exit(anyio.run(main, settings, arguments.profile, arguments.only, arguments.json))
