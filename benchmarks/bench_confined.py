"""Time a confined plugin against the same plugin in process and behind an MCP mount.

Run ``python benchmarks/bench_confined.py`` (``--quick`` for a smoke run). It
installs small plugins as distributions in a scratch folder put on
``sys.path`` (a module and a dist-info with ``entry_points.txt``; the host
passes the folder to each worker): ``calc`` registers one ``add`` tool with a
JSON Schema input, and ``open0`` … ``open9`` the same tool under a namespace
each. Three Locations stay open side by side: ``calc`` confined (the default,
``confine="auto"``, in a worker under bubblewrap), ``calc`` in process
(``confine="off"``), and the built-in ``mcp`` plugin mounting ``pegboard serve
--plugin calc --trust calc`` over stdio (the plugin in the server's process).
Each round times a batch of ``add`` calls on each, through the whole call
pipeline, round robin with the order rotated each round, so machine noise hits
each alike; a figure is the median over rounds of the difference or ratio
within a round, beside the quietest round's.

Then it opens (and closes) Locations with the ten ``open`` plugins, confined
and with ``confine="off"``, and, to split that cost, with one plugin each way,
and times the process a worker starts from: ``python -I -c "import
pegboard._worker"``, bare and in the worker's sandbox.

The targets: a confined call costs at most 150 µs more than one in process,
and at most 0.3x one through the MCP mount; opening a Location with 10
confined plugins costs at most 1.5 s more than with them in process. It prints
Markdown and exits 0 whatever the figures (1, saying why, where no sandbox can
confine a plugin); ``--json PATH`` also writes the readings. Without the MCP
SDK (the ``mcp`` extra) the MCP row is left out, and the script says so.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import operator
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _targets import Reading, add_json_option, difference, paired, ratio, write
from _timing import Job, collector_paused, time_rounds

import pegboard
from pegboard.sandbox import detect, installation, isolated

CONTEXT = pegboard.ToolContext(session_id="s", agent="bench", message_id="m", call_id="c")
ARGUMENTS = {"a": 1, "b": 2}
ALLOW_MCP = [{"action": "mcp.*", "resource": "*", "effect": "allow"}]

#: The most a confined ``add`` call may cost over one in process, in µs.
CALL_TARGET = 150.0
#: The most a confined call may cost, as a multiple of one through the MCP mount.
MOUNT_TARGET = 0.3
#: The most opening a Location with 10 confined plugins may cost over in process, in ms.
OPEN_TARGET = 1500.0
#: How many plugins the Locations that are opened enable.
PLUGINS = 10

PLUGIN = """
    import pegboard

    @pegboard.tool(
        description="Add two integers.",
        input={{
            "type": "object",
            "properties": {{"a": {{"type": "integer"}}, "b": {{"type": "integer"}}}},
            "required": ["a", "b"],
            "additionalProperties": False,
        }},
    )
    async def add(input, context):
        return str(input["a"] + input["b"])

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({{"add": add}}, namespace={namespace!r})
"""

IN_PROCESS = "add, confine='off'"
CONFINED = "add, confined"
MOUNTED = "add via `pegboard serve` and the mcp mount"
ECHO = "a JSON line echoed by a child process over pipes"
OPEN_OFF = f"open {PLUGINS} plugins, confine='off'"
OPEN_ON = f"open {PLUGINS} plugins, confined"
OPEN_ONE_OFF = "open 1 plugin, confine='off'"
OPEN_ONE_ON = "open 1 plugin, confined"
IMPORT = '`python -I -c "import pegboard._worker"`'
IMPORT_SANDBOXED = f"{IMPORT} in the worker's sandbox"


#: The child of the echo contender: each line it reads, written back at once.
ECHO_CHILD = """
import sys
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""


