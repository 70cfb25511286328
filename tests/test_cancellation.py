"""Cancellation is never a result: a cancelled call settles nothing and leaves no file."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import pegboard
from pegboard import _bounding, hookimpl

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]
BIG = "line\n" * 20_000  # over the default limits: retained in managed storage


async def cancel_while(
    request: pegboard.Request,
    call: pegboard.ToolCall,
    started: anyio.Event | threading.Event,
    then: Callable[[], object] = lambda: None,
) -> list[pegboard.Outcome]:
    """Run ``call``, cancel it once ``started`` is set, call ``then()``, and return
    what the call settled into.
    """
    outcomes: list[pegboard.Outcome] = []

    async def run() -> None:
        outcomes.append(await request.execute(call))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        if isinstance(started, threading.Event):
            assert await anyio.to_thread.run_sync(started.wait, 5)
        else:
            await started.wait()
        group.cancel_scope.cancel()
        then()
    return outcomes


async def test_law_canonical_representation_cancelled_sync_tool_has_no_outcome(
    location: pegboard.Location, context: Context
) -> None:
    """A sync tool's thread cannot be stopped: the caller returns at once, its result is dropped."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @pegboard.tool(description="Blocks its thread.")
    def blocks(input: Any, ctx: pegboard.ToolContext) -> str:
        started.set()
        release.wait(5)
        finished.set()
        return "done"

    location.tools.register({"blocks": blocks})
    call = pegboard.ToolCall("blocks", "{}", context())
    try:
        outcomes = await cancel_while(location.prepare(), call, started)
        # The caller did not wait for the thread: it is still blocked.
        assert not finished.is_set()
        assert [] == outcomes
    finally:
        release.set()
    await anyio.to_thread.run_sync(finished.wait, 5)


