"""An MCP server (2026-07-28) that answers calls with tasks, as the tasks extension says.

Run over stdio by tests/test_mcp_fidelity.py. A client that declares
``io.modelcontextprotocol/tasks`` on a call gets a task handle for every tool
below; ``tasks/get`` reports the task, ``tasks/update`` answers its question,
``tasks/cancel`` cancels it (and writes "cancelled" to the call's marker file).
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

__all__ = ("app",)

EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
QUESTION = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which colour?",
        "requestedSchema": {
            "type": "object",
            "properties": {"colour": {"type": "string"}},
            "required": ["colour"],
        },
    },
}
SAMPLING = {
    "method": "sampling/createMessage",
    "params": {"messages": [], "maxTokens": 10},
}
#: Every task this process made, by ID.
TASKS: dict[str, dict[str, Any]] = {}


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str


class UpdateParams(TaskParams):
    input_responses: dict[str, Any]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def view(task: dict[str, Any]) -> dict[str, Any]:
    """The task as tasks/get shows it, its result or question inlined."""
    age = time.monotonic() - task["started"]
    if task["status"] == "working" and task["tool"] == "report" and age > 0.2:
        task["status"] = "completed"
        task["result"] = text(f"report on {task['arguments']['topic']}")
    shown = {
        "taskId": task["id"],
        "status": task["status"],
        "createdAt": task["created"],
        "lastUpdatedAt": now(),
        "ttlMs": 60_000,
        "pollIntervalMs": 50,
    }
    if task["status"] == "working":
        shown["statusMessage"] = f"working on {task['tool']}"
    if task["status"] == "completed":
        shown["result"] = task["result"]
    if task["status"] == "failed":
        shown["error"] = {"code": -32603, "message": "the printer is on fire"}
    if task["status"] == "input_required":
        shown["inputRequests"] = task["asked"]
    if task["status"] == "cancelled" and task["tool"] == "drop":
        shown["statusMessage"] = "the queue was flushed"
    return shown


def text(said: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": said}], "isError": False}


class Tasks(Extension):
    identifier = EXTENSION

    async def intercept_tool_call(self, params: Any, ctx: Any, call_next: Any) -> Any:
        declared = (params.meta or {}).get(CAPABILITIES, {}).get("extensions", {})
        if EXTENSION not in declared:
            return await call_next(ctx)
        task_id = secrets.token_hex(16)
        task: dict[str, Any] = {
            "id": task_id,
            "tool": params.name,
            "arguments": params.arguments or {},
            "created": now(),
            "started": time.monotonic(),
            "status": "working",
        }
        if params.name == "ask":
            task["status"], task["asked"] = "input_required", {"q1": QUESTION}
        if params.name == "sample":
            task["status"], task["asked"] = "input_required", {"s1": SAMPLING}
        if params.name == "fail":
            task["status"] = "failed"
        if params.name == "drop":
            task["status"] = "cancelled"
        TASKS[task_id] = task
        return {"resultType": "task", **view(task)}

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskParams, self.get),
            MethodBinding("tasks/update", UpdateParams, self.update),
            MethodBinding("tasks/cancel", TaskParams, self.cancel),
        ]

    def task(self, params: TaskParams) -> dict[str, Any]:
        task = TASKS.get(params.task_id)
        if task is None:
            raise MCPError(code=-32602, message="Failed to retrieve task: Task not found")
        return task

    async def get(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        return view(self.task(params))

    async def update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        task = self.task(params)
        answer = params.input_responses.get("q1")
        if task["status"] == "input_required" and answer is not None:
            colour = (answer.get("content") or {}).get("colour")
            said = f"colour: {colour}" if answer["action"] == "accept" else "no colour given"
            task["status"], task["result"] = "completed", text(said)
        return {}

    async def cancel(self, ctx: Any, params: TaskParams) -> dict[str, Any]:
        task = self.task(params)
        task["status"] = "cancelled"
        marker = task["arguments"].get("marker")
        if marker:
            Path(marker).write_text("cancelled")
        return {}


app = MCPServer("tasks", extensions=[Tasks()])


@app.tool(structured_output=False)
def report(topic: str) -> str:
    """Write a report (as a task when the client takes tasks)."""
    return f"plain report on {topic}"


@app.tool(structured_output=False)
def ask() -> str:
    """Ask the user a colour."""
    return "asked nobody"


@app.tool(structured_output=False)
def sample() -> str:
    """Ask the client's model for a completion."""
    return "sampled nothing"


@app.tool(structured_output=False)
def fail() -> str:
    """Fail with a JSON-RPC error."""
    return "did not fail"


@app.tool(structured_output=False)
def drop() -> str:
    """Have its task cancelled by the server."""
    return "not dropped"


@app.tool(structured_output=False)
def slow(marker: str) -> str:
    """Work until cancelled."""
    return "done at once"


if __name__ == "__main__":
    app.run()
