"""providers.*.run_step: a host's whole step in one call, answered as each SDK wants."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anthropic.types import Message, MessageParam
from google.genai import types as genai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputItemParam
from test_providers import conforms

import pegboard
from pegboard.providers import anthropic, gemini, openai_chat, openai_responses

pytestmark = pytest.mark.anyio

PROVIDERS = [openai_chat, openai_responses, anthropic, gemini]
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))


def response(provider: Any, calls: list[tuple[str, str, Any]], message_id: str = "msg_1") -> Any:
    """The SDK's own response object holding ``calls`` (call ID, tool name, arguments).

    Arguments are JSON text for OpenAI and a dict (or None) for Anthropic and Gemini.
    """
    if provider is openai_chat:
        tool_calls = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ]
        return ChatCompletion.model_validate(
            {
                "id": message_id,
                "object": "chat.completion",
                "created": 0,
                "model": "gpt",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                    }
                ],
            }
        )
    if provider is openai_responses:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{call_id}",
                "call_id": call_id,
                "name": name,
                "arguments": args,
                "status": "completed",
            }
            for call_id, name, args in calls
        ]
        return Response.model_validate(
            {
                "id": message_id,
                "created_at": 0,
                "model": "gpt",
                "object": "response",
                "output": [
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [],
                    },
                    *output,
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        )
    if provider is anthropic:
        content = [{"type": "text", "text": "Let me look."}] + [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, name, args in calls
        ]
        return Message.model_validate(
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": content,
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )
    parts = [genai.Part(text="Let me look.")] + [
        genai.Part(function_call=genai.FunctionCall(id=call_id or None, name=name, args=args))
        for call_id, name, args in calls
    ]
    return genai.GenerateContentResponse(
        response_id=message_id,
        candidates=[genai.Candidate(content=genai.Content(role="model", parts=parts))],
    )


def arguments(provider: Any, value: Any) -> Any:
    """``value`` (a dict, or raw text) as the provider sends arguments."""
    import json

    if provider in (openai_chat, openai_responses):
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str) and not value.strip():
        # No arguments: Anthropic sends an empty object, Gemini no args at all.
        return {} if provider is anthropic else None
    return json.loads(value) if isinstance(value, str) else value


def validate(provider: Any, items: list[dict[str, Any]]) -> None:
    """What run_step returned, checked against the SDK's parameter types."""
    if provider is openai_chat:
        conforms(list[ChatCompletionMessageParam], items)
    elif provider is openai_responses:
        conforms(list[ResponseInputItemParam], items)
    elif provider is anthropic:
        conforms(list[MessageParam], items)
    else:
        for content in items:
            genai.Content.model_validate(content)


def answers(provider: Any, items: list[dict[str, Any]]) -> dict[str, tuple[bool, str]]:
    """Each answered call ID: (is it an error, the text the model reads)."""
    found: dict[str, tuple[bool, str]] = {}
    if provider is openai_chat:
        for message in items:
            if message["role"] == "tool":
                content = message["content"]
                text = content if isinstance(content, str) else content[0]["text"]
                found[message["tool_call_id"]] = ("Error" in text or "did not finish" in text, text)
    elif provider is openai_responses:
        for item in items:
            output = item["output"]
            text = output if isinstance(output, str) else output[0]["text"]
            found[item["call_id"]] = ("Error" in text or "did not finish" in text, text)
    elif provider is anthropic:
        for block in items[0]["content"]:
            found[block["tool_use_id"]] = (block["is_error"], block["content"][0]["text"])
    else:
        for part in items[0]["parts"]:
            if "function_response" in part:
                reply = part["function_response"]
                key = "error" if "error" in reply["response"] else "output"
                found[reply.get("id", reply["name"])] = (key == "error", reply["response"][key])
    return found


def order(provider: Any, items: list[dict[str, Any]]) -> list[str]:
    """The call IDs in the order the answers come."""
    return list(answers(provider, items))


