"""pegboard's built-in plugin: file, search and shell tools, written against the public API only."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread

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

    The bash tool spools long output to a private temporary folder, readable
    through the filesystem service while the Location is open and removed
    when it closes.
    """
    filesystem: pegboard.Filesystem = services.filesystem
    permissions: pegboard.Permissions = services.permissions
    spool = Path(
        await anyio.to_thread.run_sync(functools.partial(tempfile.mkdtemp, prefix="pegboard-bash-"))
    )
    try:
        with filesystem.readable(spool) as spool_dir:
            shell = Shell(filesystem, permissions, spool_dir)
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
                await shell.close()  # no command outlives its Location
    finally:
        await anyio.to_thread.run_sync(shutil.rmtree, spool, True)
