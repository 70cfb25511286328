"""Calls a served Location runs as tasks: the 2025-11-25 core tasks (``params.task``,
``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel``) and the 2026-07-28
tasks extension (``resultType: "task"``, ``tasks/get``, ``tasks/update``, ``tasks/cancel``).

A task lives in the memory of the process that runs it. Its ID names that process
(a random replica marker) and 192 random bits; it is answered only to the client
that created it, for at most its time to live.
"""

from __future__ import annotations

import datetime
import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._sessions import session_of

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from mcp.server.context import ServerRequestContext

__all__ = (
    "DIRECT_WINDOW",
    "EXTENSION",
    "MAX_KEPT_TASKS",
    "MAX_LIVE_TASKS",
    "MAX_TTL_MS",
    "ServedTask",
    "TaskStore",
    "declares_extension",
    "task_owner",
)

logger = logging.getLogger("pegboard.mcp")

#: The tasks extension of the 2026-07-28 protocol.
EXTENSION = "io.modelcontextprotocol/tasks"
#: Where a 2026-07-28 request carries its client's capabilities.
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
#: Where a 2025-11-25 task's messages name their task.
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: Tasks one server process runs at once; a client asking for more is refused.
MAX_LIVE_TASKS = 64
#: Ended tasks one server process keeps for their clients (oldest dropped first).
MAX_KEPT_TASKS = 1024
#: A task's time to live when its client names none, and the most it may name (ms).
DEFAULT_TTL_MS = 300_000
MAX_TTL_MS = 3_600_000
#: Seconds a task whose call outlived its time to live is kept, failed.
OUTLIVED_GRACE = 60.0
#: How often clients are asked to poll, in milliseconds.
POLL_INTERVAL_MS = 200
#: Seconds a call may take and still be answered as a plain result (2026-07-28)
#: or as a task that has already ended (2025-11-25).
DIRECT_WINDOW = 1.0
#: The statuses a task ends in.
_ENDED = ("completed", "failed", "cancelled")

#: Each connection that is not HTTP (stdio, in memory): a name of its own.
_CONNECTIONS: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def declares_extension(meta: Mapping[str, Any] | None) -> bool:
    """Whether a 2026-07-28 request's ``_meta`` declares the tasks extension."""
    if not isinstance(meta, Mapping):
        return False
    capabilities = meta.get(CLIENT_CAPABILITIES)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def task_owner(context: ServerRequestContext[Any, Any]) -> str:
    """Who a task belongs to, as far as the protocol lets the server tell clients apart.

    Over HTTP: a handshake-era client's (signed) session; on 2026-07-28, an OAuth
    client's ID, or else every holder of the server's bearer token, which is one
    principal. Over stdio or in memory: the connection.
    """
    headers = getattr(context.request, "headers", None)
    if headers is not None:
        session = headers.get("mcp-session-id")
        if isinstance(session, str) and session:
            return "session:" + session_of(session)
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        return "http" if token is None else "oauth:" + token.client_id
    # A 2026-07-28 stream makes a connection object per request, all sharing
    # the stream's outbound channel: that channel is the client.
    connection = getattr(context.session, "_connection", None)
    channel = getattr(connection, "outbound", connection)
    if channel is None:
        return "connection"
    try:
        name = _CONNECTIONS.get(channel)
        if name is None:
            name = _CONNECTIONS[channel] = "connection:" + secrets.token_hex(16)
    except TypeError:  # not weakly referable: its identity, for as long as it lives
        return f"connection:{id(channel)}"
    return name


@attrs.define(eq=False)
class ServedTask:
    """One call run as a task, and what its client may read of it."""

    task_id: str
    owner: str
    tool: str
    ttl_ms: int
    created_at: str = attrs.field(factory=_now)
    last_updated_at: str = attrs.field(factory=_now)
    status: str = "working"
    status_message: str | None = None
    #: The call's result (a ``CallToolResult`` as JSON) once it completed.
    result: dict[str, Any] | None = None
    #: The JSON-RPC error the call ended with, once it failed.
    error: types.ErrorData | None = None
    #: What the call answered: its result, or (answered directly) a question.
    answer: Any = None
    #: Whether the client holds this task's ID: from then on it is a task.
    handed_out: bool = False
    cancel_requested: bool = False
    scope: anyio.CancelScope = attrs.field(factory=anyio.CancelScope)
    done: anyio.Event = attrs.field(factory=anyio.Event)

    @property
    def ended(self) -> bool:
        return self.status in _ENDED

    def update(self, status: str, message: str | None = None) -> None:
        self.status = status
        if message is not None:
            self.status_message = message
        self.last_updated_at = _now()

    def core(self) -> types.Task:
        """The task as the 2025-11-25 protocol shows it."""
        return types.Task(
            task_id=self.task_id,
            status=self.status,  # type: ignore[arg-type]  # one of TaskStatus
            status_message=self.status_message,
            created_at=self.created_at,
            last_updated_at=self.last_updated_at,
            ttl=self.ttl_ms,
            poll_interval=POLL_INTERVAL_MS,
        )

    def core_json(self) -> dict[str, Any]:
        """`core` as the JSON a 2025-11-25 response carries."""
        shown: dict[str, Any] = self.core().model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        return shown

    def detailed(self) -> dict[str, Any]:
        """The task as the 2026-07-28 tasks extension shows it, its end inlined."""
        shown: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status_message is not None:
            shown["statusMessage"] = self.status_message
        if self.status == "completed":
            shown["result"] = self.result
        if self.status == "failed" and self.error is not None:
            shown["error"] = self.error.model_dump(mode="json", exclude_none=True)
        return shown


