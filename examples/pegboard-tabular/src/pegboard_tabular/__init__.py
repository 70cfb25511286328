"""pegboard-tabular: tools that answer questions about a Location's CSV and JSON files.

A pegboard plugin: the ``pegboard`` entry point named ``tabular`` points at this
module, whose ``activate_location`` hook gives every Location its own tools:
``tabular_files``, ``tabular_describe_csv``, ``tabular_query_csv`` and
``tabular_json_value``. It reads files through the trusted filesystem service
and asks the permission service before each read, so the host must trust it:
``host.location(root, plugins=["tabular"], trusted=["tabular"])``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pegboard

from ._workspace import Workspace

__all__ = ("activate_location", "options_schema")

#: The options a host or ``pegboard.toml`` may give; pegboard validates them
#: against this schema before activation.
options_schema = {
    "type": "object",
    "properties": {
        "max_rows": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000,
            "description": "The most rows one query returns (default 200)",
        },
        "max_file_bytes": {
            "type": "integer",
            "minimum": 1,
            "description": "The largest data file the tools read (default 20 MiB)",
        },
    },
    "additionalProperties": False,
}


@pegboard.hookimpl
async def activate_location(
    tools: pegboard.Tools, options: Mapping[str, Any], services: pegboard.Services
) -> AsyncIterator[None]:
    """Give one Location its tabular tools; forget its cached tables when it closes."""
    workspace = Workspace(
        services.filesystem,
        services.permissions,
        max_rows=options.get("max_rows", 200),
        max_file_bytes=options.get("max_file_bytes", 20 * 1024 * 1024),
    )
    tools.register(workspace.tools(), namespace="tabular")
    try:
        yield
    finally:
        workspace.close()
