"""A served Location for an MCP client in the same process: no subprocess, no socket."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.shared.memory import MessageStream, create_client_server_memory_streams

from .._location import Location
from ._server import LocationServer, build_server

__all__ = ("InMemoryTransport",)


class InMemoryTransport:
    """Serve ``location`` to an MCP client in this process, over memory streams.

    It is a transport for the MCP SDK (``mcp.Client(transport)``, or
    ``async with transport as (read, write)`` for ``mcp.ClientSession(read, write)``)
    and for fastmcp (``fastmcp.Client(transport)``, or
    ``fastmcp.server.create_proxy(transport)`` to mount the tools in a FastMCP
    server). Each connection runs the server `build_server` makes, exactly as
    `serve` runs it over stdio: both protocol eras, the Location's own rules and
    approver for every permission request (a client approves only through
    ``ClientApprover(client_approval=True)``, and never persistently), and
    cancellation from the client cancels the call. The server's run ends when
    the connection does.

    fastmcp's ``Client`` takes the transport when fastmcp was imported before
    the transport was made: pegboard never imports fastmcp itself.
    """

    #: fastmcp: both protocol eras are served, so ``mode="auto"`` may probe.
    legacy_only = False

    def __init__(self, location: Location, *, name: str = "pegboard") -> None:
        self.server: LocationServer = build_server(location, name=name)
        self._connection: contextlib.AbstractAsyncContextManager[MessageStream] | None = None
        _recognised_by_fastmcp()

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[MessageStream]:
        """A new connection to the server: the client's read and write streams."""
        server = self.server
        async with (
            create_client_server_memory_streams() as (client, (read, write)),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(server.run, read, write, server.create_initialization_options())
            try:
                yield client
            finally:
                # The client has gone: the server's run, and any call in flight, ends.
                tasks.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def connect_session(
        self, *, transport_options: Any = None, **session_kwargs: Any
    ) -> AsyncIterator[ClientSession]:
        """A new connection, as a `mcp.ClientSession` not yet initialized (fastmcp's API).

        ``session_kwargs`` go to the session; ``transport_options`` is fastmcp's,
        and names the session class it wants.
        """
        session_class: type[ClientSession] = getattr(
            transport_options, "session_class", ClientSession
        )
        async with (
            self.connect() as (read, write),
            session_class(read, write, **session_kwargs) as session,
        ):
            yield session

    async def __aenter__(self) -> MessageStream:
        if self._connection is not None:
            raise RuntimeError(
                "this InMemoryTransport is already connected as a context manager; make one "
                "transport per SDK client, or call transport.connect() for each connection"
            )
        connection = self.connect()
        streams = await connection.__aenter__()
        self._connection = connection
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        connection, self._connection = self._connection, None
        if connection is None:
            return None
        return await connection.__aexit__(exc_type, exc, traceback)

    async def close(self) -> None:
        """Nothing to release between connections (fastmcp's API)."""

    def get_session_id(self) -> str | None:
        """No HTTP session (fastmcp's API)."""
        return None

    def __repr__(self) -> str:
        return f"<InMemoryTransport(server={self.server.name!r})>"


def _recognised_by_fastmcp() -> None:
    """Register the transport as fastmcp's ``ClientTransport`` when fastmcp is in use.

    A virtual subclass (`abc.ABCMeta.register`), and only once the program has
    imported fastmcp: importing it reconfigures logging and patches the MCP
    types, which no program that merely has it installed should get.
    """
    if "fastmcp" not in sys.modules:
        return
    from fastmcp.client.transports import ClientTransport

    if not issubclass(InMemoryTransport, ClientTransport):
        ClientTransport.register(InMemoryTransport)
