"""pegboard's pytest plugin: fixtures for testing plugins (registered through pytest11).

Fixtures only, none autouse. By default a Location enables no plugin at all;
override ``pegboard_plugins`` (and ``pegboard_trusted``, ``pegboard_files``,
``pegboard_permissions``) in a test module or conftest to enable yours, or add
an in-process plugin with ``pegboard_host.add_plugin(name, plugin)``. The async
fixtures need an async test (``pytest.mark.anyio``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import pegboard
    from pegboard.testing import FakeRunner

__all__ = (
    "pegboard_call",
    "pegboard_context",
    "pegboard_files",
    "pegboard_host",
    "pegboard_location",
    "pegboard_permissions",
    "pegboard_plugins",
    "pegboard_trusted",
)

#: ``pegboard_call(name, input={}, *, final_step=False)``
Call = Callable[..., Awaitable["pegboard.Outcome"]]


@pytest.fixture
def pegboard_plugins() -> Sequence[str | Mapping[str, Any]]:
    """The plugins ``pegboard_location`` enables, as ``host.location(plugins=...)`` takes them.

    None by default (not even ``builtin``); override it to enable yours, for
    example ``return [{"name": "notes", "options": {"limit": 5}}]``.
    """
    return []


@pytest.fixture
def pegboard_trusted() -> Sequence[str]:
    """The plugins the host trusts with the trusted services; none by default."""
    return []


@pytest.fixture
def pegboard_files() -> Mapping[str, str | bytes] | str | os.PathLike[str]:
    """What ``pegboard_location`` starts with: relative paths to text or bytes, or a
    folder to copy.
    """
    return {}


@pytest.fixture
def pegboard_permissions() -> Sequence[Mapping[str, str]]:
    """The Location's permission rules; by default everything is allowed."""
    return [{"action": "*", "resource": "*", "effect": "allow"}]


@pytest.fixture
def pegboard_host() -> pegboard.Host:
    """A strict `pegboard.Host`: a plugin that fails to load or activate raises.

    It imports only the plugins a Location enables.
    """
    import pegboard

    return pegboard.Host(strict=True)


@pytest.fixture
async def pegboard_location(
    pegboard_host: pegboard.Host,
    pegboard_plugins: Sequence[str | Mapping[str, Any]],
    pegboard_trusted: Sequence[str],
    pegboard_files: Mapping[str, str | bytes] | str | os.PathLike[str],
    pegboard_permissions: Sequence[Mapping[str, str]],
    tmp_path: Path,
) -> AsyncIterator[pegboard.Location]:
    """An open Location in a temporary folder, with ``pegboard_plugins`` activated.

    Its root holds ``pegboard_files``; managed output goes to a temporary folder too.
    """
    import anyio.to_thread

    from pegboard.testing._subject import seed_files

    root = tmp_path / "location"
    await anyio.to_thread.run_sync(seed_files, root, pegboard_files)
    async with pegboard_host.location(
        root,
        plugins=pegboard_plugins,
        trusted=pegboard_trusted,
        storage=tmp_path / "managed",
        permissions=pegboard_permissions,
    ) as location:
        yield location


@pytest.fixture
def pegboard_context() -> FakeRunner:
    """A fake runner: ``pegboard_context()`` makes a `pegboard.ToolContext` with a
    fresh call ID, and ``pegboard_context.progress`` lists what tools reported.
    """
    from pegboard.testing import FakeRunner

    return FakeRunner()


@pytest.fixture
def pegboard_call(pegboard_location: pegboard.Location, pegboard_context: FakeRunner) -> Call:
    """Call a tool in ``pegboard_location`` and return its outcome.

    ``await pegboard_call("notes_count", {"folder": "."})`` prepares a request,
    executes one call with a context from ``pegboard_context`` and returns the
    `pegboard.Completed` or `pegboard.Failed`.
    """
    import pegboard

    async def call(
        name: str, input: Mapping[str, Any] | str | None = None, *, final_step: bool = False
    ) -> pegboard.Outcome:
        request = pegboard_location.prepare(final_step=final_step)
        raw = {} if input is None else input
        return await request.execute(pegboard.ToolCall(name, raw, pegboard_context()))

    return call
