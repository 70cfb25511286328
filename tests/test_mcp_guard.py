"""The one ASGI layer in front of ``pegboard serve --http``: token, JSON-RPC gate, cancel.

Driven directly, without a network: an inner app records what reaches it.
The last tests drive the whole served app the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

from pegboard.mcp._http import Guard
from pegboard.mcp._serve import http_app
from pegboard.mcp._server import build_server

pytestmark = pytest.mark.anyio

TOKEN = "guard-token"
CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}

Message = dict[str, Any]


class Inner:
    """An inner ASGI app: reads the body, answers, then (like the SDK on a
    session) keeps reading until told the client has gone.
    """

    def __init__(self, *, answer_first: bool = False) -> None:
        self.bodies: list[bytes] = []
        self.scopes: list[dict[str, Any]] = []
        self.answer_first = answer_first

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(scope)
        body = b""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        if scope["method"] != "POST" or json.loads(body).get("method") != "tools/call":
            return  # the cancellation guard's own notification, or a GET
        if self.answer_first:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})
        await receive()  # the client going away


def scope(method: str = "POST", **headers: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [
            (name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()
        ],
    }


async def drive(
    app: Any, request: dict[str, Any], chunks: list[bytes], *, wait: bool = False
) -> tuple[int | None, bytes]:
    """Send ``chunks`` as the body, then a disconnect (with ``wait``, once answered);
    the status and body of the answer.
    """
    answered = anyio.Event()
    pending: list[Message] = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    answer: dict[str, Any] = {"status": None, "body": b""}

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if wait:
            await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        else:
            answer["body"] += message.get("body", b"")
            if not message.get("more_body", False):
                answered.set()

    with anyio.fail_after(10):
        await app(request, receive, send)
    return answer["status"], answer["body"]


AUTHORIZED = {"authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong"},
        {"authorization": f"Basic {TOKEN}"},
        # The first Authorization header is the one read: a second cannot rescue it.
        {"authorization": "Bearer wrong", "Authorization": f"Bearer {TOKEN}"},
    ],
    ids=["none", "wrong", "scheme", "second-header"],
)
async def test_law_host_authority_the_guard_refuses_a_request_without_the_token(
    headers: dict[str, str],
) -> None:
    inner = Inner()
    request = scope(**headers)
    if len(headers) == 2:  # two headers of one name, as ASGI can carry them
        request["headers"] = [(b"authorization", value.encode()) for value in headers.values()]
    status, body = await drive(Guard(inner, token=TOKEN), request, [json.dumps(CALL).encode()])
    assert (status, inner.scopes) == (401, [])
    assert b"invalid_token" in body


async def test_the_body_reaches_the_server_whole_in_however_many_chunks() -> None:
    """Read once by the guard, the body is handed on byte for byte."""
    inner = Inner(answer_first=True)
    body = json.dumps({**CALL, "params": {"name": "x", "arguments": {"t": "é" * 5000}}}).encode()
    chunks = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    status, _ = await drive(Guard(inner, token=TOKEN), scope(**AUTHORIZED), chunks)
    assert status == 200
    assert inner.bodies == [body]


async def test_a_bad_body_split_in_chunks_is_refused_whole() -> None:
    inner = Inner()
    body = b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}'
    status, answer = await drive(Guard(inner), scope(), [body[:10], body[10:]])
    assert (status, inner.scopes) == (400, [])
    assert json.loads(answer)["error"]["code"] == -32600


async def test_a_body_over_the_limit_is_left_to_the_server_unparsed() -> None:
    """Over the SDK's limit the guard stops reading: the SDK answers 413."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    seen: list[tuple[int, bool]] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append((len(message["body"]), message["more_body"]))

    chunk = b"x" * (DEFAULT_MAX_REQUEST_BODY_SIZE // 2 + 1)
    await drive(Guard(inner), scope(mcp_session_id="s"), [chunk, chunk, chunk])
    assert seen == [(2 * len(chunk), True)]


async def test_a_session_client_that_disconnects_mid_call_cancels_it() -> None:
    inner = Inner()
    await drive(Guard(inner), scope(mcp_session_id="s"), [json.dumps(CALL).encode()])
    assert len(inner.bodies) == 2
    cancelled = json.loads(inner.bodies[1])
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == 7
    assert (b"mcp-session-id", b"s") in inner.scopes[1]["headers"]


@pytest.mark.parametrize(
    ("request_scope", "answer_first", "message"),
    [
        (scope(mcp_session_id="s"), True, CALL),  # answered before it went
        (scope(), False, CALL),  # no session: the SDK's own stream closing cancels
        (scope(mcp_session_id="s"), False, {"jsonrpc": "2.0", "method": "tools/call"}),
        (scope(mcp_session_id="s"), False, [CALL]),  # a batch has no one ID
    ],
    ids=["answered", "no-session", "notification", "batch"],
)
async def test_no_cancellation_is_sent_where_there_is_nothing_to_cancel(
    request_scope: dict[str, Any], answer_first: bool, message: object
) -> None:
    inner = Inner(answer_first=answer_first)
    if isinstance(message, list):

        async def reader(scope: Any, receive: Any, send: Any) -> None:
            inner.bodies.append((await receive())["body"])
            await receive()

        await drive(Guard(reader), request_scope, [json.dumps(message).encode()])
    else:
        await drive(Guard(inner), request_scope, [json.dumps(message).encode()])
    assert len(inner.bodies) == 1


async def test_a_request_that_is_not_http_passes_untouched() -> None:
    reached: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    await Guard(inner, token=TOKEN)({"type": "lifespan"}, None, None)  # type: ignore[arg-type]
    assert reached == ["lifespan"]


def test_a_blank_or_padded_token_is_refused() -> None:
    for token in ("", " padded "):
        with pytest.raises(ValueError, match="non-empty string without surrounding spaces"):
            Guard(Inner(), token=token)


# The whole served app, driven in process.

REGION = {
    "type": "object",
    "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
    "required": ["region"],
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _where(input: Any, context: pegboard.ToolContext) -> str:
    return f"served in {input['region']}"


@pytest.fixture
async def served_app(host: pegboard.Host, workspace: Path, storage_dir: Path) -> AsyncIterator[Any]:
    host.tools.register(
        {"where": pegboard.tool(description="Say where.", input=REGION, execute=_where)}
    )
    async with host.location(workspace, plugins=[], storage=storage_dir) as location:
        server = build_server(location)
        app = http_app(server, token=TOKEN)
        async with server.session_manager.run():
            yield app


def modern_call(region: str, header: str) -> tuple[dict[str, Any], bytes]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "where", "arguments": {"region": region}, "_meta": MODERN_META},
    }
    request = scope(
        **AUTHORIZED,
        host="127.0.0.1:8000",
        accept="application/json, text/event-stream",
        content_type="application/json",
        mcp_protocol_version="2026-07-28",
        mcp_method="tools/call",
        mcp_name="where",
        mcp_param_region=header,
    )
    request.update(query_string=b"", root_path="", scheme="http", server=("127.0.0.1", 8000))
    return request, json.dumps(body).encode()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_2026_call_whose_mcp_param_header_disagrees_with_its_arguments_is_refused(
    served_app: Any,
) -> None:
    """The SDK checks Mcp-Param headers against the schema pegboard advertises."""
    request, body = modern_call("eu", "eu")
    status, answer = await drive(served_app, request, [body], wait=True)
    assert status == 200, answer
    assert b"served in eu" in answer
    request, body = modern_call("eu", "us")
    status, answer = await drive(served_app, request, [body], wait=True)
    assert status == 400, answer
    assert "Mcp-Param-Region" in json.loads(answer)["error"]["message"]
