"""An MCP server that breaks the protocol on purpose, speaking JSON-RPC over stdio by
hand (the SDK's servers cannot send what it refuses): its one tool's answer is no
CallToolResult. Run by tests/test_mcp_fidelity.py."""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "broken",
    "description": "Answer with no result.",
    "inputSchema": {"type": "object"},
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        return {"content": "a string where a list of content blocks belongs"}
    return {}


for line in sys.stdin:
    message = json.loads(line)
    if "id" in message and "method" in message:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer(message)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
