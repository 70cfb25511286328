"""The official MCP conformance suite's tool scenarios, against a Location served over HTTP."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import anyio
import pytest

import pegboard

pytest.importorskip("mcp", reason="the MCP SDK is not installed: pip install 'pegboard[mcp]'")

import conformance_fixture
import httpx2 as httpx

import pegboard.mcp

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# uvicorn, which serves MCP's streamable HTTP, runs on asyncio only.
pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

ROOT = Path(__file__).resolve().parent.parent


def _check_script() -> ModuleType:
    """scripts/check.py, which pins and installs Node and the suite."""
    spec = importlib.util.spec_from_file_location("pegboard_check", ROOT / "scripts" / "check.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECK = _check_script()
#: Where scripts/check.py installs Node and the suite (git-ignored).
PREFIX: Path = CHECK.NODE_PREFIX
NODE = PREFIX / "node_modules" / "node" / "bin" / "node"
SUITE = PREFIX / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL = "python3 scripts/check.py (or: npm install --prefix .ci-node {})".format(
    " ".join(CHECK.NODE_PACKAGES)
)
TOKEN = "conformance-token"
DOCS = ROOT / "docs" / "mcp.md"

#: The server scenarios pegboard serves: the tool scenarios, and the protocol and
#: transport ones they rest on. Each must pass every check.
RUN = (
    "server-initialize",
    "ping",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "server-sse-polling",
    "resources-list",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-with-logging",
    "logging-set-level",
    "json-schema-2020-12",
)


def suite() -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, or a failure that says how to install them."""
    if not NODE.exists() or not SUITE.exists():
        pytest.fail(f"the MCP conformance suite and Node 22 are not installed; run {INSTALL}")
    return NODE, SUITE


class WithToken:
    """Test-only ASGI front: adds the bearer token the suite's client cannot send.

    The suite's server mode has no option for request headers, so the product's
    token check stays in place behind this front instead of being switched off.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k != b"authorization"]
            headers.append((b"authorization", f"Bearer {TOKEN}".encode()))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


def fixture_host() -> pegboard.Host:
    """A host with the fixture plugin installed as ``conformance``."""
    host = pegboard.Host()
    host.add_plugin("conformance", conformance_fixture)
    return host


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[str]:
    """The fixture plugin's Location served over HTTP on loopback; yields its URL."""
    import uvicorn

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    host = fixture_host()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with host.location(
        workspace, plugins=["conformance"], storage=tmp_path / "storage"
    ) as location:
        app = pegboard.mcp.http_app(
            pegboard.mcp.build_server(location),
            token=TOKEN,
            poll_after=conformance_fixture.POLL_AFTER,
        )
        config = uvicorn.Config(WithToken(app), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve)
            with anyio.fail_after(10):
                while not server.started:  # noqa: ASYNC110 - uvicorn sets a flag, not an event
                    await anyio.sleep(0.02)
            yield url
            server.should_exit = True


async def run_scenario(url: str, scenario: str, output: Path) -> list[dict[str, object]]:
    """The checks the suite ran for one scenario, from the results it saved."""
    node, entry = suite()
    with anyio.fail_after(60):
        result = await anyio.run_process(
            [node, entry, "server", "--url", url, "--scenario", scenario, "-o", output],
            check=False,
        )
    files = list(output.rglob("checks.json"))
    assert files, f"{scenario}: the suite saved no results\n{result.stdout.decode()}"
    checks: list[dict[str, object]] = json.loads(files[0].read_text())
    return checks


#: Checks a scenario reports as ``INFO`` when the server skipped what it tests
#: (say, it never closed the stream to be resumed), which must therefore succeed.
MUST_SUCCEED = {
    "server-sse-polling": {
        "ServerSendsPrimingEvent",
        "ServerSendsRetryField",
        "ServerDisconnectResume",
    },
}


@pytest.mark.parametrize("scenario", RUN)
async def test_conformance_tool_scenario_passes(served: str, scenario: str, tmp_path: Path) -> None:
    """Every check of the scenario succeeds: no failure, no warning; only the
    suite's notes on what it sent and saw are ``INFO``.
    """
    checks = await run_scenario(served, scenario, tmp_path / "results")
    assert checks, f"{scenario}: the suite ran no checks"
    required = MUST_SUCCEED.get(scenario, set())
    bad = [
        check
        for check in checks
        if check["status"] != "SUCCESS" and (check["status"] != "INFO" or check["name"] in required)
    ]
    assert not bad, json.dumps(bad, indent=2)
    assert required <= {check["name"] for check in checks}, json.dumps(checks, indent=2)


def documented_skips() -> set[str]:
    """The scenarios docs/mcp.md lists as not run, from its conformance section."""
    section = DOCS.read_text().split("## Conformance suite", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE))


async def test_every_server_scenario_is_run_or_documented_as_not_run() -> None:
    """A scenario the pinned suite adds is neither silently skipped nor run undocumented."""
    node, entry = suite()
    listing = (await anyio.run_process([node, entry, "list"])).stdout.decode()
    server_part = listing.split("Server scenarios", 1)[1].split("Client scenarios", 1)[0]
    scenarios = set(re.findall(r"^\s+- ([a-z0-9-]+)", server_part, flags=re.MULTILINE))
    assert scenarios, listing
    skipped = documented_skips()
    assert not skipped & set(RUN), "a scenario is both run and documented as not run"
    assert scenarios == skipped | set(RUN), (
        f"not run and not documented: {sorted(scenarios - skipped - set(RUN))}; "
        f"documented but unknown to the suite: {sorted((skipped | set(RUN)) - scenarios)}"
    )


async def test_without_the_front_the_served_app_asks_for_the_token(tmp_path: Path) -> None:
    """The test front is the only thing that lets the suite in: the app still says 401."""
    host = fixture_host()
    async with host.location(tmp_path, plugins=["conformance"]) as location:
        app = pegboard.mcp.http_app(
            pegboard.mcp.build_server(location),
            token=TOKEN,
            poll_after=conformance_fixture.POLL_AFTER,
        )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            refused = await http.post("/mcp", json={})
    assert refused.status_code == 401


async def test_a_missing_suite_fails_and_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No silent skip in CI: without Node 22 or the suite the test fails with the fix."""
    monkeypatch.setattr(sys.modules[__name__], "NODE", PREFIX / "missing" / "node")
    with pytest.raises(
        pytest.fail.Exception, match=r"not installed; run python3 scripts/check\.py"
    ):
        suite()