async def test_law_canonical_representation_shielded_tool_has_no_outcome(
    location: pegboard.Location, context: Context, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool that shields itself finishes its work, but the cancelled call settles nothing."""
    started, release = anyio.Event(), anyio.Event()

    @pegboard.tool(description="Shields itself.")
    async def shielded(input: Any, ctx: pegboard.ToolContext) -> str:
        with anyio.CancelScope(shield=True):
            started.set()
            await release.wait()
        return "finished anyway"

    location.tools.register({"shielded": shielded})
    call = pegboard.ToolCall("shielded", "{}", context("call-7"))
    outcomes = await cancel_while(location.prepare(), call, started, release.set)
    assert [] == outcomes
    assert "discarded the result of tool 'shielded' (call call-7)" in caplog.text


@pytest.mark.parametrize("translation", ["returns", "raises ToolFailure"])
async def test_law_canonical_representation_swallowed_cancellation_has_no_outcome(
    location: pegboard.Location, context: Context, translation: str
) -> None:
    """A tool that turns its cancellation into a result or a ToolFailure publishes neither."""
    started = anyio.Event()

    @pegboard.tool(description="Swallows cancellation.")
    async def swallows(input: Any, ctx: pegboard.ToolContext) -> str:
        try:
            started.set()
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            if translation == "returns":
                return "interrupted, but here is a result"
            raise pegboard.ToolFailure("interrupted") from None
        return "never"

    location.tools.register({"swallows": swallows})
    call = pegboard.ToolCall("swallows", "{}", context())
    assert [] == await cancel_while(location.prepare(), call, started)


async def test_law_canonical_representation_shielded_caller_still_gets_its_outcome(
    location: pegboard.Location, context: Context
) -> None:
    """The check honours shields: a call run inside a shielded scope is not cancelled."""

    @pegboard.tool(description="Quick.")
    async def quick(input: Any, ctx: pegboard.ToolContext) -> str:
        await anyio.lowlevel.checkpoint()
        return "kept"

    location.tools.register({"quick": quick})
    request = location.prepare()
    with anyio.CancelScope() as outer:
        outer.cancel()
        with anyio.CancelScope(shield=True):
            outcome = await request.execute(pegboard.ToolCall("quick", "{}", context()))
    assert (pegboard.Text("kept"),) == outcome.content  # type: ignore[union-attr]


class Observe:
    """A plugin whose execute_after hook only looks."""

    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> None:
        return None


@pytest.mark.parametrize("hooked", [False, True], ids=["no-hook", "hook"])
async def test_law_canonical_representation_cancel_during_retention_leaves_no_file(
    host: pegboard.Host,
    workspace: Path,
    storage_dir: Path,
    context: Context,
    monkeypatch: pytest.MonkeyPatch,
    hooked: bool,
) -> None:
    """Cancelled while its oversized output is written: no outcome, and the file is deleted."""
    writing, release = threading.Event(), threading.Event()
    retain = _bounding._retain

    def slow_retain(*args: Any) -> Any:
        kept = retain(*args)
        writing.set()
        release.wait(5)
        return kept

    monkeypatch.setattr(_bounding, "_retain", slow_retain)

    @pegboard.tool(description="Big.")
    async def big(input: Any, ctx: pegboard.ToolContext) -> str:
        return BIG

    host.add_plugin("observe", Observe())
    plugins = ["observe"] if hooked else []
    async with host.location(workspace, plugins=plugins, storage=storage_dir) as location:
        location.tools.register({"big": big})
        call = pegboard.ToolCall("big", "{}", context())
        try:
            # The cancellation lands while the thread still holds the written file.
            outcomes = await cancel_while(location.prepare(), call, writing, release.set)
        finally:
            release.set()
    assert [] == outcomes
    assert [] == [path for path in storage_dir.rglob("*") if path.is_file()]


async def test_law_canonical_representation_cancel_in_a_hook_leaves_no_file(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A call cancelled while a hook awaits deletes the file its output was retained in."""
    waiting = anyio.Event()
    seen: list[tuple[Path, ...]] = []

    class Waits:
        @hookimpl
        async def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            seen.append(event.managed)
            waiting.set()
            await anyio.sleep_forever()

    @pegboard.tool(description="Big.")
    async def big(input: Any, ctx: pegboard.ToolContext) -> str:
        return BIG

    host.add_plugin("waits", Waits())
    async with host.location(workspace, plugins=["waits"], storage=storage_dir) as location:
        location.tools.register({"big": big})
        call = pegboard.ToolCall("big", "{}", context())
        outcomes = await cancel_while(location.prepare(), call, waiting)
    assert [] == outcomes
    [(path,)] = seen
    assert not path.exists()
    assert [] == [path for path in storage_dir.rglob("*") if path.is_file()]


async def test_cancellation_is_not_logged_for_calls_that_were_not_cancelled(
    location: pegboard.Location, context: Context, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a call that was cancelled reports a discarded result."""

    @pegboard.tool(description="Sync.")
    def sync(input: Any, ctx: pegboard.ToolContext) -> str:
        time.sleep(0.001)
        return "ok"

    location.tools.register({"sync": sync})
    with caplog.at_level(logging.WARNING, logger="pegboard"):
        outcome = await location.prepare().execute(pegboard.ToolCall("sync", "{}", context()))
    assert (pegboard.Text("ok"),) == outcome.content  # type: ignore[union-attr]
    assert "discarded" not in caplog.text


# Native asyncio cancellation: no cancel scope remembers it, the task does.


def swallowing(started: anyio.Event, translation: str) -> pegboard.Tool:
    @pegboard.tool(description="Swallows asyncio's cancellation.")
    async def swallows(input: Any, ctx: pegboard.ToolContext) -> str:
        import asyncio

        try:
            started.set()
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            if translation == "returns":
                return "interrupted, but here is a result"
            raise pegboard.ToolFailure("interrupted") from None
        return "never"

    return swallows


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("translation", ["returns", "raises ToolFailure"])
@pytest.mark.parametrize("how", ["task.cancel", "wait_for", "timeout"])
async def test_law_canonical_representation_native_asyncio_cancellation_has_no_outcome(
    location: pegboard.Location, context: Context, translation: str, how: str
) -> None:
    """A call cancelled by task.cancel(), asyncio.wait_for or asyncio.timeout settles
    nothing, even when its tool swallowed the CancelledError.
    """
    import asyncio

    started = anyio.Event()
    location.tools.register({"swallows": swallowing(started, translation)})
    request = location.prepare()
    call = pegboard.ToolCall("swallows", "{}", context())
    outcomes: list[pegboard.Outcome] = []

    async def run() -> None:
        outcomes.append(await request.execute(call))

    if how == "task.cancel":
        task = asyncio.create_task(run())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
    elif how == "wait_for":
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run(), 0.05)
    else:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await run()
    assert [] == outcomes


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_law_canonical_representation_a_tools_own_asyncio_timeout_is_not_a_cancellation(
    location: pegboard.Location, context: Context
) -> None:
    """A tool that times out its own work with asyncio.timeout or anyio still settles."""
    import asyncio

    @pegboard.tool(description="Gives up on a slow part.")
    async def patient(input: Any, ctx: pegboard.ToolContext) -> str:
        try:
            async with asyncio.timeout(0.01):
                await asyncio.sleep(3600)
        except TimeoutError:
            pass
        with anyio.move_on_after(0.01):
            await anyio.sleep(3600)
        return "settled"

    location.tools.register({"patient": patient})
    outcome = await location.prepare().execute(pegboard.ToolCall("patient", "{}", context()))
    assert (pegboard.Text("settled"),) == outcome.content  # type: ignore[union-attr]
