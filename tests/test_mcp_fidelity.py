"""Nothing a server says is lost: titles, annotations, media in errors, questions, auth."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import mcp_types as types
from mcp import Client

import pegboard.mcp

pytestmark = pytest.mark.anyio

RICH = str(Path(__file__).with_name("mcp_rich_peer.py"))
HINTS = pegboard.ToolAnnotations(read_only=True, open_world=False)


def context(**options: Any) -> pegboard.ToolContext:
    return pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c", **options)


@contextlib.asynccontextmanager
async def mounted(
    host: pegboard.Host,
    root: Path,
    servers: dict[str, Any],
    rules: list[dict[str, str]] | None = None,
    approver: pegboard.Approver | None = None,
) -> AsyncIterator[pegboard.Location]:
    plugins = [{"name": "mcp", "options": {"servers": servers, "startup_timeout": 30}}]
    rules = rules if rules is not None else [{"action": "mcp.*", "effect": "allow"}]
    async with host.location(
        root, plugins=plugins, trusted=["mcp"], permissions=rules, approver=approver
    ) as location:
        yield location


def test_tool_title_and_annotations_reach_the_definition() -> None:
    """pegboard.tool(title=, annotations=) are carried by Tool and ToolDefinition."""

    async def look(input: object, context: pegboard.ToolContext) -> str:
        return "a room"

    made = pegboard.tool(description="Look.", execute=look, title="Look around", annotations=HINTS)
    assert ("Look around", HINTS) == (made.title, made.annotations)
    with pytest.raises(TypeError, match="True, False or None"):
        pegboard.ToolAnnotations(read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"pegboard\.ToolAnnotations"):
        pegboard.tool(description="Look.", execute=look, annotations={"read_only": True})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="title"):
        pegboard.tool(description="Look.", execute=look, title=" ")


async def test_served_tools_advertise_title_annotations_and_output_schema(
    host: pegboard.Host, workspace: Path
) -> None:
    """tools/list carries each definition's title, annotations and output schema."""

    async def look(input: object, context: pegboard.ToolContext) -> dict[str, str]:
        return {"room": "empty"}

    output = {"type": "object", "properties": {"room": {"type": "string"}}}
    host.tools.register(
        {
            "look": pegboard.tool(
                description="Look.", execute=look, output=output, title="Look around",
                annotations=HINTS,
            ),
            "plain": pegboard.tool(description="Plain.", execute=look),
        }
    )  # fmt: skip
    async with (
        host.location(workspace, plugins=[]) as location,
        Client(pegboard.mcp.build_server(location)) as mcp,
    ):
        look_tool, plain_tool = (await mcp.list_tools()).tools
    assert "Look around" == look_tool.title
    assert types.ToolAnnotations(read_only_hint=True, open_world_hint=False) == (
        look_tool.annotations
    )
    assert output == look_tool.output_schema
    assert (None, None) == (plain_tool.title, plain_tool.annotations)


async def test_mounted_servers_keep_titles_annotations_and_error_media(
    host: pegboard.Host, workspace: Path
) -> None:
    """A mounted tool's title and hints survive, and an error's image is its partial."""
    servers = {"rich": {"command": [sys.executable, RICH]}}
    async with mounted(host, workspace, servers) as location:
        assert [] == list(location.plugin_errors)
        request = location.prepare()
        definitions = {definition.name: definition for definition in request.definitions}
        look = definitions["rich_look"]
        assert ("Look around", HINTS) == (look.title, look.annotations)
        assert (None, None) == (
            definitions["rich_broken"].title,
            definitions["rich_broken"].annotations,
        )
        broken = await request.execute(pegboard.ToolCall("rich_broken", {}, context()))
    assert isinstance(broken, pegboard.Failed)
    assert "it broke" == broken.error.message
    assert (
        pegboard.Image(b"\x89PNG fake", "image/png"),
        pegboard.Audio(b"RIFF fake", "audio/wav", annotations=FOR_USER),
        pegboard.EmbeddedResource(uri="file:///log.txt", text="trace", annotations=FOR_BOTH),
    ) == broken.partial


FOR_USER = pegboard.ContentAnnotations(audience=["user"], priority=0.25)
FOR_BOTH = pegboard.ContentAnnotations(
    audience=("user", "assistant"), priority=1, last_modified="2026-01-02T03:04:05Z"
)


