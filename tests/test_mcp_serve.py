"""pegboard serves a Location to the official MCP SDK's Client, in memory and over stdio."""

from __future__ import annotations

import os
import secrets
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from anyio.abc import TaskStatus
from distributions import install_plugin

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

import pegboard.mcp

pytestmark = pytest.mark.anyio

#: The client's protocol era: the SDK's default (2026-07-28, no handshake) and
#: the 2025 handshake most clients in the field still speak.
ERAS = ["auto", "legacy"]


@attrs.frozen
class AddInput:
    a: int
    b: int


@attrs.frozen
class Total:
    total: int


class Calls:
    """Application tools for the tests, and what they saw."""

    def __init__(self) -> None:
        self.contexts: list[pegboard.ToolContext] = []
        self.cleaned_up = anyio.Event()

    async def add(
        self, input: AddInput, context: pegboard.ToolContext
    ) -> pegboard.ToolResponse[Total]:
        self.contexts.append(context)
        await context.progress(pegboard.Progress(message="adding", current=1, total=2))
        return pegboard.ToolResponse(output=Total(input.a + input.b), metadata={"ui": "sum"})

    async def count(self, input: object, context: pegboard.ToolContext) -> int:
        return 7

    async def lines(self, input: object, context: pegboard.ToolContext) -> list[str]:
        return [f"line {n}" for n in range(5000)]

    async def fail(self, input: object, context: pegboard.ToolContext) -> str:
        await context.progress(pegboard.Progress(content="half done"))
        raise pegboard.ToolFailure("it broke", metadata={"code": 7})

    async def media(self, input: object, context: pegboard.ToolContext) -> list[Any]:
        return MEDIA

    async def slow(self, input: object, context: pegboard.ToolContext) -> str:
        try:
            await anyio.sleep(60)
        finally:
            self.cleaned_up.set()
        return "never"

    def register(self, tools: pegboard.Tools) -> None:
        tools.register(
            {
                "add": pegboard.tool(
                    description="Add two integers.", execute=self.add, input=AddInput, output=Total
                ),
                "count": pegboard.tool(
                    description="A number.", execute=self.count, output={"type": "integer"}
                ),
                "lines": pegboard.tool(
                    description="Many lines.",
                    execute=self.lines,
                    output={"type": "array", "items": {"type": "string"}},
                ),
                "fail": pegboard.tool(description="Always fail.", execute=self.fail),
                "media": pegboard.tool(description="Media.", execute=self.media),
                "slow": pegboard.tool(description="Never finish.", execute=self.slow),
            }
        )


MEDIA = [
    pegboard.Text("look"),
    pegboard.Image(b"\x89PNG", "image/png"),
    pegboard.Audio(b"RIFF", "audio/wav"),
    pegboard.ResourceLink(uri="file:///a.txt", name="a.txt", mime_type="text/plain", size=3),
    pegboard.EmbeddedResource(uri="file:///b.txt", text="bee", mime_type="text/plain"),
    pegboard.EmbeddedResource(uri="file:///c.bin", data=b"\x00\x01"),
]


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
async def served(
    host: pegboard.Host, workspace: Path, storage_dir: Path, calls: Calls
) -> AsyncIterator[pegboard.Location]:
    calls.register(host.tools)
    approver = pegboard.mcp.ClientApprover(client_approval=True)
    async with host.location(
        workspace, plugins=[], storage=storage_dir, approver=approver
    ) as location:
        yield location


def client(location: pegboard.Location, era: str, **options: Any) -> Client:
    info = types.Implementation(name="test-agent", version="1")
    return Client(pegboard.mcp.build_server(location), mode=era, client_info=info, **options)


@pytest.mark.parametrize("era", ERAS)
async def test_tools_list_returns_the_advertised_definitions(
    served: pegboard.Location, era: str
) -> None:
    """Names, descriptions and schemas; a non-object output schema is wrapped in an object."""
    async with client(served, era) as mcp:
        listed = {tool.name: tool for tool in (await mcp.list_tools()).tools}
    definitions = {definition.name: definition for definition in served.prepare().definitions}
    assert list(definitions) == list(listed)
    for name, definition in definitions.items():
        assert definition.description == listed[name].description
        assert pegboard.thaw(definition.input_schema) == listed[name].input_schema
    assert pegboard.thaw(definitions["add"].output_schema) == listed["add"].output_schema
    assert {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    } == listed["count"].output_schema
    assert listed["fail"].output_schema is None


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_maps_output_content_and_metadata(served: pegboard.Location, era: str) -> None:
    """structuredContent is the whole machine output; content and _meta follow the outcome."""
    async with client(served, era) as mcp:
        added = await mcp.call_tool("add", {"a": 2, "b": 40})
        counted = await mcp.call_tool("count", {})
        lines = await mcp.call_tool("lines", {})
    assert (False, {"total": 42}) == (added.is_error, added.structured_content)
    assert [types.TextContent(text='{"total":42}')] == added.content
    assert "sum" == (added.meta or {})["ui"]
    assert {"result": 7} == counted.structured_content
    # Bounding cut the content to a preview, never the structured output.
    assert [f"line {n}" for n in range(5000)] == lines.structured_content["result"]
    preview, link = lines.content  # the preview, and a link to the whole output
    assert isinstance(preview, types.TextContent)
    assert isinstance(link, types.ResourceLink)
    assert len(preview.text.encode()) < 51_200 + 1024  # a bounded preview, with its marker


