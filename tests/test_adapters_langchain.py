"""pegboard.adapters.langchain: tools run as a LangChain agent executor runs them, offline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import pydantic
import pytest
from adapter_tools import PNG, WORD, Board
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

import pegboard
from pegboard.adapters.langchain import PegboardTool, tools

pytestmark = pytest.mark.anyio


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"type": "tool_call", "name": name, "args": args, "id": call_id}


async def _agent_loop(location: pegboard.Location, model: GenericFakeChatModel) -> list[Any]:
    """What an agent executor does: ask the model, run its tool calls in parallel, repeat."""
    by_name = {tool.name: tool for tool in tools(location, session_id="s-1")}
    messages: list[BaseMessage] = [HumanMessage("go")]
    while True:
        reply = model.invoke(messages)
        messages.append(reply)
        assert isinstance(reply, AIMessage)
        if not reply.tool_calls:
            return messages
        answers: list[Any] = [None] * len(reply.tool_calls)

        async def run(index: int, call: Any, answers: list[Any]) -> None:
            answers[index] = await by_name[call["name"]].ainvoke(call)

        async with anyio.create_task_group() as group:
            for index, call in enumerate(reply.tool_calls):
                group.start_soon(run, index, call, answers)
        messages += answers


class ToolCallingFakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, bindable to tools as an agent binds its model."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class TestOnAsyncio:
    """LangChain's async tools run on asyncio only."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    async def test_law_durable_identity_through_a_langchain_agent(
        self, location: pegboard.Location
    ) -> None:
        """A fake chat model calls two tools at once; each ToolMessage answers its call ID."""
        board = Board()
        location.tools.register(board.tools())
        calls = [_call("meet", {"word": "a"}, "call_a"), _call("meet", {"word": "b"}, "call_b")]
        model = GenericFakeChatModel(
            messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")])
        )
        messages = await _agent_loop(location, model)

        assert "done" == messages[-1].content
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        assert [("call_a", "met a"), ("call_b", "met b")] == [
            (m.tool_call_id, m.content) for m in answers
        ]
        assert ["call_a", "call_b"] == [m.artifact.call.call_id for m in answers]
        assert {("s-1", "langchain")} == {(c.session_id, c.agent) for c in board.contexts}

    async def test_law_durable_identity_through_create_agent(
        self, location: pegboard.Location
    ) -> None:
        """LangChain's own agent runs two calls at once: one outcome per call, each with
        the call's ID, and the LangGraph thread as the session.
        """
        board = Board()
        location.tools.register(board.tools())
        outcomes: list[pegboard.Outcome] = []
        calls = [_call("meet", {"word": "a"}, "call_a"), _call("meet", {"word": "b"}, "call_b")]
        model = ToolCallingFakeModel(
            messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")])
        )
        agent = create_agent(model, tools(location, on_outcome=outcomes.append))

        result = await agent.ainvoke(
            {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "thread-1"}}
        )

        messages = result["messages"]
        assert "done" == messages[-1].content
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        assert [("call_a", "met a"), ("call_b", "met b")] == sorted(
            (m.tool_call_id, m.content) for m in answers
        )
        assert ["call_a", "call_b"] == sorted(o.call.call_id for o in outcomes if o.call)
        assert {("thread-1", "langchain")} == {(c.session_id, c.agent) for c in board.contexts}

    async def test_cancellation_propagates_through_create_agent(
        self, location: pegboard.Location
    ) -> None:
        """Cancelling the agent's run cancels the tool and runs its cleanup; no outcome."""
        board = Board()
        location.tools.register(board.tools())
        outcomes: list[pegboard.Outcome] = []
        model = ToolCallingFakeModel(
            messages=iter([AIMessage("", tool_calls=[_call("hang", {}, "c1")]), AIMessage("x")])
        )
        agent = create_agent(model, tools(location, on_outcome=outcomes.append))
        with anyio.move_on_after(0.5) as scope:
            await agent.ainvoke({"messages": [HumanMessage("go")]})
        assert scope.cancelled_caught
        assert board.cleaned_up.is_set()
        assert [] == outcomes

    async def test_failures_are_error_tool_messages(self, location: pegboard.Location) -> None:
        """ToolFailure and invalid input: status="error", pegboard's words, the outcome."""
        board = Board()
        location.tools.register(board.tools())
        by_name = {tool.name: tool for tool in tools(location)}

        failed = await by_name["fail"].ainvoke(_call("fail", {}, "c1"))
        assert "error" == failed.status
        assert "Error: disk full\nOutput before the error:\nwrote 3 of 5" == failed.content
        assert isinstance(failed.artifact, pegboard.Failed)

        invalid = await by_name["meet"].ainvoke(_call("meet", {"word": 7}, "c2"))
        assert ("error", "c2") == (invalid.status, invalid.tool_call_id)
        assert invalid.content.startswith("Error: invalid input for tool 'meet': $.word")
        assert "invalid_input" == invalid.artifact.error.kind

        ok = await by_name["picture"].ainvoke(_call("picture", {}, "c3"))
        assert "success" == ok.status
        assert {"type": "text", "text": "a picture"} == ok.content[0]
        assert {"type": "image", "mime_type": "image/png"} == {
            key: ok.content[1][key] for key in ("type", "mime_type")
        }
        assert PNG == __import__("base64").b64decode(ok.content[1]["base64"])

    async def test_bare_arguments_give_content_or_the_error_text(
        self, location: pegboard.Location
    ) -> None:
        location.tools.register(Board().tools())
        by_name = {tool.name: tool for tool in tools(location)}
        assert "Error: disk full" in await by_name["fail"].ainvoke({})
        assert [] == [t for t in tools(location) if t.handle_tool_error is not True]

    async def test_a_crashing_tool_propagates_as_itself(self, location: pegboard.Location) -> None:
        location.tools.register(Board().tools())
        [crash] = [tool for tool in tools(location) if tool.name == "crash"]
        with pytest.raises(RuntimeError, match="bug in the tool"):
            await crash.ainvoke(_call("crash", {}, "c1"))

    async def test_cancellation_propagates_through_ainvoke(
        self, location: pegboard.Location
    ) -> None:
        """Cancelling ainvoke cancels the tool and runs its cleanup; no outcome is settled."""
        board = Board()
        location.tools.register(board.tools())
        outcomes: list[pegboard.Outcome] = []
        [hang] = [t for t in tools(location, on_outcome=outcomes.append) if t.name == "hang"]
        with anyio.move_on_after(0.2) as scope:
            await hang.ainvoke(_call("hang", {}, "c1"))
        assert scope.cancelled_caught
        assert board.cleaned_up.is_set()
        assert [] == outcomes


