"""Polled streams: ``poll_after`` closes a long call's stream, and the client resumes it."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import httpx2 as httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import pegboard.mcp
from pegboard.mcp._resume import KEEP_FOR, MAX_EVENTS, MAX_STREAMS, RETRY_MS, StreamEvents

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# uvicorn, which serves streamable HTTP, runs on asyncio only.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

TOKEN = "polling-token"
POLL_AFTER = 0.3
KEY = b"k" * 32


@attrs.frozen
class Steps:
    seconds: float
    steps: int


async def _steps(input: Steps, context: pegboard.ToolContext) -> str:
    for step in range(input.steps):
        await anyio.sleep(input.seconds / input.steps)
        await context.progress(pegboard.Progress(current=step + 1, total=input.steps))
    return f"took {input.steps} steps"


class Hold:
    """A tool that runs until cancelled, and says when it started and ended."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

    async def __call__(self, input: None, context: pegboard.ToolContext) -> str:
        self.started.set()
        try:
            await anyio.sleep_forever()
        finally:
            self.cancelled.set()
        raise AssertionError("unreachable")


@attrs.define
class Recorder:
    """ASGI front: the requests that reached the application."""

    app: ASGIApp
    seen: list[tuple[str, str | None]] = attrs.field(factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            last = headers.get(b"last-event-id")
            self.seen.append((scope["method"], None if last is None else last.decode()))
        await self.app(scope, receive, send)

    def resumed(self) -> list[str]:
        return [last for method, last in self.seen if method == "GET" and last is not None]


@attrs.frozen
class Served:
    url: str
    recorder: Recorder
    hold: Hold
    events: Callable[[], StreamEvents]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _host(hold: Hold) -> pegboard.Host:
    class Plugin:
        @staticmethod
        @pegboard.hookimpl
        async def activate_location(
            tools: pegboard.Tools, options: Mapping[str, Any], services: pegboard.Services
        ) -> AsyncIterator[None]:
            tools.register(
                {
                    "steps": pegboard.tool(
                        description="Sleeps, reporting progress.", execute=_steps, input=Steps
                    ),
                    "hold": pegboard.tool(description="Runs until cancelled.", execute=hold),
                }
            )
            yield

    host = pegboard.Host()
    host.add_plugin("polled", Plugin)
    return host


async def _serve(app: ASGIApp, port: int, *, task_status: Any) -> None:
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task_status.started(server)
    await server.serve()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[list[Served]]:
    """Two replicas sharing a session key, each polling streams after POLL_AFTER."""
    hold = Hold()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with (
        _host(hold).location(workspace, plugins=["polled"], storage=tmp_path / "s") as location,
        anyio.create_task_group() as tasks,
    ):
        replicas = []
        servers = []
        for _ in range(2):
            built = pegboard.mcp.build_server(location)
            app = pegboard.mcp.http_app(built, token=TOKEN, session_key=KEY, poll_after=POLL_AFTER)
            recorder = Recorder(app)
            port = free_port()
            servers.append(await tasks.start(_serve, recorder, port))
            replicas.append(
                Served(
                    f"http://127.0.0.1:{port}/mcp",
                    recorder,
                    hold,
                    lambda built=built: _events_of(built),
                )
            )
        with anyio.fail_after(10):
            while not all(server.started for server in servers):  # noqa: ASYNC110 - uvicorn sets a flag
                await anyio.sleep(0.02)
        yield replicas
        for server in servers:
            server.should_exit = True


def _events_of(built: Any) -> StreamEvents:
    handler = built.session_manager._handle_stateful_request
    events: StreamEvents = handler.__self__.events
    return events


def _client(url: str) -> Any:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    return http, Client(streamable_http_client(url, http_client=http), mode="legacy")


async def test_a_long_call_is_answered_through_its_resumed_streams(served: list[Served]) -> None:
    """The SDK's client gets the answer and every progress report of a call that
    outlives two polls, by resuming its stream with Last-Event-ID."""
    replica = served[0]
    progress: list[float] = []

    async def on_progress(current: float, total: float | None, message: str | None) -> None:
        progress.append(current)

    http, client = _client(replica.url)
    async with http, client:
        with anyio.fail_after(30):
            result = await client.call_tool(
                "steps", {"seconds": 1.2, "steps": 6}, progress_callback=on_progress
            )
    assert not result.is_error, result
    assert result.content[0].text == "took 6 steps"  # type: ignore[union-attr]
    assert progress == [1, 2, 3, 4, 5, 6]
    assert len(replica.recorder.resumed()) >= 2, replica.recorder.seen


async def test_a_quick_call_is_answered_on_its_stream_and_nothing_is_kept(
    served: list[Served],
) -> None:
    replica = served[0]
    http, client = _client(replica.url)
    async with http, client:
        result = await client.call_tool("steps", {"seconds": 0.01, "steps": 1})
    assert result.content[0].text == "took 1 steps"  # type: ignore[union-attr]
    assert replica.recorder.resumed() == []
    assert len(replica.events()) == 0


async def _post_call(
    http: httpx.AsyncClient, url: str, session: str, name: str, arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    """POST a tools/call with request ID 7; the SSE events the server sent on its stream."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    events = []
    async with http.stream("POST", url, json=body, headers=_headers(session)) as response:
        assert response.status_code == 200, await response.aread()
        events = _parse_sse(b"".join([chunk async for chunk in response.aiter_bytes()]))
    return events


def _headers(session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def _parse_sse(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events


async def _initialize(http: httpx.AsyncClient, url: str, version: str = "2025-11-25") -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    response = await http.post(url, json=body, headers=_headers())
    assert response.status_code == 200, response.text
    session: str = response.headers["mcp-session-id"]
    await http.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=_headers(session),
    )
    return session


async def _resume(
    http: httpx.AsyncClient, url: str, session: str, last_event: str
) -> tuple[int, list[dict[str, Any]], bytes]:
    headers = {**_headers(session), "Last-Event-ID": last_event, "Accept": "text/event-stream"}
    async with http.stream("GET", url, headers=headers) as response:
        raw = await response.aread()
    return response.status_code, _parse_sse(raw), raw


async def test_the_stream_is_primed_and_resumed_by_the_session_that_made_it(
    served: list[Served],
) -> None:
    """A priming event with an ID and a retry hint comes first; another session (a
    valid one, with the same key) cannot resume the stream with the same event ID."""
    url = served[0].url
    async with httpx.AsyncClient(timeout=30) as http:
        mine = await _initialize(http, url)
        theirs = await _initialize(http, url)
        with anyio.fail_after(10):
            events = await _post_call(http, url, mine, "steps", {"seconds": 0.9, "steps": 3})
        priming = events[0]
        assert priming["data"] == "", events
        assert priming["id"], events
        assert priming["retry"] == str(RETRY_MS)
        assert not any('"result"' in event.get("data", "") for event in events), events
        last = events[-1]["id"]
        status, _, raw = await _resume(http, url, theirs, last)
        assert status == 404, raw
        assert b"replica that ran it" in raw
        with anyio.fail_after(10):
            answer = await _answer(http, url, mine, last)
        assert answer["result"]["content"][0]["text"] == "took 3 steps"


async def _answer(http: httpx.AsyncClient, url: str, session: str, last: str) -> dict[str, Any]:
    """The call's answer, resuming its stream as often as it takes, as a client would."""
    while True:
        status, resumed, raw = await _resume(http, url, session, last)
        assert status == 200, raw
        last = next((e["id"] for e in reversed(resumed) if "id" in e), last)
        for event in resumed:
            if '"result"' in event.get("data", ""):
                answer: dict[str, Any] = json.loads(event["data"])
                return answer


async def test_a_client_that_cannot_resume_keeps_its_stream_open(served: list[Served]) -> None:
    """Priming events and resumption came with 2025-11-25: an older client's long
    call is answered on its stream, never closed under it."""
    url = served[0].url
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _initialize(http, url, "2025-06-18")
        with anyio.fail_after(10):
            events = await _post_call(http, url, session, "steps", {"seconds": 0.9, "steps": 3})
    assert all(event.get("data") for event in events), events
    assert '"result"' in events[-1]["data"]
    assert served[0].recorder.resumed() == []


async def test_a_made_up_event_id_is_not_found(served: list[Served]) -> None:
    url = served[0].url
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _initialize(http, url)
        for made_up in ("nothing", "a.1", ".", "x" * 10_000):
            status, _, raw = await _resume(http, url, session, made_up)
            assert status == 404, raw


async def test_another_replica_says_where_the_stream_is(served: list[Served]) -> None:
    """Behind a load balancer without sticky sessions, the resuming GET is refused
    with a message naming the cause, rather than left waiting."""
    first, second = served[0].url, served[1].url
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _initialize(http, first)
        with anyio.fail_after(10):
            events = await _post_call(http, first, session, "steps", {"seconds": 0.6, "steps": 1})
        status, _, raw = await _resume(http, second, session, events[-1]["id"])
    assert status == 404
    message = json.loads(raw)["error"]["message"]
    assert "route each session's requests to one replica" in message


async def test_a_cancelled_polled_call_stops_and_its_stream_ends(served: list[Served]) -> None:
    """notifications/cancelled reaches a call whose stream was closed: the tool is
    cancelled, and a client resuming the stream gets an error, not a wait."""
    replica = served[0]
    url = replica.url
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _initialize(http, url)
        with anyio.fail_after(10):
            events = await _post_call(http, url, session, "hold", {})
        assert replica.hold.started.is_set()
        assert not replica.hold.cancelled.is_set()
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "the user stopped it"},
        }
        # Another session's request 7 is another call: this one goes on.
        other = await _initialize(http, url)
        await http.post(url, json=cancel, headers=_headers(other))
        await anyio.sleep(0.3)
        assert not replica.hold.cancelled.is_set()
        response = await http.post(url, json=cancel, headers=_headers(session))
        assert response.status_code == 202
        with anyio.fail_after(5):
            await replica.hold.cancelled.wait()
            status, resumed, raw = await _resume(http, url, session, events[-1]["id"])
    assert status == 200, raw
    errors = [json.loads(e["data"]) for e in resumed if '"error"' in e.get("data", "")]
    assert errors, resumed
    assert errors[0]["id"] == 7
    assert "without an answer" in errors[0]["error"]["message"]


