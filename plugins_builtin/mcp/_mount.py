"""One mounted MCP server: its connection, its tools, and their calls."""

from __future__ import annotations

import contextlib
import contextvars
import importlib.metadata
import json
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.lowlevel
import attrs
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import pegboard
from pegboard.mcp import from_mcp_annotations, from_mcp_content

from ._config import ServerConfig
from ._listing import ServerInput, read_listing
from ._tasks import TaskHandle, TasksExtension, elicitation_of, follow_task, run_task, runs_as_task

if TYPE_CHECKING:
    import httpx2
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

__all__ = ("Mount",)

logger = logging.getLogger("pegboard")

#: The plugin's name, as its errors name it.
PLUGIN = "mcp"
#: ``_meta`` keys MCP itself owns; the rest is the tool's metadata.
_RESERVED_META = "io.modelcontextprotocol/"
#: How often a dropped list-change subscription is opened again.
_LISTEN_ATTEMPTS = 3
#: Where a server's log message goes when no single call of its own can take it.
_PYTHON_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_PAST = {"decline": "declined", "cancel": "cancelled"}
#: Where MCP marks a server's request as part of a task (2025-11-25).
_RELATED_TASK = "io.modelcontextprotocol/related-task"


@attrs.define(eq=False)
class Call:
    """One call in flight on a server: where its logs go, and what its user refused."""

    context: pegboard.ToolContext
    #: The server's task for this call, once it made one.
    task: str | None = None
    #: Each question of the server the user declined or cancelled during the call.
    refused: list[str] = attrs.Factory(list)


#: The call this task is making, for the task a 2026-07-28 server may answer it with.
_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar(
    "pegboard_mcp_call", default=None
)


def _client_info() -> types.Implementation:
    try:
        version = importlib.metadata.version("pegboard")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return types.Implementation(name="pegboard", version=version)


