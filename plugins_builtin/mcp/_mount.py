"""One mounted MCP server: its connection, its tools, and their calls."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import pegboard
from pegboard.mcp import from_mcp_annotations, from_mcp_content

from ._config import ServerConfig

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
    ) -> None:
        self.config = config
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
                        listing = await client.list_tools()
                    self._register(listing.tools)
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
            "elicitation_callback": self._elicit,
            "cache": None,  # listings are re-read on every change anyway
            "client_info": _client_info(),
            "read_timeout_seconds": self.config.request_timeout,
        }
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

    async def _elicit(
        self, context: object, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        """A server asks the user: a plain confirmation goes to the host's permission
        service (action ``mcp.<server>.elicit``); a form or a URL is declined, as
        pegboard has no way to fill one in.
        """
        message = params.message
        schema = getattr(params, "requested_schema", None)
        if schema is None or schema.get("properties"):
            logger.warning(
                "server %r asked the user to %s (%r); declined: pegboard answers only "
                "confirmations from mounted servers",
                self.name,
                "open a URL" if schema is None else "fill in a form",
                message,
            )
            return types.ElicitResult(action="decline")
        try:
            await self._permissions.ask(
                pegboard.PermissionRequest(
                    action=f"mcp.{self.name}.elicit",
                    resources=[message],
                    metadata={"server": self.name, "message": message},
                )
            )
        except (pegboard.ToolFailure, pegboard.PermissionRejected) as refusal:
            # The server hears only "decline": the reason is for the host's operator.
            logger.warning("server %r asked %r; declined: %s", self.name, message, refusal)
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={})

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
                    listing = await client.list_tools()
                self._register(listing.tools)

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

    def _register(self, listed: list[types.Tool]) -> None:
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
            if problem is None and _requires_tasks(listed_tool):
                # Such a tool answers a plain call with an error: advertising it
                # would offer the model a tool that always fails.
                problem = (
                    "it requires task-augmented calls (execution.taskSupport: required), "
                    "which pegboard does not make"
                )
            if problem is None:
                try:
                    made[listed_tool.name] = self._tool(listed_tool)
                except (pegboard.SchemaError, ValueError) as error:
                    problem = str(error)
            if problem is not None:
                self._report(f"tool {listed_tool.name!r} is not mounted: {problem}")
                continue
            effective[name] = listed_tool.name
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

    def _tool(self, listed: types.Tool) -> pegboard.Tool:
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
            input=listed.input_schema,
            output=output,
            title=title if title and title.strip() else None,
            annotations=from_mcp_annotations(listed.annotations),
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

        try:
            result = await client.call_tool(
                tool,
                arguments,
                read_timeout_seconds=self.config.request_timeout,
                progress_callback=forward,
                # The server continues this call's trace, where there is one.
                meta=pegboard.trace_context() or None,  # type: ignore[arg-type]
            )
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
        if result.is_error:
            await self._keep_error_content(result, context)
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
            text = "\n".join(
                block.text for block in result.content if isinstance(block, types.TextContent)
            )
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


def _requires_tasks(listed: types.Tool) -> bool:
    return listed.execution is not None and listed.execution.task_support == "required"


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


def _why(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.error.message
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        return _why(error.exceptions[0])
    if isinstance(error, TimeoutError):
        return "timed out"
    return f"{type(error).__name__}: {error}"
