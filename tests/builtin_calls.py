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


@contextlib.asynccontextmanager
async def call_folders_held(
    monkeypatch: Any, prefix: str = "pegboard-call-"
) -> AsyncIterator[list[tuple[str, Path, bool]]]:
    """While the block runs, making or removing a temporary folder named ``prefix...`` (a
    command's, by default) waits until the event loop has run a task meanwhile (5 s at
    most): on the loop's own thread it would wait in vain. Yields what happened, in order:
    ``(step, folder, whether the loop ran)``.
    """
    import shutil
    import tempfile
    import threading

    import anyio
    import anyio.to_thread

    reached, loop_ran = threading.Event(), threading.Event()
    steps: list[tuple[str, Path, bool]] = []

    def held(name: str, step: Any) -> Any:
        def wrapper(*arguments: Any, **options: Any) -> Any:
            done = step(*arguments, **options) if name == "made" else None
            folder = Path(done if name == "made" else arguments[0])
            if folder.name.startswith(prefix):
                loop_ran.clear()
                reached.set()
                steps.append((name, folder, loop_ran.wait(5)))
            return done if name == "made" else step(*arguments, **options)

        return wrapper

    async def answer() -> None:
        while True:
            if await anyio.to_thread.run_sync(reached.wait, 0.05):
                reached.clear()
                loop_ran.set()

    monkeypatch.setattr(tempfile, "mkdtemp", held("made", tempfile.mkdtemp))
    monkeypatch.setattr(shutil, "rmtree", held("removed", shutil.rmtree))
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(answer)
        yield steps
        tasks.cancel_scope.cancel()
