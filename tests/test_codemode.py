"""Code Mode: one execute tool runs a sandboxed program over the request's tools."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import pegboard
from pegboard import hookimpl
from pegboard.codemode import CodeModeLimits

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


@attrs.frozen
class AddInput:
    a: int
    b: int


@attrs.frozen
class AddOutput:
    total: int
    parts: list[int]


class Recorder:
    """Tools that record what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.contexts: list[pegboard.ToolContext] = []

    def add(self) -> pegboard.Tool:
        async def execute(input: AddInput, context: pegboard.ToolContext) -> Any:
            self.calls.append(("add", input))
            self.contexts.append(context)
            return pegboard.ToolResponse(output=AddOutput(input.a + input.b, [input.a, input.b]))

        return pegboard.tool(
            description="Add two integers.", input=AddInput, output=AddOutput, execute=execute
        )

    def echo(self, label: str = "echo") -> pegboard.Tool:
        async def execute(input: Any, context: pegboard.ToolContext) -> Any:
            self.calls.append((label, input))
            self.contexts.append(context)
            return f"{label}:{input['text']}"

        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return pegboard.tool(description="Echo text back.", input=schema, execute=execute)


def execute(code: str) -> dict[str, str]:
    return {"code": code}


async def run(
    request: pegboard.Request, code: str, context: Context, **ids: Any
) -> pegboard.Outcome:
    return await request.execute(pegboard.ToolCall("execute", execute(code), context(**ids)))


def text(outcome: pegboard.Outcome) -> str:
    assert isinstance(outcome, pegboard.Completed), outcome
    return "\n".join(item.text for item in outcome.content)  # type: ignore[union-attr]


def failure(outcome: pegboard.Outcome) -> str:
    assert isinstance(outcome, pegboard.Failed), outcome
    assert "tool_failure" == outcome.error.kind
    return outcome.error.message


async def test_without_code_mode_nothing_changes(location: pegboard.Location) -> None:
    """prepare() advertises the registered tools themselves."""
    location.tools.register({"add": Recorder().add()})
    assert ["add"] == [d.name for d in location.prepare().definitions]
    assert ["add"] == [d.name for d in location.prepare(code_mode=False).definitions]


async def test_code_mode_advertises_one_execute_tool_with_typed_signatures(
    location: pegboard.Location,
) -> None:
    """The one definition is execute({code}); its description has a stub per tool."""
    recorder = Recorder()
    location.tools.register({"add": recorder.add(), "echo": recorder.echo()})
    request = location.prepare(code_mode=True)
    (definition,) = request.definitions
    assert "execute" == definition.name
    assert ["code"] == definition.input_schema["required"]
    assert {"code"} == set(definition.input_schema["properties"])
    assert definition.output_schema is None
    assert "auto" == request.tool_choice
    assert "async def add(*, a: int, b: int) -> dict[str, Any]:" in definition.description
    assert "# returns {'total': int, 'parts': list[int]}" in definition.description
    assert "    Add two integers." in definition.description
    assert "async def echo(*, text: str = ...) -> str:" in definition.description


async def test_the_description_states_the_limits(location: pegboard.Location) -> None:
    limits = CodeModeLimits(wall_time=5, memory=2 * 1024 * 1024, calls=7)
    (definition,) = location.prepare(code_mode=limits).definitions
    assert (
        "Limits for one program: 5 s (tool calls included), 2 MiB of memory, 7 tool calls."
        in definition.description
    )


async def test_a_program_calls_two_tools_and_uses_their_machine_outputs(
    location: pegboard.Location, context: Context
) -> None:
    """Output-bearing tools return their encoded output; others their text."""
    recorder = Recorder()
    location.tools.register({"add": recorder.add(), "echo": recorder.echo()})
    code = (
        "first = await add(a=2, b=3)\n"
        "said = await echo(text=str(first['total']))\n"
        "print('parts', first['parts'])\n"
        "{'said': said, 'total': first['total'] * 10}"
    )
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert 'parts [2, 3]\n{"said": "echo:5", "total": 50}' == text(outcome)
    assert [("add", AddInput(2, 3)), ("echo", {"text": "5"})] == recorder.calls
    assert "execute" == outcome.name
    assert pegboard.CallIdentity.of(context()) == outcome.call