class Tools:
    """A step's tools: two that need each other (concurrency), and every kind of trouble."""

    def __init__(self) -> None:
        self.first = anyio.Event()
        self.cancelled: list[str] = []

    def mapping(self) -> dict[str, pegboard.Tool]:
        async def slow(input: Any, context: pegboard.ToolContext) -> str:
            await self.first.wait()
            return f"slow {input['city']}"

        async def fast(input: Any, context: pegboard.ToolContext) -> Any:
            await context.progress(pegboard.Progress(message="half", current=1, total=2))
            self.first.set()
            return ["fast", pegboard.Image(_PNG, "image/png")]

        async def now(input: Any, context: pegboard.ToolContext) -> str:
            assert {} == input
            return "12:00"

        async def hang(input: Any, context: pegboard.ToolContext) -> str:
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.append(context.call_id)
            return "never"

        async def broken(input: Any, context: pegboard.ToolContext) -> str:
            await anyio.lowlevel.checkpoint()
            raise RuntimeError("secret detail of a bug")

        city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        empty = {"type": "object", "properties": {}}
        return {
            "slow": pegboard.tool(description="Slow.", execute=slow, input=city),
            "fast": pegboard.tool(description="Fast.", execute=fast),
            "now": pegboard.tool(description="Now.", execute=now, input=empty),
            "hang": pegboard.tool(description="Hangs.", execute=hang),
            "broken": pegboard.tool(description="Broken.", execute=broken),
        }


@pytest.fixture
async def asking(tmp_path: Path) -> AsyncIterator[tuple[pegboard.Location, Tools]]:
    """A Location with the built-ins, an approver that never answers, and the step's tools."""

    async def never(request: pegboard.PermissionRequest) -> pegboard.Reject:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    (tmp_path / "root").mkdir()
    made = Tools()
    async with pegboard.Host().location(
        tmp_path / "root", plugins=["builtin"], storage=tmp_path / "s", approver=never
    ) as location:
        location.tools.register(made.mapping())
        yield location, made


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__.rsplit(".")[-1])
async def test_run_step_answers_every_call_id_in_order_whatever_happens(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """Parallel, invalid, unknown, empty-argument, timed-out, defective and
    approval-withdrawn calls: one answer each, in call order, valid for the SDK.
    """
    location, made = asking
    calls = [
        ("c_slow", "slow", arguments(provider, {"city": "Oslo"})),
        ("c_fast", "fast", arguments(provider, {})),
        ("c_invalid", "slow", arguments(provider, {"town": 3})),
        ("c_unknown", "ghost", arguments(provider, {})),
        ("c_empty", "now", arguments(provider, "")),
        ("c_hang", "hang", arguments(provider, {})),
        ("c_broken", "broken", arguments(provider, {})),
        ("c_write", "write", arguments(provider, {"path": "a.txt", "content": "x"})),
    ]
    events: list[pegboard.StepEvent] = []
    request = location.prepare()
    with anyio.fail_after(20):
        items = await provider.run_step(
            request,
            response(provider, calls),
            session_id="s1",
            agent="main",
            timeout=1.5,
            on_event=events.append,
        )
    validate(provider, items)
    got = answers(provider, items)
    assert [call_id for call_id, _, _ in calls] == order(provider, items)
    assert (False, "slow Oslo") == got["c_slow"]
    assert (False, "fast") == (got["c_fast"][0], got["c_fast"][1].split("\n")[0])
    assert got["c_invalid"][0]
    assert "'city' is a required property" in got["c_invalid"][1]
    assert got["c_unknown"][0]
    assert "there is no tool named 'ghost'" in got["c_unknown"][1]
    assert (False, "12:00") == got["c_empty"]
    assert got["c_hang"][0]
    assert "1.5-second limit" in got["c_hang"][1]
    assert got["c_broken"][0]
    assert "RuntimeError" in got["c_broken"][1]
    assert "secret detail" not in got["c_broken"][1]  # the model is not shown the defect
    assert got["c_write"][0]
    assert "limit" in got["c_write"][1]
    assert ["c_hang"] == made.cancelled
    assert not (location.root / "a.txt").exists()

    kinds = {(event.kind, event.call_id) for event in events}
    assert {("started", call_id) for call_id, _, _ in calls} <= kinds
    assert ("progress", "c_fast") in kinds
    assert ("approval_asked", "c_write") in kinds
    assert ("approval_withdrawn", "c_write") in kinds
    (defect,) = [event for event in events if event.kind == "defect"]
    assert ("c_broken", "broken") == (defect.call_id, defect.name)
    assert isinstance(defect.error, RuntimeError)
    outcomes = {event.call_id: event.outcome for event in events if event.kind == "outcome"}
    assert {"c_slow", "c_fast", "c_invalid", "c_unknown", "c_empty"} == set(outcomes)
    for outcome in outcomes.values():
        assert outcome is not None
        assert outcome.call is not None
        assert ("s1", "main", "msg_1") == (
            outcome.call.session_id,
            outcome.call.agent,
            outcome.call.message_id,
        )
    if provider is openai_chat:  # every tool message first, then the media
        assert ["tool"] * len(calls) + ["user"] == [message["role"] for message in items]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__.rsplit(".")[-1])