async def test_without_polling_a_stream_stays_open_and_nothing_resumes(tmp_path: Path) -> None:
    hold = Hold()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        _host(hold).location(workspace, plugins=["polled"], storage=tmp_path / "s") as location,
        anyio.create_task_group() as tasks,
    ):
        app = pegboard.mcp.http_app(pegboard.mcp.build_server(location), token=TOKEN)
        server = await tasks.start(_serve, app, port)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
                await anyio.sleep(0.02)
        async with httpx.AsyncClient(timeout=30) as http:
            session = await _initialize(http, url)
            events = await _post_call(http, url, session, "steps", {"seconds": 0.6, "steps": 1})
            status, _, _ = await _resume(http, url, session, "anything.1")
        server.should_exit = True
    assert all(event.get("data") for event in events), "no priming event without polling"
    assert '"result"' in events[-1]["data"]
    assert status == 405


@pytest.mark.parametrize("wrong", [0, -1.0, float("nan")])
async def test_poll_after_is_a_positive_number_of_seconds(tmp_path: Path, wrong: float) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with _host(Hold()).location(workspace, plugins=["polled"]) as location:
        server = pegboard.mcp.build_server(location)
        with pytest.raises(ValueError, match="poll_after is a number of seconds above 0"):
            pegboard.mcp.http_app(server, token=TOKEN, poll_after=wrong)