async def test_content_annotations_survive_a_mount_and_a_serve(
    host: pegboard.Host, workspace: Path
) -> None:
    """Each block's audience, priority and lastModified reach pegboard content, and
    a client of the mounting Location sees them as the mounted server sent them, in
    a result and in an error result's media.
    """
    servers = {"rich": {"command": [sys.executable, RICH]}}
    async with mounted(host, workspace, servers) as location:
        outcome = await location.prepare().execute(
            pegboard.ToolCall("rich_annotated", {}, context())
        )
        async with Client(pegboard.mcp.build_server(location)) as mcp:
            result = await mcp.call_tool("rich_annotated", {})
            failure = await mcp.call_tool("rich_broken", {})
    assert isinstance(outcome, pegboard.Completed)
    assert [FOR_USER, FOR_BOTH, FOR_USER, FOR_BOTH, None] == [
        item.annotations for item in outcome.content
    ]
    user = types.Annotations(audience=["user"], priority=0.25)
    both = types.Annotations(
        audience=["user", "assistant"], priority=1.0, last_modified="2026-01-02T03:04:05Z"
    )
    assert [user, both, user, both, None] == [block.annotations for block in result.content]
    assert ["text", "image", "audio", "resource"] == [block.type for block in failure.content]
    assert [None, None, user, both] == [block.annotations for block in failure.content]
    assert failure.is_error