def install(site: Path, name: str, namespace: str | None) -> None:
    """Install plugin ``name`` in ``site``: a module, and a dist-info naming its entry point."""
    module = f"pegboard_bench_confined_{name}"
    (site / f"{module}.py").write_text(textwrap.dedent(PLUGIN.format(namespace=namespace)))
    info = site / f"bench_confined_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: bench-confined-{name}\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[pegboard]\n{name} = {module}\n")


def mcp_server(site: Path, scratch: Path) -> dict[str, Any]:
    """The mcp plugin's entry for ``pegboard serve`` with ``calc``, trusted, in its process."""
    served = scratch / "served"
    served.mkdir()
    command = shutil.which("pegboard", path=str(Path(sys.executable).parent)) or "pegboard"
    return {
        "command": [command, "serve", "-l", str(served), "--plugin", "calc", "--trust", "calc"],
        "environment": {"PYTHONPATH": str(site), "XDG_DATA_HOME": str(scratch / "data")},
        "startup_timeout": 60,
    }


def tool_call(request: pegboard.Request, name: str) -> Job:
    call = pegboard.ToolCall(name, ARGUMENTS, CONTEXT)

    async def run() -> None:
        outcome = await request.execute(call)
        if not isinstance(outcome, pegboard.Completed):
            raise SystemExit(f"{name} did not complete: {outcome}")

    return run


@contextlib.asynccontextmanager
async def echoing() -> AsyncIterator[Job]:
    """A bare round trip over two pipes to a child process: the floor under a confined call."""
    line = b'{"type": "call", "id": 1, "input": {"a": 1, "b": 2}}\n'
    async with await anyio.open_process([sys.executable, "-I", "-c", ECHO_CHILD]) as child:
        assert child.stdin is not None
        assert child.stdout is not None
        stdin, stdout = child.stdin, child.stdout

        async def run() -> None:
            await stdin.send(line)
            received = b""
            while not received.endswith(b"\n"):
                received += await stdout.receive()

        try:
            yield run
        finally:
            await stdin.aclose()


def checked(location: pegboard.Location, confined: bool) -> pegboard.Location:
    """``location``, once sure its plugins activated, each confined or not as asked."""
    if location.plugin_errors:
        problems = "; ".join(str(error) for error in location.plugin_errors)
        raise SystemExit(f"a plugin failed to activate: {problems}")
    for info in location.plugin_info:
        if info.name != "mcp" and info.confined is not confined:
            raise SystemExit(f"plugin {info.name!r} ran confined={info.confined}, not {confined}")
    return location


Opening = Callable[[], contextlib.AbstractAsyncContextManager[pegboard.Location]]


async def time_opens(
    openings: dict[str, tuple[Opening, bool]], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds to open, and to close, each Location, one figure each per round."""
    opened: dict[str, list[float]] = {label: [] for label in openings}
    closed: dict[str, list[float]] = {label: [] for label in openings}
    labels = list(openings)
    for round_ in range(rounds):
        shift = round_ % len(labels)
        for label in labels[shift:] + labels[:shift]:
            opening, confined = openings[label]
            with collector_paused():
                started = time.perf_counter()
                async with opening() as location:
                    ready = time.perf_counter()
                    checked(location, confined)
                    ending = time.perf_counter()
                ended = time.perf_counter()
            opened[label].append(ready - started)
            closed[label].append(ended - ending)
    return opened, closed


def time_imports(site: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds for the worker's interpreter to start and import its module, bare and sandboxed."""
    argv = [sys.executable, "-I", "-c", "import pegboard._worker"]
    samples: dict[str, list[float]] = {IMPORT: [], IMPORT_SANDBOXED: []}
    for round_ in range(rounds):
        order = [IMPORT, IMPORT_SANDBOXED][:: 1 if round_ % 2 == 0 else -1]
        for label in order:
            with contextlib.ExitStack() as stack:
                inherited: tuple[int, ...]
                if label == IMPORT:
                    command, inherited, environment = argv, (), dict(os.environ)
                    cwd = None
                else:
                    confinement = stack.enter_context(isolated(readable=installation([site])))
                    command = confinement.command(argv, cwd=Path("/tmp"))
                    inherited = confinement.pass_fds
                    environment = dict(confinement.environment)
                    cwd = confinement.tmpdir
                started = time.perf_counter()
                subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    check=True,
                    env=environment,
                    cwd=cwd,
                    pass_fds=inherited,
                )
                samples[label].append(time.perf_counter() - started)
    return samples


