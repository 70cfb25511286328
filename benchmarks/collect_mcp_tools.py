"""Collect real tool definitions from public MCP servers into benchmarks/data/mcp_tools.json.

Run ``python benchmarks/collect_mcp_tools.py`` (needs ``npm`` and network access to
the npm registry and PyPI). Each server in SERVERS is installed at its pinned
version into a temporary directory, started over stdio with placeholder
credentials, and asked for ``tools/list``; every tool is written with the
package and version it came from. pegboard's built-in tools are added from a
Location with the ``builtin`` plugin. bench_search.py reads the file; the
tasks it is measured on live in benchmarks/data/search_tasks.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import Any

import anyio
import importlib_metadata

import pegboard

DATA = Path(__file__).resolve().parent / "data" / "mcp_tools.json"

#: (registry, package, version, executable, arguments, environment)
SERVERS: tuple[tuple[str, str, str, str, tuple[str, ...], dict[str, str]], ...] = (
    ("npm", "@modelcontextprotocol/server-filesystem", "2026.8.31", "mcp-server-filesystem",
     ("{workdir}",), {}),
    ("npm", "@modelcontextprotocol/server-everything", "2026.8.31", "mcp-server-everything",
     (), {}),
    ("npm", "@modelcontextprotocol/server-memory", "2026.8.31", "mcp-server-memory", (), {}),
    ("npm", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31",
     "mcp-server-sequential-thinking", (), {}),
    ("npm", "@modelcontextprotocol/server-github", "2025.4.8", "mcp-server-github", (),
     {"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("npm", "@modelcontextprotocol/server-gitlab", "2025.4.25", "mcp-server-gitlab", (),
     {"GITLAB_PERSONAL_ACCESS_TOKEN": "placeholder"}),
    ("npm", "@modelcontextprotocol/server-slack", "2025.4.25", "mcp-server-slack", (),
     {"SLACK_BOT_TOKEN": "placeholder", "SLACK_TEAM_ID": "placeholder"}),
    ("npm", "@modelcontextprotocol/server-puppeteer", "2025.5.12", "mcp-server-puppeteer", (),
     {}),
    ("npm", "@modelcontextprotocol/server-google-maps", "0.6.2", "mcp-server-google-maps", (),
     {"GOOGLE_MAPS_API_KEY": "placeholder"}),
    ("npm", "@modelcontextprotocol/server-brave-search", "0.6.2", "mcp-server-brave-search",
     (), {"BRAVE_API_KEY": "placeholder"}),
    ("npm", "@playwright/mcp", "0.0.86", "playwright-mcp", ("--caps", "vision,pdf"), {}),
    ("npm", "chrome-devtools-mcp", "1.11.0", "chrome-devtools-mcp", (), {}),
    ("npm", "@notionhq/notion-mcp-server", "2.5.2", "notion-mcp-server", (),
     {"NOTION_TOKEN": "placeholder"}),
    ("npm", "@wonderwhy-er/desktop-commander", "0.2.52", "desktop-commander", (), {}),
    ("npm", "mcp-server-kubernetes", "4.1.7", "mcp-server-kubernetes", (), {}),
    ("npm", "@executeautomation/playwright-mcp-server", "1.0.12", "playwright-mcp-server",
     (), {}),
    ("npm", "firecrawl-mcp", "3.26.0", "firecrawl-mcp", (),
     {"FIRECRAWL_API_KEY": "fc-placeholder"}),
    ("npm", "@sentry/mcp-server", "0.39.0", "sentry-mcp", ("--access-token", "placeholder"), {}),
    ("pypi", "mcp-server-git", "2026.10.19", "mcp-server-git", (), {}),
    ("pypi", "mcp-server-fetch", "2026.10.24", "mcp-server-fetch", (), {}),
    ("pypi", "mcp-server-time", "2026.10.19", "mcp-server-time", (), {}),
)  # fmt: skip


def install(workdir: Path) -> dict[str, Path]:
    """Install every server; return the directory of each registry's executables."""
    npm = [f"{package}@{version}" for kind, package, version, *_ in SERVERS if kind == "npm"]
    prefix = workdir / "npm"
    subprocess.run(
        ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
         "--ignore-scripts", *npm],
        check=True,
    )  # fmt: skip
    environment = workdir / "pypi"
    venv.create(environment, with_pip=True)
    pypi = [f"{package}=={version}" for kind, package, version, *_ in SERVERS if kind == "pypi"]
    subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet", *pypi],
        check=True,
    )
    return {"npm": prefix / "node_modules" / ".bin", "pypi": environment / "bin"}


def list_tools(command: list[str], environment: dict[str, str], cwd: Path) -> list[Any]:
    """``tools/list`` from one stdio server, following pagination, as plain JSON."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **environment},
        cwd=cwd,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    number = 0

    def ask(method: str, params: dict[str, Any]) -> Any:
        nonlocal number
        number += 1
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        process.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        for line in process.stdout:  # type: ignore[union-attr]
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # a server printing a banner on stdout
            if reply.get("id") == number:
                if "error" in reply:
                    raise RuntimeError(f"{command[0]}: {reply['error']}")
                return reply["result"]
        raise RuntimeError(f"{command[0]} closed its output before answering {method}")

    try:
        ask(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "pegboard-collect", "version": "1"},
            },
        )
        process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        )
        process.stdin.flush()
        tools: list[Any] = []
        cursor = None
        while True:
            result = ask("tools/list", {} if cursor is None else {"cursor": cursor})
            tools.extend(result["tools"])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
    finally:
        process.kill()
        process.wait()


async def builtin_tools(root: Path) -> list[dict[str, Any]]:
    """pegboard's own built-in tools, as a Location with the builtin plugin defines them."""
    host = pegboard.Host()
    async with host.location(root, plugins=["builtin"], storage=root / ".storage") as location:
        return [
            {
                "name": definition.name,
                "description": definition.description,
                "inputSchema": pegboard.thaw(definition.input_schema),
            }
            for definition in location.prepare().definitions
        ]


def main() -> int:
    collected: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        bins = install(workdir)
        for kind, package, version, executable, arguments, environment in SERVERS:
            command = [str(bins[kind] / executable)]
            command += [argument.format(workdir=workdir) for argument in arguments]
            tools = list_tools(command, environment, workdir)
            print(f"{package} {version}: {len(tools)} tools", file=sys.stderr)
            for tool in tools:
                entry = {key: tool[key] for key in ("name", "description", "inputSchema")
                         if key in tool}  # fmt: skip
                entry["source"] = {"registry": kind, "package": package, "version": version}
                collected.append(entry)
        own = anyio.run(builtin_tools, workdir)
        for entry in own:
            entry["source"] = {"registry": "pypi", "package": "pegboard",
                               "version": importlib_metadata.version("pegboard")}  # fmt: skip
            collected.append(entry)
    DATA.write_text(json.dumps(collected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(collected)} tools to {DATA}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
