"""Plugins a real author writes pass the kit as hosts would run them: confined.

A SQLite query tool, a PNG chart tool and an HTTP fetch tool with progress, each
checked with every check, with examples and without (generated inputs alone).
"""

from __future__ import annotations

import http.server
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pegboard.testing import Example, check

SQLITE = """
import sqlite3, tempfile
from pathlib import Path

import attrs
import pegboard


@attrs.frozen
class Query:
    sql: str = attrs.field(metadata={"description": "One read-only SELECT statement"})


class Plugin:
    @pegboard.hookimpl
    async def activate_location(self, tools):
        path = Path(tempfile.mkdtemp()) / "cities.db"
        database = sqlite3.connect(path, check_same_thread=False)
        database.executescript(
            "CREATE TABLE city (name TEXT, people INTEGER);"
            "INSERT INTO city VALUES ('Lyon', 522000), ('Nantes', 320000);"
        )
        database.commit()

        def query(input: Query, context: pegboard.ToolContext) -> object:
            if not input.sql.lstrip().lower().startswith("select"):
                raise pegboard.ToolFailure("only SELECT statements are allowed")
            try:
                rows = database.execute(input.sql).fetchmany(100)
            except sqlite3.Error as error:
                raise pegboard.ToolFailure(f"the query failed: {error}") from None
            return pegboard.ToolResponse(
                output={"rows": [list(row) for row in rows]}, metadata={"rows": len(rows)}
            )

        tool = pegboard.tool(
            description="Run a read-only SQL query on the cities database.",
            input=Query,
            output={"type": "object", "properties": {"rows": {"type": "array"}}},
            execute=query,
        )
        tools.register({"query": tool}, namespace="cities")
        yield
        database.close()


plugin = Plugin()
"""

CHART = """
import struct, zlib

import attrs
import pegboard


@attrs.frozen
class Bars:
    values: list[int] = attrs.field(metadata={"description": "Bar heights, 0 to 50"})


def png(width: int, height: int, rows: list[bytes]) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    raw = b"".join(b"\\x00" + row for row in rows)
    signature = b"\\x89PNG\\r\\n\\x1a\\n"
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
    return signature + body + chunk(b"IEND", b"")


async def chart(input: Bars, context: pegboard.ToolContext) -> object:
    values = [min(max(value, 0), 50) for value in input.values[:40]]
    if not values:
        raise pegboard.ToolFailure("give at least one value")
    width, height = 4 * len(values), 50
    rows = [
        bytes(0 if height - y <= values[x // 4] else 255 for x in range(width))
        for y in range(height)
    ]
    image = pegboard.Image(png(width, height, rows), "image/png")
    return [image, pegboard.Text(f"{len(values)} bars")]


class Plugin:
    @pegboard.hookimpl
    def activate_location(self, tools):
        bars = pegboard.tool(
            description="Draw a bar chart as a PNG image.", input=Bars, execute=chart
        )
        tools.register({"bars": bars}, namespace="chart")


plugin = Plugin()
"""

FETCH = """
import functools

import attrs
import httpx
import pegboard


@attrs.frozen
class Page:
    url: str = attrs.field(metadata={"description": "An http:// or https:// URL"})


async def fetch(client: httpx.AsyncClient, input: Page, context: pegboard.ToolContext) -> str:
    if not input.url.startswith(("http://", "https://")):
        raise pegboard.ToolFailure("give an http:// or https:// URL")
    received = bytearray()
    try:
        async with client.stream("GET", input.url) as response:
            total = int(response.headers.get("content-length", 0)) or None
            async for data in response.aiter_bytes():
                received += data
                await context.progress(
                    pegboard.Progress(message="reading", current=len(received), total=total)
                )
    except (httpx.HTTPError, ValueError) as error:
        raise pegboard.ToolFailure(f"could not fetch {input.url}: {error}") from None
    return received.decode("utf-8", "replace")[:2000] or "(empty page)"


class Plugin:
    @pegboard.hookimpl
    async def activate_location(self, tools):
        # One client per Location: making one loads certificates, which takes a while.
        async with httpx.AsyncClient(timeout=5) as client:
            execute = functools.partial(fetch, client)
            get = pegboard.tool(description="Fetch a web page.", input=Page, execute=execute)
            tools.register({"get": get}, namespace="web")
            yield


plugin = Plugin()
"""


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    for module in [name for name in sys.modules if name.startswith("realistic_")]:
        del sys.modules[module]


@pytest.fixture
def server() -> Iterator[str]:
    """A local web page, for the fetch plugin (granted the network)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<h1>hello</h1>" * 200
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def write(folder: Path, name: str, source: str) -> str:
    path = folder / f"realistic_{name}_{folder.name.replace('-', '_')}.py"
    path.write_text(textwrap.dedent(source))
    return f"{path}:plugin"


@pytest.mark.parametrize("with_examples", [True, False], ids=["examples", "generated"])
def test_a_sqlite_query_plugin_passes(folder: Path, with_examples: bool) -> None:
    examples = [
        Example(tool="cities_query", input={"sql": "SELECT name FROM city ORDER BY name"}),
        Example(tool="cities_query", input={"sql": "DROP TABLE city"}, expect="tool_failure"),
    ]
    # Without examples, the author says why random text fails: it is not SQL.
    expected = {} if with_examples else {"cities_query": "random text is not a SELECT"}
    report = check(
        write(folder, "sqlite", SQLITE),
        name="cities",
        examples=examples if with_examples else [],
        expected_failures=expected,
        generated=10,
    )
    assert report.passed, report.format()
    assert report.where.startswith("confined")


@pytest.mark.parametrize("with_examples", [True, False], ids=["examples", "generated"])
def test_a_png_chart_plugin_passes(folder: Path, with_examples: bool) -> None:
    examples = [Example(tool="chart_bars", input={"values": [3, 20, 45]})]
    report = check(
        write(folder, "chart", CHART),
        name="chart",
        examples=examples if with_examples else [],
        generated=10,
    )
    assert report.passed, report.format()
    assert report.where.startswith("confined")


def test_an_http_fetch_plugin_with_progress_passes_with_the_network(
    folder: Path, server: str
) -> None:
    reference = write(folder, "fetch", FETCH)
    examples = [Example(tool="web_get", input={"url": server})]
    report = check(reference, name="web", examples=examples, generated=5, network=True)
    assert report.passed, report.format()
    # Without the network the same plugin fails (its example cannot complete), and the
    # side effects check names the connection it tried.
    refused = check(reference, name="web", examples=examples, generated=5)
    assert not refused.passed
    failed = {result.name: result.describe() for result in refused.failed}
    assert "examples" in failed
    assert "with no network granted" in failed["side_effects"]


def test_the_built_in_plugin_passes(tmp_path: Path) -> None:
    """pegboard's own tools pass the kit from generated inputs alone, in the checks'
    process as every host runs them: generated paths name no file, so every call of
    `read` and `edit` failing is expected."""
    no_file = "generated paths name no file in the empty folder the checks give"
    report = check(
        "builtin",
        trusted=True,
        expected_failures={"read": no_file, "edit": no_file},
        directory=tmp_path,
    )
    assert report.passed, report.format()
