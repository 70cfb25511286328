"""The side effects check: a corpus of plugins that leave traces, each beside a correct twin.

Each broken plugin is caught by both runners (``check()``/``pegboard check`` and a
`PluginConformance` subclass), with and without examples, with a message naming
the side effect; its twin, which does the same job cleanly, passes.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from pegboard.testing import Example, check

pytest_plugins = ["pytester"]
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

TEMPLATE = """
import asyncio, logging, os, socket, sys, tempfile, threading, time
from pathlib import Path

import anyio
import pegboard
from pegboard import hookimpl
from pegboard.testing import Example, PluginConformance

STATE = {{}}


@pegboard.tool(description="Do the job.")
async def job(input, context):
{tool}
    return "done"


class Plugin:
    @hookimpl
    async def activate_location(self, tools):
{activate}
        tools.register({{"job": job}})
        yield
{teardown}


plugin = Plugin()


class TestWithExamples(PluginConformance):
    plugin = plugin
    name = "traces"
    examples = (Example(tool="job"),)
    backends = ("asyncio",)


class TestWithout(PluginConformance):
    plugin = plugin
    name = "traces"
    backends = ("asyncio",)
"""


@attrs.frozen
class Case:
    """A side effect: the broken code, what the report says, and the clean twin."""

    name: str
    seen: str
    tool: str = "pass"
    activate: str = "pass"
    teardown: str = "pass"
    twin_tool: str = "pass"
    twin_activate: str = "pass"
    twin_teardown: str = "pass"


CASES = (
    Case(
        "write",
        "wrote /opt/traces-cache.txt (outside its temporary directory)",
        tool="""
            try:
                Path("/opt/traces-cache.txt").write_text("cache")
            except OSError:
                pass  # the sandbox refused; the plugin carries on
        """,
        twin_tool='Path(tempfile.gettempdir(), "cache.txt").write_text("cache")',
    ),
    Case(
        "network",
        "connected to ('127.0.0.1', 9) with no network granted",
        tool="""
            try:
                socket.create_connection(("127.0.0.1", 9), timeout=1).close()
            except OSError:
                pass
        """,
    ),
    Case(
        "datagram",
        "sent a datagram to ('127.0.0.1', 9) with no network granted",
        tool="""
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.sendto(b"ping", ("127.0.0.1", 9))
                except OSError:
                    pass
        """,
    ),
    Case(
        "environment",
        "read the environment variable 'TRACES_API_KEY'",
        tool='STATE["key"] = os.environ.get("TRACES_API_KEY")',
        twin_tool='STATE["path"] = os.environ.get("PATH")',
    ),
    Case(
        "environment_bytes",
        "read the environment variable 'TRACES_API_KEY'",
        tool='STATE["key"] = os.getenvb(b"TRACES_API_KEY") or b"TRACES_API_KEY" in os.environb',
        twin_tool='STATE["path"] = os.environb.get(b"PATH")',
    ),
    Case(
        "stdout",
        "printed to standard output: 'working on it'",
        tool='print("working on it")',
        twin_tool='logging.getLogger("traces").info("working on it")',
    ),
    Case(
        "stdout_descriptor",
        "wrote to standard output: 'working on it' (descriptor 1, below sys.stdout)",
        tool='os.write(1, b"working on it\\n")',
        twin_tool='os.write(2, b"working on it\\n")',
    ),
    Case(
        "stdout_buffer",
        "wrote to standard output: 'working on it' (descriptor 1, below sys.stdout)",
        tool='sys.stdout.buffer.write(b"working on it\\n")',
        twin_tool='sys.stderr.buffer.write(b"working on it\\n")',
    ),
    Case(
        "cwd",
        "changed the working directory to '/'",
        tool='os.chdir("/")',
    ),
    Case(
        "thread",
        "thread 'traces-poller' is still running (teardown)",
        activate="""
            stop = threading.Event()
            STATE["stop"] = stop
            threading.Thread(target=stop.wait, args=(30,), name="traces-poller").start()
        """,
        twin_activate="""
            stop = threading.Event()
            STATE["stop"] = stop
            STATE["thread"] = threading.Thread(target=stop.wait, args=(30,))
            STATE["thread"].start()
        """,
        twin_teardown="""
            STATE["stop"].set()
            STATE["thread"].join()
        """,
    ),
    Case(
        "task",
        "(sleep) is still running (teardown)",
        activate='STATE["task"] = asyncio.get_running_loop().create_task(asyncio.sleep(30))',
        twin_activate='STATE["task"] = asyncio.get_running_loop().create_task(asyncio.sleep(30))',
        twin_teardown="""
            STATE["task"].cancel()
            try:
                await STATE["task"]
            except asyncio.CancelledError:
                pass
        """,
    ),
    Case(
        "fd",
        "traces.log) is still open (teardown)",
        activate='STATE["log"] = open(Path(tempfile.gettempdir(), "traces.log"), "w")',
        twin_activate='STATE["log"] = open(Path(tempfile.gettempdir(), "traces.log"), "w")',
        twin_teardown='STATE["log"].close()',
    ),
    Case(
        "progress",
        "after it settled",
        tool="""
            async def later():
                await asyncio.sleep(0.05)
                await context.progress(pegboard.Progress(message="late"))

            STATE.setdefault("tasks", []).append(asyncio.get_running_loop().create_task(later()))
        """,
        twin_tool='await context.progress(pegboard.Progress(message="on time"))',
    ),
)

Write = Callable[[str, str], Path]


def source(tool: str, activate: str, teardown: str) -> str:
    def block(code: str, indent: int) -> str:
        return textwrap.indent(textwrap.dedent(code).strip(), " " * indent)

    return TEMPLATE.format(
        tool=block(tool, 4), activate=block(activate, 8), teardown=block(teardown, 8)
    )


@pytest.fixture
def write(tmp_path: Path) -> Iterator[Write]:
    folder = tmp_path / "plugins"
    folder.mkdir()
    written: list[str] = []

    def write(name: str, text: str) -> Path:
        module = f"traces_{name}_{tmp_path.name.replace('-', '_')}"
        path = folder / f"{module}.py"
        path.write_text(text)
        written.append(module)
        return path

    yield write
    for module in written:
        sys.modules.pop(module, None)


def side_effects(path: Path, examples: bool) -> str:
    report = check(
        f"{path}:plugin",
        name="traces",
        examples=[Example(tool="job")] if examples else [],
        only=["side_effects"],
    )
    [result] = report.results
    assert report.where.startswith("confined"), report.format()
    return result.status + "\n" + result.describe()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
@pytest.mark.parametrize("examples", [True, False], ids=["examples", "generated"])
def test_a_side_effect_is_reported_and_its_twin_passes(
    case: Case, examples: bool, write: Write
) -> None:
    broken = write(case.name, source(case.tool, case.activate, case.teardown))
    found = side_effects(broken, examples)
    assert found.startswith("failed"), found
    assert case.seen in found, found
    twin = write(
        f"{case.name}_twin", source(case.twin_tool, case.twin_activate, case.twin_teardown)
    )
    found = side_effects(twin, examples)
    assert found.startswith("passed"), found


@pytest.mark.timeout(600)  # every case's classes in one pytest run
def test_the_pytest_runner_reports_every_side_effect(pytester: pytest.Pytester) -> None:
    """Each broken plugin's subclasses fail side_effects, with and without examples."""
    for case in CASES:
        pytester.makepyfile(
            **{
                f"test_{case.name}": source(case.tool, case.activate, case.teardown),
                f"test_{case.name}_twin": source(
                    case.twin_tool, case.twin_activate, case.twin_teardown
                ),
            }
        )
    # In a process of its own: the checks run threads that compile code, and pytest
    # formatting a failure at the same moment trips CPython 3.11's shared AST state.
    result = pytester.runpytest_subprocess(*QUIET, "-v", "-k", "side_effects")
    result.assert_outcomes(failed=2 * len(CASES), passed=2 * len(CASES))
    out = result.stdout.str()
    for case in CASES:
        assert case.seen in out, case.name
        for runner in ("TestWithExamples", "TestWithout"):
            result.stdout.fnmatch_lines(
                [f"*test_{case.name}.py::{runner}::test_side_effects*FAILED*"]
            )


def test_a_plugin_in_the_checks_process_is_not_judged_for_side_effects(write: Write) -> None:
    path = write("trusted", source('print("hello")', "pass", "pass"))
    report = check(f"{path}:plugin", name="traces", trusted=True, only=["side_effects"])
    [result] = report.results
    assert "skipped" == result.status
    assert "confined plugin's worker" in (result.reason or "")
