"""pegboard.adapters.openai_agents: a real Agents SDK run, offline, calling pegboard tools."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anyio
import attrs
import pytest
from adapter_tools import PNG, Board
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

import pegboard
from pegboard.adapters.openai_agents import function_tools

# The Agents SDK runs on asyncio only.
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    """Offline: the SDK exports no traces."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


def _outputs(model: ScriptedModel, step: int) -> dict[str, Any]:
    """The function_call_output items the model received at ``step`` (from 0)."""
    return {
        item["call_id"]: item["output"]
        for item in model.calls[step].input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


async def test_law_durable_identity_through_an_agents_sdk_run(
    location: pegboard.Location,
) -> None:
    """Two parallel function calls: each outcome carries its call ID and item ID."""
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    model = ScriptedModel(
        [
            [
                function_call("meet", {"word": "a"}, call_id="call_a", item_id="fc_a"),
                function_call("meet", {"word": "b"}, call_id="call_b", item_id="fc_b"),
            ],
            [assistant_message("done")],
        ]
    )
    tools = function_tools(location, session_id="s-1", on_outcome=outcomes.append)
    agent = Agent(name="helper", model=model, tools=tools)

    result = await Runner.run(agent, "go")

    assert "done" == result.final_output
    # One outcome per call, each with the call's ID and its item's ID.
    assert [("call_a", "fc_a"), ("call_b", "fc_b")] == sorted(
        (o.call.call_id, o.call.message_id) for o in outcomes if o.call
    )
    assert {("s-1", "helper")} == {(c.session_id, c.agent) for c in board.contexts}
    assert {"call_a": "met a", "call_b": "met b"} == _outputs(model, 1)


async def test_a_crashing_tool_does_not_abort_the_run(
    location: pegboard.Location, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool that raises becomes an error result the model sees; the run goes on."""
    location.tools.register(Board().tools())
    model = ScriptedModel(
        [[function_call("crash", {}, call_id="call_1")], [assistant_message("recovered")]]
    )
    with caplog.at_level(logging.ERROR, logger="pegboard"):
        result = await Runner.run(
            Agent(name="a", model=model, tools=function_tools(location)), "go"
        )
    assert "recovered" == result.final_output
    said = _outputs(model, 1)["call_1"]
    assert "RuntimeError('bug in the tool')" in said
    assert "tool 'crash' raised" in caplog.text


async def test_failures_and_invalid_input_reach_the_model(location: pegboard.Location) -> None:
    """ToolFailure with partial output, a wrong argument type, an unknown name: all answered."""
    location.tools.register(Board().tools())
    model = ScriptedModel(
        [
            [
                function_call("fail", {}, call_id="call_f"),
                function_call("meet", {"word": 7}, call_id="call_m"),
            ],
            [assistant_message("ok")],
        ]
    )
    await Runner.run(Agent(name="a", model=model, tools=function_tools(location)), "go")
    said = _outputs(model, 1)
    assert "Error: disk full\nOutput before the error:\nwrote 3 of 5" == said["call_f"]
    assert said["call_m"].startswith("Error: invalid input for tool 'meet': $.word")


async def test_malformed_arguments_are_answered_and_the_run_goes_on(
    location: pegboard.Location,
) -> None:
    """Arguments a careless model sends — not JSON, not an object — become invalid-input
    errors the model reads; no call runs the tool, and the run finishes.
    """
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    model = ScriptedModel(
        [
            [
                function_call("meet", '{"word": ', call_id="call_cut"),
                function_call("meet", "[1, 2]", call_id="call_list"),
            ],
            [assistant_message("ok")],
        ]
    )
    agent = Agent(name="a", model=model, tools=function_tools(location, on_outcome=outcomes.append))
    result = await Runner.run(agent, "go")
    assert "ok" == result.final_output
    said = _outputs(model, 1)
    assert {"call_cut", "call_list"} == set(said)
    assert all(text.startswith("Error: ") for text in said.values())
    assert ["invalid_input"] * 2 == [o.error.kind for o in outcomes]  # type: ignore[union-attr]
    assert [] == board.contexts


async def test_media_is_sent_as_an_input_image(location: pegboard.Location) -> None:
    location.tools.register(Board().tools())
    model = ScriptedModel([[function_call("picture", {}, call_id="c")], [assistant_message("ok")]])
    await Runner.run(Agent(name="a", model=model, tools=function_tools(location)), "go")
    [text, image] = _outputs(model, 1)["c"]
    assert {"type": "input_text", "text": "a picture"} == text
    assert image["image_url"].startswith("data:image/png;base64,")
    assert len(PNG) < len(image["image_url"])


@attrs.frozen
class Search:
    query: str
    limit: int = 10


async def test_strict_schemas_and_strict_arguments(location: pegboard.Location) -> None:
    """Strict where the schema allows it; the model's nulls for optional fields are removed."""
    seen: list[Any] = []

    async def search(input: Search, context: pegboard.ToolContext) -> str:
        seen.append(input)
        return "found"

    free = {"type": "object", "additionalProperties": {"type": "string"}}
    location.tools.register(
        {
            "search": pegboard.tool(description="Search.", execute=search, input=Search),
            "tag": pegboard.tool(description="Tag.", execute=lambda i, c: "tagged", input=free),
        }
    )
    tools = {tool.name: tool for tool in function_tools(location)}
    assert tools["search"].strict_json_schema
    assert ["query", "limit"] == tools["search"].params_json_schema["required"]
    assert not tools["tag"].strict_json_schema  # free-form keys: OpenAI strict cannot say it
    assert free == tools["tag"].params_json_schema

    model = ScriptedModel(
        [
            [function_call("search", '{"query": "milk", "limit": null}', call_id="c")],
            [assistant_message("ok")],
        ]
    )
    await Runner.run(Agent(name="a", model=model, tools=list(tools.values())), "go")
    assert [Search("milk", 10)] == seen
    assert "found" == _outputs(model, 1)["c"]
    assert not any(t.strict_json_schema for t in function_tools(location, strict=False))


_HELLO = {"hello": pegboard.tool(description="Says hi.", execute=lambda value, context: "hi")}


async def test_adapters_openai_agents_continues_the_run_on_a_failing_output_bearing_tool(
    location: pegboard.Location,
) -> None:
    """A failing tool with an output schema is answered with its error; the run goes on."""

    async def names(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse:
        raise pegboard.ToolFailure("the index is gone")

    async def rows(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse:
        return pegboard.ToolResponse(output={"count": 3}, content="three rows")

    listed = {"type": "array", "items": {"type": "string"}}
    counted = {"type": "object", "properties": {"count": {"type": "integer"}}}
    location.tools.register(
        {
            "names": pegboard.tool(description="Names.", execute=names, output=listed),
            "rows": pegboard.tool(description="Rows.", execute=rows, output=counted),
        }
    )
    model = ScriptedModel(
        [
            [function_call("names", {}, call_id="n"), function_call("rows", {}, call_id="r")],
            [assistant_message("done")],
        ]
    )
    tools = function_tools(location)
    result = await Runner.run(Agent(name="a", model=model, tools=tools), "go")
    assert "done" == result.final_output
    assert {"n": "Error: the index is gone", "r": "three rows"} == _outputs(model, 1)


async def test_adapters_openai_agents_answers_an_unknown_tool_with_an_outcome_and_continues(
    location: pegboard.Location,
) -> None:
    """Under tools.run_config(), a call to a tool the agent lacks gets pegboard's
    unknown_tool outcome (the host sees it through on_outcome) and the run goes on.
    """
    location.tools.register(_HELLO)
    outcomes: list[pegboard.Outcome] = []
    model = ScriptedModel(
        [
            [
                function_call("ghost", {}, call_id="g"),
                function_call("hello", {}, call_id="m"),
            ],
            [assistant_message("done")],
        ]
    )
    tools = function_tools(location, session_id="s-1", on_outcome=outcomes.append)
    agent = Agent(name="helper", model=model, tools=tools)
    result = await Runner.run(agent, "go", run_config=tools.run_config())
    assert "done" == result.final_output
    outputs = _outputs(model, 1)
    assert "there is no tool named 'ghost'" in outputs["g"]
    assert "hi" == outputs["m"]
    (unknown,) = [o for o in outcomes if isinstance(o, pegboard.Failed)]
    assert "unknown_tool" == unknown.error.kind
    assert unknown.call is not None
    assert ("s-1", "g") == (unknown.call.session_id, unknown.call.call_id)


async def test_adapters_openai_agents_final_step_says_tool_choice_none(
    location: pegboard.Location,
) -> None:
    """A final step's run config asks for tool_choice none; a call anyway fails as final_step."""
    location.tools.register(_HELLO)
    outcomes: list[pegboard.Outcome] = []
    model = ScriptedModel([[function_call("hello", {}, call_id="m")], [assistant_message("done")]])
    tools = function_tools(location, final_step=True, on_outcome=outcomes.append)
    config = tools.run_config()
    assert "none" == config.model_settings.tool_choice  # type: ignore[union-attr]
    await Runner.run(Agent(name="a", model=model, tools=tools), "go", run_config=config)
    assert "none" == model.calls[0].model_settings.tool_choice
    assert ["final_step"] == [o.error.kind for o in outcomes if isinstance(o, pegboard.Failed)]


async def test_cancellation_propagates_through_an_agents_sdk_run(
    location: pegboard.Location,
) -> None:
    """Cancelling the run cancels the tool and runs its cleanup; no outcome is settled."""
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    model = ScriptedModel([[function_call("hang", {}, call_id="c")], [assistant_message("x")]])
    agent = Agent(name="a", model=model, tools=function_tools(location, on_outcome=outcomes.append))
    with anyio.move_on_after(0.2) as scope:
        await Runner.run(agent, "go")
    assert scope.cancelled_caught
    assert board.cleaned_up.is_set()
    assert [] == outcomes


async def test_the_builtin_tools_are_all_sent_strict(
    host: pegboard.Host, workspace: Any, storage_dir: Any
) -> None:
    async with host.location(workspace, plugins=["builtin"], storage=storage_dir) as location:
        tools = function_tools(location)
    assert {"bash", "edit", "glob", "grep", "read", "write"} <= {tool.name for tool in tools}
    assert [] == [tool.name for tool in tools if not tool.strict_json_schema]