# The store's bounds, on the store itself.


def _message(request_id: int, text: str = "") -> Any:
    from mcp_types import JSONRPCNotification, JSONRPCResponse

    if text == "answer":
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result={})
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={})


async def test_a_chatty_call_keeps_its_last_events_and_always_its_answer() -> None:
    events = StreamEvents()
    store = events.session("s")
    first = await store.store_event("1", None)
    for _ in range(MAX_EVENTS * 3):
        await store.store_event("1", _message(1))
    await store.store_event("1", _message(1, "answer"))
    found = events.find(first, "s")
    assert found is not None
    stream, seq = found
    kept = stream.after(seq)
    assert len(kept) == MAX_EVENTS
    assert stream.done
    assert kept[-1][1].id == 1


async def test_finished_streams_expire_and_the_count_is_bounded() -> None:
    now = [0.0]
    events = StreamEvents(clock=lambda: now[0])
    store = events.session("s")
    old = await store.store_event("old", None)
    await store.store_event("old", _message(0, "answer"))
    found = events.find(old, "s")
    assert found is not None
    found[0].ended = 0.0
    now[0] = KEEP_FOR + 1
    await store.store_event("new", None)
    assert events.find(old, "s") is None
    for number in range(MAX_STREAMS + 50):
        await store.store_event(str(number), None)
    assert len(events) <= MAX_STREAMS


