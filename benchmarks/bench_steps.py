"""Break ``Request.execute`` down: each pipeline step timed on its own.

Run ``python benchmarks/bench_steps.py``. It reaches into pegboard's private
modules to call each step as the pipeline does for the small ``add`` tool of
``bench_calls.py``; a step this version of pegboard no longer has is reported
and left out, so the list needs updating when the pipeline changes. Every step
runs in every round, so noise spreads over all of them; a figure is the best
round minus the cost of an empty loop. The remainder is what the steps leave
unexplained (coroutine frames, attribute look-ups, branches).
"""

from __future__ import annotations

import gc
import inspect
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import anyio
import attrs
import cattrs
import orjson
from bench_calls import (
    ADD_TOOL,
    ARGUMENTS,
    ARGUMENTS_TEXT,
    BIG_TEXT_BYTES,
    CONTEXT,
    TOOLS_IN_SNAPSHOT,
    AddInput,
    AddOutput,
    add,
    big_text,
    table,
)

import pegboard
from pegboard import _bounding, _content, _converter, _json, _pipeline, _request, _tool

LOOPS = 2_000
ROUNDS = 40

Step = Callable[[], object]
AsyncStep = Callable[[], Awaitable[object]]


async def usable(steps: dict[str, Any]) -> dict[str, Any]:
    """The steps this version of pegboard can run; the others are reported and left out."""
    kept = {}
    for label, step in steps.items():
        try:
            result = step()
            if inspect.isawaitable(result):
                await result
        except (AttributeError, ImportError, TypeError) as error:
            print(f"left out, not in this version of pegboard: {label} ({error})")
        else:
            kept[label] = step
    return kept


async def best_of(steps: dict[str, Step], awaited: dict[str, AsyncStep]) -> dict[str, float]:
    """Best per-call µs of every step over ``ROUNDS`` rounds, empty loop subtracted."""
    steps = {"(empty)": lambda: None, **await usable(steps)}
    awaited = {"(empty await)": nothing, **await usable(awaited)}
    best = dict.fromkeys([*steps, *awaited], float("inf"))
    gc.collect()
    gc.disable()
    for _ in range(ROUNDS):
        for label, step in steps.items():
            start = perf_counter_ns()
            for _ in range(LOOPS):
                step()
            best[label] = min(best[label], perf_counter_ns() - start)
        for label, step_async in awaited.items():
            start = perf_counter_ns()
            for _ in range(LOOPS):
                await step_async()
            best[label] = min(best[label], perf_counter_ns() - start)
    gc.enable()
    empty, empty_await = best.pop("(empty)"), best.pop("(empty await)")
    return {
        label: (ns - (empty_await if label in awaited else empty)) / LOOPS / 1000
        for label, ns in best.items()
    }


async def nothing() -> None:
    return None


@attrs.define(kw_only=True)
class MutableIdentity:
    session_id: str
    agent: str
    message_id: str
    call_id: str


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        host = pegboard.Host()
        async with host.location(scratch, plugins=[], storage=Path(scratch) / "m") as location:
            location.tools.register({"add": ADD_TOOL})
            await report(location.prepare())
            snapshot(location)
        await bounding(Path(scratch))


