"""OpenTelemetry: a span and a duration per call, across Code Mode, MCP and commands."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from otel import Telemetry, installed

import pegboard
import pegboard.mcp
from pegboard import _tracing

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]
TRACE_PEER = str(Path(__file__).with_name("mcp_trace_peer.py"))
#: A remote parent, as an MCP client sends it.
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
PARENT_TRACE = int("0af7651916cd43dd8448eb211c80319c", 16)


@pytest.fixture(scope="module")
def telemetry_installed() -> Iterator[Telemetry]:
    with installed() as telemetry:
        yield telemetry


@pytest.fixture
def telemetry(telemetry_installed: Telemetry) -> Telemetry:
    telemetry_installed.clear()
    return telemetry_installed


def tools() -> dict[str, pegboard.Tool]:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}

    async def echo(input: Any, context: pegboard.ToolContext) -> str:
        return f"echo:{input.get('text', '')}"

    async def fail(input: Any, context: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("no such thing")

    async def crash(input: Any, context: pegboard.ToolContext) -> str:
        raise LookupError("a bug")

    async def hang(input: Any, context: pegboard.ToolContext) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return {
        name: pegboard.tool(description=f"{name.title()}.", input=schema, execute=execute)
        for name, execute in {"echo": echo, "fail": fail, "crash": crash, "hang": hang}.items()
    }


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> AsyncIterator[pegboard.Location]:
    host.tools.register(tools())
    async with host.location(workspace, plugins=[], storage=storage_dir) as location:
        yield location


def call(name: str, context: Context, **input: Any) -> pegboard.ToolCall:
    return pegboard.ToolCall(name, input, context())


def named(telemetry: Telemetry, name: str) -> ReadableSpan:
    (span,) = [span for span in telemetry.finished() if span.name == name]
    return span


def test_import_pegboard_imports_no_opentelemetry() -> None:
    """Tracing costs nothing unused: `import pegboard` loads no OpenTelemetry module."""
    code = (
        "import sys, pegboard; pegboard.Host; pegboard.ToolCall; "
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "[]" == found.stdout.strip()


def test_with_the_api_imported_and_no_provider_a_call_builds_nothing() -> None:
    """The look-up imports no more of OpenTelemetry than the host did, and builds nothing."""
    code = (
        "import sys, opentelemetry.trace\n"
        "from pegboard import _tracing\n"
        "assert _tracing.instruments() is None\n"
        "print('opentelemetry.metrics' in sys.modules, _tracing._cached)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "False None" == found.stdout.strip()


async def test_without_a_provider_there_are_no_instruments(
    location: pegboard.Location, context: Context
) -> None:
    """OpenTelemetry imported but no provider set: calls take the untraced path."""
    assert "opentelemetry.trace" in sys.modules
    assert _tracing.instruments() is None
    outcome = await location.prepare().execute(call("echo", context, text="hi"))
    assert isinstance(outcome, pegboard.Completed)


async def test_a_completed_call_is_an_execute_tool_span(
    location: pegboard.Location, context: Context, telemetry: Telemetry
) -> None:
    """Name, kind and the conventions' attributes; arguments and result are not recorded."""
    before = telemetry.count("echo")
    outcome = await location.prepare().execute(call("echo", context, text="hi"))
    assert isinstance(outcome, pegboard.Completed)
    span = named(telemetry, "execute_tool echo")
    assert SpanKind.INTERNAL == span.kind
    assert {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "echo",
        "gen_ai.tool.call.id": "call-1",
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": "session-1",
        "gen_ai.agent.name": "agent-1",
    } == dict(span.attributes or {})
    assert StatusCode.UNSET == span.status.status_code
    assert before + 1 == telemetry.count("echo")
    recorded = {"gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.type"}
    echoed = [point for point, _ in telemetry.durations() if point["gen_ai.tool.name"] == "echo"]
    assert all(set(point) == recorded for point in echoed)


