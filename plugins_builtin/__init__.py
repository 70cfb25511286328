"""pegboard's built-in plugin: file, search and shell tools, written against the public API only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pegboard

from ._files import Files
from ._search import Search
from ._shell import Shell

__all__ = ("activate_location",)


@pegboard.hookimpl
async def activate_location(
    tools: pegboard.Tools, services: pegboard.Services
) -> AsyncIterator[None]:
    """Register read, write, edit, glob, grep and bash, capturing the trusted services.

    The bash tool spools long output into the Location's managed storage, so
    a spool file is kept, readable and pruned exactly like retained output.
    No command outlives the Location: closing it stops those still running.
    """
    filesystem: pegboard.Filesystem = services.filesystem
    permissions: pegboard.Permissions = services.permissions
    storage: pegboard.ManagedStorage = services.storage
    shell = Shell(filesystem, permissions, storage, sandbox=services.sandbox)
    tools.register(
        {
            **Files(filesystem, permissions).tools(),
            **Search(filesystem, permissions).tools(),
            **shell.tools(),
        }
    )
    try:
        yield
    finally:
        await shell.close()