async def report(request: pegboard.Request) -> None:
    pipeline: Any = request._pipeline
    limits = pipeline.limits
    codec_in: Any = ADD_TOOL.input
    codec_out: Any = ADD_TOOL.output
    identity = pegboard.CallIdentity.of(CONTEXT)
    value = AddInput(a=1, b=2)
    output = AddOutput(total=3)
    encoded = {"total": 3}
    text = pegboard.Text('{"total":3}')
    content = (text,)
    completed = pegboard.Completed(encoded, content, None, call=identity)
    text_call = pegboard.ToolCall("add", ARGUMENTS_TEXT, CONTEXT)
    dict_call = pegboard.ToolCall("add", ARGUMENTS, CONTEXT)
    relaxed = cattrs.Converter(forbid_extra_keys=True, detailed_validation=False)
    relaxed.register_structure_hook(int, _converter._strict_int)
    relaxed_structure = relaxed.get_structure_hook(AddInput)
    private: Any = _pipeline  # names here come and go between versions

    def rebuilt_context() -> pegboard.ToolContext:
        # Pipelines with a _Recorder hand the tool a copy of the runner's context.
        return pegboard.ToolContext(
            session_id=CONTEXT.session_id,
            agent=CONTEXT.agent,
            message_id=CONTEXT.message_id,
            call_id=CONTEXT.call_id,
            progress=private._Recorder(CONTEXT.progress).report,
        )

    def recorded() -> None:
        tool: Any = _tool
        token = tool.RECORDER.set(tool.ProgressRecorder(CONTEXT))
        tool.RECORDER.reset(token)

    pipeline_steps: dict[str, Step] = {
        "CallIdentity.of(context)": lambda: pegboard.CallIdentity.of(CONTEXT),
        "read_input: JSON text to dict": lambda: pipeline.read_input(ARGUMENTS_TEXT),
        "input decode: jsonschema-rs check": lambda: codec_in._validator.check(ARGUMENTS),
        "input decode: cattrs structure": lambda: codec_in._structure(ARGUMENTS, AddInput),
        "progress: _Recorder + ToolContext copy": rebuilt_context,
        "progress: ProgressRecorder in a context variable": recorded,
        "ToolResponse(output=...) wrapper": lambda: pegboard.ToolResponse(output=output),
        "output encode: cattrs unstructure": lambda: codec_out._unstructure(output),
        "output encode: jsonschema-rs check": lambda: codec_out._validator.check(encoded),
        "normalize_content(None)": lambda: _content.normalize_content(None),
        "content from output: orjson dumps": lambda: _json.dumps(encoded),
        "Text(...) (validated attrs)": lambda: pegboard.Text('{"total":3}'),
        "check_text(content)": lambda: _bounding.check_text(content),
        "metadata(None)": lambda: pipeline.metadata(None, "add", identity),
        "Completed(...)": lambda: pegboard.Completed(encoded, content, None, call=identity),
        "fits(content, limits) in bound()": lambda: _bounding.fits(content, limits),
    }
    dict_steps: dict[str, Step] = {
        "read_input(dict): find_problem walk": lambda: _json.find_problem(ARGUMENTS, max_depth=64),
        "read_input(dict): orjson.dumps for the size": lambda: len(orjson.dumps(ARGUMENTS)),
        "read_input(dict) as a whole": lambda: pipeline.read_input(ARGUMENTS),
    }
    alternatives: dict[str, Step] = {
        "cattrs structure, detailed_validation=False": lambda: relaxed_structure(
            ARGUMENTS, AddInput
        ),
        "AddInput(**raw) after schema validation": lambda: AddInput(**ARGUMENTS),
        "4 str fields: attrs.frozen, keywords (CallIdentity)": lambda: pegboard.CallIdentity(
            session_id="s", agent="a", message_id="m", call_id="c"
        ),
        "4 str fields: attrs.define, keywords": lambda: MutableIdentity(
            session_id="s", agent="a", message_id="m", call_id="c"
        ),
    }
    awaited: dict[str, AsyncStep] = {
        "execute, JSON text": lambda: request.execute(text_call),
        "execute, parsed dict": lambda: request.execute(dict_call),
        "tool body: await add(...)": lambda: add(value, CONTEXT),
        "publish() of a small Completed": lambda: pipeline.publish(completed, "add"),
    }
    best = await best_of({**pipeline_steps, **dict_steps, **alternatives}, awaited)

    whole = best["execute, JSON text"]
    order = [label for label in pipeline_steps if label in best]
    order.insert(order.index("ToolResponse(output=...) wrapper"), "tool body: await add(...)")
    explained = sum(best[label] for label in order)
    rows = [(label, f"{best[label]:.2f}", f"{best[label] / whole:.0%}") for label in order]
    rows.append(("remainder", f"{whole - explained:.2f}", f"{(whole - explained) / whole:.0%}"))
    rows.append(("Request.execute, JSON text input, whole", f"{whole:.2f}", "100%"))
    print(f"Best of {ROUNDS} rounds of {LOOPS} calls; µs a call.\n")
    print(table(("step, in pipeline order", "µs", "share"), rows))
    print()
    extra = [*dict_steps, "execute, parsed dict"]
    print(table(("parsed dict input", "µs"), [(label, f"{best[label]:.2f}") for label in extra]))
    print()
    extra = [*alternatives, "publish() of a small Completed"]
    print(table(("for comparison", "µs"), [(label, f"{best[label]:.2f}") for label in extra]))


