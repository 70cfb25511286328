"""Plugin costs: opening a Location among many installed distributions, and hook overhead.

Run from the repository root::

    .venv/bin/python benchmarks/bench_plugins.py [--quick]

Part one generates 300 unrelated distributions plus 3 pegboard plugins as
dist-info folders in a temporary site directory, then times, side by side in
one process: a bare ``importlib_metadata.entry_points(group="pegboard")`` scan,
and a fresh ``Host`` opening a Location that enables the 3 plugins (scan
included). It checks that only the 3 enabled plugin modules were imported.
Part two times one call with no ``execute_after`` hooks and with 5.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import attrs
import importlib_metadata

import pegboard

PLUGIN = """
import pegboard

@pegboard.tool(description="Say {name}.")
async def say(input, context):
    return "{name}"

@pegboard.hookimpl
def activate_location(tools):
    tools.register({{"{name}": say}})
"""


def make_site(root: Path, workspace: Path, *, others: int) -> list[str]:
    """Write ``others`` unrelated distributions and 6 plugins; return the plugin names."""
    root.mkdir()
    workspace.mkdir()
    for index in range(others):
        info = root / f"unrelated_{index}-1.0.dist-info"
        info.mkdir()
        metadata = f"Metadata-Version: 2.1\nName: unrelated-{index}\nVersion: 1.0\n"
        (info / "METADATA").write_text(metadata)
        (info / "entry_points.txt").write_text(f"[console_scripts]\nu{index} = m{index}:main\n")
    names = []
    for index in range(6):  # 3 enabled, 3 installed but never enabled
        name = f"benchplugin{index}"
        (root / f"{name}.py").write_text(textwrap.dedent(PLUGIN.format(name=name)))
        info = root / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[pegboard]\n{name} = {name}\n")
        names.append(name)
    return names


def best_and_median(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e3:8.2f} ms   best {min(samples) * 1e3:8.2f} ms"


async def open_location(root: Path, storage: Path, enabled: list[str]) -> None:
    # In process: the figure is the scan's and the loader's (a confined plugin would
    # add a worker process, and would never be imported here).
    async with pegboard.Host().location(
        root, plugins=enabled, storage=storage, confine="off"
    ) as location:
        assert len(location.prepare().definitions) == len(enabled)


async def time_calls(
    hooks: int, calls: int, workspace: Path, storage: Path
) -> Callable[[], Awaitable[float]]:
    host = pegboard.Host()

    class Observe:
        @pegboard.hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            return None

    names = []
    for index in range(hooks):
        host.add_plugin(f"observe{index}", Observe())
        names.append(f"observe{index}")

    @attrs.frozen
    class AddInput:
        a: int
        b: int

    @pegboard.tool(description="Add.", input=AddInput)
    async def add(input: AddInput, context: pegboard.ToolContext) -> str:
        return str(input.a + input.b)

    host.tools.register({"add": add})

    async def run() -> float:
        # In process, as above: the hooks' own cost.
        async with host.location(
            workspace, plugins=names, storage=storage, confine="off"
        ) as location:
            request = location.prepare()
            call = pegboard.ToolCall(
                "add", '{"a": 1, "b": 2}', pegboard.ToolContext("s", "a", "m", "c")
            )
            start = time.perf_counter()
            for _ in range(calls):
                await request.execute(call)
            return (time.perf_counter() - start) / calls

    return run


async def main(quick: bool) -> None:
    rounds = 3 if quick else 9
    with tempfile.TemporaryDirectory() as temporary:
        site, workspace, storage = (Path(temporary, part) for part in ("site", "ws", "storage"))
        plugins = make_site(site, workspace, others=300)
        sys.path.insert(0, str(site))
        enabled = plugins[:3]
        scans, opens = [], []
        for _ in range(rounds):
            start = time.perf_counter()
            found = importlib_metadata.entry_points(group="pegboard")
            scans.append(time.perf_counter() - start)
            assert {point.name for point in found} >= set(plugins)
            start = time.perf_counter()
            await open_location(workspace, storage, enabled)
            opens.append(time.perf_counter() - start)
        imported = sorted(name for name in plugins if name in sys.modules)
        print("## Opening a Location among 306 installed distributions (3 plugins enabled)\n")
        print(f"entry_points(group='pegboard') scan   {best_and_median(scans)}")
        print(f"Host() + open Location + 3 plugins    {best_and_median(opens)}")
        ratio = statistics.median(o / s for o, s in zip(opens, scans, strict=True))
        print(f"ratio open / scan (median of pairs)   {ratio:.2f}x   target < 2x")
        print(f"plugin modules imported: {imported} (enabled: {enabled})")
        assert imported == enabled, "only the enabled plugins may be imported"

        print("\n## One call with execute_after hooks\n")
        calls = 2_000 if quick else 20_000
        none = await time_calls(0, calls, workspace, storage)
        five = await time_calls(5, calls, workspace, storage)
        bare, hooked = [], []
        for _ in range(rounds):
            bare.append(await none())
            hooked.append(await five())
        for label, samples in (("no hooks", bare), ("5 hooks", hooked)):
            median, best = statistics.median(samples) * 1e6, min(samples) * 1e6
            print(f"{label:<10}  median {median:7.2f} µs  best {best:7.2f} µs")
        cost = (statistics.median(hooked) - statistics.median(bare)) * 1e6
        print(f"cost of 5 hooks: {cost:.2f} µs per call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for smoke tests")
    anyio.run(main, parser.parse_args().quick)