def shown(reading: Reading) -> str:
    unit = "x" if reading.unit == "x" else f" {reading.unit}"
    limit = "-" if reading.limit is None else f"{reading.limit:g}{unit}"
    verdict = "-" if reading.met is None else "met" if reading.met else "not met"
    return (
        f"| {reading.quantity} | {reading.figure:,.2f}{unit} "
        f"| {reading.quietest:,.2f}{unit} | {limit} | {verdict} |"
    )


@contextlib.asynccontextmanager
async def call_locations(
    host: pegboard.Host, scratch: Path, site: Path, mount: bool
) -> AsyncIterator[dict[str, Job]]:
    """The three Locations of the per-call rounds, open side by side; a call job for each."""
    async with contextlib.AsyncExitStack() as stack:
        jobs: dict[str, Job] = {}
        modes: tuple[tuple[str, pegboard.ConfineMode], ...] = (
            (IN_PROCESS, "off"),
            (CONFINED, "auto"),
        )
        for label, confine in modes:
            root = scratch / f"calls-{confine}"
            root.mkdir()
            location = await stack.enter_async_context(
                host.location(root, plugins=["calc"], storage=scratch / "storage", confine=confine)
            )
            jobs[label] = tool_call(checked(location, confine == "auto").prepare(), "add")
        if mount:
            root = scratch / "calls-mount"
            root.mkdir()
            servers = {"calc": mcp_server(site, scratch)}
            location = await stack.enter_async_context(
                host.location(
                    root,
                    plugins=[{"name": "mcp", "options": {"servers": servers}}],
                    trusted=["mcp"],
                    permissions=ALLOW_MCP,
                    storage=scratch / "storage",
                )
            )
            jobs[MOUNTED] = tool_call(checked(location, False).prepare(), "calc_add")
        jobs[ECHO] = await stack.enter_async_context(echoing())
        yield jobs