@pytest.mark.parametrize("era", ERAS)
async def test_failures_are_errors_with_message_and_partial_content(
    served: pegboard.Location, era: str
) -> None:
    """A Failed outcome is isError with its message, then the partial content."""
    async with client(served, era) as mcp:
        failed = await mcp.call_tool("fail", {})
        invalid = await mcp.call_tool("add", {"a": "two"})
        unknown = await mcp.call_tool("nope", {})
    assert failed.is_error
    assert ["it broke", "half done"] == [block.text for block in failed.content]
    assert 7 == (failed.meta or {})["code"]
    assert invalid.is_error
    assert "invalid input for tool 'add'" in invalid.content[0].text
    assert unknown.is_error
    assert "there is no tool named 'nope'" in unknown.content[0].text


@pytest.mark.parametrize("era", ERAS)
async def test_media_content_becomes_mcp_blocks(served: pegboard.Location, era: str) -> None:
    """Text, base64 image and audio, resource links and embedded resources, both ways."""
    async with client(served, era) as mcp:
        result = await mcp.call_tool("media", {})
    assert ["text", "image", "audio", "resource_link", "resource", "resource"] == [
        block.type for block in result.content
    ]
    assert "iVBORw==" == result.content[1].data
    assert tuple(MEDIA) == pegboard.mcp.from_mcp_content(result.content)


@pytest.mark.parametrize("era", ERAS)
async def test_identity_and_progress(served: pegboard.Location, calls: Calls, era: str) -> None:
    """The MCP session and request IDs are the call's identity; progress is notified."""
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(current: float, total: float | None, message: str | None) -> None:
        updates.append((current, total, message))

    async with client(served, era) as mcp:
        await mcp.call_tool("add", {"a": 1, "b": 1}, progress_callback=progress)
        await mcp.call_tool("add", {"a": 1, "b": 2})
    assert [(1, 2, "adding")] == updates
    first, second = calls.contexts
    assert "test-agent" == first.agent
    assert first.session_id == second.session_id
    assert first.session_id.startswith("mcp-")
    assert first.call_id == first.message_id
    assert first.call_id != second.call_id
    assert first.call_id.isdigit()


@pytest.mark.parametrize("era", ERAS)
async def test_a_cancelled_call_is_cancelled_and_settles_nothing(
    host: pegboard.Host, served: pegboard.Location, calls: Calls, era: str
) -> None:
    """The client's cancellation cancels the tool; no outcome is published."""
    settled: list[pegboard.ExecuteEvent] = []

    class Watch:
        @pegboard.hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            settled.append(event)

    host.add_plugin("watch", Watch())
    async with (
        host.location(served.root, plugins=["watch"]) as location,
        client(location, era) as mcp,
    ):
        with anyio.move_on_after(0.5):
            await mcp.call_tool("slow", {})
            raise AssertionError("the call was cancelled")
        with anyio.fail_after(5):
            await calls.cleaned_up.wait()
        after = await mcp.call_tool("count", {})
    assert ["count"] == [event.name for event in settled]
    assert not after.is_error


async def _watch_list(
    era: str, mcp: Client, changed: Callable[[], None], *, task_status: TaskStatus[None]
) -> None:
    """Tell ``changed`` when the tool list changes; started once listening."""
    if era == "legacy":
        task_status.started()
        return  # the handshake era announces changes on the connection (message_handler)
    async with mcp.listen(tools_list_changed=True) as subscription:
        task_status.started()
        async for _ in subscription:
            changed()


