"""What every plugin gets from its services view: background tasks and problem reports."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

import pegboard
from pegboard import hookimpl

pytestmark = pytest.mark.anyio


class Background:
    """A plugin with a background task that runs until the Location closes."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def work(self) -> None:
        self.events.append("working")
        try:
            await anyio.sleep_forever()
        finally:
            self.events.append("cancelled")

    @hookimpl
    async def activate_location(self, services: pegboard.Services) -> AsyncIterator[None]:
        services.tasks.start_soon(self.work)
        yield
        self.events.append("teardown")


async def test_background_tasks_run_until_teardown_has_run(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A plugin's task runs while the Location is open and is cancelled after teardown."""
    events: list[str] = []
    host.add_plugin("background", Background(events))
    async with host.location(workspace, plugins=["background"], storage=storage_dir):
        await anyio.wait_all_tasks_blocked()
        assert ["working"] == events
    assert ["working", "teardown", "cancelled"] == events


async def test_a_failing_background_task_is_recorded_and_contained(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A task that raises lands in plugin_errors (phase background); the Location goes on."""

    async def crash() -> None:
        raise ValueError("lost the thread")

    class Crashing:
        @hookimpl
        def activate_location(self, services: pegboard.Services) -> None:
            services.tasks.start_soon(crash, name="crash")

    host.add_plugin("crashing", Crashing())
    async with host.location(workspace, plugins=["crashing"], storage=storage_dir) as location:
        await anyio.wait_all_tasks_blocked()
        [problem] = location.plugin_errors
        assert ("crashing", "background") == (problem.plugin, problem.phase)
        assert "background task 'crash' raised ValueError: lost the thread" == problem.message
        assert "crashing" in location.plugins


async def test_a_report_is_recorded_without_failing_the_plugin(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """report() records a problem; the plugin stays active with its tools."""

    async def says(input: object, context: pegboard.ToolContext) -> str:
        return "hi"

    class Partial:
        @hookimpl
        def activate_location(self, tools: pegboard.Tools, services: pegboard.Services) -> None:
            tools.register({"says": pegboard.tool(description="Say hi.", execute=says)})
            services.report("back end 'b' is down; using 'a' alone", phase="activation")

    host.add_plugin("partial", Partial())
    async with host.location(workspace, plugins=["partial"], storage=storage_dir) as location:
        [problem] = location.plugin_errors
        assert ("partial", "activation") == (problem.plugin, problem.phase)
        assert ["says"] == [definition.name for definition in location.prepare().definitions]


async def test_strict_hosts_raise_reports(workspace: Path, storage_dir: Path) -> None:
    """In strict mode a report raises, like any plugin failure."""

    class Reporting:
        @hookimpl
        def activate_location(self, services: pegboard.Services) -> None:
            services.report("something is off")

    host = pegboard.Host(strict=True)
    host.add_plugin("reporting", Reporting())
    with pytest.raises(pegboard.PluginError, match="something is off"):
        async with host.location(workspace, plugins=["reporting"], storage=storage_dir):
            pass


async def test_the_callers_exception_leaves_the_location_unwrapped(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The Location's task group never wraps the caller's own exception in a group."""
    with pytest.raises(KeyError):
        async with host.location(workspace, plugins=[], storage=storage_dir):
            raise KeyError("mine")
    with anyio.move_on_after(0.05) as scope:
        async with host.location(workspace, plugins=[], storage=storage_dir):
            await anyio.sleep_forever()
    assert scope.cancelled_caught