class Mount:
    """One configured MCP server, connected while its Location is open.

    `run` owns the connection in a background task: it connects, registers the
    server's tools under the server's name, re-registers them when the server
    says its list changed, and disconnects when `stop` is called.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        tools: pegboard.Tools,
        permissions: pegboard.Permissions,
        services: pegboard.Services,
        root: Path,
        elicit: pegboard.Elicit | None = None,
    ) -> None:
        self.config = config
        self._ask_user = elicit
        self._tools = tools
        self._permissions = permissions
        self._services = services
        self._root = root
        #: Set once the tools are registered, or the connection failed.
        self.ready = anyio.Event()
        #: Set once the connection is closed and the tools withdrawn.
        self.closed = anyio.Event()
        #: Why the server could not be mounted, once ``ready`` is set.
        self.error: str | None = None
        self._scope = anyio.CancelScope()
        self._client: Client | None = None
        self._registration: pegboard.Registration | None = None
        self._changed = anyio.Event()
        #: The last 401 or 403 a remote server answered with.
        self._refused: int | None = None
        #: The calls in flight, for the log messages and questions they cause.
        self._calls: list[Call] = []
        #: Each mounted tool as the server listed it: how a call of it is made.
        self._listed: dict[str, types.Tool] = {}

    @property
    def name(self) -> str:
        return self.config.name

    def stop(self) -> None:
        """Disconnect (or stop connecting) and withdraw the tools."""
        self._scope.cancel()

    async def run(self) -> None:
        """Connect, follow list changes until stopped, then disconnect."""
        try:
            with self._scope:
                async with self._connect() as client:
                    with anyio.fail_after(self.config.request_timeout):
                        await self._set_log_level(client)
                        listed, extras = await read_listing(client)
                    self._register(listed, extras)
                    self._client = client
                    self.ready.set()
                    await self._follow_changes(client)
        except Exception as error:  # noqa: BLE001 - a failing server must not fail the others
            if not self.ready.is_set():
                self.error = self._unauthorized(error) or _why(error)
            elif _closed(error):
                self._lost()
            else:
                self._report(f"disconnected: {_why(error)}; its tools are withdrawn")
        finally:
            self._client = None
            self._withdraw()
            self.ready.set()
            self.closed.set()

    def _lost(self) -> None:
        """The server went away: say so once, and withdraw its tools."""
        if not self._scope.cancel_called:
            self._report("exited or closed the connection; its tools are withdrawn")
            self.stop()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        options: dict[str, Any] = {
            "message_handler": self._message,
            "logging_callback": self._log,
            # 2026-07-28 servers log only for requests that ask, at this level or above.
            "log_level": self.config.log_level,
            "cache": None,  # listings are re-read on every change anyway
            "client_info": _client_info(),
            "read_timeout_seconds": self.config.request_timeout,
        }
        if self._ask_user is not None:
            # Offered only when the host can ask its user: a server that asks
            # anyway is told no such capability was declared.
            options["elicitation_callback"] = self._elicit
        # A 2026-07-28 server may answer any call with a task: follow it to its end.
        options["extensions"] = [TasksExtension(self._follow)]
        if self.config.url is None:
            command, *arguments = self.config.command
            parameters = StdioServerParameters(
                command=command,
                args=arguments,
                env=dict(self.config.environment) or None,
                cwd=self._root,
            )
            async with Client(parameters, **options) as client:
                yield client
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx2.Timeout(self.config.startup_timeout, read=self.config.request_timeout)

        async def remember(response: httpx2.Response) -> None:
            # The SDK turns an HTTP error into a generic JSON-RPC one: keep the status.
            if response.status_code in (401, 403):
                self._refused = response.status_code

        async with httpx2.AsyncClient(
            headers=dict(self.config.headers),
            timeout=timeout,
            event_hooks={"response": [remember]},
            auth=self._oauth(),
        ) as http:
            transport = streamable_http_client(self.config.url, http_client=http)
            async with Client(transport, **options) as client:
                yield client

    def _oauth(self) -> httpx2.Auth | None:
        """The SDK's OAuth client for the configured client credentials: it finds the
        authorization server through the server's protected-resource metadata, takes
        a token for the scopes the server names, and a new one when it expires.
        Tokens are kept in memory only.
        """
        oauth = self.config.oauth
        if oauth is None or self.config.url is None:
            return None
        from mcp.client.auth.extensions.client_credentials import (
            ClientCredentialsOAuthProvider,
        )

        return ClientCredentialsOAuthProvider(
            server_url=self.config.url,
            storage=_Tokens(),
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            issuer=oauth.issuer,
        )

    async def _set_log_level(self, client: Client) -> None:
        """Ask a handshake-era server that logs to send messages at the configured
        level and above (a 2026-07-28 server is asked on each request instead).
        """
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        if client.server_capabilities.logging is None:
            return
        level = self.config.log_level
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]
        try:
            await client.session.send_request(request, types.EmptyResult)
        except MCPError as error:
            logger.warning(
                "server %r refused logging/setLevel %s: %s", self.name, level, _why(error)
            )

    async def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A server's log message goes to the calling tool's ``context.log`` when one
        call of this server is in flight (MCP does not say which request a message
        belongs to); otherwise to the ``pegboard`` logger, never to another's call.
        """
        data = params.data
        if isinstance(data, str):
            message, data = data, None
        else:
            message = f"{params.logger or 'log'} (MCP server {self.name!r})"
        try:
            entry = pegboard.ToolLog(params.level, message, data)
        except ValueError as error:
            entry = pegboard.ToolLog(params.level, f"{message} [data left out: {error}]")
        calls = self._calls
        if len(calls) == 1:
            await calls[0].context.log(entry.level, entry.message, entry.data)
            return
        logger.log(
            _PYTHON_LEVELS.get(entry.level, logging.INFO),
            "server %r: %s%s",
            self.name,
            entry.message,
            "" if entry.data is None else f" {json.dumps(pegboard.thaw(entry.data))}",
        )

    async def _elicit(
        self, context: ClientRequestContext | None, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """A server asks the user: the host's ``elicit`` handler answers. A decline or
        a cancel is remembered, so the call that asked never reports success.
        """
        answer, refusal = await self._ask(params)
        if refusal is not None:
            self._refuse(params, refusal)
        return answer

    async def _ask(
        self, params: types.ElicitRequestParams
    ) -> tuple[types.ElicitResult | types.ErrorData, str | None]:
        """The host's answer to ``params``, and how it refused, if it did."""
        ask = self._ask_user
        assert ask is not None  # the capability is declared only with a handler
        source = f"MCP server {self.name!r}"
        if isinstance(params, types.ElicitRequestURLParams):
            question = pegboard.Elicitation(source=source, message=params.message, url=params.url)
        else:
            question = pegboard.Elicitation(
                source=source, message=params.message, schema=params.requested_schema
            )
        try:
            answer = await ask(question)
            if not isinstance(answer, pegboard.ElicitationAnswer):
                raise TypeError(
                    f"the host's elicit handler returned {type(answer).__name__}, "
                    "not a pegboard.ElicitationAnswer"
                )
            if answer.action == "accept" and question.schema is not None:
                pegboard.SchemaCodec(dict(question.schema)).decode(
                    pegboard.thaw(answer.content or {})
                )
        except Exception as error:  # noqa: BLE001 - the server hears an error, the log why
            logger.warning(
                "server %r asked %r; the host's answer failed: %s", self.name, params.message, error
            )
            failed = types.ErrorData(
                code=types.INTERNAL_ERROR, message="the user could not be asked"
            )
            # The reason is the host's, for its log: the model reads only that it failed.
            return failed, "could not be asked"
        if answer.action != "accept":
            return types.ElicitResult(
                action=answer.action
            ), f"was {_PAST[answer.action]} by the user"
        content = None if question.url is not None else pegboard.thaw(answer.content or {})
        return types.ElicitResult(action="accept", content=content), None

    async def _follow(self, handle: TaskHandle, claim: ClaimContext) -> types.CallToolResult:
        """Follow the task a 2026-07-28 server made for the call in flight in this task."""
        call = _CALL.get()
        if call is None:  # a task for a call this mount did not make
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} answered with a task no call of pegboard's made"
            )

        async def answer(server: str, request: Mapping[str, Any]) -> dict[str, Any]:
            try:
                params = elicitation_of(request)
            except ValueError as error:
                raise pegboard.ToolFailure(
                    f"the MCP server {server!r} asked during {claim.tool_name!r} for what "
                    f"pegboard cannot give: {error}; its task is cancelled"
                ) from None
            if self._ask_user is None:
                raise pegboard.ToolFailure(
                    f"the MCP server {server!r} asked the user during {claim.tool_name!r} "
                    f"({params.message!r}), and this host gives no way to ask; its task is "
                    "cancelled"
                )
            result, refusal = await self._ask(params)
            if refusal is not None:
                call.refused.append(f"its question {params.message!r} {refusal}")
            if isinstance(result, types.ErrorData):
                raise pegboard.ToolFailure(
                    f"the MCP server {server!r} asked the user during {claim.tool_name!r} "
                    f"({params.message!r}), and the question could not be asked; its task is "
                    "cancelled"
                )
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)

        return await follow_task(
            claim.session,
            self.name,
            claim.tool_name,
            handle,
            call,
            answer,
            within=self.config.request_timeout,
        )

    def _refuse(self, params: types.ElicitRequestParams, what: str) -> None:
        """Remember on the call that asked (every call in flight, when MCP does not say
        which) that its question was not answered.
        """
        related = (params.meta or {}).get(_RELATED_TASK)
        task = related.get("taskId") if isinstance(related, Mapping) else None
        calls = [call for call in self._calls if task is not None and call.task == task]
        for call in calls or self._calls:
            call.refused.append(f"its question {params.message!r} {what}")

    async def _message(self, message: IncomingMessage) -> None:
        # Handshake-era servers announce list changes on the connection.
        if isinstance(message, types.ToolListChangedNotification):
            self._changed.set()

    async def _follow_changes(self, client: Client) -> None:
        async with anyio.create_task_group() as tasks:
            capability = client.server_capabilities.tools
            modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            if modern and capability is not None and capability.list_changed:
                tasks.start_soon(self._listen, client)
            while True:
                await self._changed.wait()
                self._changed = anyio.Event()
                with anyio.fail_after(self.config.request_timeout):
                    listed, extras = await read_listing(client)
                self._register(listed, extras)

    async def _listen(self, client: Client) -> None:
        # 2026-07-28 servers announce list changes only on a subscription.
        for _attempt in range(_LISTEN_ATTEMPTS):
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for _event in subscription:
                        self._changed.set()
                return  # the server ended the subscription on purpose
            except SubscriptionLost:
                self._changed.set()  # changes may have been missed: read the list again
            except MCPError as error:
                if _closed(error):
                    self._lost()
                    return
                self._report(f"cannot follow its tool list: {_why(error)}")
                return
        self._report("its tool-list subscription keeps dropping; changes are no longer followed")

    def _register(self, listed: list[types.Tool], extras: Mapping[str, Mapping[str, Any]]) -> None:
        """Register ``listed``, then close the previous registration: no gap."""
        made: dict[str, pegboard.Tool] = {}
        effective: dict[str, str] = {}
        for listed_tool in listed:
            problem = None
            try:
                name = pegboard.effective_name(listed_tool.name, self.name)
            except pegboard.RegistrationError as error:
                problem = str(error)
            else:
                if name in effective:
                    problem = f"its name becomes {name!r}, as {effective[name]!r} does"
            if problem is None:
                try:
                    made[listed_tool.name] = self._tool(listed_tool, extras.get(listed_tool.name))
                except (pegboard.SchemaError, ValueError, TypeError) as error:
                    problem = str(error)
            if problem is not None:
                self._report(f"tool {listed_tool.name!r} is not mounted: {problem}")
                continue
            effective[name] = listed_tool.name
        self._listed = {tool.name: tool for tool in listed if tool.name in made}
        previous, self._registration = (
            self._registration,
            self._tools.register(made, namespace=self.name),
        )
        if previous is not None:
            previous.close()

    def _withdraw(self) -> None:
        registration, self._registration = self._registration, None
        if registration is not None:
            registration.close()

    def _tool(self, listed: types.Tool, extra: Mapping[str, Any] | None) -> pegboard.Tool:
        description = (listed.description or "").strip() or (
            f"{listed.title or listed.name} (a tool of the MCP server {self.name!r})"
        )
        output = listed.output_schema

        async def execute(input: Mapping[str, Any], context: pegboard.ToolContext) -> Any:
            return await self.call(listed.name, dict(input), context, has_output=output is not None)

        title = listed.title or (listed.annotations.title if listed.annotations else None)
        return pegboard.tool(
            description=description,
            execute=execute,
            input=ServerInput(listed.input_schema),
            output=output,
            title=title if title and title.strip() else None,
            annotations=from_mcp_annotations(listed.annotations),
            extra=extra,
        )

    async def call(
        self,
        tool: str,
        arguments: dict[str, Any],
        context: pegboard.ToolContext,
        *,
        has_output: bool,
    ) -> pegboard.ToolResponse[Any]:
        """Forward one call: ask permission, call, and map the result back."""
        action = f"mcp.{self.name}.{tool}"  # no colon: rules split ACTION:RESOURCE there
        await self._permissions.ask(
            pegboard.PermissionRequest(
                action=action,
                resources=[json.dumps(arguments, sort_keys=True, ensure_ascii=False)],
                always=["*"],
                metadata={"server": self.name, "tool": tool, "arguments": arguments},
            )
        )
        client = self._client
        if client is None:
            raise self._gone(tool)

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            update = pegboard.Progress(message=message, current=progress, total=total)
            await context.progress(update)

        call = Call(context)
        self._calls.append(call)
        try:
            listed = self._listed.get(tool)
            if listed is not None and runs_as_task(client, listed):
                result = await run_task(
                    client, self.name, tool, arguments, call, within=self.config.request_timeout
                )
            else:
                token = _CALL.set(call)
                try:
                    result = await client.call_tool(
                        tool,
                        arguments,
                        read_timeout_seconds=self.config.request_timeout,
                        progress_callback=forward,
                        # The server continues this call's trace, where there is one.
                        meta=pegboard.trace_context() or None,  # type: ignore[arg-type]
                    )
                finally:
                    _CALL.reset(token)
            # What the server sent before its answer (a last log message) is handled
            # in tasks of the SDK's own: let them reach this call first.
            await anyio.lowlevel.checkpoint()
        except MCPError as error:
            if _closed(error):
                self._lost()
                raise self._gone(tool) from error
            if error.error.code == types.REQUEST_TIMEOUT:
                raise pegboard.ToolFailure(
                    f"the MCP server {self.name!r} did not answer {tool!r} within "
                    f"{self.config.request_timeout:g} s"
                ) from None
            why = self._unauthorized(error) or error.error.message
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} refused the call to {tool!r}: {why}"
            ) from None
        except RuntimeError as error:
            # The SDK checks structured content against the tool's output schema.
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} returned invalid output from {tool!r}: {error}"
            ) from None
        except ValueError as error:  # the SDK's models refused the answer (pydantic's error)
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} answered {tool!r} with a result MCP does not "
                f"allow: {_refused(error)}"
            ) from None
        finally:
            self._calls.remove(call)
        if result.is_error:
            await self._keep_error_content(result, context)
        elif call.refused:
            # The server carried on without its answer; the model must not read
            # that as the user's consent.
            await self._keep_error_content(result, context)
            told = _text(result)
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} asked the user during {tool!r} and "
                f"{'; '.join(call.refused)}, so the call is not a success"
                + (f"; the server said: {told}" if told else "")
            )
        return self._response(tool, result, has_output=has_output)

    async def _keep_error_content(
        self, result: types.CallToolResult, context: pegboard.ToolContext
    ) -> None:
        """Keep what an error result shows besides its text (images, resources) as the
        failed call's partial content: the error message holds only text.
        """
        other = [block for block in result.content if not isinstance(block, types.TextContent)]
        if not other:
            return
        try:
            content = from_mcp_content(other)
        except ValueError as error:
            logger.warning("server %r: error content pegboard cannot read: %s", self.name, error)
            return
        await context.progress(pegboard.Progress(content=content))

    def _response(
        self, tool: str, result: types.CallToolResult, *, has_output: bool
    ) -> pegboard.ToolResponse[Any]:
        metadata = {
            key: value
            for key, value in (result.meta or {}).items()
            if not key.startswith(_RESERVED_META)
        } or None
        if result.is_error:
            text = _text(result)
            raise pegboard.ToolFailure(
                text or f"the MCP tool {tool!r} failed without saying why", metadata=metadata
            )
        try:
            content: tuple[pegboard.ContentItem, ...] = from_mcp_content(result.content)
        except ValueError as error:
            raise pegboard.ToolFailure(
                f"the MCP server {self.name!r} returned content pegboard cannot read: {error}"
            ) from None
        if not content and not has_output:
            content = (pegboard.Text(f"{tool} returned no content"),)
        return pegboard.ToolResponse(
            output=result.structured_content if has_output else None,
            content=content,
            metadata=metadata,
        )

    def _unauthorized(self, error: BaseException) -> str | None:
        """Why the server refused us, and what to set, if it did."""
        from mcp.client.auth import OAuthFlowError

        status, self._refused = self._refused, None
        table = f"[mcp.servers.{self.name}]"
        oauth = self.config.oauth
        flow = _find(error, OAuthFlowError)
        if oauth is not None and flow is not None:
            return (
                f"OAuth failed with the client credentials in {table} oauth "
                f"(issuer {oauth.issuer}): {flow}"
            )
        if status is None:
            return None
        reason = "401 Unauthorized" if status == 401 else "403 Forbidden"
        if oauth is not None:
            return f"it answered {reason} to the OAuth token taken with {table} oauth"
        if self.config.headers:
            return (
                f"it answered {reason}: it refused the credentials in {table} headers; "
                "check them and the environment variables they name"
            )
        return (
            f"it answered {reason}: give the credentials it expects in {table} headers, "
            'e.g. headers = { Authorization = "Bearer ${TOKEN_VARIABLE}" }, or, for an '
            "OAuth server, oauth = { client_id = ..., client_secret = ..., issuer = ... }"
        )

    def _gone(self, tool: str) -> pegboard.PluginError:
        return pegboard.PluginError(
            PLUGIN,
            "background",
            f"the MCP server {self.name!r} is not connected, so {tool!r} could not run",
        )

    def _report(self, problem: str) -> None:
        phase: Literal["activation", "background"] = (
            "background" if self.ready.is_set() else "activation"
        )
        self._services.report(f"server {self.name!r}: {problem}", phase=phase)


class _Tokens:
    """The SDK's token storage, in memory: a mount's tokens live as long as it does."""

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self._client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._client = client_info


def _text(result: types.CallToolResult) -> str:
    """A result's text blocks, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def _find(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``error`` or the first exception of ``kind`` in its groups and causes."""
    if isinstance(error, kind):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (found := _find(inner, kind)) is not None:
                return found
    cause = error.__cause__ or error.__context__
    return None if cause is None else _find(cause, kind)


def _closed(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _closed(error.exceptions[0])
    return isinstance(error, MCPError) and error.error.code == types.CONNECTION_CLOSED


def _refused(error: ValueError) -> str:
    """Where and why the SDK's models refused a message, in one line."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "the result"
        return f"{where}: {first.get('msg', error)}"
    return str(error).splitlines()[0]


def _why(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.error.message
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _why(error.exceptions[0])
    if isinstance(error, TimeoutError):
        return "timed out"
    return f"{type(error).__name__}: {error}"
