"""The README's example runs."""

from __future__ import annotations

import pytest

import pegboard

pytestmark = pytest.mark.anyio


async def test_a_registered_tool_completes(location: pegboard.Location, context) -> None:
    """A call through a prepared request settles into one Completed outcome."""

    @pegboard.tool(description="Echo the text.", input={"type": "object"})
    async def echo(input: dict[str, object], ctx: pegboard.ToolContext) -> str:
        return "hello"

    location.tools.register({"echo": echo})
    outcome = await location.prepare().execute(pegboard.ToolCall("echo", "{}", context()))
    assert (
        pegboard.Completed(None, (pegboard.Text("hello"),), call=outcome.call, name="echo")
        == outcome
    )
