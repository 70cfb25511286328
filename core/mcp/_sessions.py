"""Handshake-era HTTP sessions that any replica can answer: signed, self-contained IDs."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import uuid
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import orjson

from ._http import send_error

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Message, Receive, Scope, Send

    from ._resume import SessionEvents, Stream

__all__ = ("MIN_KEY_BYTES", "SessionClaims", "SessionKey", "StatelessSessions", "session_of")

logger = logging.getLogger("pegboard.mcp")

#: The shortest key that signs session IDs: 256 bits.
MIN_KEY_BYTES = 32
#: What a session ID starts with, so that pegboard's own are told apart.
PREFIX = "pb1"
#: A client's name and capabilities beyond this many bytes are left out of its ID.
MAX_CLAIMS = 2048


@attrs.frozen
class SessionClaims:
    """What a handshake-era client told ``initialize``, carried in its session ID."""

    session: str
    protocol_version: str
    client_info: dict[str, Any] | None
    capabilities: dict[str, Any] | None


class SessionKey:
    """Signs and checks session IDs (HMAC-SHA256). Every replica must share the key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"a session key is at least {MIN_KEY_BYTES} bytes; "
                f"this one has {len(key)}: make one with `openssl rand -hex 32`"
            )
        self._key = key

    def issue(self, claims: SessionClaims) -> str:
        """The session ID for ``claims``: ``pb1.SESSION.CLAIMS.SIGNATURE``."""
        data: dict[str, Any] = {"v": claims.protocol_version}
        extra = {"i": claims.client_info, "c": claims.capabilities}
        if len(orjson.dumps(extra)) <= MAX_CLAIMS:
            data.update(extra)
        body = f"{PREFIX}.{claims.session}.{_b64(orjson.dumps(data))}"
        return f"{body}.{self._sign(body)}"

    def load(self, session_id: str) -> SessionClaims | None:
        """The claims of a session ID this key signed, or ``None``."""
        body, _, signature = session_id.rpartition(".")
        if not body.startswith(PREFIX + ".") or not hmac.compare_digest(
            signature, self._sign(body)
        ):
            return None
        _, session, payload = body.split(".", 2)
        try:
            data = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (binascii.Error, ValueError):
            return None
        info, capabilities = data.get("i"), data.get("c")
        return SessionClaims(
            session,
            str(data.get("v", "")),
            info if isinstance(info, dict) else None,
            capabilities if isinstance(capabilities, dict) else None,
        )

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def session_of(session_id: str) -> str:
    """The short session name inside a pegboard session ID (any other ID unchanged)."""
    if session_id.startswith(PREFIX + "."):
        return session_id.split(".", 2)[1]
    return session_id


