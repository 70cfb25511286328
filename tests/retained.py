"""Managed storage seen from outside, for the bounding and storage test files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pegboard

#: The file whose modification time says when an area was last listed to prune it.
STAMP = ".pruned"


def listing(directory: Path) -> list[str]:
    """The entries of a storage area, apart from its prune stamp."""
    return sorted(set(os.listdir(directory)) - {STAMP}) if directory.exists() else []


def area(storage: Path, root: Path) -> Path:
    """The managed-storage area of the Location at ``root``."""
    return pegboard.ManagedStorage(storage).for_location(root.resolve()).directory


def echo_tool(content: object) -> pegboard.Tool:
    async def execute(input: object, context: pegboard.ToolContext) -> object:
        return pegboard.ToolResponse(content=content)

    return pegboard.tool(description="Return fixed content.", execute=execute)


async def run_once(
    host: pegboard.Host,
    root: Path,
    tool: pegboard.Tool,
    context: pegboard.ToolContext,
    **options: Any,
) -> pegboard.Outcome:
    """Open a Location, register ``tool`` as ``big`` and call it once."""
    async with host.location(root, plugins=[], **options) as location:
        with location.tools.register({"big": tool}):
            request = location.prepare()
            return await request.execute(pegboard.ToolCall("big", "{}", context))
