"""pegboard's hook specifications; implement them with `pegboard.hookimpl`.

As with pluggy, an implementation may accept any subset of a hook's arguments.
Only the plugins enabled in a Location take part in its hooks, in the order the
Location enables them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Generator, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pegboard import ExecuteEvent, LocationInfo, Outcome, Services, ToolDefinition, Tools

__all__ = (
    "PROJECT",
    "activate_location",
    "execute_after",
    "hookimpl",
    "hookspec",
    "prepare_request",
)

#: The pluggy project name shared by the specifications and the marker.
PROJECT = "pegboard"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def activate_location(
    location: LocationInfo,
    tools: Tools,
    options: Mapping[str, Any],
    services: Services,
) -> Awaitable[None] | Generator[None, None, None] | AsyncGenerator[None, None] | None:
    """Activate the plugin for one Location: build its tools and register them.

    :param location: the Location's public information (its ``root``).
    :param tools: the registration capability, bound to a fresh scope this
        plugin owns in this Location; closing the scope removes everything
        registered through it.
    :param options: the plugin's options from the host or ``pegboard.toml``,
        already validated against the plugin's ``options_schema`` if it has one.
    :param services: the Location's services; only plugins the host trusts see
        the trusted ones (``filesystem``, ``permissions``, ``storage``); every
        plugin may start background ``tasks`` and ``report`` problems.

    May be a plain function, a coroutine function, or a generator or async
    generator function that yields exactly once: the code after its ``yield``
    runs when the Location closes (or the activation is undone). Plain and
    generator functions run in a worker thread. The host ignores the return
    value. A hook that raises or exceeds the activation timeout is recorded in
    ``location.plugin_errors``; its background tasks are cancelled and
    whatever it registered is removed.
    """


@hookspec
def execute_after(event: ExecuteEvent) -> Outcome | Awaitable[Outcome | None] | None:
    """See, and optionally replace, the outcome of every call in the Location.

    :param event: ``event.call`` is the call's identity as the runner supplied
        it, ``event.name`` the effective tool name, ``event.outcome`` the bounded
        canonical outcome and ``event.managed`` the managed file paths holding
        text that bounding cut.

    Return a replacement `pegboard.Completed` or `pegboard.Failed`, or ``None``
    to keep the outcome. The host normalizes and bounds a replacement again and
    passes it to the next plugin's hook. May be a coroutine function. A hook
    that raises, or returns anything else (an empty `pegboard.Completed`, an
    output its tool's output schema refuses, an unknown error kind), fails that
    one call closed: `request.execute` raises `pegboard.PluginError`, the
    un-hooked outcome is never published, the call's managed files are deleted,
    and the first such failure is recorded in ``location.plugin_errors``.
    """


@hookspec
def prepare_request(
    location: LocationInfo, definitions: list[ToolDefinition], final_step: bool
) -> None:
    """Withdraw tools from one model request.

    :param location: the Location's public information.
    :param definitions: the definitions about to be advertised; remove items
        in place to withdraw those tools from this request only.
    :param final_step: whether this is the request's final step.

    The host ignores the return value. Calls to a withdrawn name fail with
    kind ``unavailable``; additions to the list are ignored. A hook that raises
    is recorded in ``location.plugin_errors`` and its changes are discarded.
    Must be a plain function: preparing a request does no I/O, and a plugin
    whose ``prepare_request`` is a coroutine or generator function fails to load.
    """