@pytest.mark.parametrize(
    ("name", "error_type"),
    [("fail", "tool_failure"), ("nothing", "unknown_tool")],
)
async def test_a_failed_outcome_sets_its_kind_as_error_type(
    location: pegboard.Location,
    context: Context,
    telemetry: Telemetry,
    name: str,
    error_type: str,
) -> None:
    """A Failed outcome's ToolError kind is error.type, and the span's status is an error."""
    before = telemetry.count(name, error_type)
    outcome = await location.prepare().execute(call(name, context))
    assert isinstance(outcome, pegboard.Failed)
    span = named(telemetry, f"execute_tool {name}")
    assert error_type == (span.attributes or {})["error.type"]
    assert StatusCode.ERROR == span.status.status_code
    assert outcome.error.message == span.status.description
    assert before + 1 == telemetry.count(name, error_type)


async def test_a_defect_sets_the_exception_class_as_error_type(
    location: pegboard.Location, context: Context, telemetry: Telemetry
) -> None:
    """A tool's unexpected exception propagates; its span names the class."""
    with pytest.raises(LookupError):
        await location.prepare().execute(call("crash", context))
    span = named(telemetry, "execute_tool crash")
    assert "LookupError" == (span.attributes or {})["error.type"]
    assert StatusCode.ERROR == span.status.status_code


async def test_a_cancelled_call_ends_its_span_as_cancelled(
    location: pegboard.Location, context: Context, telemetry: Telemetry
) -> None:
    """Cancellation propagates and the span says cancelled, never an outcome's kind."""
    request = location.prepare()
    with anyio.move_on_after(0.2) as scope:
        await request.execute(call("hang", context))
    assert scope.cancelled_caught
    span = named(telemetry, "execute_tool hang")
    assert "cancelled" == (span.attributes or {})["error.type"]
    assert "the call was cancelled" == span.status.description
    assert span.end_time is not None


