"""The ``mcp`` plugin: the MCP servers a Location configures, mounted as its tools.

Configured by the ``[mcp]`` table of ``pegboard.toml``; see docs/mcp.md. It
starts processes, so it needs the host's trust: ``trusted=["mcp"]``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

import anyio

import pegboard

from ._config import OPTIONS_SCHEMA, server_configs

if TYPE_CHECKING:
    from ._mount import Mount

__all__ = ("activate_location", "options_schema")

# Checked here so `pegboard plugins` says why the plugin does not load; the SDK
# itself (a second or more to import) loads only when a server is mounted.
if importlib.util.find_spec("mcp") is None:
    raise ImportError("the mcp plugin needs the MCP SDK: pip install 'pegboard[mcp]'")

#: The ``[mcp]`` options, checked by the host before activation.
options_schema = OPTIONS_SCHEMA


@pegboard.hookimpl
async def activate_location(
    location: pegboard.LocationInfo,
    tools: pegboard.Tools,
    options: Mapping[str, Any],
    services: pegboard.Services,
) -> AsyncGenerator[None, None]:
    """Mount every enabled server; a server that fails is reported, the rest still mount."""
    configs, problems = server_configs(options)
    for problem in problems:
        services.report(problem, phase="activation")
    if configs and not services.trusted:
        raise pegboard.ServiceDenied(
            "the mcp plugin starts the MCP servers a Location's config names, so it runs "
            "only when the host trusts it: host.location(trusted=['mcp']) or --trust mcp"
        )
    from ._mount import Mount

    mounts = [
        Mount(
            config,
            tools=tools,
            permissions=services.permissions,
            services=services,
            root=location.root,
            elicit=services.elicit,
        )
        for config in configs
    ]
    try:
        async with anyio.create_task_group() as waiting:
            for mount in mounts:
                services.tasks.start_soon(mount.run, name=f"mcp server {mount.name!r}")
                waiting.start_soon(_started, mount)
        for mount in mounts:
            if mount.error is not None:
                services.report(
                    f"server {mount.name!r} is not mounted: {mount.error}", phase="activation"
                )
        yield
    finally:
        for mount in mounts:
            mount.stop()
        for mount in mounts:
            await mount.closed.wait()


async def _started(mount: Mount) -> None:
    """Wait for ``mount`` to start, within its startup timeout."""
    with anyio.move_on_after(mount.config.startup_timeout):
        await mount.ready.wait()
    if not mount.ready.is_set():
        mount.error = f"it did not start within {mount.config.startup_timeout:g} s"
        mount.stop()
