"""An MCP server that says more than text: titles, annotations, media in errors.

Run over stdio by tests/test_mcp_fidelity.py.
"""

from __future__ import annotations

import base64

import mcp_types as types
from mcp.server.mcpserver import MCPServer

__all__ = ("app",)

app = MCPServer("rich")


@app.tool(
    title="Look around",
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
)
def look() -> str:
    """Describe the room."""
    return "a room"


@app.tool()
def broken() -> types.CallToolResult:
    """Fail with a picture of what went wrong."""
    picture = base64.b64encode(b"\x89PNG fake").decode()
    return types.CallToolResult(
        is_error=True,
        content=[
            types.TextContent(text="it broke"),
            types.ImageContent(data=picture, mime_type="image/png"),
        ],
    )


if __name__ == "__main__":
    app.run()
