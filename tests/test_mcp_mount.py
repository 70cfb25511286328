"""The mcp plugin mounts a real MCP server (tests/mcp_peer.py, the official SDK) over stdio."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

pytestmark = pytest.mark.anyio

PEER = str(Path(__file__).with_name("mcp_peer.py"))
#: Starting a Python MCP server imports the SDK: seconds on a busy machine.
START = 30


async def eventually(condition: Callable[[], bool], *, within: float = 10) -> None:
    """Wait until ``condition()`` holds: what another process does sends no event here."""
    with anyio.fail_after(within):
        for _ in iter(condition, True):
            await anyio.sleep(0.05)


def peer(**extra: Any) -> dict[str, Any]:
    return {"command": [sys.executable, PEER], **extra}


@contextlib.asynccontextmanager
async def mounted(
    host: pegboard.Host,
    root: Path,
    servers: dict[str, Any],
    *,
    approver: pegboard.Approver | None = None,
    trusted: tuple[str, ...] = ("mcp",),
    **options: Any,
) -> AsyncIterator[pegboard.Location]:
    plugins = [{"name": "mcp", "options": {"servers": servers, **options}}]
    rules = [] if approver else [{"action": "mcp.*", "resource": "*", "effect": "allow"}]
    async with host.location(
        root, plugins=plugins, trusted=trusted, permissions=rules, approver=approver
    ) as location:
        yield location


async def test_tools_appear_namespaced_and_calls_round_trip(
    host: pegboard.Host, workspace: Path, context: Callable[..., pegboard.ToolContext]
) -> None:
    """A server's tools register as <server>_<tool>; calls carry input, output, content,
    failures, progress and permission requests both ways; failing servers do not stop it.
    """
    asked: list[pegboard.PermissionRequest] = []

    async def approver(request: pegboard.PermissionRequest) -> str:
        asked.append(request)
        return "once"

    servers = {
        "peer": peer(environment={"PEER_GREETING": "hello"}, startup_timeout=START),
        "broken": {"command": ["/nonexistent/mcp-server"]},
        "off": {"command": ["/nonexistent/mcp-server"], "disabled": True},
    }
    async with mounted(host, workspace, servers, approver=approver) as location:
        request = location.prepare()
        names = [definition.name for definition in request.definitions]
        assert [
            "peer_add", "peer_die", "peer_echo", "peer_grow", "peer_picture", "peer_refuse",
            "peer_steps", "peer_wait", "peer_where",
        ] == names  # fmt: skip
        [problem] = location.plugin_errors
        assert ("mcp", "activation") == (problem.plugin, problem.phase)
        assert "server 'broken' is not mounted: FileNotFoundError" in problem.message

        echo = await request.execute(pegboard.ToolCall("peer_echo", {"text": "hi"}, context()))
        assert pegboard.Completed({"result": "hi"}, (pegboard.Text("hi"),)) == pegboard.Completed(
            echo.output, echo.content
        )
        assert "mcp.peer.echo" == asked[-1].action
        assert ('{"text": "hi"}',) == asked[-1].resources

        added = await request.execute(pegboard.ToolCall("peer_add", '{"a": 2, "b": 40}', context()))
        assert {"total": 42} == added.output

        where = await request.execute(pegboard.ToolCall("peer_where", {}, context()))
        assert f"{workspace} hello" == where.content[0].text

        picture = await request.execute(pegboard.ToolCall("peer_picture", {}, context()))
        assert [pegboard.Image(b"\x89PNG\r\n\x1a\nfake", "image/png")] == [
            item for item in picture.content if isinstance(item, pegboard.Image)
        ]

        refused = await request.execute(
            pegboard.ToolCall("peer_refuse", {"reason": "no"}, context())
        )
        assert isinstance(refused, pegboard.Failed)
        assert "tool_failure" == refused.error.kind
        assert "refused: no" in refused.error.message

        invalid = await request.execute(pegboard.ToolCall("peer_add", {"a": "x"}, context()))
        assert "invalid_input" == invalid.error.kind  # checked before the server is asked

        updates: list[pegboard.Progress] = []

        async def progress(update: pegboard.Progress) -> None:
            updates.append(update)

        stepped = await request.execute(
            pegboard.ToolCall("peer_steps", {}, context(progress=progress))
        )
        assert isinstance(stepped, pegboard.Completed)
        assert [("first half", 1, 2), ("second half", 2, 2)] == [
            (update.message, update.current, update.total) for update in updates
        ]


async def test_cancelling_a_call_cancels_it_on_the_server(
    host: pegboard.Host, workspace: Path, context: Callable[..., pegboard.ToolContext]
) -> None:
    """A cancelled call sends MCP's cancellation; the server stops the tool."""
    marker = workspace / "marker"
    async with mounted(host, workspace, {"peer": peer(startup_timeout=START)}) as location:
        request = location.prepare()
        with anyio.move_on_after(1):
            await request.execute(
                pegboard.ToolCall("peer_wait", {"marker": str(marker)}, context())
            )
            raise AssertionError("a cancelled call returns no outcome")
        await eventually(marker.exists)
        assert "cancelled" == marker.read_text()
        # The connection stays usable.
        echo = await location.prepare().execute(
            pegboard.ToolCall("peer_echo", {"text": "x"}, context())
        )
        assert isinstance(echo, pegboard.Completed)