def test_content_annotations_are_checked_and_stored() -> None:
    """Annotations are validated like MCP's, and a stored outcome keeps them."""
    with pytest.raises(ValueError, match="priority is a number from 0 to 1"):
        pegboard.ContentAnnotations(priority=1.5)
    with pytest.raises(ValueError, match="audience is a sequence"):
        pegboard.ContentAnnotations(audience="user")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="audience is a sequence"):
        pegboard.ContentAnnotations(audience=["model"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        pegboard.Text("x", annotations={"priority": 1})  # type: ignore[arg-type]
    outcome = pegboard.Completed(
        None,
        (
            pegboard.Text("for you", annotations=FOR_USER),
            pegboard.Image(b"png", "image/png", annotations=FOR_BOTH),
            pegboard.Text("plain"),
        ),
    )
    stored = pegboard.dump_outcome(outcome)
    assert "annotations" not in stored["content"][2]
    assert outcome == pegboard.load_outcome(stored)


def bare_mount(
    permissions: pegboard.Permissions, elicit: pegboard.Elicit | None = None
) -> tuple[Any, list[Any], list[str]]:
    """A Mount outside any Location, with what it registers and reports."""
    from pegboard.plugins_builtin.mcp._config import ServerConfig
    from pegboard.plugins_builtin.mcp._mount import Mount

    registered: list[dict[str, pegboard.Tool]] = []
    reports: list[str] = []

    class Tools:
        def register(self, tools: dict[str, pegboard.Tool], namespace: str) -> None:
            registered.append(tools)

    class Services:
        def report(self, problem: str, phase: str) -> None:
            reports.append(problem)

    mount = Mount(
        ServerConfig(name="far", command=("x",)),
        tools=Tools(),  # type: ignore[arg-type]
        permissions=permissions,
        services=Services(),  # type: ignore[arg-type]
        root=Path("."),
        elicit=elicit,
    )
    return mount, registered, reports


async def test_elicitation_from_a_mounted_server_goes_to_the_hosts_handler() -> None:
    """A form and a URL reach the host's elicit handler as pegboard.Elicitation, and
    its answers go back; a decline is remembered by the call that asked (by its task
    when the server says which), never by an unrelated call; accepted content must
    fit the form.
    """
    from pegboard.plugins_builtin.mcp._mount import Call

    asked: list[pegboard.Elicitation] = []
    answers = iter(
        [
            pegboard.ElicitationAnswer("accept", {"name": "Ada"}),
            pegboard.ElicitationAnswer("accept"),
            pegboard.ElicitationAnswer("decline"),
            pegboard.ElicitationAnswer("cancel"),
        ]
    )

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        asked.append(question)
        return next(answers)

    mount, _, _ = bare_mount(pegboard.Permissions(), elicit=elicit)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    form = types.ElicitRequestFormParams(message="Your name?", requested_schema=schema)
    url = types.ElicitRequestURLParams(
        message="Sign in", url="https://example.com/login", elicitation_id="e1"
    )
    related = {"io.modelcontextprotocol/related-task": {"taskId": "t2"}}
    of_task = types.ElicitRequestFormParams(
        message="Which one?", requested_schema=schema, _meta=related
    )
    first, second = Call(context()), Call(context(), task="t2")
    mount._calls[:] = [first, second]
    results = [await mount._elicit(None, params) for params in (form, url, of_task, form)]
    assert [
        types.ElicitResult(action="accept", content={"name": "Ada"}),
        types.ElicitResult(action="accept"),
        types.ElicitResult(action="decline"),
        types.ElicitResult(action="cancel"),
    ] == results
    assert [
        pegboard.Elicitation(source="MCP server 'far'", message="Your name?", schema=schema),
        pegboard.Elicitation(
            source="MCP server 'far'", message="Sign in", url="https://example.com/login"
        ),
    ] == asked[:2]
    # Its task names the call that asked; a question without one is every call's.
    assert ["its question 'Your name?' was cancelled by the user"] == first.refused
    assert [
        "its question 'Which one?' was declined by the user",
        "its question 'Your name?' was cancelled by the user",
    ] == second.refused


def test_an_elicitation_answer_is_checked() -> None:
    """Only accept/decline/cancel, and only an accepted answer carries content."""
    with pytest.raises(ValueError, match="'accept', 'decline' or 'cancel'"):
        pegboard.ElicitationAnswer("ok")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only an accepted elicitation has content"):
        pegboard.ElicitationAnswer("decline", {"name": "Ada"})
    answer = pegboard.ElicitationAnswer("accept", {"tags": ["a"]})
    with pytest.raises(TypeError):
        answer.content["tags"].append("b")  # type: ignore[index]


async def test_host_location_takes_only_a_callable_elicit(
    host: pegboard.Host, workspace: Path
) -> None:
    """elicit= is an async function or None; the handler is a trusted service."""
    with pytest.raises(TypeError, match="elicit takes an async function"):
        async with host.location(workspace, plugins=[], elicit="yes"):  # type: ignore[arg-type]
            pass
    untrusted = pegboard.Services("other", trusted=False, available={"elicit": print})
    with pytest.raises(pegboard.ServiceDenied, match="elicit"):
        untrusted.elicit  # noqa: B018 - reading it is the test
    trusted = pegboard.Services("mcp", trusted=True, available={"elicit": None})
    assert trusted.elicit is None


async def test_a_servers_log_messages_go_to_the_one_call_in_flight_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With one call in flight, its context.log takes the server's message; with none
    or several (MCP does not say which call a message belongs to) pegboard's logger
    does, so one call never sees another's messages.
    """
    from pegboard.plugins_builtin.mcp._mount import Call

    mount, _, _ = bare_mount(pegboard.Permissions())
    received: list[pegboard.ToolLog] = []

    async def log(entry: pegboard.ToolLog) -> None:
        received.append(entry)

    def message(data: Any, level: str = "warning") -> types.LoggingMessageNotificationParams:
        return types.LoggingMessageNotificationParams(level=level, logger="db", data=data)  # type: ignore[arg-type]

    caplog.set_level("DEBUG", logger="pegboard")
    await mount._log(message("before any call"))
    mount._calls[:] = [Call(context(log=log))]
    await mount._log(message("during the call", "info"))
    await mount._log(message({"rows": 3}))
    await mount._log(message({"huge": "x" * 70_000}))
    mount._calls.append(Call(context(log=log)))
    await mount._log(message("while two run", "emergency"))
    assert [
        pegboard.ToolLog("info", "during the call"),
        pegboard.ToolLog("warning", "db (MCP server 'far')", {"rows": 3}),
    ] == received[:2]
    assert received[2].message.startswith("db (MCP server 'far') [data left out: ")
    assert 3 == len(received)
    assert [
        ("WARNING", "server 'far': before any call"),
        ("CRITICAL", "server 'far': while two run"),
    ] == [(record.levelname, record.getMessage()) for record in caplog.records]


async def test_tools_that_require_tasks_are_mounted_and_keep_execution() -> None:
    """A tool with execution.taskSupport 'required' is advertised: the mount runs it as
    a task. What pegboard's definition has no field for is kept in Tool.extra.
    """
    mount, registered, reports = bare_mount(pegboard.Permissions())
    schema = {"type": "object"}
    later = types.Tool(
        name="later", input_schema=schema, execution=types.ToolExecution(task_support="required")
    )
    extras = {"later": {"execution": {"taskSupport": "required"}, "x-new": [1]}}
    mount._register([types.Tool(name="now", input_schema=schema), later], extras)
    [tools] = registered
    assert ["now", "later"] == list(tools)
    assert {"execution": {"taskSupport": "required"}, "x-new": [1]} == tools["later"].extra
    assert tools["now"].extra is None
    assert [] == reports


def test_definition_extra_is_what_pegboard_does_not_carry() -> None:
    """Every field outside name, title, description, the schemas and the known hints,
    as the server sent it: execution, icons, _meta, unknown annotations, new fields.
    """
    from pegboard.plugins_builtin.mcp._listing import _Listing, definition_extra

    sent = {
        "tools": [
            {
                "name": "t",
                "title": "T",
                "description": "d",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "optional"},
                "icons": [{"src": "https://example.com/t.png"}],
                "annotations": {"readOnlyHint": True, "x-cost": "high"},
                "_meta": {"vendor/key": 1},
                "x-later-revision": {"a": 1},
            },
            {"name": "plain", "inputSchema": {"type": "object"}},
        ]
    }
    rich, plain = _Listing.model_validate(sent).tools
    assert {
        "execution": {"taskSupport": "optional"},
        "icons": [{"src": "https://example.com/t.png"}],
        "annotations": {"x-cost": "high"},
        "_meta": {"vendor/key": 1},
        "x-later-revision": {"a": 1},
    } == definition_extra(rich)
    assert {} == definition_extra(plain)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio only
async def test_a_remote_mount_authenticates_from_the_environment_and_reports_401(
    host: pegboard.Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """headers take ${VARIABLE}s from the host's environment; a 401 is named as such;
    annotations round-trip through pegboard serve and the mcp plugin.
    """
    served_root, mounting_root = tmp_path / "served", tmp_path / "mounting"
    served_root.mkdir()
    mounting_root.mkdir()

    async def look(input: object, context: pegboard.ToolContext) -> str:
        return "a room"

    served = pegboard.Host()
    served.tools.register(
        {
            "look": pegboard.tool(
                description="Look.", execute=look, title="Look around", annotations=HINTS
            )
        }
    )
    port = free_port()
    monkeypatch.setenv("FAR_TOKEN", "s3cret")
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        served.location(served_root, plugins=[]) as location,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(
            lambda: pegboard.mcp.serve(location, transport="http", port=port, token="s3cret")
        )
        with anyio.fail_after(20):
            while True:  # until uvicorn listens
                async with mounted(host, mounting_root, {"far": {"url": url}}) as refused:
                    errors = [problem.message for problem in refused.plugin_errors]
                if "Connect" not in " ".join(errors):
                    break
                await anyio.sleep(0.1)
        good = {"url": url, "headers": {"Authorization": "Bearer ${FAR_TOKEN}"}}
        async with mounted(host, mounting_root, {"far": good}) as mounting:
            [definition] = mounting.prepare().definitions
        monkeypatch.setenv("OLD_TOKEN", "expired")
        stale = {"url": url, "headers": {"Authorization": "Bearer ${OLD_TOKEN}"}}
        async with mounted(host, mounting_root, {"far": stale}) as rejected:
            [wrong] = rejected.plugin_errors
        unset = {"url": url, "headers": {"Authorization": "Bearer ${NOT_SET_ANYWHERE}"}}
        async with mounted(host, mounting_root, {"far": unset}) as missing:
            [problem] = missing.plugin_errors
        tasks.cancel_scope.cancel()
    assert "it answered 401 Unauthorized: give the credentials it expects" in errors[0]
    assert (
        "it answered 401 Unauthorized: it refused the credentials in [mcp.servers.far] headers"
    ) in wrong.message
    assert ("far_look", "Look around", HINTS) == (
        definition.name,
        definition.title,
        definition.annotations,
    )
    assert "names ${NOT_SET_ANYWHERE}, which is not set" in problem.message


async def test_bounding_keeps_the_annotations_of_what_it_keeps(tmp_path: Path) -> None:
    """Oversized content: media keep their annotations, and the link that replaces
    an embedded resource keeps the resource's (and so does the preview of its text).
    """
    from pegboard._bounding import bound_content

    storage = pegboard.ManagedStorage(tmp_path / "managed")
    limits = pegboard.OutputLimits(max_lines=8, max_bytes=1024)
    big = "\n".join(f"line {number}" for number in range(100))
    bounded = await bound_content(
        (
            pegboard.Image(b"png", "image/png", annotations=FOR_USER),
            pegboard.EmbeddedResource(uri="file:///log.txt", text=big, annotations=FOR_BOTH),
        ),
        limits,
        storage,
    )
    picture, preview, link = bounded.content
    assert (FOR_USER, FOR_BOTH, FOR_BOTH) == (
        picture.annotations,
        preview.annotations,
        link.annotations,
    )
    assert isinstance(link, pegboard.ResourceLink)


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [(FOR_USER, FOR_USER, FOR_USER), (FOR_USER, FOR_BOTH, None), (FOR_USER, None, None)],
)
async def test_a_preview_keeps_the_annotations_its_texts_share(
    tmp_path: Path,
    first: pegboard.ContentAnnotations | None,
    second: pegboard.ContentAnnotations | None,
    kept: pegboard.ContentAnnotations | None,
) -> None:
    """Texts cut to one preview: it carries their annotations when they all agree."""
    from pegboard._bounding import bound_content

    storage = pegboard.ManagedStorage(tmp_path / "managed")
    limits = pegboard.OutputLimits(max_lines=8, max_bytes=1024)
    big = "\n".join(f"line {number}" for number in range(100))
    bounded = await bound_content(
        (pegboard.Text(big, annotations=first), pegboard.Text(big, annotations=second)),
        limits,
        storage,
    )
    (preview,) = bounded.content
    assert isinstance(preview, pegboard.Text)
    assert "omitted" in preview.text
    assert kept == preview.annotations


ISSUED = "issued-token"


class Issued:
    """The resource server's token verifier: only the token the issuer handed out,
    until it is revoked.
    """

    revoked = False

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        if token != ISSUED or self.revoked:
            return None
        return AccessToken(token=token, client_id="pegboard", scopes=["tools"])


def authorization_server(issuer: str, granted: list[str]) -> Any:
    """A minimal OAuth authorization server: metadata, and client credentials for a token."""
    import base64

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            }
        )

    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        client = base64.b64decode(credentials).decode() if scheme == "Basic" else ""
        if form.get("grant_type") != "client_credentials" or client != "pegboard:sh-secret":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        granted.append(str(form.get("scope")))
        return JSONResponse({"access_token": ISSUED, "token_type": "Bearer", "expires_in": 3600})

    return Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/token", token, methods=["POST"]),
        ]
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio only
async def test_a_remote_mount_takes_an_oauth_token_with_client_credentials(
    host: pegboard.Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """oauth = {client_id, client_secret, issuer} mounts a server that is an OAuth
    resource server (pegboard.mcp.serve with auth= and token_verifier=): the SDK's
    client finds the issuer, takes a token and calls; a wrong secret is reported.
    """
    from mcp.server.auth.settings import AuthSettings

    from pegboard.mcp._serve import _serve_http

    served_root, mounting_root = tmp_path / "served", tmp_path / "mounting"
    served_root.mkdir()
    mounting_root.mkdir()

    async def look(input: object, context: pegboard.ToolContext) -> str:
        return "a room"

    served = pegboard.Host()
    served.tools.register({"look": pegboard.tool(description="Look.", execute=look)})
    port, issuer_port = free_port(), free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    url = f"http://127.0.0.1:{port}/mcp"
    granted: list[str] = []
    auth = AuthSettings(
        issuer_url=issuer,
        resource_server_url=url,
        required_scopes=["tools"],
        validate_token_resource=False,
    )
    monkeypatch.setenv("FAR_SECRET", "sh-secret")
    oauth = {"client_id": "pegboard", "client_secret": "${FAR_SECRET}", "issuer": issuer}
    async with (
        served.location(served_root, plugins=[]) as location,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(
            _serve_http, authorization_server(issuer, granted), "127.0.0.1", issuer_port
        )
        tasks.start_soon(
            lambda: pegboard.mcp.serve(
                location, transport="http", port=port, auth=auth, token_verifier=Issued()
            )
        )
        with anyio.fail_after(20):
            while True:  # until both listen
                async with mounted(
                    host, mounting_root, {"far": {"url": url, "oauth": oauth}}
                ) as mounting:
                    errors = [problem.message for problem in mounting.plugin_errors]
                    if not errors:
                        outcome = await mounting.prepare().execute(
                            pegboard.ToolCall("far_look", {}, context())
                        )
                        break
                await anyio.sleep(0.1)
        import httpx2

        accept = {"Accept": "application/json, text/event-stream"}
        bearer = {**accept, "Authorization": f"Bearer {ISSUED}"}
        async with httpx2.AsyncClient() as http:
            anonymous = await http.post(url, headers=accept, json={})
            rebinding = await http.post(url, headers={**bearer, "Host": "evil.example"}, json={})
        wrong = {**oauth, "client_secret": "guess"}
        async with mounted(host, mounting_root, {"far": {"url": url, "oauth": wrong}}) as refused:
            [problem] = refused.plugin_errors
        tasks.cancel_scope.cancel()
    assert isinstance(outcome, pegboard.Completed)
    assert (pegboard.Text("a room"),) == outcome.content
    assert ["tools"] == granted
    assert 401 == anonymous.status_code
    assert "resource_metadata=" in anonymous.headers["www-authenticate"]
    assert 421 == rebinding.status_code  # Host and Origin are checked under OAuth too
    assert (
        "server 'far' is not mounted: OAuth failed with the client credentials in "
        f"[mcp.servers.far] oauth (issuer {issuer}): Token exchange failed (401)"
    ) in problem.message


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # uvicorn runs on asyncio only
async def test_a_call_the_server_refuses_with_401_says_so(
    host: pegboard.Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token revoked after the mount: the call fails naming the 401 and the headers."""
    from mcp.server.auth.settings import AuthSettings

    served_root, mounting_root = tmp_path / "served", tmp_path / "mounting"
    served_root.mkdir()
    mounting_root.mkdir()

    async def look(input: object, context: pegboard.ToolContext) -> str:
        return "a room"

    served = pegboard.Host()
    served.tools.register({"look": pegboard.tool(description="Look.", execute=look)})
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings(
        issuer_url="https://auth.example.com",
        resource_server_url=url,
        validate_token_resource=False,
    )
    verifier = Issued()
    monkeypatch.setenv("FAR_TOKEN", ISSUED)
    far = {"url": url, "headers": {"Authorization": "Bearer ${FAR_TOKEN}"}}
    async with (
        served.location(served_root, plugins=[]) as location,
        anyio.create_task_group() as tasks,
    ):
        tasks.start_soon(
            lambda: pegboard.mcp.serve(
                location, transport="http", port=port, auth=auth, token_verifier=verifier
            )
        )
        with anyio.fail_after(20):
            while True:  # until uvicorn listens
                async with mounted(host, mounting_root, {"far": far}) as mounting:
                    if not mounting.plugin_errors:
                        call = pegboard.ToolCall("far_look", {}, context())
                        before = await mounting.prepare().execute(call)
                        verifier.revoked = True
                        after = await mounting.prepare().execute(call)
                        break
                await anyio.sleep(0.1)
        tasks.cancel_scope.cancel()
    assert isinstance(before, pegboard.Completed)
    assert isinstance(after, pegboard.Failed)
    assert (
        "the MCP server 'far' refused the call to 'look': it answered 401 Unauthorized: it "
        "refused the credentials in [mcp.servers.far] headers"
    ) in after.error.message


TASKS = str(Path(__file__).with_name("mcp_task_peer.py"))


async def test_a_task_a_2026_server_makes_is_followed_to_its_end(
    host: pegboard.Host, workspace: Path, tmp_path: Path
) -> None:
    """The mount declares the tasks extension; a call answered with a task is polled to
    its result, its status messages are progress, its question goes to the host's
    handler (a decline is no success), what it cannot answer, a failed task or one the
    server cancelled fails the call, and a cancelled call cancels the task.
    """
    answers = iter(
        [
            pegboard.ElicitationAnswer("accept", {"colour": "teal"}),
            pegboard.ElicitationAnswer("decline"),
        ]
    )

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        assert "Which colour?" == question.message
        return next(answers)

    progress: list[str | None] = []

    async def report(update: pegboard.Progress) -> None:
        progress.append(update.message)

    marker = tmp_path / "marker"
    servers = {"tp": {"command": [sys.executable, TASKS]}}
    plugins = [{"name": "mcp", "options": {"servers": servers, "startup_timeout": 30}}]
    rules = [{"action": "mcp.*", "effect": "allow"}]
    async with host.location(
        workspace, plugins=plugins, trusted=["mcp"], permissions=rules, elicit=elicit
    ) as location:
        request = location.prepare()

        async def call(name: str, **input: Any) -> pegboard.Outcome:
            return await request.execute(pegboard.ToolCall(name, input, context(progress=report)))

        written = await call("tp_report", topic="owls")
        accepted = await call("tp_ask")
        declined = await call("tp_ask")
        sampled = await call("tp_sample")
        failed = await call("tp_fail")
        dropped = await call("tp_drop")
        with anyio.move_on_after(0.5):
            await call("tp_slow", marker=str(marker))
    assert isinstance(written, pegboard.Completed)
    assert (pegboard.Text("report on owls"),) == written.content
    assert "working on report" == progress[0]
    assert isinstance(accepted, pegboard.Completed)
    assert (pegboard.Text("colour: teal"),) == accepted.content
    assert isinstance(declined, pegboard.Failed)
    assert declined.error.message.endswith(
        "its question 'Which colour?' was declined by the user, so the call is not a success; "
        "the server said: no colour given"
    )
    assert isinstance(sampled, pegboard.Failed)
    assert "'sampling/createMessage', which pegboard does not answer" in sampled.error.message
    assert isinstance(failed, pegboard.Failed)
    assert "could not finish 'fail': the printer is on fire" in failed.error.message
    assert isinstance(dropped, pegboard.Failed)
    assert dropped.error.message.endswith(
        "the MCP server 'tp' cancelled its task for 'drop': the queue was flushed"
    )
    await eventually(marker.exists)
    assert "cancelled" == marker.read_text()


async def test_a_task_question_without_a_handler_fails_the_call(
    host: pegboard.Host, workspace: Path
) -> None:
    """A host without elicit= cannot answer a task's question: the call fails saying so."""
    servers = {"tp": {"command": [sys.executable, TASKS]}}
    async with mounted(host, workspace, servers) as location:
        outcome = await location.prepare().execute(pegboard.ToolCall("tp_ask", {}, context()))
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.message == (
        "the MCP server 'tp' asked the user during 'ask' ('Which colour?'), and this host "
        "gives no way to ask; its task is cancelled"
    )


async def eventually(condition: Any, *, within: float = 10) -> None:
    """Wait until ``condition()`` holds: what another process does sends no event here."""
    with anyio.fail_after(within):
        for _ in iter(condition, True):
            await anyio.sleep(0.05)


async def test_a_failing_elicit_handler_is_an_error_to_the_server_and_stays_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that raises: the server hears "the user could not be asked", the call
    remembers that its question was not answered, and the exception's text goes only
    to the host's log, never towards the model.
    """
    from pegboard.plugins_builtin.mcp._mount import Call

    async def elicit(question: pegboard.Elicitation) -> pegboard.ElicitationAnswer:
        raise RuntimeError("token file /etc/secret unreadable")

    mount, _, _ = bare_mount(pegboard.Permissions(), elicit=elicit)
    call = Call(context())
    mount._calls[:] = [call]
    form = types.ElicitRequestFormParams(
        message="Proceed?", requested_schema={"type": "object", "properties": {}}
    )
    with caplog.at_level("WARNING", logger="pegboard"):
        answer = await mount._elicit(None, form)
    assert types.ErrorData(code=types.INTERNAL_ERROR, message="the user could not be asked") == (
        answer
    )
    assert ["its question 'Proceed?' could not be asked"] == call.refused
    assert "token file /etc/secret unreadable" in caplog.records[-1].getMessage()


async def test_an_answer_mcp_does_not_allow_fails_the_call_naming_what_was_wrong(
    host: pegboard.Host, workspace: Path
) -> None:
    """A server whose answer to a call is no CallToolResult fails that call, saying where
    and why its answer was refused; the host sees no exception."""
    peer = str(Path(__file__).with_name("mcp_raw_peer.py"))
    async with mounted(host, workspace, {"raw": {"command": [sys.executable, peer]}}) as location:
        assert () == location.plugin_errors
        outcome = await location.prepare().execute(pegboard.ToolCall("raw_broken", {}, context()))
    assert isinstance(outcome, pegboard.Failed)
    assert (
        "the MCP server 'raw' answered 'broken' with a result MCP does not allow: content: "
        "Input should be a valid list"
    ) == outcome.error.message
