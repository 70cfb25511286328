"""Tool search over real tool definitions: recall, advertised size, search and prepare time.

Run from the repository root::

    .venv/bin/python benchmarks/bench_search.py [--quick]

The tools are the 300+ definitions in ``data/mcp_tools.json``, listed with
``tools/list`` from public MCP servers (each with its package and version;
``collect_mcp_tools.py`` regenerates the file) plus pegboard's built-ins. Each
server's tools are registered under a namespace, as a mount would. The tasks in
``data/search_tasks.json`` each name the one tool that does them. In one run it
reports:

- recall@1 and recall@5 of ``request.search`` over the deferred tools
  (``prepare(defer="auto")``; target: recall@5 of at least 0.90);
- the JSON characters advertised with ``defer="auto"`` (``search_tools``
  included) against advertising every tool (target: at most 15%);
- the median ``request.search`` over 10,000 deferred tools (the real tools,
  copied under more namespaces; target: at most 2 ms);
- ``prepare()`` then reading the definitions, with 10,000 tools, after one
  registration changed, with and without ``defer="auto"``, side by side in
  the same rounds (target: at most 1.5x).

The script prints Markdown and always exits 0; the figures are read, not asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from _timing import collector_paused  # beside this script on sys.path

import pegboard
from pegboard.providers import anthropic

DATA = Path(__file__).resolve().parent / "data"

#: The namespace each server's tools are registered under (pegboard's own: none).
NAMESPACES = {
    "@modelcontextprotocol/server-filesystem": "fs",
    "@modelcontextprotocol/server-everything": "everything",
    "@modelcontextprotocol/server-memory": "memory",
    "@modelcontextprotocol/server-sequential-thinking": "thinking",
    "@modelcontextprotocol/server-github": "github",
    "@modelcontextprotocol/server-gitlab": "gitlab",
    "@modelcontextprotocol/server-slack": "slack",
    "@modelcontextprotocol/server-puppeteer": "puppeteer",
    "@modelcontextprotocol/server-google-maps": "maps",
    "@modelcontextprotocol/server-brave-search": "brave",
    "@playwright/mcp": "playwright",
    "chrome-devtools-mcp": "chrome",
    "@notionhq/notion-mcp-server": "notion",
    "@wonderwhy-er/desktop-commander": "desktop",
    "mcp-server-kubernetes": "k8s",
    "@executeautomation/playwright-mcp-server": "pw",
    "firecrawl-mcp": "firecrawl",
    "@sentry/mcp-server": "sentry",
    "mcp-server-git": "git",
    "mcp-server-fetch": "fetch",
    "mcp-server-time": "time",
    "pegboard": None,
}


async def _unused(input: Any, context: pegboard.ToolContext) -> str:
    return "not run in this benchmark"


def load_tools() -> dict[str | None, dict[str, pegboard.Tool]]:
    """The collected tools, as pegboard tools grouped by namespace."""
    groups: dict[str | None, dict[str, pegboard.Tool]] = {}
    for entry in json.loads((DATA / "mcp_tools.json").read_text(encoding="utf-8")):
        namespace = NAMESPACES[entry["source"]["package"]]
        schema = entry.get("inputSchema") or {"type": "object"}
        groups.setdefault(namespace, {})[entry["name"]] = pegboard.tool(
            description=entry.get("description") or "",
            input=schema,
            execute=_unused,
        )
    return groups


def load_tasks() -> list[tuple[str, str]]:
    tasks = json.loads((DATA / "search_tasks.json").read_text(encoding="utf-8"))
    return [(task["task"], task["tool"]) for task in tasks]


def characters(definitions: object) -> int:
    return len(json.dumps(definitions, ensure_ascii=False, separators=(",", ":")))


def row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def copies(groups: dict[str | None, dict[str, pegboard.Tool]], total: int) -> Iterator[dict]:
    """Mappings of ``total`` tools in all: the real ones, copied under more namespaces,
    each copy a tool of its own (nothing measured once is shared between copies).
    """
    real = [(namespace, name, tool) for namespace, tools in groups.items()
            for name, tool in tools.items()]  # fmt: skip
    made = 0
    copy = 0
    while made < total:
        mapping = {}
        for namespace, name, tool in real[: total - made]:
            mapping[f"c{copy}_{namespace or 'pegboard'}_{name}"[:64]] = pegboard.tool(
                description=tool.description, input=tool.input, execute=_unused
            )
        made += len(mapping)
        copy += 1
        yield mapping


async def main(quick: bool) -> None:
    groups = load_tools()
    tasks = load_tasks()
    searches = 200 if quick else 2000
    rounds = 5 if quick else 21
    many = 2_000 if quick else 10_000
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        host = pegboard.Host()
        async with host.location(root, plugins=[], storage=root / ".storage") as location:
            for namespace, tools in groups.items():
                location.tools.register(tools, namespace=namespace)
            every = location.prepare()
            request = location.prepare(defer="auto")
            names = {definition.name for definition in every.definitions}
            missing = sorted({tool for _, tool in tasks} - names)
            if missing:
                raise SystemExit(f"tasks name tools that are not registered: {missing}")
            copied = sum(
                task.lower().find(tool_description(every, tool)) >= 0 for task, tool in tasks
            )

            hits1 = hits5 = 0
            misses = []
            for task, tool in tasks:
                found = [definition.name for definition in request.search(task, limit=5)]
                hits1 += found[:1] == [tool]
                hits5 += tool in found
                if tool not in found:
                    misses.append((task, tool, found[:3]))
            recall1, recall5 = hits1 / len(tasks), hits5 / len(tasks)

            everything = characters(anthropic.tools(every))
            advertised = characters(anthropic.tools(request))
            native = characters(anthropic.tools(request, native_search=True))

        print(f"## Tool search: {len(names)} real tools, {len(tasks)} tasks\n")
        print(row("quantity", "figure", "target"))
        print(row("---", "---", "---"))
        print(row("tools (MCP servers + pegboard built-ins)", f"{len(names)}", "at least 300"))
        print(row("tasks quoting their tool's first description sentence", f"{copied}", "0"))
        print(row("recall@1 of request.search", f"{recall1:.3f}", ""))
        print(row("recall@5 of request.search", f"{recall5:.3f}", "at least 0.90"))
        print(
            row(
                'advertised JSON characters (`anthropic.tools()`), defer="auto" / all tools',
                f"{advertised:,} / {everything:,} = {advertised / everything:.1%}",
                "at most 15%",
            )
        )
        print(
            row(
                "the same with native_search=True (deferred tools sent with defer_loading)",
                f"{native:,} / {everything:,} = {native / everything:.1%}",
                "",
            )
        )
        if misses:
            print("\nTasks whose tool is not among the first five:\n")
            for task, tool, found in misses:
                print(f"- {task!r}: wanted `{tool}`, got {', '.join(found) or 'nothing'}")

        mappings = list(copies(groups, many))
        first: dict[bool, float] = {}
        for auto in (False, True):
            async with host.location(root, plugins=[], storage=root / ".storage") as location:
                for mapping in mappings:
                    location.tools.register(mapping)
                gc.collect()
                started = time.perf_counter()
                prepared = location.prepare(defer="auto") if auto else location.prepare()
                len(prepared.definitions)
                first[auto] = time.perf_counter() - started
        async with host.location(root, plugins=[], storage=root / ".storage") as location:
            for mapping in mappings:
                location.tools.register(mapping)
            request = location.prepare(defer="auto")
            assert len(request.deferred) == many
            started = time.perf_counter()
            request.search("warm up the index", limit=5)
            built = time.perf_counter() - started
            queries = [task for task, _ in tasks]
            samples = []
            for index in range(searches):
                query = queries[index % len(queries)]
                with collector_paused():
                    started = time.perf_counter()
                    request.search(query, limit=5)
                    samples.append(time.perf_counter() - started)

            extra = location.tools.register({"one_more": _one_more()})
            started = time.perf_counter()
            location.prepare(defer="auto").search("warm up the index", limit=5)
            rebuilt = time.perf_counter() - started
            extra.close()
            plain, deferred = prepare_rounds(location, rounds, change=True)
            plain_same, deferred_same = prepare_rounds(location, rounds, change=False)
        print(f"\n## {many:,} deferred tools\n")
        print(row("quantity", "figure", "target"))
        print(row("---", "---", "---"))
        print(row("building the search index (once per snapshot)", f"{built * 1000:.0f} ms", ""))
        print(row("the same after one change (word bags reused)", f"{rebuilt * 1000:.0f} ms", ""))
        print(
            row(
                f"request.search, median of {searches}",
                f"{median_ms(samples):.3f} ms (p90 {quantile(samples, 0.9) * 1000:.3f} ms)",
                "at most 2 ms",
            )
        )
        print(
            row(
                "prepare() + definitions after one change, without defer",
                f"{median_ms(plain):.3f} ms",
                "",
            )
        )
        print(
            row(
                'prepare(defer="auto") + definitions after one change',
                f"{median_ms(deferred):.3f} ms",
                "",
            )
        )
        ratio = statistics.median(deferred) / statistics.median(plain)
        print(row('after one change: defer="auto" / without', f"{ratio:.2f}x", "at most 1.5x"))
        same = statistics.median(deferred_same) / statistics.median(plain_same)
        print(
            row(
                "boards unchanged: prepare() + definitions, without defer; with; with / without",
                f"{median_ms(plain_same):.4f} ms; {median_ms(deferred_same):.4f} ms; {same:.2f}x",
                "",
            )
        )
        print(
            row(
                "first prepare() + definitions, new Location: without defer; with; with / without",
                f"{first[False] * 1000:.1f} ms; {first[True] * 1000:.1f} ms; "
                f"{first[True] / first[False]:.2f}x",
                "",
            )
        )


def _one_more() -> pegboard.Tool:
    return pegboard.tool(description="One more tool.", execute=_unused)


def quantile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def tool_description(request: pegboard.Request, name: str) -> str:
    """The first sentence of a tool's description, lowercased (for the copying check)."""
    (definition,) = [d for d in request.definitions if d.name == name]
    return definition.description.strip().split(". ")[0].lower()


def prepare_rounds(
    location: pegboard.Location, rounds: int, *, change: bool
) -> tuple[list[float], list[float]]:
    """Seconds for prepare() and reading its definitions (after one registration
    changed, or with the boards unchanged), without and with ``defer="auto"``,
    alternating in each round.
    """
    samples: dict[bool, list[float]] = {False: [], True: []}
    extra = _one_more()

    def once(auto: bool, round_: int) -> None:
        registration = location.tools.register({f"extra_{round_}_{auto}": extra})
        if not change:
            warm = location.prepare(defer="auto") if auto else location.prepare()
            len(warm.definitions)
        gc.collect()
        with collector_paused():
            started = time.perf_counter()
            request = location.prepare(defer="auto") if auto else location.prepare()
            len(request.definitions)
            samples[auto].append(time.perf_counter() - started)
        registration.close()

    for warm in (False, True):
        once(warm, -1)
    samples = {False: [], True: []}
    for round_ in range(rounds):
        order: tuple[bool, ...] = (False, True) if round_ % 2 else (True, False)
        for auto in order:
            once(auto, round_)
    return samples[False], samples[True]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer tools and rounds")
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse(sys.argv[1:])
    anyio.run(main, arguments.quick)