async def test_inner_calls_get_a_derived_identity(
    location: pegboard.Location, context: Context
) -> None:
    """Inner call IDs are <execute call id>/1, /2...; the other IDs are the runner's."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    code = "await echo(text='a')\nawait echo(text='b')"
    await run(location.prepare(code_mode=True), code, context, call_id="outer")
    assert ["outer/1", "outer/2"] == [c.call_id for c in recorder.contexts]
    assert {("session-1", "agent-1", "message-1")} == {
        (c.session_id, c.agent, c.message_id) for c in recorder.contexts
    }


async def test_inner_calls_run_the_registration_captured_at_prepare(
    location: pegboard.Location, context: Context
) -> None:
    """A registration made after prepare() does not change what the program calls."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo("first")})
    request = location.prepare(code_mode=True)
    location.tools.register({"echo": recorder.echo("second")})
    assert "first:x" == text(await run(request, "await echo(text='x')", context))


async def test_a_failed_call_raises_an_exception_the_program_can_catch(
    location: pegboard.Location, context: Context
) -> None:
    """The exception names the tool, the error kind and the message."""

    @pegboard.tool(description="Always fails.")
    async def broken(input: Any, context: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("the disk is on fire")

    location.tools.register({"broken": broken, "add": Recorder().add()})
    code = (
        "try:\n"
        "    await broken()\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
        "try:\n"
        "    await add(a='one', b=2)\n"
        "except RuntimeError as error:\n"
        "    print(str(error).split(':')[0])\n"
    )
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert (
        "tool 'broken' failed (tool_failure): the disk is on fire\n"
        "tool 'add' failed (invalid_input)"
    ) == text(outcome)


async def test_an_uncaught_failure_fails_the_execute_call(
    location: pegboard.Location, context: Context
) -> None:
    """The model sees the traceback and what the program printed before it."""

    @pegboard.tool(description="Always fails.")
    async def broken(input: Any, context: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("the disk is on fire")

    location.tools.register({"broken": broken})
    code = "print('before')\nawait broken()"
    outcome = await run(location.prepare(code_mode=True), code, context)
    message = failure(outcome)
    assert message.startswith("the program raised an exception:")
    assert "RuntimeError: tool 'broken' failed (tool_failure): the disk is on fire" in message
    assert message.endswith("It printed before it stopped:\nbefore\n")


async def test_positional_arguments_and_unknown_names_raise_in_the_program(
    location: pegboard.Location, context: Context
) -> None:
    """Tools take keyword arguments only; a name that is no tool is a NameError."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    code = (
        "try:\n"
        "    await echo('x')\n"
        "except TypeError as error:\n"
        "    print('TypeError', error)\n"
        "try:\n"
        "    await delete_everything()\n"
        "except NameError as error:\n"
        "    print('NameError', error)\n"
    )
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert (
        "TypeError echo() takes keyword arguments only, as its signature shows\n"
        "NameError name 'delete_everything' is not defined; the tools are: echo"
    ) == text(outcome)
    assert [] == recorder.calls


async def test_a_tool_named_in_an_expression_can_be_called_later(
    location: pegboard.Location, context: Context
) -> None:
    """``f = echo; await f(...)`` calls the tool through the pipeline too."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    code = "tools = [echo]\nawait tools[0](text='late')"
    assert "echo:late" == text(await run(location.prepare(code_mode=True), code, context))


async def test_inner_calls_run_concurrently_with_gather(
    location: pegboard.Location, context: Context
) -> None:
    """Two gathered calls overlap: the first waits for an event only the second sets."""
    released = anyio.Event()

    @pegboard.tool(description="Waits for the release.")
    async def waits(input: Any, context: pegboard.ToolContext) -> str:
        with anyio.fail_after(5):
            await released.wait()
        return "waited"

    @pegboard.tool(description="Releases the waiter.")
    async def releases(input: Any, context: pegboard.ToolContext) -> str:
        released.set()
        return "released"

    location.tools.register({"waits": waits, "releases": releases})
    code = "import asyncio\nawait asyncio.gather(waits(), releases())"
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert '["waited", "released"]' == text(outcome)


async def test_inner_calls_are_reported_as_progress(
    location: pegboard.Location, context: Context
) -> None:
    """The runner's progress callback gets one message per inner call."""
    reports: list[pegboard.Progress] = []

    async def progress(update: pegboard.Progress) -> None:
        reports.append(update)

    location.tools.register({"echo": Recorder().echo()})
    code = "await echo(text='a')\nawait echo(text='b')"
    await run(location.prepare(code_mode=True), code, context, call_id="c", progress=progress)
    assert ["echo (c/1)", "echo (c/2)"] == [r.message for r in reports]


async def test_execute_after_hooks_see_every_inner_call(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """Hooks run for each inner call, then for the execute call itself."""
    seen: list[tuple[str | None, str]] = []

    class Observe:
        @hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            seen.append((event.name, event.call.call_id))

    host.add_plugin("observe", Observe())
    host.tools.register({"echo": Recorder().echo()})
    async with host.location(workspace, plugins=["observe"], storage=storage_dir) as location:
        code = "await echo(text='a')\nawait echo(text='b')"
        await run(location.prepare(code_mode=True), code, context, call_id="c")
    assert [("echo", "c/1"), ("echo", "c/2"), ("execute", "c")] == seen


async def test_the_execute_content_is_bounded_like_any_other(
    location: pegboard.Location, context: Context, storage_dir: Path
) -> None:
    """Printed output past the Location's limits is saved whole and previewed."""
    code = "for i in range(5000):\n    print('line', i)"
    content = text(await run(location.prepare(code_mode=True), code, context))
    assert "omitted; the full output is saved in" in content
    (saved,) = [p for p in storage_dir.rglob("*") if p.is_file()]
    assert "line 4999" in saved.read_text()


async def test_a_program_without_output_says_so(
    location: pegboard.Location, context: Context
) -> None:
    """Content is never empty."""
    outcome = await run(location.prepare(code_mode=True), "x = 1", context)
    assert "(the program printed nothing and its last expression was None)" == text(outcome)


async def test_a_syntax_error_fails_the_call_with_the_reason(
    location: pegboard.Location, context: Context
) -> None:
    message = failure(await run(location.prepare(code_mode=True), "def (:", context))
    assert message.startswith("the program is not valid Python:")


async def test_the_call_limit_fails_the_call_before_running_one_more(
    location: pegboard.Location, context: Context
) -> None:
    """With calls=2, a third call is not made and the model is told the limit."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    request = location.prepare(code_mode=CodeModeLimits(calls=2))
    code = "for i in range(3):\n    await echo(text=str(i))"
    message = failure(await run(request, code, context))
    assert "more than 2 tool calls" in message
    assert "split the work" in message
    assert 2 == len(recorder.calls)


async def test_the_limits_a_location_was_opened_with_hold_for_its_requests(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """host.location(code_mode=...) sets the limits of prepare(code_mode=True); a request
    given its own limits uses those instead."""
    recorder = Recorder()
    opening = host.location(
        workspace, plugins=[], storage=storage_dir, code_mode=CodeModeLimits(calls=1)
    )
    async with opening as location:
        location.tools.register({"echo": recorder.echo()})
        code = "for i in range(3):\n    await echo(text=str(i))"
        message = failure(await run(location.prepare(code_mode=True), code, context))
        assert "more than 1 tool calls" in message
        assert 1 == len(recorder.calls)
        own = location.prepare(code_mode=CodeModeLimits(calls=5))
        assert isinstance(await run(own, code, context), pegboard.Completed)
        assert 4 == len(recorder.calls)


async def test_a_location_takes_code_mode_limits_or_none(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    with pytest.raises(TypeError, match=r"code_mode takes a pegboard\.codemode\.CodeModeLimits"):
        async with host.location(workspace, plugins=[], code_mode=True):  # type: ignore[arg-type]
            pass


async def test_the_call_limit_holds_for_gathered_calls(
    location: pegboard.Location, context: Context
) -> None:
    """Calls started together count one by one: past the limit none more is made."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    request = location.prepare(code_mode=CodeModeLimits(calls=3))
    code = "import asyncio\nawait asyncio.gather(*[echo(text=str(i)) for i in range(5)])"
    message = failure(await run(request, code, context))
    assert "more than 3 tool calls" in message
    assert len(recorder.calls) <= 3


async def test_the_memory_limit_fails_the_call(
    location: pegboard.Location, context: Context
) -> None:
    request = location.prepare(code_mode=CodeModeLimits(memory=10_000_000))
    message = failure(await run(request, "x = [0] * 50_000_000\nlen(x)", context))
    assert message.startswith("the program used more than 10000000 bytes of memory")


async def test_the_time_limit_covers_computation(
    location: pegboard.Location, context: Context
) -> None:
    """A program that loops forever is stopped at its wall time."""
    request = location.prepare(code_mode=CodeModeLimits(wall_time=0.5))
    started = time.monotonic()
    message = failure(await run(request, "while True:\n    pass", context))
    assert time.monotonic() - started < 3
    assert "0.5 s" in message
    assert "time limit" in message


async def test_the_time_limit_covers_tool_calls_and_cancels_them(
    location: pegboard.Location, context: Context
) -> None:
    """A tool call still running at the wall time is cancelled and the call fails."""
    cleaned = anyio.Event()

    @pegboard.tool(description="Waits forever.")
    async def waits(input: Any, context: pegboard.ToolContext) -> str:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.set()
        return "never"

    location.tools.register({"waits": waits})
    request = location.prepare(code_mode=CodeModeLimits(wall_time=0.3))
    message = failure(await run(request, "await waits()", context))
    assert message.startswith("the program was stopped after 0.3 s, its time limit")
    assert cleaned.is_set()


@pytest.mark.parametrize("code", ["await waits()", "while True:\n    pass"])
async def test_cancelling_execute_cancels_the_program_and_produces_no_outcome(
    location: pegboard.Location, context: Context, code: str
) -> None:
    """Cancellation reaches inner calls (their cleanup runs) and returns at once,
    even while the program is busy computing.
    """
    started, cleaned = anyio.Event(), anyio.Event()
    outcomes: list[pegboard.Outcome] = []

    @pegboard.tool(description="Waits forever.")
    async def waits(input: Any, context: pegboard.ToolContext) -> str:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            cleaned.set()
        return "never"

    location.tools.register({"waits": waits})
    request = location.prepare(code_mode=CodeModeLimits(wall_time=20))

    async def call() -> None:
        outcomes.append(await run(request, code, context))

    begun = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(call)
        if "waits" in code:
            await started.wait()
        else:
            await anyio.sleep(0.3)
        group.cancel_scope.cancel()
    assert time.monotonic() - begun < 5
    assert [] == outcomes
    assert cleaned.is_set() or "waits" not in code


async def test_an_unexpected_exception_from_an_inner_tool_propagates_unchanged(
    location: pegboard.Location, context: Context
) -> None:
    """The framework never turns a tool's bug into a model-visible result."""

    class BugError(Exception):
        pass

    @pegboard.tool(description="Has a bug.")
    async def buggy(input: Any, context: pegboard.ToolContext) -> str:
        raise BugError("oops")

    location.tools.register({"buggy": buggy})
    with pytest.raises(BugError, match="oops"):
        await run(location.prepare(code_mode=True), "await buggy()", context)


async def test_the_final_step_keeps_execute_and_runs_nothing(
    location: pegboard.Location, context: Context
) -> None:
    """On the final step execute stays advertised, tool_choice is none, a call fails."""
    recorder = Recorder()
    location.tools.register({"echo": recorder.echo()})
    request = location.prepare(final_step=True, code_mode=True)
    assert ["execute"] == [d.name for d in request.definitions]
    assert "none" == request.tool_choice
    outcome = await run(request, "await echo(text='x')", context)
    assert isinstance(outcome, pegboard.Failed)
    assert "final_step" == outcome.error.kind
    assert [] == recorder.calls


async def test_tools_a_prepare_hook_withdrew_are_not_in_the_program(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A withdrawn tool has no function and no stub."""

    class Withdraw:
        @hookimpl
        def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
            definitions[:] = [d for d in definitions if d.name != "hidden"]

    recorder = Recorder()
    host.add_plugin("withdraw", Withdraw())
    host.tools.register({"echo": recorder.echo(), "hidden": recorder.echo("hidden")})
    async with host.location(workspace, plugins=["withdraw"], storage=storage_dir) as location:
        request = location.prepare(code_mode=True)
        assert "async def hidden" not in request.definitions[0].description
        code = "try:\n    await hidden(text='x')\nexcept NameError:\n    print('no')"
        assert "no" == text(await run(request, code, context))
    assert [] == recorder.calls


async def test_code_mode_takes_true_or_limits(location: pegboard.Location) -> None:
    with pytest.raises(TypeError, match="code_mode takes True or a"):
        location.prepare(code_mode="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="calls must be a positive number"):
        CodeModeLimits(calls=0)


async def test_a_missing_sandbox_is_a_clear_error(
    location: pegboard.Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without pydantic-monty, prepare(code_mode=True) says how to install it."""
    monkeypatch.setitem(sys.modules, "pydantic_monty", None)
    with pytest.raises(ImportError, match=r"pip install 'pegboard\[codemode\]'"):
        location.prepare(code_mode=True)
    assert [] == list(location.prepare().definitions)


def test_importing_pegboard_does_not_import_the_sandbox() -> None:
    code = "import sys, pegboard; print('pydantic_monty' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "False" == result.stdout.strip(), result.stderr


async def test_a_cancelled_busy_program_stops_and_returns_its_worker() -> None:
    """Cancelling a step mid-computation kills its worker at once, so the
    session is returned to the pool long before the program's own time limit.
    """
    from pegboard.codemode._sandbox import Session

    session = await Session.open(CodeModeLimits(wall_time=60))
    with anyio.move_on_after(0.3):
        await session.step(session.session.feed_start, "while True:\n    pass")
    await session.close()
    for _ in range(100):  # polls a worker thread's progress: no event to wait on
        if session.closed:
            break
        await anyio.sleep(0.05)
    assert session.closed


async def test_law_codec_boundary_code_mode_sees_validated_encoded_output(
    location: pegboard.Location, context: Context
) -> None:
    """The program gets the output codec's encoded JSON, never the tool's own value,
    and output that fails its schema never reaches it.
    """
    recorder = Recorder()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    @pegboard.tool(description="Returns output its schema rejects.", output=schema)
    async def wrong(input: Any, context: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output={"n": "not a number"}, content="fine")

    location.tools.register({"add": recorder.add(), "wrong": wrong})
    code = (
        "value = await add(a=1, b=2)\n"
        "print(type(value).__name__, sorted(value))\n"
        "try:\n"
        "    print(await wrong())\n"
        "except RuntimeError as error:\n"
        "    print(str(error).split(':')[0])\n"
    )
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert "dict ['parts', 'total']\ntool 'wrong' failed (invalid_output)" == text(outcome)


async def test_a_sleeping_program_is_stopped_at_its_wall_time(
    location: pegboard.Location, context: Context
) -> None:
    """Sleeping is waiting, not computing: the wall clock still stops it."""
    request = location.prepare(code_mode=CodeModeLimits(wall_time=0.5))
    started = time.monotonic()
    message = failure(await run(request, "import asyncio\nawait asyncio.sleep(100)", context))
    assert time.monotonic() - started < 3
    assert message.startswith("the program was stopped after 0.5 s")


async def test_sleeps_run_on_the_host_clock(location: pegboard.Location, context: Context) -> None:
    """time.sleep and asyncio.sleep wait; a bad length raises in the program, as in CPython."""
    code = (
        "import asyncio, time\n"
        "time.sleep(0.01)\n"
        "await asyncio.sleep(0.01)\n"
        "await asyncio.sleep(-1)\n"
        "try:\n"
        "    time.sleep(-1)\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    outcome = await run(location.prepare(code_mode=True), code, context)
    assert "sleep length must be non-negative" == text(outcome)


async def test_gathered_sleeps_overlap(location: pegboard.Location, context: Context) -> None:
    """Ten gathered half-second sleeps take about half a second, not five."""
    code = "import asyncio\nawait asyncio.gather(*[asyncio.sleep(0.5) for _ in range(10)])\n1"
    started = time.monotonic()
    assert "1" == text(await run(location.prepare(code_mode=True), code, context))
    assert time.monotonic() - started < 3


async def test_execute_calls_run_side_by_side(
    location: pegboard.Location, context: Context
) -> None:
    """Several programs at once each get their own sandbox and their own answers."""
    recorder = Recorder()
    location.tools.register({"add": recorder.add()})
    request = location.prepare(code_mode=True)
    results: dict[int, str] = {}

    async def one(index: int) -> None:
        code = f"(await add(a={index}, b=100))['total']"
        results[index] = text(await run(request, code, context, call_id=f"c{index}"))

    async with anyio.create_task_group() as group:
        for index in range(4):
            group.start_soon(one, index)
    assert {index: str(index + 100) for index in range(4)} == results


async def test_printed_output_past_the_cap_is_dropped_and_said(
    location: pegboard.Location, context: Context, storage_dir: Path
) -> None:
    """The host keeps a prefix of at most 1 MiB characters of what one program prints."""
    code = "print('a' * 1000)\nprint('b' * 2_000_000)\nprint('c')"
    content = text(await run(location.prepare(code_mode=True), code, context))
    assert content.endswith("[printed output past 1048576 characters was dropped]")
    (saved,) = [p for p in storage_dir.rglob("*") if p.is_file()]
    kept = saved.read_text()
    assert kept.startswith("a" * 1000)
    assert len(kept) < 1024 * 1024 + 100
    assert "c" not in kept.split("[")[0]


async def test_a_call_the_program_never_awaited_is_cancelled_when_it_ends(
    location: pegboard.Location, context: Context
) -> None:
    """The program's result does not wait for calls it left behind; they are cancelled."""
    started, cleaned = anyio.Event(), anyio.Event()

    @pegboard.tool(description="Waits forever.")
    async def waits(input: Any, context: pegboard.ToolContext) -> str:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            cleaned.set()
        return "never"

    location.tools.register({"waits": waits})
    code = "import asyncio\nleft = waits()\nawait asyncio.sleep(0.05)\n'done'"
    with anyio.fail_after(10):
        outcome = await run(location.prepare(code_mode=True), code, context)
    assert "done" == text(outcome)
    assert started.is_set()
    assert cleaned.is_set()