@pytest.mark.parametrize("era", ERAS)
async def test_registration_changes_send_list_changed(served: pegboard.Location, era: str) -> None:
    """Registering or closing a tool at the Location notifies the client."""
    changes: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes[-1].set()

    async with (
        client(served, era, message_handler=on_message) as mcp,
        anyio.create_task_group() as tasks,
    ):
        await tasks.start(partial(_watch_list, era, mcp, lambda: changes[-1].set()))
        assert "extra" not in [tool.name for tool in (await mcp.list_tools()).tools]
        registration = served.tools.register(
            {"extra": pegboard.tool(description="Extra.", execute=Calls().count)}
        )
        with anyio.fail_after(5):
            await changes[-1].wait()
        assert "extra" in [tool.name for tool in (await mcp.list_tools()).tools]
        changes.append(anyio.Event())
        registration.close()
        with anyio.fail_after(5):
            await changes[-1].wait()
        assert "extra" not in [tool.name for tool in (await mcp.list_tools()).tools]
        tasks.cancel_scope.cancel()


def _launcher(permissions: pegboard.Permissions, runs: list[int]) -> pegboard.Tool:
    async def launch(input: object, context: pegboard.ToolContext) -> str:
        runs.append(1)
        await permissions.ask(pegboard.PermissionRequest(action="launch", resources=["rocket"]))
        return "launched"

    return pegboard.tool(description="Launch, with permission.", execute=launch)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (types.ElicitResult(action="accept", content={"decision": "once"}), "launched"),
        (
            types.ElicitResult(
                action="accept", content={"decision": "reject", "feedback": "not now"}
            ),
            "the user rejected launch: not now",
        ),
    ],
    ids=["once", "reject"],
)
async def test_permissions_that_ask_elicit_the_client(
    served: pegboard.Location, era: str, reply: types.ElicitResult, expected: str
) -> None:
    """An ask becomes an elicitation: mid-call on a handshake connection, or as an
    input request that re-runs the call with the answer on a 2026-07-28 one.
    """
    runs: list[int] = []
    served.tools.register({"launch": _launcher(served.permissions, runs)})
    asked: list[str] = []

    async def elicit(context: object, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        asked.append(params.message)
        return reply

    async with client(served, era, elicitation_callback=elicit) as mcp:
        result = await mcp.call_tool("launch", {})
    assert ["Allow launch on rocket?"] == asked
    assert expected == result.content[0].text
    assert (2 if era == "auto" else 1) == len(runs)


@pytest.mark.parametrize("era", ERAS)
async def test_without_elicitation_an_ask_is_rejected(served: pegboard.Location, era: str) -> None:
    """A client that cannot be asked gets a tool result with isError naming the rule to add."""
    served.tools.register({"launch": _launcher(served.permissions, [])})
    async with client(served, era) as mcp:
        result = await mcp.call_tool("launch", {})
    assert result.is_error
    assert "needs approval and the MCP client does not support" in result.content[0].text
    assert "--allow launch:rocket" in result.content[0].text


PLUGIN = """
    import anyio
    import pegboard

    @pegboard.tool(description="Add two integers.", input={
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}, output={"type": "integer"})
    async def add(input, context):
        await context.progress(pegboard.Progress(message="adding", current=1, total=1))
        return input["a"] + input["b"]

    @pegboard.tool(description="Fail.")
    async def fail(input, context):
        raise pegboard.ToolFailure("no luck")

    @pegboard.tool(description="Whether the cyclic garbage collector runs.")
    async def collector(input, context):
        import gc

        return ("on" if gc.isenabled() else "off") + (" frozen" if gc.get_freeze_count() else "")

    def make(root, tools):
        @pegboard.tool(description="Wait until cancelled.")
        async def wait(input, context):
            try:
                await anyio.sleep(60)
            finally:
                (root / "cancelled").write_text("yes")
            return "never"

        @pegboard.tool(description="Register another tool.")
        async def grow(input, context):
            tools.register({"extra": fail})
            return "grown"

        return {"add": add, "fail": fail, "wait": wait, "grow": grow, "collector": collector}

    @pegboard.hookimpl
    def activate_location(location, tools):
        tools.register(make(location.root, tools))
"""


@pytest.fixture
def stdio_server(tmp_path: Path, workspace: Path) -> StdioServerParameters:
    """`pegboard serve --location DIR` with a test plugin installed on PYTHONPATH."""
    site = tmp_path / "site"
    site.mkdir()
    install_plugin(site, "servetest", PLUGIN)
    (workspace / "pegboard.toml").write_text('plugins = ["servetest"]\n')
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    # Trusted: its tools write a marker into the Location, which a confined plugin cannot.
    return StdioServerParameters(
        command=command,
        args=["serve", "--location", str(workspace), "--trust", "servetest"],
        env=env,
    )


@pytest.mark.parametrize("era", ERAS)
async def test_pegboard_serve_over_stdio(
    stdio_server: StdioServerParameters, workspace: Path, era: str
) -> None:
    """The pegboard command as a subprocess: list, call, errors, progress, cancel, list_changed."""
    changed = anyio.Event()
    updates: list[str | None] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def progress(current: float, total: float | None, message: str | None) -> None:
        updates.append(message)

    async with Client(stdio_server, mode=era, message_handler=on_message) as mcp:
        assert ["add", "collector", "fail", "grow", "wait"] == [
            tool.name for tool in (await mcp.list_tools()).tools
        ]
        # The engine was imported without the collector and frozen; serving runs with it.
        assert "on frozen" == (await mcp.call_tool("collector", {})).content[0].text
        added = await mcp.call_tool("add", {"a": 2, "b": 3}, progress_callback=progress)
        assert ({"result": 5}, ["adding"]) == (added.structured_content, updates)
        failed = await mcp.call_tool("fail", {})
        assert (True, "no luck") == (failed.is_error, failed.content[0].text)
        with anyio.move_on_after(1):
            await mcp.call_tool("wait", {})
            raise AssertionError("the call was cancelled")
        with anyio.fail_after(10):
            for _ in iter((workspace / "cancelled").exists, True):  # written by the server process
                await anyio.sleep(0.05)
        async with anyio.create_task_group() as tasks:
            await tasks.start(partial(_watch_list, era, mcp, changed.set))
            await mcp.call_tool("grow", {})
            with anyio.fail_after(10):
                await changed.wait()
            tasks.cancel_scope.cancel()
        assert "extra" in [tool.name for tool in (await mcp.list_tools()).tools]


@pytest.mark.parametrize("era", ERAS)
async def test_managed_output_a_preview_names_is_a_readable_resource(
    served: pegboard.Location, storage_dir: Path, era: str
) -> None:
    """A bounded result links the file its preview names; resources/read returns the
    whole output; files the server never named, in storage or anywhere, cannot be read.
    """
    stranger = storage_dir / "pegboard-output-not-named.txt"
    stranger.parent.mkdir(parents=True, exist_ok=True)
    stranger.write_text("another Location's secret")
    async with client(served, era) as mcp:
        result = await mcp.call_tool("lines", {})
        [link] = [block for block in result.content if isinstance(block, types.ResourceLink)]
        assert link.uri in result.content[0].text.replace(str(storage_dir), storage_dir.as_uri())
        read = await mcp.read_resource(link.uri)
        listed = await mcp.list_resources()
        refused = []
        for uri in (stranger.as_uri(), "file:///etc/passwd"):
            with pytest.raises(MCPError, match="not a managed output file this server named"):
                await mcp.read_resource(uri)
            refused.append(uri)
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text.count("line ") == 5000
    assert [link.uri] == [str(resource.uri) for resource in listed.resources]
    assert 2 == len(refused)


async def test_a_stdio_client_that_goes_away_stops_its_calls(
    workspace: Path, tmp_path: Path
) -> None:
    """Closing `pegboard serve`'s standard input mid-call stops the process the
    built-in bash started, and the server exits by itself.
    """
    import json
    import subprocess

    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None, "the pegboard console script is installed beside python"
    server = await anyio.open_process(
        [command, "serve", "-l", str(workspace), "--allow", "bash", "--allow", "edit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")},
    )
    assert server.stdin is not None
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    }
    # The sleeper is found from here by its command line: in the sandbox's PID
    # namespace the `$!` it could write is not a host process ID.
    marker = f"60.{os.getpid()}{secrets.randbelow(10**6):06d}"
    arguments = {"command": f"sleep {marker} & echo started > sleeper.pid; wait"}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "bash", "arguments": arguments}},
    ):  # fmt: skip
        await server.stdin.send(json.dumps(message).encode() + b"\n")
    recorded = workspace / "sleeper.pid"
    try:
        with anyio.fail_after(20):
            # Written by the server's bash: nothing to wait on but the file.
            for _ in iter(lambda: recorded.exists() and bool(recorded.read_text().strip()), True):
                await anyio.sleep(0.05)
        assert _with_marker(marker), "the sleeper is seen running from the host"
        await server.stdin.aclose()  # the client goes away
        with anyio.fail_after(10):
            returncode = await server.wait()
            while _with_marker(marker):  # noqa: ASYNC110 - polling other processes
                await anyio.sleep(0.05)
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert 0 == returncode


def _with_marker(marker: str) -> list[str]:
    """The host processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(entry.name)
            except OSError:
                continue  # ended meanwhile
    return found