class StatelessSessions:
    """Serves handshake-era requests of the SDK's session manager without keeping sessions.

    ``initialize`` gets a signed session ID holding what the client declared;
    every later request is served by a transport made for that request alone,
    with the client as its ID describes it, on whichever replica it reaches.
    A server-to-client request (elicitation) has nowhere to get its answer,
    so none is sent; the standalone ``GET`` stream is not offered (``405``).
    """

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        key: SessionKey,
        *,
        poll_after: float | None = None,
    ) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        from ._resume import StreamEvents

        if poll_after is not None and not poll_after > 0:
            raise ValueError(f"poll_after is a number of seconds above 0, not {poll_after!r}")
        self.manager = manager
        self.key = key
        self.poll_after = poll_after
        #: The polled streams' events, when calls' streams are polled.
        self.events = None if poll_after is None else StreamEvents()
        self._security = TransportSecurityMiddleware(manager.security_settings)

    def install(self) -> None:
        # The manager routes handshake-era requests here; 2026-07-28 ones are
        # already stateless in the SDK.
        self.manager._handle_stateful_request = self.handle  # type: ignore[method-assign]

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
        from starlette.requests import Request

        method = scope["method"]
        # Host and Origin first, as the SDK's transport would: no answer at all
        # for a page that reached the server through DNS rebinding.
        refused = await self._security.validate_request(Request(scope), is_post=method == "POST")
        if refused is not None:
            await refused(scope, receive, send)
            return
        header = MCP_SESSION_ID_HEADER.lower().encode("ascii")
        session_id = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
        if session_id is None:
            if method != "POST":
                await send_error(send, 400, -32600, "Bad Request: Missing session ID")
                return
            body, more = await _read(receive)
            claims = None if more else _initialize_claims(body)
            if claims is None:
                await send_error(send, 400, -32600, "Bad Request: Missing session ID")
                return
            session_id = self.key.issue(claims)
            receive = _replay(body, receive)
        else:
            claims = self.key.load(session_id)
            if claims is None:
                await send_error(
                    send,
                    404,
                    -32600,
                    "Session not found: not signed with this server's session key; "
                    "initialize again (replicas must share --session-key-file)",
                )
                return
        if method == "GET":
            last_event = _header(scope, b"last-event-id")
            if last_event is not None and self.events is not None:
                await self._resume(session_id, claims, last_event, scope, receive, send)
                return
            await send_error(send, 405, -32600, "Method Not Allowed: no standalone stream")
            return
        if method == "DELETE":
            # Nothing is kept, so nothing is ended: any replica says yes.
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        request_id = None
        if self.events is not None and method == "POST":
            body, more = await _read(receive)
            receive = _replay(body, receive, more=more)
            message = None if more else _message(body)
            if message is not None and self._cancel_parked(claims, message):
                await send({"type": "http.response.start", "status": 202, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            request_id = _call_id(message)
        await self._serve(session_id, claims, scope, receive, send, request_id)

    async def _serve(
        self,
        session_id: str,
        claims: SessionClaims,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str | None = None,
    ) -> None:
        from mcp.server.connection import Connection
        from mcp.server.runner import serve_connection
        from mcp.server.streamable_http import StreamableHTTPServerTransport
        from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
        from mcp.shared.transport_context import TransportContext

        from ._resume import RETRY_MS

        manager = self.manager
        events = None if request_id is None else self._session_events(claims)
        if events is None:
            request_id = None  # a client that cannot resume keeps its stream open
        else:
            # The version the session agreed decides what its streams carry (a
            # priming event, from 2025-11-25), whatever a request's header says.
            scope = _with_header(scope, b"mcp-protocol-version", claims.protocol_version)
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=manager.json_response,
            event_store=events,
            security_settings=manager.security_settings,
            retry_interval=None if events is None else RETRY_MS,
        )

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    read_stream,
                    write_stream,
                    inline_methods=frozenset({"initialize"}),
                    # The answer to a request to the client could reach any
                    # replica: none is sent, notifications are.
                    transport_builder=lambda _: TransportContext(
                        kind="streamable-http", can_send_request=False
                    ),
                )
                connection = Connection.from_envelope(
                    claims.protocol_version, claims.client_info, claims.capabilities
                )
                try:
                    await serve_connection(
                        manager.app,
                        dispatcher,
                        connection=connection,
                        lifespan_state=manager._lifespan_state,
                    )
                except Exception:
                    logger.exception("an HTTP request's MCP connection failed")

        group = manager._task_group
        assert group is not None, "the session manager is not running"
        parked = False
        try:
            await group.start(run)
            if request_id is None:
                await transport.handle_request(scope, receive, send)
            else:
                parked = await self._poll(transport, claims, request_id, scope, receive, send)
        finally:
            if not parked:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    def _session_events(self, claims: SessionClaims) -> SessionEvents | None:
        if self.events is None or not _resumable(claims.protocol_version):
            return None
        return self.events.session(claims.session)

    async def _poll(
        self,
        transport: StreamableHTTPServerTransport,
        claims: SessionClaims,
        request_id: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> bool:
        """Serve a call whose stream is closed after `poll_after` seconds; whether
        its transport was parked to finish the call for a client that will resume.
        """
        events, poll_after = self.events, self.poll_after
        assert events is not None
        assert poll_after is not None
        closed = False

        async def close_on_time() -> None:
            nonlocal closed
            await anyio.sleep(poll_after)
            closed = True
            stream = events.request(claims.session, request_id)
            if stream is not None:
                # Before the client can see the stream end and cancel the call.
                stream.polled = True
            transport.close_sse_stream(request_id)

        async with anyio.create_task_group() as timer:
            timer.start_soon(close_on_time)
            await transport.handle_request(scope, receive, send)
            timer.cancel_scope.cancel()
        stream = events.request(claims.session, request_id)
        if stream is None:
            return False
        if not closed:
            # The answer went out on the stream itself: nothing to resume.
            events.forget(stream)
            return False
        if stream.done:
            return False
        group = self.manager._task_group
        assert group is not None, "the session manager is not running"
        group.start_soon(_park, transport, stream)
        return True

    def _cancel_parked(self, claims: SessionClaims, message: dict[str, Any]) -> bool:
        """Cancel the parked call a ``notifications/cancelled`` names; whether there was one."""
        if message.get("method") != "notifications/cancelled" or self.events is None:
            return False
        params = message.get("params")
        target = params.get("requestId") if isinstance(params, dict) else None
        if not isinstance(target, str | int) or isinstance(target, bool):
            return False
        stream = self.events.request(claims.session, str(target))
        if stream is None or not stream.polled or stream.done:
            return False
        stream.cancel()
        return True

    async def _resume(
        self,
        session_id: str,
        claims: SessionClaims,
        last_event: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """Send a polled stream's events after ``last_event``, then the rest as they
        come, for at most `poll_after` seconds or until the call's answer.
        """
        from ._resume import KEEP_FOR

        assert self.events is not None
        found = self.events.find(last_event, claims.session)
        if found is None:
            await send_error(
                send,
                404,
                -32600,
                f"Not Found: no stream with event {last_event!r} is kept here. A call's "
                "stream is resumed on the replica that ran it: route each session's "
                "requests to one replica, or serve without polling; events are kept "
                f"{KEEP_FOR:.0f} s after the call ends",
            )
            return
        stream, seq = found
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache, no-transform"),
                    (b"mcp-session-id", session_id.encode("ascii")),
                ],
            }
        )

        async def until_disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tasks.cancel_scope.cancel()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(until_disconnected)
            with anyio.move_on_after(self.poll_after):
                while True:
                    changed = stream.changed
                    for number, message in stream.after(seq):
                        await send(
                            {
                                "type": "http.response.body",
                                "body": _sse(stream.event_id(number), message),
                                "more_body": True,
                            }
                        )
                        seq = number
                    if stream.done and not stream.after(seq):
                        break
                    await changed.wait()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()


