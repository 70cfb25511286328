"""Shared fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

import pegboard


@pytest.fixture(autouse=True)
def private_data_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved approvals and default storage go to a temporary per-user data directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def host() -> pegboard.Host:
    return pegboard.Host()


@pytest.fixture
def storage_dir(tmp_path: Path) -> Path:
    return tmp_path / "managed"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
async def location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> AsyncIterator[pegboard.Location]:
    async with host.location(workspace, plugins=[], storage=storage_dir) as opened:
        yield opened


@pytest.fixture
def context() -> Callable[..., pegboard.ToolContext]:
    """Make a runner context; IDs default to distinct, recognizable values."""

    def make(call_id: str = "call-1", **overrides: object) -> pegboard.ToolContext:
        fields: dict[str, object] = {
            "session_id": "session-1",
            "agent": "agent-1",
            "message_id": "message-1",
            "call_id": call_id,
        }
        fields.update(overrides)
        return pegboard.ToolContext(**fields)  # type: ignore[arg-type]

    return make
