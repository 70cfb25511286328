"""Where the plugins a host did not trust run: the host's choice for one Location.

The worker that runs a confined plugin is `pegboard._confined`, imported only
when a plugin runs confined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

from ._plugins import BUILTIN_MODULES, Plugins

__all__ = ("ConfineMode", "Confining", "confinement_missing", "network_names")

#: How a host runs the plugins it did not trust: confined where a sandbox works
#: (``auto``), confined or not at all (``required``), or in its own process (``off``).
ConfineMode = Literal["auto", "required", "off"]
_MODES = ("auto", "required", "off")


@attrs.frozen
class Confining:
    """The host's choice for one Location: which plugins run confined, and how.

    ``reason`` is why no sandbox can confine a plugin here (None while one can).
    """

    mode: ConfineMode
    trusted: frozenset[str]
    network: frozenset[str] = frozenset()
    reason: str | None = None
    #: The host's secrets its rules grant, for each worker's environment.
    secrets: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"confine is 'auto', 'required' or 'off', not {self.mode!r}")

    def decide(self, name: str, plugins: Plugins) -> Literal["in process", "confined"] | str:
        """``"in process"``, ``"confined"``, or why plugin ``name`` may not run at all."""
        if name in self.trusted or name in BUILTIN_MODULES or self.mode == "off":
            return "in process"
        if plugins.source(name) is None:  # an object the host added: already in its process
            if self.mode == "required":
                return (
                    f"it was added in process (host.add_plugin) and is not trusted, and "
                    f"confine='required' runs no untrusted plugin in the host's process; "
                    f"trust it with host.location(trusted=[{name!r}])"
                )
            return "in process"
        if self.reason is not None:
            return (
                f"it is not trusted, so it must run confined, and no sandbox can confine it "
                f"here: {self.reason}; to run it with your full authority, trust it "
                f"(host.location(trusted=[{name!r}])) or turn confinement off (confine='off')"
            )
        return "confined"


def network_names(names: Iterable[str]) -> frozenset[str]:
    """``network=``: plugin names, checked."""
    if isinstance(names, str):
        raise TypeError("network takes a list of plugin names, not one string")
    found = frozenset(names)
    for name in found:
        if not isinstance(name, str):
            raise TypeError(f"network takes plugin names, got {name!r}")
    return found


def confinement_missing() -> str | None:
    """Why no sandbox can confine a plugin's worker here, or None while one can."""
    from .sandbox import detect

    info = detect("auto")
    if info.kind == "bubblewrap":
        return None
    if info.kind is None:
        return info.reason
    # Landlock has no PID namespace: what a worker starts could outlive it.
    return "confined plugins need bubblewrap (a PID namespace); only Landlock works here"
