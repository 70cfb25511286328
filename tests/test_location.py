"""A Location's change notifications: ``location.watch()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import pegboard

pytestmark = pytest.mark.anyio


async def _says(input: Any, context: pegboard.ToolContext) -> str:
    return "hi"


SAYS = pegboard.tool(description="Say hi.", execute=_says)


async def test_watch_wakes_after_changes_and_ends_when_the_location_closes(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Registering or closing, on the Location or the application board, wakes a watcher;
    closing the Location ends the iteration.
    """
    seen: list[list[str]] = []
    async with host.location(workspace, plugins=[], storage=storage_dir) as location:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            async with location.watch() as changes:
                task_status.started()
                async for _ in changes:
                    seen.append([d.name for d in location.prepare().definitions])

        async with anyio.create_task_group() as tasks:
            await tasks.start(watch)
            await anyio.wait_all_tasks_blocked()
            registration = location.tools.register({"local": SAYS})
            await anyio.wait_all_tasks_blocked()
            host.tools.register({"shared": SAYS})
            await anyio.wait_all_tasks_blocked()
            registration.close()
            await anyio.wait_all_tasks_blocked()
            location._close()  # what closing the Location does first
    assert [["local"], ["local", "shared"], ["shared"]] == seen


async def test_changes_made_while_busy_wake_the_watcher_once(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Changes land while the consumer is busy: it wakes once and reads the latest list."""
    async with (
        host.location(workspace, plugins=[], storage=storage_dir) as location,
        location.watch() as changes,
    ):
        for name in ("a", "b", "c"):
            location.tools.register({name: SAYS})
        with anyio.fail_after(1):
            await anext(changes)
        assert ["a", "b", "c"] == [d.name for d in location.prepare().definitions]
        with anyio.move_on_after(0.05) as idle:
            await anext(changes)
        assert idle.cancelled_caught


async def test_a_registration_from_a_worker_thread_wakes_the_watcher(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A plain function registering from a worker thread still wakes the event loop."""
    async with (
        host.location(workspace, plugins=[], storage=storage_dir) as location,
        location.watch() as changes,
    ):
        await anyio.to_thread.run_sync(lambda: location.tools.register({"threaded": SAYS}))
        with anyio.fail_after(1):
            await anext(changes)


async def test_watching_a_closed_location_ends_at_once(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A Location that is already closed has nothing to watch."""
    async with host.location(workspace, plugins=[], storage=storage_dir) as location:
        pass
    assert [] == [change async for change in location.watch()]


async def test_a_location_without_plugins_does_not_scan_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """plugins=[] names nothing to look up: no installed distribution is read."""
    host = pegboard.Host()

    def no_scan() -> list[str]:
        raise AssertionError("the entry points were scanned")

    monkeypatch.setattr(host._plugins, "names", no_scan)
    async with host.location(tmp_path, plugins=[], storage=tmp_path / "storage") as location:
        assert () == location.plugins
    (tmp_path / "pegboard.toml").write_text("[builtin]\n")
    with pytest.raises(AssertionError, match="scanned"):
        async with host.location(tmp_path, plugins=[], storage=tmp_path / "storage"):
            pass  # options for a plugin: the scan must say whether it is installed


async def test_snapshots_follow_every_change_across_many_changes(tmp_path: Path) -> None:
    """Snapshots updated from the boards' change logs equal a full merge, every time.

    Enough changes to fold overlays into their base and to trim the logs; a
    request keeps the tools it captured whatever changes later.
    """
    import random

    rng = random.Random(11)
    host = pegboard.Host()
    made = [pegboard.tool(description=f"Tool {i}.", execute=lambda i, c: "") for i in range(5)]
    async with host.location(tmp_path, plugins=[], storage=tmp_path / "storage") as location:
        boards = {"host": host.tools, "location": location.tools}
        live: list[tuple[str, str, pegboard.Tool, pegboard.Registration]] = []
        captured: list[tuple[pegboard.Request, dict[str, pegboard.Tool]]] = []
        for step in range(3000):
            if live and rng.random() < 0.45:
                where, name, tool, registration = live.pop(rng.randrange(len(live)))
                registration.close()
            else:
                where, name, tool = (
                    rng.choice(list(boards)),
                    f"t{rng.randrange(150)}",
                    rng.choice(made),
                )
                live.append((where, name, tool, boards[where].register({name: tool})))
            if rng.random() < 0.3:
                continue  # several changes between two prepares
            expected: dict[str, pegboard.Tool] = {}
            for board in ("host", "location"):  # the Location's tools win
                expected.update({n: t for w, n, t, _ in live if w == board})
            request = location.prepare()
            assert expected == dict(request._tools.items()), step
            assert len(expected) == len(request._tools)
            assert sorted(expected) == [d.name for d in request.definitions]
            assert all(request._tools.get(n) is t for n, t in expected.items())
            assert request._tools.get("t999") is None
            assert "t999" not in request._tools
            if step % 100 == 0:
                captured.append((request, expected))
        for request, expected in captured:
            assert expected == dict(request._tools.items())
            assert sorted(expected) == [d.name for d in request.definitions]


@pytest.mark.parametrize(
    ("root", "said"),
    [
        ("", "a Location's root is an empty path; give a folder ('.' for the current one)"),
        ("a\0b", "a Location's root holds a NUL character: 'a\\x00b'"),
        ("no/such/folder", "a Location's root must be a directory: no/such/folder"),
    ],
    ids=["empty", "NUL", "missing"],
)
async def test_a_root_that_names_no_folder_is_refused_naming_why(
    host: pegboard.Host, root: str, said: str
) -> None:
    """An empty root (an unset variable, say) never opens the current folder, where the
    Location's commands could write: it is refused, as is a root that names no folder."""
    with pytest.raises(NotADirectoryError) as raised:
        async with host.location(root, plugins=[]):
            raise AssertionError("the Location opened")
    assert said == str(raised.value)
