"""A small host: register two tools, prepare a request, execute calls, print outcomes.

Run it with ``python examples/host.py`` after installing pegboard.
"""

from __future__ import annotations

import tempfile

import anyio
import attrs

import pegboard


@attrs.frozen
class AddInput:
    a: int = attrs.field(metadata={"description": "The first addend"})
    b: int = attrs.field(metadata={"description": "The second addend"})


@attrs.frozen
class AddOutput:
    total: int


@pegboard.tool(description="Add two integers.", input=AddInput, output=AddOutput)
async def add(input: AddInput, context: pegboard.ToolContext) -> pegboard.ToolResponse[AddOutput]:
    return pegboard.ToolResponse(output=AddOutput(total=input.a + input.b))


WORD_COUNT_INPUT = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to count"}},
    "required": ["text"],
    "additionalProperties": False,
}


@pegboard.tool(description="Count the words in a text.", input=WORD_COUNT_INPUT)
async def word_count(
    input: dict[str, str], context: pegboard.ToolContext
) -> pegboard.ToolResponse[None]:
    words = len(input["text"].split())
    return pegboard.ToolResponse(
        content=f"{words} words", metadata={"words": words, "characters": len(input["text"])}
    )


def show(outcome: pegboard.Outcome) -> str:
    if isinstance(outcome, pegboard.Completed):
        text = " ".join(item.text for item in outcome.content if isinstance(item, pegboard.Text))
        return f"completed: {text!r} output={outcome.output} metadata={outcome.metadata}"
    return f"failed ({outcome.error.kind}): {outcome.error.message}"


async def main() -> None:
    host = pegboard.Host()
    with tempfile.TemporaryDirectory() as workspace:
        async with host.location(workspace, plugins=[]) as location:
            location.tools.register({"add": add, "word count": word_count})
            request = location.prepare()
            print("advertised:", [definition.name for definition in request.definitions])
            calls = [
                ("add", '{"a": 2, "b": 40}'),
                ("word_count", {"text": "pegboard hangs tools on a board"}),
                ("add", '{"a": "2", "b": 40}'),
                ("subtract", "{}"),
            ]
            for index, (name, raw) in enumerate(calls, 1):
                context = pegboard.ToolContext(
                    session_id="session-1",
                    agent="demo",
                    message_id="message-1",
                    call_id=f"call-{index}",
                )
                outcome = await request.execute(pegboard.ToolCall(name, raw, context))
                print(f"{name}: {show(outcome)}")
            final = location.prepare(final_step=True)
            context = pegboard.ToolContext(
                session_id="session-1", agent="demo", message_id="message-2", call_id="call-5"
            )
            outcome = await final.execute(pegboard.ToolCall("add", '{"a": 1, "b": 1}', context))
            print(f"final step (tool_choice={final.tool_choice!r}): {show(outcome)}")


if __name__ == "__main__":
    anyio.run(main)