async def test_list_changes_register_the_new_set_without_a_gap(
    host: pegboard.Host, workspace: Path, context: Callable[..., pegboard.ToolContext]
) -> None:
    """When the server's list changes, the new set registers before the old one closes."""
    async with mounted(host, workspace, {"peer": peer(startup_timeout=START)}) as location:
        seen: list[list[str]] = []
        async with location.watch() as changes:
            grown = await location.prepare().execute(pegboard.ToolCall("peer_grow", {}, context()))
            assert isinstance(grown, pegboard.Completed)
            with anyio.fail_after(10):
                async for _ in changes:
                    names = [definition.name for definition in location.prepare().definitions]
                    seen.append(names)
                    if "peer_extra" in names:
                        break
        # Every intermediate list kept the old tools: no request saw a gap.
        assert all("peer_echo" in names for names in seen)
        doubled = await location.prepare().execute(
            pegboard.ToolCall("peer_extra", {"x": 21}, context())
        )
        assert {"result": 42} == doubled.output
        assert () == location.plugin_errors


async def test_a_server_that_dies_mid_call_fails_operationally(
    host: pegboard.Host, workspace: Path, context: Callable[..., pegboard.ToolContext]
) -> None:
    """A server exiting mid-call raises pegboard.PluginError, promptly; its tools go."""
    async with mounted(host, workspace, {"peer": peer(startup_timeout=START)}) as location:
        request = location.prepare()
        with anyio.fail_after(10), pytest.raises(pegboard.PluginError) as raised:
            await request.execute(pegboard.ToolCall("peer_die", {}, context()))
        assert "the MCP server 'peer' is not connected" in str(raised.value)
        await eventually(lambda: not location.prepare().definitions)
        assert ["mcp background"] == [f"{e.plugin} {e.phase}" for e in location.plugin_errors]
        with pytest.raises(pegboard.PluginError):  # a captured tool of the gone server
            await request.execute(pegboard.ToolCall("peer_echo", {"text": "x"}, context()))


async def test_a_server_that_never_starts_hits_the_startup_timeout(
    host: pegboard.Host, workspace: Path
) -> None:
    """A server that never answers is given up on after its startup timeout."""
    silent = {"command": [sys.executable, "-c", "import sys; sys.stdin.read()"]}
    with anyio.fail_after(10):
        async with mounted(host, workspace, {"silent": silent}, startup_timeout=0.5) as location:
            assert () == location.prepare().definitions
            [problem] = location.plugin_errors
            assert (
                "server 'silent' is not mounted: it did not start within 0.5 s" == problem.message
            )


