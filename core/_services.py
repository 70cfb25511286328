"""What a plugin sees of its Location: public information and a services view."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
import attrs

from ._plugins import PluginError

__all__ = ("BackgroundTasks", "LocationInfo", "ServiceDenied", "Services")

logger = logging.getLogger("pegboard")

#: Records a plugin failure on the Location (and raises it in strict mode).
Record = Callable[[PluginError, "BaseException | None"], None]


@attrs.frozen
class LocationInfo:
    """A Location's public information, as plugins receive it."""

    root: Path


class ServiceDenied(PermissionError):  # noqa: N818 - reads as what happened
    """A plugin asked for a trusted service the host did not trust it with."""


class BackgroundTasks:
    """Runs one plugin's background tasks, in a task group of the plugin's own.

    The tasks live for as long as the plugin is active in its Location: the
    host cancels them after every plugin's teardown has run (a plugin stops
    them gracefully in its teardown or lets the host cancel them), and at once
    if the plugin's activation fails. A task that raises is recorded in
    ``location.plugin_errors`` (phase ``background``) and leaves the Location
    and the other tasks running. ``start_soon`` may be called from the event
    loop or from the worker thread a plain (sync) activation hook runs in.
    """

    __slots__ = ("_done", "_group", "_plugin", "_record", "_stopped", "_thread")

    def __init__(self, plugin: str, record: Record) -> None:
        self._plugin = plugin
        self._record = record
        self._group: anyio.abc.TaskGroup | None = None
        self._done: anyio.Event | None = None
        self._stopped = False
        self._thread = threading.get_ident()

    async def _serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the plugin's task group until `stop` (or the Location's group) cancels it."""
        self._done = anyio.Event()
        try:
            async with anyio.create_task_group() as group:
                self._group = group
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._group = None
            self._stopped = True
            self._done.set()

    async def _open(self, location_tasks: anyio.abc.TaskGroup) -> None:
        self._thread = threading.get_ident()
        await location_tasks.start(self._serve)

    async def _stop(self) -> None:
        """Cancel every task the plugin started and wait until they have ended."""
        self._stopped = True
        if self._group is not None:
            self._group.cancel_scope.cancel()
        if self._done is not None:
            await self._done.wait()

    def start_soon(
        self, function: Callable[..., Awaitable[Any]], *args: object, name: object = None
    ) -> None:
        """Start ``await function(*args)`` in the plugin's task group."""
        group = self._group
        if group is None or self._stopped:
            raise RuntimeError(
                f"plugin {self._plugin!r} can start no background task: its tasks were "
                "stopped (its activation failed or its Location closed)"
            )
        label = str(name if name is not None else getattr(function, "__qualname__", function))
        task_name = f"{self._plugin}: {label}"
        if threading.get_ident() == self._thread:
            group.start_soon(self._guard, label, function, args, name=task_name)
        else:  # a sync activation hook, running in a worker thread
            anyio.from_thread.run_sync(
                functools.partial(group.start_soon, name=task_name),
                self._guard,
                label,
                function,
                args,
            )

    async def _guard(
        self, label: str, function: Callable[..., Awaitable[Any]], args: tuple[object, ...]
    ) -> None:
        try:
            await function(*args)
        except Exception as error:  # noqa: BLE001 - one plugin's task must not take the Location down
            message = f"background task {label!r} raised {type(error).__name__}: {error}"
            self._record(PluginError(self._plugin, "background", message), error)


#: The services only trusted plugins may use.
TRUSTED_SERVICES = ("elicit", "filesystem", "permissions", "sandbox", "storage")


class Services:
    """The Location's services as one plugin sees them.

    Trusted services are reachable only by plugins the host named in
    ``host.location(trusted=...)`` (and the built-in plugin); a Location's own
    config can never grant trust. An untrusted plugin's view is built without
    them: it holds no reference to a trusted service at all. Every plugin may
    start background ``tasks`` and ``report`` problems.
    """

    __slots__ = ("_available", "_plugin", "_record_error", "_tasks", "_trusted")

    def __init__(
        self,
        plugin: str,
        *,
        trusted: bool,
        available: Mapping[str, Any] | None = None,
        tasks: BackgroundTasks | None = None,
        record: Record | None = None,
    ) -> None:
        self._plugin = plugin
        self._trusted = trusted
        # Only what this plugin may use is kept: nothing else is reachable from here.
        self._available = {
            name: service
            for name, service in (available or {}).items()
            if trusted and name in TRUSTED_SERVICES
        }
        self._tasks = tasks
        self._record_error = record

    @property
    def trusted(self) -> bool:
        """Whether the host trusts this plugin with the trusted services."""
        return self._trusted

    @property
    def elicit(self) -> Any:
        """The host's elicitation handler (a `pegboard.Elicit`), or None when it gave none:
        asks the user what a plugin's back end wants to know.
        """
        return self._trusted_service("elicit")

    @property
    def filesystem(self) -> Any:
        """The trusted filesystem service, confined to the Location's root."""
        return self._trusted_service("filesystem")

    @property
    def permissions(self) -> Any:
        """The trusted permission service."""
        return self._trusted_service("permissions")

    @property
    def sandbox(self) -> Any:
        """The trusted sandbox service (a `pegboard.sandbox.Sandbox`): confines commands."""
        return self._trusted_service("sandbox")

    @property
    def storage(self) -> Any:
        """The trusted managed storage: this Location's own area (a `ManagedStorage`)."""
        return self._trusted_service("storage")

    @property
    def tasks(self) -> BackgroundTasks:
        """Background tasks that live as long as the plugin (see `BackgroundTasks`)."""
        if self._tasks is None:
            raise RuntimeError("background tasks are available only inside an open Location")
        return self._tasks

    def report(
        self, message: str, *, phase: Literal["activation", "background"] = "background"
    ) -> None:
        """Record a problem in ``location.plugin_errors`` without failing the plugin.

        For partial failures the plugin works around, such as one of several
        configured back ends that will not start. Strict hosts raise it instead.
        """
        self._record(PluginError(self._plugin, phase, message), None)

    def _record(self, error: PluginError, cause: BaseException | None) -> None:
        if self._record_error is None:
            logger.warning("%s", error, exc_info=cause)
            return
        self._record_error(error, cause)

    def _trusted_service(self, name: str) -> Any:
        if not self._trusted:
            raise ServiceDenied(
                f"plugin {self._plugin!r} is not trusted with the {name} service; "
                f"the host grants trust with host.location(trusted=[{self._plugin!r}])"
            )
        try:
            return self._available[name]
        except KeyError:
            raise RuntimeError(f"this Location provides no {name} service") from None

    def __repr__(self) -> str:
        state = "trusted" if self._trusted else "untrusted"
        return f"<Services for plugin {self._plugin!r} ({state})>"