async def test_sync_invoke_from_worker_threads_runs_in_parallel(
    location: pegboard.Location, anyio_backend: str
) -> None:
    """invoke() from threads (as a sync executor runs tools) reaches the Location's loop."""
    board = Board()
    location.tools.register(board.tools())
    [meet] = [tool for tool in tools(location) if tool.name == "meet"]
    answers: dict[str, Any] = {}

    def run(word: str) -> None:
        answers[word] = meet.invoke(_call("meet", {"word": word}, f"call_{word}"))

    async with anyio.create_task_group() as group:
        for word in ("a", "b"):
            group.start_soon(anyio.to_thread.run_sync, run, word)
    assert {"a": "met a", "b": "met b"} == {word: m.content for word, m in answers.items()}
    assert {"call_a", "call_b"} == {m.artifact.call.call_id for m in answers.values()}


async def test_law_durable_identity_through_a_sync_create_agent(
    location: pegboard.Location, anyio_backend: str
) -> None:
    """LangChain's agent run synchronously in a worker thread, on either backend: its
    parallel calls reach the Location's loop, one outcome per call, each with its ID.
    """
    board = Board()
    location.tools.register(board.tools())
    outcomes: list[pegboard.Outcome] = []
    calls = [_call("meet", {"word": "a"}, "call_a"), _call("meet", {"word": "b"}, "call_b")]
    model = ToolCallingFakeModel(
        messages=iter([AIMessage("", tool_calls=calls), AIMessage("done")])
    )
    agent = create_agent(model, tools(location, on_outcome=outcomes.append))

    def run() -> Any:
        config = {"configurable": {"thread_id": "thread-2"}}
        return agent.invoke({"messages": [HumanMessage("go")]}, config)

    result = await anyio.to_thread.run_sync(run)

    assert "done" == result["messages"][-1].content
    assert ["call_a", "call_b"] == sorted(o.call.call_id for o in outcomes if o.call)
    assert {"thread-2"} == {c.session_id for c in board.contexts}


