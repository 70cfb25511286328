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


#: Content annotations every kind of block carries somewhere below.
FOR_USER = types.Annotations(audience=["user"], priority=0.25)
FOR_BOTH = types.Annotations(
    audience=["user", "assistant"], priority=1.0, last_modified="2026-01-02T03:04:05Z"
)


@app.tool()
def broken() -> types.CallToolResult:
    """Fail with a picture, a sound and a log of what went wrong."""
    picture = base64.b64encode(b"\x89PNG fake").decode()
    sound = base64.b64encode(b"RIFF fake").decode()
    return types.CallToolResult(
        is_error=True,
        content=[
            types.TextContent(text="it broke"),
            types.ImageContent(data=picture, mime_type="image/png"),
            types.AudioContent(data=sound, mime_type="audio/wav", annotations=FOR_USER),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="file:///log.txt", text="trace"),
                annotations=FOR_BOTH,
            ),
        ],
    )


@app.tool()
def annotated() -> types.CallToolResult:
    """Say things meant for the user, the assistant, or both."""
    picture = base64.b64encode(b"\x89PNG fake").decode()
    return types.CallToolResult(
        content=[
            types.TextContent(text="for you", annotations=FOR_USER),
            types.ImageContent(data=picture, mime_type="image/png", annotations=FOR_BOTH),
            types.ResourceLink(uri="file:///a.txt", name="a", annotations=FOR_USER),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="file:///b.bin", blob=picture),
                annotations=FOR_BOTH,
            ),
            types.TextContent(text="plain"),
        ],
    )


if __name__ == "__main__":
    app.run()