async def test_the_plugin_starts_nothing_without_the_hosts_trust(
    host: pegboard.Host, workspace: Path
) -> None:
    """A Location's config alone cannot make pegboard start processes."""
    async with mounted(host, workspace, {"peer": peer()}, trusted=()) as location:
        [problem] = location.plugin_errors
        assert "activation" == problem.phase
        assert "trusted=['mcp']" in problem.message


@pytest.mark.parametrize(
    ("server", "message"),
    [
        ({}, "give either command = [...] (a local server) or url"),
        ({"command": ["x"], "url": "http://localhost"}, "give command or url, not both"),
        ({"url": "http://localhost", "environment": {}}, "environment applies to a local server"),
        (
            {
                "command": ["x"],
                "oauth": {"client_id": "a", "client_secret": "b", "issuer": "http://i"},
            },
            "headers and oauth apply to a remote server",
        ),
        (
            {
                "url": "http://localhost",
                "oauth": {
                    "client_id": "a",
                    "client_secret": "${NOT_SET_ANYWHERE}",
                    "issuer": "http://i",
                },
            },
            "oauth.client_secret names ${NOT_SET_ANYWHERE}, which is not set",
        ),
    ],
)
async def test_bad_server_entries_are_reported(
    host: pegboard.Host, workspace: Path, server: dict[str, Any], message: str
) -> None:
    """An unusable entry is named in plugin_errors; nothing is started for it."""
    async with mounted(host, workspace, {"odd": server}) as location:
        [problem] = location.plugin_errors
        assert message in problem.message


async def test_the_config_file_configures_the_servers(host: pegboard.Host, workspace: Path) -> None:
    """[mcp] in pegboard.toml holds the options; invalid ones keep the plugin inactive."""
    (workspace / "pegboard.toml").write_text(
        'plugins = ["mcp"]\n[mcp]\nstartup_timeout = "soon"\n[mcp.servers.x]\ncommand = ["y"]\n'
    )
    async with host.location(workspace, trusted=["mcp"]) as location:
        [problem] = location.plugin_errors
        assert ("mcp", "options") == (problem.plugin, problem.phase)
        assert "startup_timeout" in problem.message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# uvicorn, which serves MCP's streamable HTTP, runs on asyncio only.
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_served_location_mounts_over_http(
    host: pegboard.Host, tmp_path: Path, context: Callable[..., pegboard.ToolContext]
) -> None:
    """pegboard serve --transport http, mounted by url with headers, from another Location."""
    import pegboard.mcp

    async def shout(input: dict[str, str], context: pegboard.ToolContext) -> str:
        return input["text"].upper()

    served_root, mounting_root = tmp_path / "served", tmp_path / "mounting"
    served_root.mkdir()
    mounting_root.mkdir()
    served = pegboard.Host()
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    served.tools.register(
        {"shout": pegboard.tool(description="Shout.", execute=shout, input=schema)}
    )
    port = _free_port()
    async with (
        served.location(served_root, plugins=[]) as location,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(
            lambda: pegboard.mcp.serve(location, transport="http", port=port, token="s3cret")
        )
        remote = {
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": "Bearer s3cret"},
        }
        with anyio.fail_after(20):
            while True:  # until uvicorn listens
                async with mounted(host, mounting_root, {"far": remote}) as mounting:
                    if not mounting.plugin_errors:
                        outcome = await mounting.prepare().execute(
                            pegboard.ToolCall("far_shout", {"text": "hi"}, context())
                        )
                        break
                await anyio.sleep(0.1)
        tasks.cancel_scope.cancel()
    assert (pegboard.Text("HI"),) == outcome.content


async def test_log_level_is_one_of_mcps(host: pegboard.Host, workspace: Path) -> None:
    """log_level takes MCP's (syslog's) level names only; another keeps the plugin out."""
    (workspace / "pegboard.toml").write_text(
        'plugins = ["mcp"]\n[mcp.servers.x]\ncommand = ["y"]\nlog_level = "verbose"\n'
    )
    async with host.location(workspace, trusted=["mcp"]) as location:
        [problem] = location.plugin_errors
        assert ("mcp", "options") == (problem.plugin, problem.phase)
        assert "verbose" in problem.message
