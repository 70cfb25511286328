"""pegboard.adapters.pydantic_ai: a real pydantic-ai agent, offline, calling pegboard tools."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from adapter_tools import PNG, Board
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

import pegboard
from pegboard.adapters.pydantic_ai import Toolset

# pydantic-ai runs on asyncio only.
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Script:
    """A FunctionModel that makes the given calls, one list per step, then answers."""

    def __init__(self, *steps: list[tuple[str, dict[str, Any]]]) -> None:
        self.steps = list(steps)
        self.seen: list[AgentInfo] = []
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info)
        self.requests.append(list(messages))
        step = len(self.seen)
        if step <= len(self.steps):
            return ModelResponse(
                parts=[
                    ToolCallPart(name, args, tool_call_id=f"call-{step}-{index}")
                    for index, (name, args) in enumerate(self.steps[step - 1])
                ]
            )
        return ModelResponse(parts=[TextPart("done")])


def _returns(messages: list[ModelMessage]) -> dict[str, Any]:
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    }


async def test_law_durable_identity_through_a_pydantic_ai_agent(
    location: pegboard.Location,
) -> None:
    """Two parallel calls in one step: each outcome carries the agent's tool call ID."""
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    script = Script([("meet", {"word": "a"}), ("meet", {"word": "b"})])
    toolset = Toolset(location, session_id="s-1", on_outcome=outcomes.append)
    agent = Agent(FunctionModel(script), toolsets=[toolset], name="helper")

    result = await agent.run("go")

    assert "done" == result.output
    # One outcome per call, each with the framework's call ID.
    assert ["call-1-0", "call-1-1"] == sorted(o.call.call_id for o in outcomes if o.call)
    assert {"s-1"} == {context.session_id for context in board.contexts}
    assert {"helper"} == {context.agent for context in board.contexts}
    assert {f"{result.run_id}/step-1"} == {context.message_id for context in board.contexts}
    returns = _returns(result.all_messages())
    assert "met a" == returns["call-1-0"].content
    assert returns["call-1-0"].metadata in outcomes  # the host finds the outcome in history