async def test_sync_invoke_in_the_loop_thread_says_to_use_ainvoke(
    location: pegboard.Location, anyio_backend: str
) -> None:
    location.tools.register(Board().tools())
    [meet] = [tool for tool in tools(location) if tool.name == "meet"]
    with pytest.raises(RuntimeError, match="would block that loop; use ainvoke"):
        meet.invoke(_call("meet", {"word": "a"}, "c1"))


async def test_the_input_schema_is_the_tools_json_schema(
    location: pegboard.Location, anyio_backend: str
) -> None:
    """The model sees pegboard's schema; get_input_schema() validates against it."""
    location.tools.register(Board().tools())
    [meet] = [tool for tool in tools(location) if tool.name == "meet"]
    sent = convert_to_openai_tool(meet)["function"]
    assert WORD["properties"] == sent["parameters"]["properties"]
    assert ["word"] == sent["parameters"]["required"]
    schema = meet.get_input_schema()
    schema.model_validate({"word": "x"})
    with pytest.raises(pydantic.ValidationError, match=r"\$.word: 7 is not of type 'string'"):
        schema.model_validate({"word": 7})
    with pytest.raises(pydantic.ValidationError, match="'word' is a required property"):
        schema.model_validate({})


def test_tools_outside_an_event_loop_need_a_portal(tmp_path: Any) -> None:
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            pegboard.Host().location(tmp_path, plugins=[])
        ) as location,
        pytest.raises(RuntimeError, match="pass portal="),
    ):
        tools(location)


@pytest.fixture
def portal_tools(tmp_path: Any) -> Iterator[dict[str, PegboardTool]]:
    """Tools of a Location opened in a blocking portal, for a program without a loop."""
    board = Board()
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(
            pegboard.Host().location(tmp_path, plugins=[])
        ) as location,
    ):
        location.tools.register(board.tools())
        yield {tool.name: tool for tool in tools(location, portal=portal)}


def test_sync_invoke_without_a_loop_through_a_portal(portal_tools: dict[str, Any]) -> None:
    message = portal_tools["picture"].invoke(_call("picture", {}, "call_1"))
    assert ("call_1", "success") == (message.tool_call_id, message.status)
    assert portal_tools["fail"].invoke(_call("fail", {}, "c2")).status == "error"


class TestStandardUnit(ToolsUnitTests):
    """LangChain's standard unit tests for tools, on a wrapped pegboard tool."""

    @property
    def tool_constructor(self) -> type[PegboardTool]:
        return PegboardTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"name": "meet", "description": "Meet.", "args_schema": WORD}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"word": "pegboard"}

    @pytest.fixture
    def tool(self, portal_tools: dict[str, Any]) -> PegboardTool:
        return portal_tools["meet"]


class TestStandardIntegration(ToolsIntegrationTests):
    """LangChain's standard integration tests: invoke and ainvoke, with and without a call."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @property
    def tool_constructor(self) -> type[PegboardTool]:
        return PegboardTool

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {}

    @pytest.fixture
    def tool(self, portal_tools: dict[str, Any]) -> PegboardTool:
        return portal_tools["picture"]


async def test_adapters_langchain_final_step_fails_every_call_as_final_step(
    location: pegboard.Location, anyio_backend: str
) -> None:
    """tools(final_step=True) is the final step's request: a call anyway is a final_step error."""
    location.tools.register(Board().tools())
    outcomes: list[pegboard.Outcome] = []
    [meet] = [
        tool
        for tool in tools(location, final_step=True, on_outcome=outcomes.append)
        if tool.name == "meet"
    ]
    answer = await anyio.to_thread.run_sync(meet.invoke, _call("meet", {"word": "a"}, "c1"))
    assert isinstance(answer, ToolMessage)
    assert "error" == answer.status
    assert ["final_step"] == [o.error.kind for o in outcomes if isinstance(o, pegboard.Failed)]
