"""A tool's log messages reach the runner: in process, from a confined plugin, from Code Mode."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from distributions import install_plugin

import pegboard

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


@pegboard.tool(description="Log three times, then answer.", input={"type": "object"})
async def chatty(input: object, context: pegboard.ToolContext) -> str:
    await context.log("debug", "starting")
    await context.log("info", "halfway", {"rows": 2, "names": ["a", "b"]})
    await context.log("warning", "nearly done", data=None)
    return "done"


async def test_a_tools_log_messages_reach_the_runners_callback_in_order(
    location: pegboard.Location, context: Context
) -> None:
    received: list[pegboard.ToolLog] = []

    async def log(record: pegboard.ToolLog) -> None:
        received.append(record)

    location.tools.register({"chatty": chatty})
    call = pegboard.ToolCall("chatty", "{}", pegboard.ToolContext("s", "a", "m", "c", log=log))
    outcome = await location.prepare().execute(call)
    assert isinstance(outcome, pegboard.Completed)
    assert [
        pegboard.ToolLog("debug", "starting"),
        pegboard.ToolLog("info", "halfway", {"rows": 2, "names": ["a", "b"]}),
        pegboard.ToolLog("warning", "nearly done"),
    ] == received
    # Without a callback the messages go nowhere and the call is the same.
    quiet = await location.prepare().execute(pegboard.ToolCall("chatty", "{}", context()))
    assert isinstance(quiet, pegboard.Completed)
    assert outcome.content == quiet.content


def test_a_log_level_outside_syslogs_is_refused_naming_the_levels() -> None:
    with pytest.raises(ValueError, match=r"one of debug, info, notice.*got 'verbose'"):
        pegboard.ToolLog("verbose", "x")
    with pytest.raises(TypeError, match="a log message is a string, got bytes"):
        pegboard.ToolLog("info", b"x")  # type: ignore[arg-type]


def test_log_data_is_copied_as_json_and_bounded() -> None:
    data = {"rows": [1, 2]}
    record = pegboard.ToolLog("info", "m", data)
    data["rows"].append(3)
    assert {"rows": [1, 2]} == record.data  # a copy: later changes do not reach the runner
    with pytest.raises(ValueError, match=r"at most 64 KiB as JSON, and this is at least 100,0"):
        pegboard.ToolLog("info", "m", {"blob": "x" * 100_000})
    with pytest.raises(ValueError, match="a log message's data must be JSON"):
        pegboard.ToolLog("info", "m", {"not json": object()})


CONFINED = """
    import types
    import pegboard

    @pegboard.tool(description="Log from a worker.", input={"type": "object"})
    async def chatty(input, context):
        await context.log("notice", "from the worker", {"pid": "hidden"})
        # A careless or hostile plugin skips the checks and sends what it likes.
        await context._send_log(types.SimpleNamespace(level="shout", message="x", data=None))
        wrong = types.SimpleNamespace(level="info", message=["not", "text"], data=None)
        await context._send_log(wrong)
        await context.log("info", "after the bad ones")
        return "done"

    @pegboard.hookimpl
    def activate_location(tools):
        tools.register({"chatty": chatty})
"""


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    module = f"pegboard_log_{tmp_path.name.replace('-', '_')}"
    install_plugin(site, "chatty", CONFINED, module=module, distribution="chatty-plugin")
    yield "chatty"
    sys.modules.pop(module, None)


async def test_a_confined_tools_log_messages_cross_and_malformed_ones_are_dropped(
    installed: str, workspace: Path, storage_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[pegboard.ToolLog] = []

    async def log(record: pegboard.ToolLog) -> None:
        received.append(record)

    host = pegboard.Host()
    async with host.location(workspace, plugins=[installed], storage=storage_dir) as location:
        assert () == location.plugin_errors
        call = pegboard.ToolCall("chatty", "{}", pegboard.ToolContext("s", "a", "m", "c", log=log))
        with caplog.at_level(logging.WARNING, logger="pegboard"):
            outcome = await location.prepare().execute(call)
    assert isinstance(outcome, pegboard.Completed)
    assert [
        pegboard.ToolLog("notice", "from the worker", {"pid": "hidden"}),
        pegboard.ToolLog("info", "after the bad ones"),
    ] == received
    dropped = [r.getMessage() for r in caplog.records if "dropped a log message" in r.getMessage()]
    assert 2 == len(dropped)
    assert "'shout'" in dropped[0]
    assert "a log message is a string, got list" in dropped[1]


async def test_a_code_mode_programs_tools_log_through_the_execute_call(
    location: pegboard.Location,
) -> None:
    received: list[pegboard.ToolLog] = []

    async def log(record: pegboard.ToolLog) -> None:
        received.append(record)

    location.tools.register({"chatty": chatty})
    request = location.prepare(code_mode=True)
    context = pegboard.ToolContext("s", "a", "m", "call-1", log=log)
    code = "await chatty()\n"
    outcome = await request.execute(pegboard.ToolCall("execute", {"code": code}, context))
    assert isinstance(outcome, pegboard.Completed), outcome
    assert [
        pegboard.ToolLog("debug", "call-1/1: starting"),
        pegboard.ToolLog("info", "call-1/1: halfway", {"rows": 2, "names": ["a", "b"]}),
        pegboard.ToolLog("warning", "call-1/1: nearly done"),
    ] == received
