"""An MCP server for one Location: its tools, their calls, and list changes."""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.metadata
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import attrs
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._errors import RetentionError
from .._json import thaw
from .._location import Location
from .._outcome import ToolCall
from .._permissions import PermissionRejected, asker
from .._plugins import PluginError
from .._tool import LOG_LEVELS, ToolContext, ToolDefinition
from .._tracing import continued
from ._annotations import to_mcp_annotations
from ._approver import InputNeeded, current_channel
from ._call import Channel, call_result
from ._resources import ManagedResources
from ._sessions import session_of

__all__ = ("LocationServer", "build_server")

logger = logging.getLogger("pegboard.mcp")

#: What a client is told when a defect (an exception no one expected) ended its request.
DEFECT_MESSAGE = (
    "internal error in the MCP server: it is recorded in the server's log, "
    "where its operator can read it"
)

P = ParamSpec("P")
R = TypeVar("R")


def guarded(
    handler: Callable[Concatenate[Any, P], Awaitable[R]],
) -> Callable[Concatenate[Any, P], Awaitable[R]]:
    """A request handler whose defects are logged here and reach no client.

    An exception's text can hold paths, credentials or data of other clients;
    the SDK would send it as the error message on the 2025 protocol.
    """

    @functools.wraps(handler)
    async def guard(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await handler(self, *args, **kwargs)
        except MCPError:
            raise
        except Exception as error:
            logger.error("%s failed", handler.__name__.strip("_"), exc_info=error)
            raise MCPError(types.INTERNAL_ERROR, DEFECT_MESSAGE) from None

    return guard  # type: ignore[return-value]  # wraps() widens Awaitable to Coroutine


#: What the ``result`` key of a wrapped output is called.
RESULT_KEY = "result"
#: Seconds a handshake-era client may take to accept a list-change notification.
NOTIFY_TIMEOUT = 5.0
#: How many clients' ``logging/setLevel`` one process remembers (oldest forgotten first).
LOG_LEVEL_MEMORY = 10_000


@attrs.define
class Run:
    """One run of the server: a stdio process, an HTTP app, an in-process client."""

    session_id: str
    bus: InMemorySubscriptionBus
    listen: ListenHandler
    #: Handshake-era clients, told about list changes on their own connection;
    #: keyed by their connection's ``initialize`` parameters.
    sessions: dict[int, ServerSession] = attrs.field(factory=dict)
    #: What handshake-era clients asked with ``logging/setLevel``: the index of
    #: the least severe level in `LOG_LEVELS`, by client; bounded.
    log_levels: collections.OrderedDict[str, int] = attrs.field(factory=collections.OrderedDict)

    def set_log_level(self, client: str, level: str) -> None:
        self.log_levels[client] = LOG_LEVELS.index(level)
        self.log_levels.move_to_end(client)
        while len(self.log_levels) > LOG_LEVEL_MEMORY:
            self.log_levels.popitem(last=False)

    def remember(self, context: ServerRequestContext[Run]) -> None:
        """Remember a handshake-era client, to tell it when the tool list changes."""
        params = context.session.client_params
        if params is not None and context.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            # Sessions are per request; the parameters are the connection's own.
            self.sessions.setdefault(id(params), context.session)


@attrs.frozen
class Listing:
    """The MCP tools for one set of definitions, and which outputs are wrapped."""

    definitions: tuple[ToolDefinition, ...]
    tools: list[types.Tool]
    wrapped: frozenset[str]
    #: Each tool's advertised input schema, by name.
    schemas: dict[str, dict[str, Any]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, definitions: tuple[ToolDefinition, ...]) -> Listing:
        tools, wrapped = [], set()
        for definition in definitions:
            output = None
            if definition.output_schema is not None:
                output = thaw(definition.output_schema)
                # MCP wants objects here (through 2025-11-25): wrap anything else.
                if output.get("type") != "object":
                    output = {
                        "type": "object",
                        "properties": {RESULT_KEY: output},
                        "required": [RESULT_KEY],
                    }
                    wrapped.add(definition.name)
            tools.append(
                types.Tool(
                    name=definition.name,
                    title=definition.title,
                    description=definition.description,
                    input_schema=thaw(definition.input_schema),
                    output_schema=output,
                    annotations=to_mcp_annotations(definition.annotations),
                )
            )
        schemas = {tool.name: tool.input_schema for tool in tools}
        return cls(definitions, tools, frozenset(wrapped), schemas)


def _version() -> str:
    try:
        return importlib.metadata.version("pegboard")
    except importlib.metadata.PackageNotFoundError:
        return ""


class LocationServer(Server[Run]):
    """A low-level MCP server whose tools are one Location's advertised tools.

    Each ``tools/list`` returns ``location.prepare().definitions``; each
    ``tools/call`` runs through one fresh request's ``execute``. Registration
    changes send ``notifications/tools/list_changed``.
    """

    def __init__(self, location: Location, *, name: str = "pegboard") -> None:
        super().__init__(
            name,
            version=_version(),
            lifespan=self._lifespan,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            get_tool_input_schema=self._input_schema,
        )
        self.location = location
        self._resources = ManagedResources(location.storage.directory)
        self._listing = Listing.of(())
        self.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized
        )
        # Registered here, not with on_set_logging_level=, which warns: the
        # request is gone at 2026-07-28, but handshake-era clients still send it.
        self.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_level)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        # Handshake-era clients learn here that list changes are announced.
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )

    def listing(self, definitions: tuple[ToolDefinition, ...]) -> Listing:
        """The MCP tools for ``definitions``, rebuilt only when they change."""
        listing = self._listing
        if listing.definitions is not definitions and listing.definitions != definitions:
            listing = self._listing = Listing.of(definitions)
        return listing

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema ``tools/list`` advertises for ``name``.

        The SDK checks a 2026-07-28 call's ``Mcp-Param-*`` headers against it;
        without this lookup it would list every tool for every call.
        """
        return self.listing(self.location.prepare().definitions).schemas.get(name)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Server[Run]) -> AsyncIterator[Run]:
        bus = InMemorySubscriptionBus()
        run = Run(f"mcp-{uuid.uuid4().hex}", bus, ListenHandler(bus))
        raised: BaseException | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._announce_changes, run)
            try:
                yield run
            except BaseException as error:  # noqa: BLE001 - re-raised below, unwrapped
                raised = error
            finally:
                run.listen.close()
                tasks.cancel_scope.cancel()
        if raised is not None:
            raise raised

    async def _announce_changes(self, run: Run) -> None:
        """Tell clients when the advertised tools change, until the Location closes."""
        if self.location.closed:
            return
        async with self.location.watch() as changes:
            last = self.location.prepare().definitions
            async for _ in changes:
                current = self.location.prepare().definitions
                if current == last:
                    continue
                last = current
                await run.bus.publish(ToolsListChanged())
                for key, session in list(run.sessions.items()):
                    delivered = False
                    # A client that has gone, or stopped reading, is forgotten.
                    with anyio.move_on_after(NOTIFY_TIMEOUT):
                        try:
                            await session.send_tool_list_changed()
                            delivered = True
                        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                            pass
                    if not delivered:
                        del run.sessions[key]

    async def _initialized(
        self, context: ServerRequestContext[Run], params: types.NotificationParams
    ) -> None:
        context.lifespan_context.remember(context)

    @guarded
    async def _listen(
        self, context: ServerRequestContext[Run], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await context.lifespan_context.listen(context, params)

    @guarded
    async def _list_tools(
        self, context: ServerRequestContext[Run], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # A client that has listed the tools is told when they change.
        context.lifespan_context.remember(context)
        return types.ListToolsResult(tools=self.listing(self.location.prepare().definitions).tools)

    @guarded
    async def _call_tool(
        self, context: ServerRequestContext[Run], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        request = self.location.prepare()
        channel = Channel(
            context, params, least=context.lifespan_context.log_levels.get(_client_key(context), 0)
        )
        call = ToolCall(
            params.name,
            params.arguments or {},
            ToolContext(
                session_id=_session_id(context),
                agent=_agent(context),
                message_id=channel.call_id,
                call_id=channel.call_id,
                progress=channel.progress,
                log=channel.log,
            ),
        )
        token = current_channel.set(channel)
        # This call's questions are its client's alone: never shared with another's.
        asking = asker.set(channel)
        try:
            with continued(params.meta):
                outcome = await request.execute(call)
        except InputNeeded as needed:
            return channel.input_required(needed)
        except BaseExceptionGroup as group:
            # A question asked from a task the tool started arrives grouped.
            questions, rest = group.split(InputNeeded)
            if questions is None or rest is not None:
                raise
            return channel.input_required(_first(questions))
        except PermissionRejected as error:
            # A refusal is the model's to read and work around, as a tool result;
            # the pipeline left it unsettled so that a host could stop the run.
            text = self.location.redact(str(error))
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        except RetentionError as error:
            # The call could not settle: an error response, not a tool result,
            # and the cause (paths, system errors) for the operator alone.
            logger.error("tools/call %s: output not retained", params.name, exc_info=error)
            raise MCPError(
                types.INTERNAL_ERROR,
                "the call ran, but the server could not keep its output; the server's log says why",
            ) from None
        except PluginError as error:
            logger.error("tools/call %s: %s", params.name, error, exc_info=error)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"plugin {error.plugin!r} failed ({error.phase}) on the server; "
                "the server's log says why",
            ) from None
        finally:
            asker.reset(asking)
            current_channel.reset(token)
        wrapped = params.name in self.listing(request.definitions).wrapped
        result = call_result(outcome, wrapped=wrapped)
        # The file a preview names, as a link the client can read (resources/read).
        result.content.extend(self._resources.note(outcome))
        return result

    @guarded
    async def _set_level(
        self, context: ServerRequestContext[Run], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        context.lifespan_context.set_log_level(_client_key(context), params.level)
        return types.EmptyResult()

    @guarded
    async def _list_resources(
        self, context: ServerRequestContext[Run], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return self._resources.listing()

    @guarded
    async def _read_resource(
        self, context: ServerRequestContext[Run], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._resources.read(str(params.uri))


def _first(group: BaseExceptionGroup[InputNeeded]) -> InputNeeded:
    first = group.exceptions[0]
    return first if isinstance(first, InputNeeded) else _first(first)


def _session_id(context: ServerRequestContext[Run]) -> str:
    headers = getattr(context.request, "headers", None)
    if headers is not None:
        session = headers.get("mcp-session-id")
        if isinstance(session, str) and session:
            return session_of(session)
    return context.lifespan_context.session_id


def _client_key(context: ServerRequestContext[Run]) -> str:
    """Whose ``logging/setLevel`` applies: the HTTP session's, or this connection's."""
    headers = getattr(context.request, "headers", None)
    if headers is not None:
        session = headers.get("mcp-session-id")
        if isinstance(session, str) and session:
            return session_of(session)
    return f"connection-{id(context.session.client_params)}"


def _agent(context: ServerRequestContext[Run]) -> str:
    params = context.session.client_params
    return params.client_info.name if params is not None else "mcp-client"


def build_server(location: Location, *, name: str = "pegboard") -> LocationServer:
    """An MCP server for ``location``, ready for any transport.

    Pass it to ``mcp.Client(server)`` to talk to it in memory, or use
    `serve` to run it over stdio or HTTP.
    """
    return LocationServer(location, name=name)