def definition(name: str, tool: pegboard.Tool) -> pegboard.ToolDefinition:
    output = None if tool.output is None else tool.output.json_schema
    return pegboard.ToolDefinition(name, tool.description, tool.input.json_schema, output)


def snapshot(location: pegboard.Location) -> None:
    """Time the pieces of ``prepare()`` over ``TOOLS_IN_SNAPSHOT`` registered tools."""
    snapshots: Any = _request.Snapshot
    tools = {f"tool_{i:05d}": ADD_TOOL for i in range(TOOLS_IN_SNAPSHOT)}
    with location.tools.register(tools):
        boards = location._boards
        previous = snapshots.of(boards)
        with location.tools.register({"extra": ADD_TOOL}):
            winners = boards[-1].winners()
            names = sorted(winners)
            current = snapshots.of(boards, previous)
            pieces: dict[str, Step] = {
                "Snapshot.of(boards), nothing to reuse": lambda: snapshots.of(boards),
                "Snapshot.of(boards, previous), one name added": lambda: snapshots.of(
                    boards, previous
                ),
                "  of which: Board.winners() of the Location board": boards[-1].winners,
                "  of which: sorted(names)": lambda: sorted(winners),
                "  of which: the name-ordered tools dict": lambda: {n: winners[n] for n in names},
                "  of which: previous definitions by name": lambda: {
                    d.name: d for d in previous.definitions
                },
                "for comparison: one new ToolDefinition per name": lambda: tuple(
                    definition(name, winners[name]) for name in names
                ),
                "Request(...) on an unchanged snapshot": lambda: pegboard.Request(
                    current, location._pipeline, final_step=False
                ),
            }
            best = dict.fromkeys(pieces, float("inf"))
            gc.collect()
            gc.disable()
            for _ in range(15):
                for label, piece in pieces.items():
                    start = perf_counter_ns()
                    piece()
                    best[label] = min(best[label], perf_counter_ns() - start)
            gc.enable()
    rows = [(label, f"{ns / 1e6:.2f}") for label, ns in best.items()]
    print(f"\nprepare() over {TOOLS_IN_SNAPSHOT:,} tools: best of 15, ms\n")
    print(table(("piece", "ms"), rows))


async def bounding(scratch: Path) -> None:
    """Time the pieces of bounding one oversized text, as ``bound_content`` runs them.

    All of them hold the GIL except the file write, wherever they run.
    """
    text = big_text(BIG_TEXT_BYTES)
    data = text.encode("utf-8")
    accented = text.replace("fox", "foé")
    storage = pegboard.ManagedStorage(scratch / "managed")
    limits = pegboard.OutputLimits()
    marker_path = scratch / "managed" / "tool-output-20260101T000000-0000000000000000.txt"
    fits, check_text = _bounding.fits, _bounding.check_text

    async def save() -> None:
        (await storage.save(data)).unlink()

    def write() -> None:
        plain = scratch / "plain.txt"
        with plain.open("wb") as file:
            file.write(data)
        plain.unlink()

    pieces: dict[str, Step | AsyncStep] = {
        "join + encode to UTF-8": lambda: "\n".join([text]).encode("utf-8"),
        "ManagedStorage.save + unlink": save,
        "preview_text() as a whole": lambda: _bounding.preview_text(data, limits, marker_path),
        "  of which: one newline count over the text": lambda: data.count(b"\n"),
        "for comparison: plain write + unlink": write,
        "fits() on the ASCII text (no encode needed)": lambda: fits((pegboard.Text(text),), limits),
        "non-ASCII text: one encode": lambda: accented.encode("utf-8"),
        "non-ASCII text: check_text() (encodes to measure)": lambda: check_text(
            (pegboard.Text(accented),)
        ),
        "non-ASCII text: fits() (encodes to measure)": lambda: fits(
            (pegboard.Text(accented),), limits
        ),
    }
    best = dict.fromkeys(pieces, float("inf"))
    for _ in range(5):
        for label, piece in pieces.items():
            if hasattr(os, "sync"):
                os.sync()
            start = perf_counter_ns()
            result = piece()
            if inspect.isawaitable(result):
                await result
            best[label] = min(best[label], perf_counter_ns() - start)
    rows = [(label, f"{ns / 1e6:.1f}") for label, ns in best.items()]
    print(f"\nBounding {len(data) // 2**20} MiB of text: best of 5, ms\n")
    print(table(("piece", "ms"), rows))


if __name__ == "__main__":
    anyio.run(main)