async def test_the_standalone_stream_is_not_kept() -> None:
    from mcp.server.streamable_http import GET_STREAM_KEY

    events = StreamEvents()
    event = await events.session("s").store_event(GET_STREAM_KEY, _message(1))
    assert events.find(event, "s") is None
    assert len(events) == 0


async def test_replay_for_the_sdk_sends_only_the_sessions_events() -> None:
    events = StreamEvents()
    mine, theirs = events.session("mine"), events.session("theirs")
    first = await mine.store_event("1", None)
    await mine.store_event("1", _message(1, "answer"))
    sent: list[Any] = []

    async def send(event: Any) -> None:
        sent.append(event)

    assert await theirs.replay_events_after(first, send) is None
    assert sent == []
    assert await mine.replay_events_after(first, send) == "1"
    assert [event.message.id for event in sent] == [1]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--http", "--port=8931", "--poll-after", "0"], "--poll-after 0.0: give a number"),
        (["--http", "--port=8931", "--poll-after", "nan"], "--poll-after nan: give a number"),
        (["--poll-after", "30"], "--poll-after applies to HTTP; add --http"),
    ],
    ids=["zero", "nan", "stdio"],
)
async def test_a_bad_poll_after_is_a_usage_error(
    tmp_path: Path, arguments: list[str], expected: str
) -> None:
    from test_mcp_sessions import pegboard_command

    result = pegboard_command("serve", "-l", str(tmp_path), *arguments, home=tmp_path)
    assert 2 == result.returncode
    assert expected in result.stderr
    assert 1 == len(result.stderr.strip().splitlines()), result.stderr


SLOW_PLUGIN = """
    import anyio
    import pegboard

    async def slow(input, context):
        await anyio.sleep(1.0)
        return "slept"

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({"slow": pegboard.tool(description="Sleeps a second.", execute=slow)})
"""


async def test_pegboard_serve_polls_with_the_option(tmp_path: Path) -> None:
    """The command line's --poll-after reaches the server: the call's stream closes
    before its answer, which the resumed stream brings."""
    import os
    import shutil
    import sys

    from distributions import install_plugin

    site, root = tmp_path / "site", tmp_path / "location"
    site.mkdir()
    root.mkdir()
    install_plugin(site, "slow", SLOW_PLUGIN)
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent))
    assert command is not None
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    arguments = [command, "serve", "-l", str(root), "-p", "slow", "--http", f"--port={port}"]
    arguments += ["--token-file", str(token), "--poll-after", "0.3"]
    environment = {**os.environ, "PYTHONPATH": str(site), "XDG_DATA_HOME": str(tmp_path)}
    async with await anyio.open_process(arguments, env=environment) as process:
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                with anyio.fail_after(60):
                    while True:
                        try:
                            session = await _initialize(http, url)
                            break
                        except httpx.TransportError:
                            await anyio.sleep(0.1)
                    events = await _post_call(http, url, session, "slow", {})
                    assert not any('"result"' in e.get("data", "") for e in events), events
                    answer = await _answer(http, url, session, events[-1]["id"])
            assert answer["result"]["content"][0]["text"] == "slept"
        finally:
            process.terminate()
