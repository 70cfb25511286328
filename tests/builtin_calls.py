"""Calling the built-in tools through a real Location, for the builtin test files."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pegboard

#: Rules that allow every tool everything.
ALLOW_ALL = ({"action": "*", "resource": "*", "effect": "allow"},)


@contextlib.asynccontextmanager
async def opened(
    host: pegboard.Host, root: Path, storage: Path, **options: Any
) -> AsyncIterator[pegboard.Location]:
    """The Location at ``root`` with the built-in plugin, allowing everything by default."""
    options.setdefault("permissions", ALLOW_ALL)
    async with host.location(root, plugins=["builtin"], storage=storage, **options) as location:
        assert () == location.plugin_errors
        yield location


async def call(
    location: pegboard.Location,
    name: str,
    context: pegboard.ToolContext | None = None,
    **input: Any,
) -> pegboard.Outcome:
    """Run one tool call through a fresh request."""
    context = context or pegboard.ToolContext(
        session_id="session-1", agent="agent-1", message_id="message-1", call_id="call-1"
    )
    return await location.prepare().execute(pegboard.ToolCall(name, input, context))


def text(outcome: pegboard.Outcome) -> str:
    """The text of a completed call, or the error message of a failed one."""
    if isinstance(outcome, pegboard.Failed):
        return outcome.error.message
    return "\n".join(item.text for item in outcome.content if isinstance(item, pegboard.Text))


def failure(outcome: pegboard.Outcome) -> str:
    """The message of a call that failed with a ToolFailure."""
    assert isinstance(outcome, pegboard.Failed), outcome
    assert "tool_failure" == outcome.error.kind, outcome.error
    return outcome.error.message


def metadata(outcome: pegboard.Outcome) -> dict[str, Any]:
    """The metadata of a completed call."""
    assert isinstance(outcome, pegboard.Completed), outcome
    assert outcome.metadata is not None
    return dict(outcome.metadata)


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs.

    A zombie (dead, not yet reaped: some containers' init never reaps
    orphans) counts as gone.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc/self/stat").exists():
        return True  # no /proc to tell a zombie from a live process
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")
