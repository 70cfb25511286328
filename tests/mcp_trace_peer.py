"""An MCP server (the official SDK) over stdio that shows what a call carried in, for
tests/test_tracing.py and tests/test_secrets.py."""

from __future__ import annotations

import base64
import os
import urllib.parse

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ("app",)

app = MCPServer("trace-peer")


@app.tool()
def traceparent(ctx: Context) -> str:
    """The traceparent of this call's _meta, or 'none'."""
    meta = ctx.request_context.meta or {}
    value = meta.get("traceparent")  # type: ignore[union-attr]
    return value if isinstance(value, str) else "none"


@app.tool()
def reveal(name: str) -> str:
    """The value of environment variable NAME, plain, base64 and URL-encoded."""
    value = os.environ.get(name, "")
    encoded = base64.b64encode(value.encode()).decode()
    return f"plain {value} base64 {encoded} url {urllib.parse.quote(value, safe='')}"


@app.tool()
def refuse(name: str) -> str:
    """Fail with the value of environment variable NAME in the error."""
    raise ToolError(f"cannot use {os.environ.get(name, '')}")


if __name__ == "__main__":
    app.run("stdio")
