"""What guards the HTTP transport: a bearer token, JSON-RPC bodies, Host and Origin checks."""

from __future__ import annotations

import hmac
import ipaddress
import json
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = (
    "Guard",
    "is_loopback",
    "send_error",
    "transport_security",
)

#: Addresses that listen on every interface: no one name for clients to check against.
_EVERYWHERE = ("", "0.0.0.0", "::")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def transport_security(host: str) -> TransportSecuritySettings:
    """Host and Origin validation for a server bound to ``host``, always on.

    The SDK turns the checks on by itself only for three loopback names, so a
    server on ``127.0.0.2`` or a LAN address would run without them.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    if host in _EVERYWHERE:
        raise ValueError(
            f"cannot serve on {host or 'every interface'!r}: bind the one address clients "
            "connect to, so that their Host and Origin headers can be checked"
        )
    names = [f"[{host}]" if ":" in host else host]
    if is_loopback(host):
        names += ["127.0.0.1", "localhost", "[::1]"]
    names = list(dict.fromkeys(names))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")],
    )


class Guard:
    """ASGI middleware: what every HTTP request passes before the server sees it.

    One layer, one read and one parse of a body, for three guards:

    - with ``token``, every request carries ``Authorization: Bearer <token>``,
      or gets ``401 Unauthorized`` without reaching the server;
    - a POST body that is not JSON-RPC gets the protocol's error: one that is
      not JSON (``NaN``, or nested beyond orjson's 1,024 levels, which would
      exhaust Python's recursion on the way in) is a ``-32700`` parse error; a
      message whose ``id`` is not a string or an integer, or that is not an
      object, is a ``-32600`` invalid request. Both with HTTP 400, where they
      would otherwise be a ``500`` or an ``id`` read as a notification's absence
      and answered ``202 Accepted``;
    - a handshake-era client that disconnects cancels its call. The SDK cancels
      a 2026-07-28 request when its response stream closes, but on a session
      (``Mcp-Session-Id``) the handler outlives the POST that started it. When
      such a POST's connection closes before its response is complete, this
      sends the session the ``notifications/cancelled`` the client could no
      longer send, so the call (and any process it started) stops.
    """

    def __init__(self, app: ASGIApp, *, token: str | None = None) -> None:
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

        if token is not None and (not token or token != token.strip()):
            raise ValueError("the bearer token is a non-empty string without surrounding spaces")
        self.app = app
        self._token = None if token is None else token.encode("utf-8")
        self._limit = DEFAULT_MAX_REQUEST_BODY_SIZE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = self._token
        session = checked = False
        authorized = token is None
        for name, value in scope["headers"]:
            if name == b"authorization" and token is not None and not checked:
                checked = True  # the first one counts
                authorized = _bearer(value, token)
            elif name == b"mcp-session-id":
                session = True
        if not authorized:
            await _unauthorized(send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before it finished asking: nothing started
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self._limit:
                break  # the SDK answers 413
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        request_id = None
        if not more:
            parsed = _parse(body)
            if isinstance(parsed, tuple):
                await send_error(send, 400, *parsed)
                return
            if session:
                request_id = _request_id(parsed)
        replayed = False
        finished = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            message = await receive()
            if message["type"] == "http.disconnect" and not finished and request_id is not None:
                await self._cancel(scope, request_id)
            return message

        if request_id is None:
            await self.app(scope, replay, send)
            return

        async def watch(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        await self.app(scope, replay, watch)

    async def _cancel(self, scope: Scope, request_id: object) -> None:
        import anyio

        notification = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "the client disconnected"},
            }
        ).encode()
        headers = [
            (name, value)
            for name, value in scope["headers"]
            if name not in (b"content-length", b"accept", b"content-type")
        ]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-length", str(len(notification)).encode()),
        ]
        sent = False

        async def once() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": notification, "more_body": False}
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        async def discard(message: Message) -> None:
            return None

        # Shielded: the cancellation must reach the session even as this
        # connection's own handling is torn down.
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            await self.app({**scope, "headers": headers}, once, discard)


def _bearer(value: bytes, token: bytes) -> bool:
    scheme, _, credentials = value.partition(b" ")
    # Constant time, so the token cannot be guessed byte by byte.
    return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), token)


async def _unauthorized(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="pegboard", error="invalid_token"'),
                (b"content-length", str(len(_UNAUTHORIZED)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": _UNAUTHORIZED})


_UNAUTHORIZED = json.dumps(
    {
        "error": "invalid_token",
        "error_description": "this MCP server needs Authorization: Bearer <token>; "
        "the token is in the file the server's operator was told about",
    }
).encode()


#: JSON-RPC's error codes for a body that is not JSON, and for one that is not a request.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _parse(body: bytes) -> object:
    """The JSON-RPC message or batch in ``body``, or the error code and text that refuse it."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        return PARSE_ERROR, f"the body is not JSON: {error}"
    for message in parsed if isinstance(parsed, list) else (parsed,):
        if not isinstance(message, dict):
            return INVALID_REQUEST, "a JSON-RPC message is an object"
        if "id" in message:
            request_id = message["id"]
            if not isinstance(request_id, str | int) or isinstance(request_id, bool):
                return (
                    INVALID_REQUEST,
                    f"a JSON-RPC id is a string or an integer, not {_json_kind(request_id)}",
                )
    return parsed


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a fraction"
    return "an array" if isinstance(value, list) else "an object"


async def send_error(send: Send, status: int, code: int, message: str) -> None:
    """Answer with HTTP ``status`` and a JSON-RPC error (no ``id``) of ``code``."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _request_id(message: object) -> object:
    """The JSON-RPC ID of a single request, or ``None`` (checked by `_parse`)."""
    if isinstance(message, dict) and "method" in message:
        return message.get("id")
    return None
