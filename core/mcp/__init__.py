"""MCP both ways: serve a Location to MCP clients, and map content for mounted servers.

Needs the ``mcp`` extra: ``pip install 'pegboard[mcp]'``.
"""

from ._annotations import from_mcp_annotations, to_mcp_annotations
from ._approver import ClientApprover
from ._content import from_mcp_content, to_mcp_content
from ._memory import InMemoryTransport
from ._serve import http_app, serve
from ._server import LocationServer, build_server

__all__ = (
    "ClientApprover",
    "InMemoryTransport",
    "LocationServer",
    "build_server",
    "from_mcp_annotations",
    "from_mcp_content",
    "http_app",
    "serve",
    "to_mcp_annotations",
    "to_mcp_content",
)
