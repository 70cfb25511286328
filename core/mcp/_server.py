"""An MCP server for one Location: its tools, their calls, and list changes."""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib.metadata
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import attrs
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, ValidationError

from .._errors import RetentionError
from .._json import thaw
from .._location import Location
from .._outcome import ToolCall
from .._permissions import PermissionRejected, asker
from .._plugins import PluginError
from .._tool import LOG_LEVELS, Progress, ToolContext, ToolDefinition, ToolLog
from .._tracing import continued
from ._annotations import to_mcp_annotations
from ._approver import InputNeeded, current_channel, suggested_rules
from ._call import Channel, call_result
from ._resources import ManagedResources
from ._sessions import session_of
from ._tasks import (
    DIRECT_WINDOW,
    EXTENSION,
    MAX_TTL_MS,
    RELATED_TASK,
    ServedTask,
    TaskStore,
    declares_extension,
    task_owner,
)

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
    #: The calls this run runs as tasks (set when the run starts).
    tasks: TaskStore | None = None

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
    def of(
        cls, definitions: tuple[ToolDefinition, ...], redact: Callable[[str], str] = str
    ) -> Listing:
        """The listing of ``definitions``, every text in them passed through ``redact``:
        a definition from a mounted server, say, may hold a host's secret."""
        tools, wrapped = [], set()
        for definition in definitions:
            output = None
            if definition.output_schema is not None:
                output = _redacted(thaw(definition.output_schema), redact)
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
                    title=None if definition.title is None else redact(definition.title),
                    description=redact(definition.description),
                    input_schema=_redacted(thaw(definition.input_schema), redact),
                    output_schema=output,
                    annotations=to_mcp_annotations(definition.annotations),
                    # Any call can run as a task, and none has to.
                    execution=types.ToolExecution(task_support="optional"),
                )
            )
        schemas = {tool.name: tool.input_schema for tool in tools}
        return cls(definitions, tools, frozenset(wrapped), schemas)


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """Plain JSON with every string in it, keys too, passed through ``redact``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(key): _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    return value


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
            # A call may be answered with a task (a dict of the tasks extension).
            on_call_tool=self._call_tool,  # type: ignore[arg-type]
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
        # Tasks: the 2025-11-25 core methods and the 2026-07-28 extension's.
        self.extensions[EXTENSION] = {}
        self.middleware.append(self._create_core_task)
        for method, handler in (
            ("tasks/get", self._get_task),
            ("tasks/result", self._task_result),
            ("tasks/list", self._list_tasks),
            ("tasks/cancel", self._cancel_task),
            ("tasks/update", self._update_task),
        ):
            self.add_request_handler(method, _TaskParams, handler)

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

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if protocol_version in MODERN_PROTOCOL_VERSIONS:
            return capabilities  # the tasks extension, under extensions
        # Handshake-era clients may ask any tools/call to run as a task.
        tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(),
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )
        return capabilities.model_copy(update={"tasks": tasks})

    def listing(self, definitions: tuple[ToolDefinition, ...]) -> Listing:
        """The MCP tools for ``definitions``, rebuilt only when they change."""
        listing = self._listing
        if listing.definitions is not definitions and listing.definitions != definitions:
            listing = self._listing = Listing.of(definitions, self.location.redact)
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
            run.tasks = TaskStore(tasks)
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
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        store = context.lifespan_context.tasks
        raw = context.params if isinstance(context.params, Mapping) else {}
        if (
            store is not None
            and context.protocol_version in MODERN_PROTOCOL_VERSIONS
            and declares_extension(raw.get("_meta"))
            and not store.full()
        ):
            # The tasks extension lets the server choose: a call that ends soon is
            # answered as usual, one that runs on becomes a task.
            # The extension names no time to live: the longest pegboard keeps.
            task = await self._start_task(context, params, MAX_TTL_MS)
            if not task.ended:
                task.handed_out = True
                return {"resultType": "task", **task.detailed()}
            store.forget(task)
            answer: types.CallToolResult | types.InputRequiredResult = _answer(task)
            return answer
        least = context.lifespan_context.log_levels.get(_client_key(context), 0)
        return await self._execute(context, params, Channel(context, params, least=least))

    async def _execute(
        self,
        context: ServerRequestContext[Run],
        params: types.CallToolRequestParams,
        channel: Channel,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run one call through the Location's pipeline: its result, or the protocol's error."""
        request = self.location.prepare()
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

    async def _start_task(
        self,
        context: ServerRequestContext[Run],
        params: types.CallToolRequestParams,
        ttl_ms: int | None,
    ) -> ServedTask:
        """Start a call as a task, and wait a moment for it to end."""
        store = context.lifespan_context.tasks
        assert store is not None, "the server is not running"
        least = context.lifespan_context.log_levels.get(_client_key(context), 0)

        async def work(task: ServedTask) -> types.CallToolResult | types.InputRequiredResult:
            channel = TaskChannel(context, params, task, least=least)
            return await self._execute(context, params, channel)

        task = store.start(task_owner(context), params.name, ttl_ms, work)
        try:
            with anyio.move_on_after(DIRECT_WINDOW):
                await task.done.wait()
        except BaseException:
            # The request ended before its client learnt the task: nobody can reach it.
            store.cancel(task)
            store.forget(task)
            raise
        return task

    async def _create_core_task(
        self, ctx: ServerRequestContext[Run, Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: a handshake-era ``tools/call`` with ``task`` creates a task.

        Its ``CreateTaskResult`` is no ``CallToolResult``, which the SDK checks
        ``tools/call`` results against on these protocol versions.
        """
        raw = ctx.params
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            or not isinstance(raw, Mapping)
            or raw.get("task") is None
            # Before the handshake, the SDK's own answer.
            or ctx.session.client_params is None
        ):
            return await call_next(ctx)
        return await self._create_task(ctx, raw)

    @guarded
    async def _create_task(
        self, context: ServerRequestContext[Run], raw: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            params = types.CallToolRequestParams.model_validate(raw, by_name=False)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in error.errors()
            )
            raise MCPError(
                types.INVALID_PARAMS, f"tools/call params are invalid: {problems}"
            ) from None
        store = _store(context)
        if store.full():
            raise MCPError(
                types.INVALID_REQUEST,
                f"this server already runs {store.max_live} tasks, its limit: wait for one "
                "to end or cancel one (tasks/cancel), then ask again, or call without a task",
            )
        task = await self._start_task(context, params, params.task.ttl if params.task else None)
        task.handed_out = True
        return {"task": task.core_json()}

    @guarded
    async def _get_task(
        self, context: ServerRequestContext[Run], params: _TaskParams
    ) -> dict[str, Any]:
        task = _find(context, params)
        if context.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return task.detailed()
        return task.core_json()

    @guarded
    async def _task_result(
        self, context: ServerRequestContext[Run], params: _TaskParams
    ) -> types.CallToolResult:
        _era(context, modern=False)
        task = _find(context, params)
        # Answered once the call has ended (its time to live bounds the wait).
        await task.done.wait()
        if task.status == "cancelled":
            raise MCPError(
                types.INVALID_PARAMS, f"task {task.task_id!r} was cancelled: it has no result"
            )
        answer = _answer(task)
        if not isinstance(answer, types.CallToolResult):
            raise MCPError(types.INTERNAL_ERROR, "the task ended without a tool result")
        meta = dict(answer.meta or {})
        meta[RELATED_TASK] = {"taskId": task.task_id}
        return answer.model_copy(update={"meta": meta})

    @guarded
    async def _list_tasks(
        self, context: ServerRequestContext[Run], params: _TaskParams
    ) -> types.ListTasksResult:
        _era(context, modern=False)
        return types.ListTasksResult(
            tasks=[task.core() for task in _store(context).owned(task_owner(context))]
        )

    @guarded
    async def _cancel_task(
        self, context: ServerRequestContext[Run], params: _TaskParams
    ) -> dict[str, Any]:
        task = _find(context, params)
        modern = context.protocol_version in MODERN_PROTOCOL_VERSIONS
        if task.ended:
            if modern:
                return {}  # cancellation is a wish: an ended task stays as it ended
            raise MCPError(
                types.INVALID_PARAMS,
                f"task {task.task_id!r} has already ended ({task.status}): it cannot be cancelled",
            )
        _store(context).cancel(task)
        # Answered once the call has stopped, with any process it started.
        with anyio.move_on_after(CANCEL_WAIT):
            await task.done.wait()
        if modern:
            return {}
        return task.core_json()

    @guarded
    async def _update_task(
        self, context: ServerRequestContext[Run], params: _TaskParams
    ) -> types.EmptyResult:
        _era(context, modern=True)
        _find(context, params)
        # pegboard's tasks never wait for input: every response is to no question.
        return types.EmptyResult()

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


#: Seconds ``tasks/cancel`` waits for the call to stop before it answers.
CANCEL_WAIT = 10.0


class _TaskParams(types.RequestParams):
    """``tasks/*`` parameters: the task, and whatever else the method carries."""

    model_config = ConfigDict(extra="allow")
    task_id: str | None = None


class TaskChannel(Channel):
    """A call's way back to its client while it runs as a task.

    Progress becomes the task's status message (and a notification while the
    call's request is open). Once the client holds the
    task's ID the call's request is over: log messages have no stream left,
    and a question has no one to ask, so the call is refused what needs one.
    """

    __slots__ = ("task",)

    def __init__(
        self,
        context: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        task: ServedTask,
        *,
        least: int = 0,
    ) -> None:
        super().__init__(context, params, least=least)
        self.task = task

    async def progress(self, update: Progress) -> None:
        if not self.task.handed_out:
            await super().progress(update)  # its request is still open
        said = update.message
        if said is None and update.current is not None:
            said = f"{update.current:g}" + (f" of {update.total:g}" if update.total else "")
        if said is not None:
            self.task.update(self.task.status, said)

    async def log(self, entry: ToolLog) -> None:
        if not self.task.handed_out:
            await super().log(entry)

    async def elicit(self, request: Any) -> Any:
        if self.task.handed_out:
            raise PermissionRejected(
                f"{request.action} on {', '.join(request.resources)} needs approval, and a "
                "call that runs as a task cannot ask its client; call the tool without a "
                f"task, or the operator can allow it with {suggested_rules(request)}",
                request=request,
            )
        return await super().elicit(request)


def _store(context: ServerRequestContext[Run]) -> TaskStore:
    store = context.lifespan_context.tasks
    if store is None:
        raise MCPError(types.INTERNAL_ERROR, "the server is not running")
    return store


def _era(context: ServerRequestContext[Run], *, modern: bool) -> None:
    """Refuse a tasks method that the request's protocol version does not have."""
    if (context.protocol_version in MODERN_PROTOCOL_VERSIONS) != modern:
        raise MCPError(
            types.METHOD_NOT_FOUND,
            f"{context.method} is not a method of protocol {context.protocol_version}",
        )


def _find(context: ServerRequestContext[Run], params: _TaskParams) -> ServedTask:
    """The task a ``tasks/*`` request names, if it is its client's."""
    if context.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raw = context.params if isinstance(context.params, Mapping) else {}
        if not declares_extension(raw.get("_meta")):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{context.method} needs the client to declare the {EXTENSION} extension "
                "in the request's _meta",
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
    if not params.task_id:
        raise MCPError(types.INVALID_PARAMS, f"{context.method} needs params.taskId")
    return _store(context).find(params.task_id, task_owner(context))


def _answer(task: ServedTask) -> Any:
    """What a direct call would have answered: the result, a question, or the error."""
    if task.error is not None:
        raise MCPError.from_error_data(task.error)
    return task.answer


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
