"""What a plugin sees of its Location: public information and a services view."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from ._plugins import PluginError

if TYPE_CHECKING:
    import anyio.abc

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
    """Runs one plugin's background tasks for as long as its Location is open.

    The host cancels them after every plugin's teardown has run, so a plugin
    stops them gracefully in its teardown or lets the host cancel them. A task
    that raises is recorded in ``location.plugin_errors`` (phase ``background``)
    and leaves the Location and the other tasks running.
    """

    __slots__ = ("_group", "_plugin", "_record")

    def __init__(self, plugin: str, group: anyio.abc.TaskGroup, record: Record) -> None:
        self._plugin = plugin
        self._group = group
        self._record = record

    def start_soon(
        self, function: Callable[..., Awaitable[Any]], *args: object, name: object = None
    ) -> None:
        """Start ``await function(*args)`` in the Location's task group."""
        label = str(name if name is not None else getattr(function, "__qualname__", function))
        self._group.start_soon(self._guard, label, function, args, name=f"{self._plugin}: {label}")

    async def _guard(
        self, label: str, function: Callable[..., Awaitable[Any]], args: tuple[object, ...]
    ) -> None:
        try:
            await function(*args)
        except Exception as error:  # noqa: BLE001 - one plugin's task must not take the Location down
            message = f"background task {label!r} raised {type(error).__name__}: {error}"
            self._record(PluginError(self._plugin, "background", message), error)


class Services:
    """The Location's services as one plugin sees them.

    Trusted services are reachable only by plugins the host named in
    ``host.location(trusted=...)`` (and the built-in plugin); a Location's own
    config can never grant trust. Every plugin may start background ``tasks``
    and ``report`` problems.
    """

    __slots__ = ("_available", "_plugin", "_trusted")

    def __init__(
        self, plugin: str, *, trusted: bool, available: Mapping[str, Any] | None = None
    ) -> None:
        self._plugin = plugin
        self._trusted = trusted
        self._available = dict(available or {})

    @property
    def trusted(self) -> bool:
        """Whether the host trusts this plugin with the trusted services."""
        return self._trusted

    @property
    def filesystem(self) -> Any:
        """The trusted filesystem service, confined to the Location's root."""
        return self._trusted_service("filesystem")

    @property
    def permissions(self) -> Any:
        """The trusted permission service."""
        return self._trusted_service("permissions")

    @property
    def tasks(self) -> BackgroundTasks:
        """Background tasks that live as long as the Location (see `BackgroundTasks`)."""
        group = self._available.get("tasks")
        if group is None:
            raise RuntimeError("background tasks are available only inside an open Location")
        return BackgroundTasks(self._plugin, group, self._record)

    def report(
        self, message: str, *, phase: Literal["activation", "background"] = "background"
    ) -> None:
        """Record a problem in ``location.plugin_errors`` without failing the plugin.

        For partial failures the plugin works around, such as one of several
        configured back ends that will not start. Strict hosts raise it instead.
        """
        self._record(PluginError(self._plugin, phase, message), None)

    def _record(self, error: PluginError, cause: BaseException | None) -> None:
        record: Record | None = self._available.get("record")
        if record is None:
            logger.warning("%s", error, exc_info=cause)
            return
        record(error, cause)

    def _trusted_service(self, name: str) -> Any:
        if not self._trusted:
            raise ServiceDenied(
                f"plugin {self._plugin!r} is not trusted with the {name} service; "
                f"the host grants trust with host.location(trusted=[{self._plugin!r}])"
            )
        return self._available[name]

    def __repr__(self) -> str:
        state = "trusted" if self._trusted else "untrusted"
        return f"<Services for plugin {self._plugin!r} ({state})>"
