"""What a plugin sees of its Location: public information and a services view."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

__all__ = ("LocationInfo", "ServiceDenied", "Services")


@attrs.frozen
class LocationInfo:
    """A Location's public information, as plugins receive it."""

    root: Path


class ServiceDenied(PermissionError):  # noqa: N818 - reads as what happened
    """A plugin asked for a trusted service the host did not trust it with."""


class Services:
    """The Location's services as one plugin sees them.

    Trusted services are reachable only by plugins the host named in
    ``host.location(trusted=...)`` (and the built-in plugin); a Location's own
    config can never grant trust.
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