async def test_run_step_on_the_final_step_answers_every_call_as_a_failure(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """A final step runs nothing; each call is answered as a final_step failure."""
    location, _ = asking
    calls = [("c1", "now", arguments(provider, {})), ("c2", "ghost", arguments(provider, {}))]
    items = await provider.run_step(
        location.prepare(final_step=True), response(provider, calls), session_id="s", agent="a"
    )
    validate(provider, items)
    got = answers(provider, items)
    assert ["c1", "c2"] == list(got)
    assert all(error and "final step" in text for error, text in got.values())


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__.rsplit(".")[-1])
async def test_run_step_cancelled_cancels_every_call_and_propagates(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """Cancelling run_step cancels every call; nothing is returned."""
    location, made = asking
    calls = [("h1", "hang", arguments(provider, {})), ("h2", "hang", arguments(provider, {}))]
    returned: list[Any] = []
    started: list[str] = []
    both = anyio.Event()

    def note(event: pegboard.StepEvent) -> None:
        if event.kind == "started":
            started.append(event.call_id)
            if len(started) == 2:
                both.set()

    async def run() -> None:
        returned.append(
            await provider.run_step(
                location.prepare(), response(provider, calls), session_id="s", agent="a",
                on_event=note,
            )
        )  # fmt: skip

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await both.wait()
            await anyio.sleep(0.05)  # both calls now wait inside their tools
            group.cancel_scope.cancel()
    assert [] == returned
    assert ["h1", "h2"] == sorted(made.cancelled)


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__.rsplit(".")[-1])
async def test_run_step_takes_the_response_as_a_dict_and_without_tool_calls(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """The model_dump() dict works as the object does; a response without calls needs nothing."""
    location, _ = asking
    request = location.prepare()
    calls = [("c1", "now", arguments(provider, {}))]
    as_dict = response(provider, calls).model_dump()
    items = await provider.run_step(request, as_dict, session_id="s", agent="a")
    validate(provider, items)
    assert {"c1": (False, "12:00")} == answers(provider, items)
    assert [] == await provider.run_step(request, response(provider, []), session_id="s", agent="a")


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__.rsplit(".")[-1])
async def test_run_step_refuses_what_is_not_a_response(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """Something else than a response, or one without its ID, is one clear error."""
    location, _ = asking
    request = location.prepare()
    with pytest.raises(TypeError, match="response object or its model_dump"):
        await provider.run_step(request, "hello", session_id="s", agent="a")
    data = response(provider, [("c1", "now", arguments(provider, {}))]).model_dump()
    data["response_id" if provider is gemini else "id"] = None
    with pytest.raises(ValueError, match="no ID to use as the message_id"):
        await provider.run_step(request, data, session_id="s", agent="a")
    with pytest.raises(ValueError, match="timeout"):
        await provider.run_step(request, response(provider, []), session_id="s", agent="a",
                                timeout=0)  # fmt: skip


async def test_gemini_calls_without_ids_are_answered_by_name_in_order(
    asking: tuple[pegboard.Location, Tools],
) -> None:
    """Gemini may send no call IDs: the answers carry none either, one per call, in order."""
    location, _ = asking
    calls = [("", "now", {}), ("", "ghost", {})]
    items = await gemini.run_step(
        location.prepare(), response(gemini, calls, "resp-9"), session_id="s", agent="a"
    )
    validate(gemini, items)
    replies = [part["function_response"] for part in items[0]["parts"]]
    assert ["now", "ghost"] == [reply["name"] for reply in replies]
    assert all("id" not in reply for reply in replies)
    assert {"output": "12:00"} == replies[0]["response"]


@pytest.mark.parametrize(
    "provider", [openai_chat, openai_responses, anthropic], ids=["chat", "responses", "anthropic"]
)
async def test_run_step_refuses_a_call_without_its_id(
    asking: tuple[pegboard.Location, Tools], provider: Any
) -> None:
    """A call the host cannot answer by ID is one clear error, before anything runs."""
    location, _ = asking
    data = response(provider, [("c1", "now", arguments(provider, {}))]).model_dump()
    if provider is openai_chat:
        data["choices"][0]["message"]["tool_calls"][0]["id"] = None
    elif provider is openai_responses:
        data["output"][1]["call_id"] = None
    else:
        data["content"][1]["id"] = None
    with pytest.raises(ValueError, match=r"response has no (ID|call_id)"):
        await provider.run_step(location.prepare(), data, session_id="s", agent="a")


async def test_run_step_a_listener_that_raises_leaves_no_call_unanswered(
    asking: tuple[pegboard.Location, Tools], caplog: pytest.LogCaptureFixture
) -> None:
    """on_event raising on every event is logged; every call is still answered."""
    location, _ = asking

    def broken_listener(event: pegboard.StepEvent) -> None:
        raise LookupError(f"listener bug on {event.kind}")

    calls = [("c1", "now", {}), ("c2", "fast", {})]
    items = await anthropic.run_step(
        location.prepare(),
        response(anthropic, calls),
        session_id="s",
        agent="a",
        on_event=broken_listener,
    )
    got = answers(anthropic, items)
    assert (False, "12:00") == got["c1"]
    assert not got["c2"][0]
    assert "on_event raised for the 'started' event of call c1" in caplog.text
    assert "on_event raised for the 'progress' event of call c2" in caplog.text


async def test_run_step_provider_state_its_provider_cannot_take_leaves_no_call_unanswered(
    asking: tuple[pegboard.Location, Tools], caplog: pytest.LogCaptureFixture
) -> None:
    """One tool's malformed Anthropic state is dropped with a warning; every call is answered."""
    location, _ = asking

    async def odd(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse:
        return pegboard.ToolResponse(content="kept", provider_state={"anthropic": "not blocks"})

    location.tools.register({"odd": pegboard.tool(description="Odd state.", execute=odd)})
    calls = [("c1", "odd", {}), ("c2", "now", {})]
    items = await anthropic.run_step(
        location.prepare(), response(anthropic, calls), session_id="s", agent="a"
    )
    validate(anthropic, items)
    assert {"c1": (False, "kept"), "c2": (False, "12:00")} == answers(anthropic, items)
    assert "dropped the provider state of tool 'odd' (call c1)" in caplog.text


async def test_run_step_openai_chat_sends_every_calls_media_in_one_user_message(
    asking: tuple[pegboard.Location, Tools],
) -> None:
    """Two calls with images: the tool messages, then one user message holding both."""
    location, made = asking
    made.first.set()
    calls = [("m1", "fast", "{}"), ("t1", "now", "{}"), ("m2", "fast", "{}")]
    items = await openai_chat.run_step(
        location.prepare(), response(openai_chat, calls), session_id="s", agent="a"
    )
    validate(openai_chat, items)
    assert ["tool", "tool", "tool", "user"] == [message["role"] for message in items]
    parts = items[-1]["content"]
    intros = [part["text"] for part in parts if part["type"] == "text"]
    assert ["m1", "m2"] == [intro.split()[5] for intro in intros]
    assert 2 == sum(part["type"] == "image_url" for part in parts)