async def main(arguments: argparse.Namespace) -> None:
    info = detect("required")
    if info.kind != "bubblewrap":
        why = info.reason or "only Landlock works here, and a worker needs bubblewrap"
        raise SystemExit(f"bench_confined.py times confined plugins, and none can run here: {why}")
    mount = importlib.util.find_spec("mcp") is not None
    rounds = arguments.rounds or (3 if arguments.quick else 15)
    calls = 20 if arguments.quick else 200
    opens = 2 if arguments.quick else 7
    with tempfile.TemporaryDirectory(prefix="bench-confined-") as scratch_name:
        scratch = Path(scratch_name)
        site = scratch / "site"
        site.mkdir()
        install(site, "calc", None)
        names = [f"open{index}" for index in range(PLUGINS)]
        for name in names:
            install(site, name, name)
        sys.path.insert(0, str(site))
        host = pegboard.Host()
        async with call_locations(host, scratch, site, mount) as jobs:
            # One untimed round: imports, the first schema compiled, the server warmed.
            await time_rounds(jobs, 1, 5)
            calls_taken = await time_rounds(jobs, rounds, calls)

        def opening(plugins: list[str], confine: pegboard.ConfineMode) -> Opening:
            root = scratch / f"open-{len(plugins)}-{confine}"
            root.mkdir()
            return lambda: host.location(
                root, plugins=plugins, storage=scratch / "storage", confine=confine
            )

        openings = {
            OPEN_OFF: (opening(names, "off"), False),
            OPEN_ON: (opening(names, "auto"), True),
            OPEN_ONE_OFF: (opening(names[:1], "off"), False),
            OPEN_ONE_ON: (opening(names[:1], "auto"), True),
        }
        await time_opens(openings, 1)  # untimed: the page cache, the first worker
        opened, closed = await time_opens(openings, opens)
        imports = time_imports(site, opens)
    print("# Confined plugins\n")
    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {info.describe()}; "
        f"{rounds} rounds of {calls} calls each; {opens} rounds of opening Locations.\n"
    )
    print("## Per call, medians over rounds\n")
    print(f"| contender | per call | / {IN_PROCESS} |")
    print("| --- | --- | --- |")
    for label, figures in calls_taken.items():
        against = paired(figures, calls_taken[IN_PROCESS], operator.truediv)
        print(f"| {label} | {statistics.median(figures) * 1e6:,.0f} µs | {against:.2f}x |")
    if not mount:
        print(f"\nThe MCP SDK is not installed (the mcp extra): no row for {MOUNTED}.")
    print("\n## Opening and closing a Location, medians over rounds\n")
    print("| contender | open | close |")
    print("| --- | --- | --- |")
    for label in openings:
        print(
            f"| {label} | {statistics.median(opened[label]) * 1e3:,.0f} ms "
            f"| {statistics.median(closed[label]) * 1e3:,.0f} ms |"
        )
    for label, figures in imports.items():
        print(f"| {label} | {statistics.median(figures) * 1e3:,.0f} ms | - |")
    readings = [
        difference(
            f"{CONFINED} - {IN_PROCESS}, per call",
            calls_taken[CONFINED],
            calls_taken[IN_PROCESS],
            scale=1e6,
            unit="µs",
            limit=CALL_TARGET,
        )
    ]
    if mount:
        readings.append(
            ratio(
                f"{CONFINED} / {MOUNTED}, per call",
                calls_taken[CONFINED],
                calls_taken[MOUNTED],
                MOUNT_TARGET,
            )
        )
    readings += [
        Reading(
            quantity=f"{ECHO}, per call",
            figure=statistics.median(calls_taken[ECHO]) * 1e6,
            unit="µs",
            quietest=min(calls_taken[ECHO]) * 1e6,
            limit=None,
            met=None,
        ),
        difference(
            f"{OPEN_ON} - {OPEN_OFF}",
            opened[OPEN_ON],
            opened[OPEN_OFF],
            scale=1e3,
            unit="ms",
            limit=OPEN_TARGET,
        ),
        difference(
            f"{OPEN_ONE_ON} - {OPEN_ONE_OFF}",
            opened[OPEN_ONE_ON],
            opened[OPEN_ONE_OFF],
            scale=1e3,
            unit="ms",
        ),
        difference(
            f"{IMPORT_SANDBOXED} - bare",
            imports[IMPORT_SANDBOXED],
            imports[IMPORT],
            scale=1e3,
            unit="ms",
        ),
    ]
    print("\n## Against the targets\n")
    print("| quantity | median | quietest round | limit | verdict |")
    print("| --- | --- | --- | --- | --- |")
    for reading in readings:
        print(shown(reading))
    print(
        "\nA confined call crosses a pipe each way as a JSON frame, on top of the host's "
        "own pipeline: the bare echo is the floor of that round trip (two process wake-ups); "
        "the rest is the handling of the frame on each side (on asyncio, in the event "
        "loop's callback for the pipe, with no task woken per frame). A Location starts all "
        "its workers at once and activates their plugins in order: each worker is a new "
        "interpreter under bubblewrap that imports pegboard before it imports its plugin, "
        "and they boot side by side.\n"
    )
    write(arguments.json, readings)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3 rounds of 20 calls, 2 rounds of opening Locations",
    )
    parser.add_argument("--rounds", type=int, help="timed call rounds (default 15, 3 with --quick)")
    add_json_option(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse(sys.argv[1:]))
    sys.exit(0)