async def test_law_captured_execution_per_model_step(location: pegboard.Location) -> None:
    """A tool registered during step 1 is unknown to step 1's calls and advertised in step 2."""
    registered = pegboard.tool(description="Late.", execute=lambda _input, _context: "late ok")

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = len([m for m in messages if isinstance(m, ModelRequest)])
        if step == 1:
            location.tools.register({"late": registered})
        if step <= 2:
            return ModelResponse(parts=[ToolCallPart("late", {}, tool_call_id=f"c{step}")])
        return ModelResponse(parts=[TextPart("done")])

    seen: list[list[str]] = []

    def watch(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append([tool.name for tool in info.function_tools])
        return model(messages, info)

    location.tools.register({"early": registered})
    agent = Agent(FunctionModel(watch), toolsets=[Toolset(location, max_retries=2)])
    result = await agent.run("go")

    assert [["early"], ["early", "late"], ["early", "late"]] == seen
    returns = _returns(result.all_messages())
    # Step 1 did not advertise 'late': pydantic-ai itself asks the model to retry.
    assert "retried" == returns["c1"].outcome
    assert "'late'" in str(returns["c1"].content)
    assert "late ok" == returns["c2"].content


async def test_invalid_input_is_a_retry_with_pegboards_message(location: pegboard.Location) -> None:
    """The JSON schema is pegboard's: a wrong type is refused by the pipeline, as a retry."""
    board = Board()
    location.tools.register(board.tools())
    script = Script([("meet", {"word": 7})])
    result = await Agent(FunctionModel(script), toolsets=[Toolset(location)]).run("go")

    part = _returns(result.all_messages())["call-1-0"]
    assert ("retried", "model_retry") == (part.outcome, part.retry.cause)
    assert str(part.content).startswith("invalid input for tool 'meet': $.word: expected string")
    assert board.contexts == []  # the tool never ran
    [tool] = [t for t in script.seen[0].function_tools if t.name == "meet"]
    [definition] = [d for d in location.prepare().definitions if d.name == "meet"]
    assert pegboard.thaw(definition.input_schema) == tool.parameters_json_schema
    assert tool.return_schema is None  # the tool declares no output


async def test_a_tool_failure_reaches_the_model_with_its_partial_output(
    location: pegboard.Location,
) -> None:
    """ToolFailure: a failed tool result (not a retry) with the partial snapshot."""
    location.tools.register(Board().tools())
    script = Script([("fail", {})])
    result = await Agent(FunctionModel(script), toolsets=[Toolset(location)]).run("go")

    part = _returns(result.all_messages())["call-1-0"]
    assert "failed" == part.outcome
    assert "Error: disk full\nOutput before the error:\nwrote 3 of 5" == part.content


async def test_media_reaches_the_model_as_binary_content(location: pegboard.Location) -> None:
    """An image becomes BinaryContent; metadata stays with the host."""
    location.tools.register(Board().tools())
    script = Script([("picture", {})])
    result = await Agent(FunctionModel(script), toolsets=[Toolset(location)]).run("go")

    part = _returns(result.all_messages())["call-1-0"]
    sent = [item for message in script.requests[1] for item in getattr(message, "parts", [])]
    binaries = [
        content
        for item in sent
        if hasattr(item, "content")
        for content in (item.content if isinstance(item.content, list) else [item.content])
        if isinstance(content, BinaryContent)
    ]
    assert [PNG] == [binary.data for binary in binaries]
    assert {"ui": 1} == part.metadata.metadata


async def test_the_final_step_says_tool_choice_none_and_runs_no_tool(
    location: pegboard.Location,
) -> None:
    """final_step: model settings say tool_choice none; a call made anyway is not run."""
    board = Board()
    location.tools.register(board.tools())
    toolset = Toolset(location, final_step=lambda ctx: ctx.run_step >= 2)
    script = Script([("picture", {})], [("picture", {})])
    agent = Agent(FunctionModel(script), toolsets=[toolset], model_settings=toolset.model_settings)
    result = await agent.run("go")

    assert [None, "none", "none"] == [
        (info.model_settings or {}).get("tool_choice") for info in script.seen
    ]
    part = _returns(result.all_messages())["call-2-0"]
    assert "this is the final step" in part.model_response_str()
    assert 1 == len(board.contexts)


async def test_cancellation_propagates_through_a_pydantic_ai_agent(
    location: pegboard.Location,
) -> None:
    """Cancelling the run cancels the tool, runs its cleanup, and settles no outcome."""
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    agent = Agent(
        FunctionModel(Script([("hang", {})])),
        toolsets=[Toolset(location, on_outcome=outcomes.append)],
    )
    with anyio.move_on_after(0.2) as scope:
        await agent.run("go")
    assert scope.cancelled_caught
    assert board.cleaned_up.is_set()
    assert [] == outcomes


async def test_a_crashing_tool_propagates_as_itself(location: pegboard.Location) -> None:
    """A defect is not a result: the run fails with the tool's own exception."""
    location.tools.register(Board().tools())
    agent = Agent(FunctionModel(Script([("crash", {})])), toolsets=[Toolset(location)])
    with pytest.raises(RuntimeError, match="bug in the tool"):
        await agent.run("go")


async def test_test_model_calls_every_tool(location: pegboard.Location) -> None:
    """pydantic-ai's TestModel calls each advertised tool with arguments from its schema."""

    async def echo(input: Any, context: pegboard.ToolContext) -> str:
        return f"echo {input['word']}"

    from adapter_tools import WORD

    location.tools.register({"echo": pegboard.tool(description="Echo.", execute=echo, input=WORD)})
    outcomes: list[pegboard.Outcome] = []
    agent = Agent(TestModel(), toolsets=[Toolset(location, on_outcome=outcomes.append)])
    result = await agent.run("go")
    assert ["echo"] == [outcome.name for outcome in outcomes]
    assert isinstance(outcomes[0], pegboard.Completed)
    assert "echo" in result.output


async def test_output_schemas_are_sent_as_return_schemas(location: pegboard.Location) -> None:
    count = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def counted(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse:
        return pegboard.ToolResponse(output={"n": 1})

    location.tools.register(
        {"count": pegboard.tool(description="Count.", execute=counted, output=count)}
    )
    """The tool's output schema is its return schema, sent when the host asks pydantic-ai to."""
    script = Script()
    toolset = Toolset(location).include_return_schemas()
    await Agent(FunctionModel(script), toolsets=[toolset]).run("go")
    [tool] = script.seen[0].function_tools
    # FunctionModel has no native return schemas: pydantic-ai puts it in the description.
    assert tool.description is not None
    assert tool.description.startswith("Count.")
    assert '"type": "integer"' in tool.description


async def test_adapters_pydantic_ai_answers_unknown_names_before_the_toolset_as_documented(
    location: pegboard.Location,
) -> None:
    """pydantic-ai asks the model to retry a name no toolset listed, before any toolset
    sees it: such a call has no pegboard outcome (the host guide says so), while every
    call that reaches the toolset, a rejected one included, has one.
    """
    location.tools.register(
        {"hello": pegboard.tool(description="Hi.", execute=lambda value, context: "hi")}
    )
    outcomes: list[pegboard.Outcome] = []
    script = Script([("ghost", {}), ("hello", {"unexpected": 1})], [("hello", {})])
    toolset = Toolset(location, on_outcome=outcomes.append)
    result = await Agent(FunctionModel(script), toolsets=[toolset]).run("go")
    assert "done" == result.output
    returns = _returns(result.all_messages())
    assert "Unknown tool name: 'ghost'" in str(returns["call-1-0"].content)
    assert ["call-1-1", "call-2-0"] == [o.call.call_id for o in outcomes if o.call]
