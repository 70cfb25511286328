"""A small MCP server written with the official SDK, run over stdio by tests/test_mcp_mount.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ("app",)

app = MCPServer("peer")


class Sum(TypedDict):
    total: int


@app.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@app.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return {"total": a + b}


@app.tool()
def where() -> str:
    """The working directory and the PEER_GREETING variable."""
    return f"{os.getcwd()} {os.environ.get('PEER_GREETING', '-')}"


@app.tool()
def picture() -> Image:
    """A one-pixel picture."""
    return Image(data=b"\x89PNG\r\n\x1a\nfake", format="png")


@app.tool()
def refuse(reason: str) -> str:
    """Always fail, as the model should see."""
    raise ToolError(f"refused: {reason}")


@app.tool()
async def steps(ctx: Context) -> str:
    """Report progress twice."""
    await ctx.report_progress(1, 2, "first half")
    await ctx.report_progress(2, 2, "second half")
    return "stepped"


@app.tool()
async def wait(marker: str) -> str:
    """Wait a minute; write 'cancelled' to the marker file if cancelled first."""
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        Path(marker).write_text("cancelled")
        raise
    return "waited"


@app.tool()
async def grow(ctx: Context) -> str:
    """Add a tool named 'extra' and announce the change."""

    def extra(x: int) -> int:
        """Double x."""
        return 2 * x

    app.add_tool(extra)
    await ctx.notify_tools_changed()
    return "grown"


@app.tool()
def die() -> str:
    """Exit at once, mid-call."""
    os._exit(3)


if __name__ == "__main__":
    app.run()