async def test_arguments_and_results_only_when_the_host_opts_in(
    host: pegboard.Host,
    workspace: Path,
    context: Context,
    telemetry: Telemetry,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """trace_content=True or the conventions' environment variable records them, bounded."""
    host.tools.register(tools())
    long = "x" * 10_000
    async with host.location(workspace, plugins=[], trace_content=True) as location:
        await location.prepare().execute(call("echo", context, text=long))
    attributes = named(telemetry, "execute_tool echo").attributes or {}
    arguments = str(attributes["gen_ai.tool.call.arguments"])
    result = str(attributes["gen_ai.tool.call.result"])
    assert arguments.startswith('{"text":"xxx')
    assert arguments.endswith("… [5,915 more characters]")
    assert result.startswith("echo:xxx")
    assert len(result) < 4200
    telemetry.clear()
    monkeypatch.setenv(_tracing.CAPTURE_CONTENT, "true")
    async with host.location(workspace, plugins=[]) as location:
        await location.prepare().execute(call("echo", context, text="short"))
        attributes = named(telemetry, "execute_tool echo").attributes or {}
        assert '{"text":"short"}' == attributes["gen_ai.tool.call.arguments"]
        assert "echo:short" == attributes["gen_ai.tool.call.result"]
    telemetry.clear()
    async with host.location(workspace, plugins=[], trace_content=False) as location:
        await location.prepare().execute(call("echo", context, text="short"))
    assert "gen_ai.tool.call.arguments" not in (
        named(telemetry, "execute_tool echo").attributes or {}
    )


async def test_code_mode_execute_is_the_parent_of_its_programs_calls(
    location: pegboard.Location, context: Context, telemetry: Telemetry
) -> None:
    """Each tool call a program makes is a child span of the execute call's span."""
    code = "a = await echo(text='1')\nb = await echo(text='2')\nprint(a, b)"
    outcome = await location.prepare(code_mode=True).execute(
        pegboard.ToolCall("execute", {"code": code}, context())
    )
    assert isinstance(outcome, pegboard.Completed), outcome
    outer = named(telemetry, "execute_tool execute")
    inner = [span for span in telemetry.finished() if span.name == "execute_tool echo"]
    assert 2 == len(inner)
    for span in inner:
        assert span.parent is not None
        assert outer.context.span_id == span.parent.span_id
        assert outer.context.trace_id == span.context.trace_id
    assert ["call-1/1", "call-1/2"] == sorted(
        str((span.attributes or {})["gen_ai.tool.call.id"]) for span in inner
    )


async def test_pegboard_serve_continues_the_trace_of_the_request_meta(
    location: pegboard.Location, telemetry: Telemetry
) -> None:
    """params._meta.traceparent is the remote parent of the call's span."""
    async with Client(pegboard.mcp.build_server(location)) as client:
        result = await client.call_tool("echo", {"text": "hi"}, meta={"traceparent": PARENT})  # type: ignore[typeddict-unknown-key]
    assert not result.is_error
    span = named(telemetry, "execute_tool echo")
    assert PARENT_TRACE == span.context.trace_id


async def test_a_mounted_server_process_receives_the_traceparent(
    host: pegboard.Host, workspace: Path, context: Context, telemetry: Telemetry
) -> None:
    """The call to a real MCP server over stdio carries the trace in _meta."""
    servers = {"peer": {"command": [sys.executable, TRACE_PEER], "startup_timeout": 30}}
    plugins = [{"name": "mcp", "options": {"servers": servers}}]
    rules = [{"action": "mcp.*", "resource": "*", "effect": "allow"}]
    async with host.location(
        workspace, plugins=plugins, trusted=["mcp"], permissions=rules
    ) as location:
        assert not location.plugin_errors, location.plugin_errors
        outcome = await location.prepare().execute(call("peer_traceparent", context))
    assert isinstance(outcome, pegboard.Completed), outcome
    received = outcome.content[0].text  # type: ignore[union-attr]
    span = named(telemetry, "execute_tool peer_traceparent")
    assert f"00-{span.context.trace_id:032x}-" == received[:36]


async def test_bash_commands_receive_traceparent_in_their_environment(
    host: pegboard.Host, workspace: Path, context: Context, telemetry: Telemetry
) -> None:
    """TRACEPARENT names the bash call's span; without a trace it is absent."""

    async def approve(request: pegboard.PermissionRequest) -> str:
        return "once"

    rules = [{"action": "bash", "resource": "*", "effect": "allow"}]
    async with host.location(workspace, permissions=rules, approver=approve) as location:
        request = location.prepare()
        outcome = await request.execute(
            call("bash", context, command='echo "parent=${TRACEPARENT:-none}"')
        )
        assert isinstance(outcome, pegboard.Completed), outcome
        span = named(telemetry, "execute_tool bash")
        expected = f"parent=00-{span.context.trace_id:032x}-{span.context.span_id:016x}-"
        assert expected in outcome.content[0].text  # type: ignore[union-attr]


async def test_manifest_commands_receive_traceparent_in_their_environment(
    host: pegboard.Host, workspace: Path, context: Context, telemetry: Telemetry
) -> None:
    """A manifest tool's command gets TRACEPARENT naming its call's span, as bash's does."""
    script = "import os, sys\nsys.stdin.read()\nprint('parent=' + os.environ['TRACEPARENT'])\n"
    (workspace / "parent.py").write_text(script)
    command = json.dumps([sys.executable, "parent.py"])
    (workspace / "tools.toml").write_text(
        f'[[tools]]\nname = "parent"\ndescription = "Show the parent."\ncommand = {command}\n'
    )

    async def approve(request: pegboard.PermissionRequest) -> str:
        return "once"

    plugins = [{"name": "manifest", "options": {"files": ["tools.toml"]}}]
    async with host.location(
        workspace, plugins=plugins, trusted=["manifest"], approver=approve
    ) as location:
        assert () == location.plugin_errors
        outcome = await location.prepare().execute(call("parent", context))
    assert isinstance(outcome, pegboard.Completed), outcome
    span = named(telemetry, "execute_tool parent")
    expected = f"parent=00-{span.context.trace_id:032x}-{span.context.span_id:016x}-"
    assert expected in outcome.content[0].text  # type: ignore[union-attr]


def test_trace_context_is_empty_outside_a_span(telemetry: Telemetry) -> None:
    """No current span: nothing to propagate."""
    assert {} == pegboard.trace_context()
    with trace.get_tracer("test").start_as_current_span("outer") as span:
        assert pegboard.trace_context()["traceparent"].startswith(
            f"00-{span.get_span_context().trace_id:032x}"
        )


def test_the_serve_response_types_are_unchanged() -> None:
    """The MCP request parameters carry _meta as a mapping pegboard reads."""
    params = types.CallToolRequestParams(name="x", arguments={}, _meta={"traceparent": PARENT})  # type: ignore[call-arg]
    assert PARENT == dict(params.meta or {})["traceparent"]