#: Runs a task's call: its result, an interim answer, or an `MCPError`.
Work = Callable[[ServedTask], Awaitable[Any]]


class TaskStore:
    """The tasks one server process runs and keeps, bounded in number and time."""

    def __init__(
        self,
        group: TaskGroup,
        *,
        max_live: int = MAX_LIVE_TASKS,
        max_kept: int = MAX_KEPT_TASKS,
    ) -> None:
        self._group = group
        self.max_live = max_live
        self.max_kept = max_kept
        #: This process's mark on the IDs of the tasks it runs.
        self.replica = secrets.token_hex(6)
        self._tasks: dict[str, ServedTask] = {}
        #: When each task is dropped, on anyio's clock.
        self._expiry: dict[str, float] = {}
        self.live = 0

    def __len__(self) -> int:
        return len(self._tasks)

    def full(self) -> bool:
        return self.live >= self.max_live

    def start(self, owner: str, tool: str, ttl_ms: int | None, work: Work) -> ServedTask:
        """Start ``work`` as a new task of ``owner``'s; the caller checked `full` first."""
        self._sweep()
        ttl = DEFAULT_TTL_MS if ttl_ms is None or ttl_ms <= 0 else min(ttl_ms, MAX_TTL_MS)
        task_id = f"{self.replica}-{secrets.token_urlsafe(24)}"
        task = ServedTask(task_id, owner, tool, ttl)
        self._tasks[task_id] = task
        self._expiry[task_id] = anyio.current_time() + ttl / 1000
        # A call still running when its time to live ends is stopped.
        task.scope.deadline = self._expiry[task_id]
        self.live += 1
        self._group.start_soon(self._run, task, work)
        return task

    async def _run(self, task: ServedTask, work: Work) -> None:
        try:
            with task.scope:
                try:
                    answer = await work(task)
                except MCPError as error:
                    task.error = error.error
                    task.update("failed", error.message)
                except Exception as error:
                    logger.error("task for %s failed", task.tool, exc_info=error)
                    from ._server import DEFECT_MESSAGE

                    task.error = types.ErrorData(code=types.INTERNAL_ERROR, message=DEFECT_MESSAGE)
                    task.update("failed", DEFECT_MESSAGE)
                else:
                    task.answer = answer
                    if isinstance(answer, types.CallToolResult):
                        task.result = answer.model_dump(
                            mode="json", by_alias=True, exclude_none=True
                        )
                        task.update("completed")
                    elif task.handed_out:
                        message = "the call asked a question its task cannot carry"
                        task.error = types.ErrorData(code=types.INTERNAL_ERROR, message=message)
                        task.update("failed", message)
                    else:
                        task.update("completed")  # a question, answered directly
            if not task.ended:
                if task.cancel_requested:
                    task.update("cancelled", "cancelled by its client (tasks/cancel)")
                else:
                    message = f"the call outlived its task's time to live ({task.ttl_ms} ms)"
                    task.error = types.ErrorData(code=types.INTERNAL_ERROR, message=message)
                    task.update("failed", message)
                    # Kept a little longer, so that its client can learn why.
                    self._expiry[task.task_id] = anyio.current_time() + OUTLIVED_GRACE
        finally:
            self.live -= 1
            task.done.set()

    def find(self, task_id: str, owner: str) -> ServedTask:
        """``owner``'s task ``task_id``, or the protocol's error saying why there is none.

        Another client's task is answered as one that does not exist.
        """
        self._sweep()
        task = self._tasks.get(task_id)
        if task is not None and task.owner == owner and task.handed_out:
            return task
        replica, _, rest = task_id.partition("-")
        if rest and replica != self.replica and len(replica) == len(self.replica):
            raise MCPError(
                types.INVALID_PARAMS,
                f"task {task_id!r} is not held by this replica: tasks need requests routed to "
                "the replica that created them (a task lives in the memory of the server "
                "process that runs it; route tasks/* requests by their Mcp-Name header or "
                "keep a client's requests on one replica)",
            )
        raise MCPError(
            types.INVALID_PARAMS,
            f"Failed to retrieve task: task {task_id!r} not found (it never existed here, "
            "belongs to another client, or outlived its time to live)",
        )

    def owned(self, owner: str) -> list[ServedTask]:
        self._sweep()
        return [t for t in self._tasks.values() if t.owner == owner and t.handed_out]

    def cancel(self, task: ServedTask) -> None:
        """Stop ``task``'s call; it ends ``cancelled`` unless it has ended already."""
        if not task.ended:
            task.cancel_requested = True
            task.scope.cancel()

    def forget(self, task: ServedTask) -> None:
        """Drop a task its client was never told about (answered directly)."""
        self._tasks.pop(task.task_id, None)
        self._expiry.pop(task.task_id, None)

    def _sweep(self) -> None:
        """Drop ended tasks past their time to live, and the oldest beyond the bound."""
        now = anyio.current_time()
        for task_id, expiry in list(self._expiry.items()):
            if expiry <= now and self._tasks[task_id].ended:
                self.forget(self._tasks[task_id])
        if len(self._tasks) > self.max_kept:
            for task in [t for t in self._tasks.values() if t.ended]:
                self.forget(task)
                if len(self._tasks) <= self.max_kept:
                    break


def modern(context: ServerRequestContext[Any, Any]) -> bool:
    return context.protocol_version in MODERN_PROTOCOL_VERSIONS