async def _park(transport: StreamableHTTPServerTransport, stream: Stream) -> None:
    """Let a call whose stream was closed run to its end, then close its transport.

    A call that ends without an answer (a client cancelled it) still ends its
    stream, with an error, so that a client resuming it is not left waiting.
    """
    from mcp_types import ErrorData, JSONRPCError

    try:
        while not (stream.done or stream.cancelled):
            await stream.changed.wait()
    finally:
        with anyio.CancelScope(shield=True):
            await transport.terminate()
        if not stream.done:
            stream.add(
                JSONRPCError(
                    jsonrpc="2.0",
                    id=_rpc_id(stream.request_id),
                    error=ErrorData(code=-32603, message="the call ended without an answer"),
                )
            )
            stream.finish()


def _rpc_id(request_id: str) -> str | int:
    return int(request_id) if request_id.lstrip("-").isdigit() else request_id


def _sse(event_id: str, message: Any) -> bytes:
    data = message.model_dump_json(by_alias=True, exclude_unset=True)
    return f"event: message\r\nid: {event_id}\r\ndata: {data}\r\n\r\n".encode()


def _resumable(version: str) -> bool:
    # Priming events and resumption came with the 2025-11-25 revision; dates sort.
    return version >= "2025-11-25"


def _with_header(scope: Scope, name: bytes, value: str) -> Scope:
    headers = [(k, v) for k, v in scope["headers"] if k != name]
    return {**scope, "headers": [*headers, (name, value.encode("latin-1"))]}


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def _message(body: bytes) -> dict[str, Any] | None:
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return message if isinstance(message, dict) else None


def _call_id(message: dict[str, Any] | None) -> str | None:
    """The ID of a request whose stream may be polled, as the SDK keys its stream."""
    if message is None or "method" not in message:
        return None
    request_id = message.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    return str(request_id)


def _initialize_claims(body: bytes) -> SessionClaims | None:
    """A new session's claims, if ``body`` is an ``initialize`` request."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    info, capabilities = params.get("clientInfo"), params.get("capabilities")
    return SessionClaims(
        uuid.uuid4().hex,
        version,
        info if isinstance(info, dict) else None,
        capabilities if isinstance(capabilities, dict) else None,
    )


async def _read(receive: Receive) -> tuple[bytes, bool]:
    """The request body (up to the SDK's limit), and whether more was left unread."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), True
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = bool(message.get("more_body", False))
        if not more or size > DEFAULT_MAX_REQUEST_BODY_SIZE:
            return b"".join(chunks), more


def _replay(body: bytes, receive: Receive, *, more: bool = False) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay
