"""Run a Location's MCP server over stdio or streamable HTTP."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Literal

import anyio

from .._location import Location
from ._http import Guard, transport_security
from ._server import LocationServer, build_server
from ._sessions import SessionKey, StatelessSessions

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.auth.settings import AuthSettings
    from starlette.types import ASGIApp as ASGIApplication

__all__ = ("http_app", "serve")


async def serve(
    location: Location,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "pegboard",
    token: str | None = None,
    auth: AuthSettings | None = None,
    token_verifier: TokenVerifier | None = None,
    session_key: bytes | None = None,
    poll_after: float | None = None,
) -> None:
    """Serve ``location``'s tools to MCP clients until the transport ends.

    ``stdio`` serves one client on standard input and output and returns when
    it closes them; ``http`` serves streamable HTTP at ``http://HOST:PORT/mcp``
    until cancelled (it needs the asyncio backend). Over HTTP every request
    must carry ``Authorization: Bearer <token>``, or, for an OAuth resource
    server, a token ``token_verifier`` accepts (with the SDK's ``auth``
    settings); Host and Origin headers are checked against ``host``. Open the
    Location with ``approver=pegboard.mcp.ClientApprover()`` so that requests
    the rules leave at ``ask`` are answered.

    Over HTTP nothing a request needs is kept between requests: a 2025-era
    client's session ID is signed with ``session_key`` (32 bytes or more) and
    carries what it declared, so that every replica given the same key answers
    every request. Without a key, each process makes its own, and only it
    accepts the session IDs it issued.

    With ``poll_after`` (seconds), a call still running after that long has
    its stream closed, and a client of the 2025-11-25 revision or later
    resumes it (``GET`` with ``Last-Event-ID``) to get the rest: a long call
    then holds no connection open longer than a proxy's idle timeout. The
    events wait in the memory of the replica that runs the call, so the
    client's ``GET`` must reach that replica.
    """
    server = build_server(location, name=name)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    if transport != "http":
        raise ValueError(f"transport is 'stdio' or 'http', not {transport!r}")
    await _serve_http(
        http_app(
            server,
            host=host,
            token=token,
            auth=auth,
            token_verifier=token_verifier,
            session_key=session_key,
            poll_after=poll_after,
        ),
        host,
        port,
    )


def http_app(
    server: LocationServer,
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    auth: AuthSettings | None = None,
    token_verifier: TokenVerifier | None = None,
    session_key: bytes | None = None,
    poll_after: float | None = None,
) -> ASGIApplication:
    """The streamable HTTP application for ``server``, guarded and stateless as
    `serve` describes.
    """
    if (token is None) == (token_verifier is None):
        raise ValueError(
            "serving over HTTP needs one way to authenticate clients: token= (a bearer "
            "token) or token_verifier= with auth= (an OAuth resource server)"
        )
    if token_verifier is not None and auth is None:
        raise ValueError("token_verifier= needs auth= (mcp.server.auth.settings.AuthSettings)")
    key = SessionKey(secrets.token_bytes(32) if session_key is None else session_key)
    starlette = server.streamable_http_app(
        host=host,
        transport_security=transport_security(host),
        auth=auth,
        token_verifier=token_verifier,
    )
    StatelessSessions(server.session_manager, key, poll_after=poll_after).install()
    return Guard(starlette, token=token)


async def _serve_http(app: ASGIApplication, host: str, port: int) -> None:
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5
    )
    http = uvicorn.Server(config)
    stopped = anyio.Event()
    failed: list[OSError] = []

    async def run() -> None:
        # Shielded: cancelling serve() asks uvicorn to stop, so that it closes
        # its connections and runs the app's shutdown instead of being cut off.
        with anyio.CancelScope(shield=True):
            try:
                await http.serve()
            except SystemExit:  # uvicorn's answer to a port it cannot bind
                failed.append(OSError(f"cannot serve HTTP on {host}:{port}; is the port in use?"))
            finally:
                stopped.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        try:
            await stopped.wait()
        finally:
            http.should_exit = True
    if failed:
        raise failed[0]
