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

if TYPE_CHECKING:
    from anyio.abc import TaskStatus
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Message, Receive, Scope, Send

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

    def __init__(self, manager: StreamableHTTPSessionManager, key: SessionKey) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.manager = manager
        self.key = key
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
                await _error(send, 400, -32600, "Bad Request: Missing session ID")
                return
            body, more = await _read(receive)
            claims = None if more else _initialize_claims(body)
            if claims is None:
                await _error(send, 400, -32600, "Bad Request: Missing session ID")
                return
            session_id = self.key.issue(claims)
            receive = _replay(body, receive)
        else:
            claims = self.key.load(session_id)
            if claims is None:
                await _error(
                    send,
                    404,
                    -32600,
                    "Session not found: not signed with this server's session key; "
                    "initialize again (replicas must share --session-key-file)",
                )
                return
        if method == "GET":
            await _error(send, 405, -32600, "Method Not Allowed: no standalone stream")
            return
        if method == "DELETE":
            # Nothing is kept, so nothing is ended: any replica says yes.
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self._serve(session_id, claims, scope, receive, send)

    async def _serve(
        self, session_id: str, claims: SessionClaims, scope: Scope, receive: Receive, send: Send
    ) -> None:
        from mcp.server.connection import Connection
        from mcp.server.runner import serve_connection
        from mcp.server.streamable_http import StreamableHTTPServerTransport
        from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
        from mcp.shared.transport_context import TransportContext

        manager = self.manager
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=manager.json_response,
            event_store=None,
            security_settings=manager.security_settings,
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
        try:
            await group.start(run)
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()


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


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _error(send: Send, status: int, code: int, message: str) -> None:
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
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
