"""Tool values: one execute function, codecs, immutability."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import pegboard

pytestmark = pytest.mark.anyio


async def first(input: Any, context: pegboard.ToolContext) -> str:
    return "first"


async def second(input: Any, context: pegboard.ToolContext) -> str:
    return "second"


def test_tool_function_and_decorator_forms_are_equal() -> None:
    """tool(execute=f) and @tool on f make equal values."""
    made = pegboard.tool(description="First.", execute=first)
    decorated = pegboard.tool(description="First.")(first)
    assert made.execute is decorated.execute is first
    assert made.description == decorated.description
    assert dict(made.input.json_schema) == dict(decorated.input.json_schema)


async def test_law_single_execution(location: pegboard.Location, context: Any) -> None:
    """Law 1: a Tool executes only the function it was made with, and cannot be rewired."""
    made = pegboard.tool(description="First.", execute=first)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.execute = second  # type: ignore[misc]
    other = attrs.evolve(made, execute=second)
    location.tools.register({"first": made, "second": other})
    request = location.prepare()
    outcomes = [
        await request.execute(pegboard.ToolCall(name, "{}", context(name)))
        for name in ("first", "second")
    ]
    assert [(pegboard.Text("first"),), (pegboard.Text("second"),)] == [
        outcome.content  # type: ignore[union-attr]
        for outcome in outcomes
    ]
    assert made.execute is first


def test_a_tool_has_no_name() -> None:
    """A reusable tool value carries no name of its own; registration names it."""
    made = pegboard.tool(description="First.", execute=first)
    assert "name" not in attrs.fields_dict(pegboard.Tool)
    assert not hasattr(made, "name")


def test_no_input_means_an_empty_object() -> None:
    """A tool made without input takes no arguments: an empty, closed object."""
    made = pegboard.tool(description="First.", execute=first)
    assert dict(made.input.json_schema) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert made.output is None


@pytest.mark.parametrize("description", ["", "   ", None, 3])
def test_a_tool_needs_a_description(description: Any) -> None:
    """The model needs a description, so an empty one is refused."""
    with pytest.raises(ValueError, match="needs a description"):
        pegboard.tool(description=description, execute=first)


def test_execute_must_be_callable() -> None:
    """A non-callable execute is refused when the tool is made."""
    with pytest.raises(TypeError, match="execute must be a function"):
        pegboard.tool(description="d", execute="print")  # type: ignore[call-overload]


def test_async_detection() -> None:
    """Coroutine functions and async callable objects run on the loop; others in a thread."""

    class AsyncCallable:
        async def __call__(self, input: Any, context: Any) -> str:
            return "x"

    assert pegboard.tool(description="d", execute=first).is_async
    assert pegboard.tool(description="d", execute=AsyncCallable()).is_async
    assert not pegboard.tool(description="d", execute=lambda i, c: "x").is_async


def test_bad_codec_spec_is_a_schema_error() -> None:
    """Only attrs classes, schema dicts and codecs describe input or output."""
    with pytest.raises(pegboard.SchemaError, match="must be an attrs class"):
        pegboard.tool(description="d", execute=first, output=int)


def test_content_items_validate_their_fields() -> None:
    """Media items check their MIME type; embedded resources carry exactly one body."""
    with pytest.raises(ValueError, match="image/"):
        pegboard.Image(b"x", "audio/wav")
    with pytest.raises(ValueError, match="audio/"):
        pegboard.Audio(b"x", "image/png")
    with pytest.raises(TypeError):
        pegboard.Text(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one"):
        pegboard.EmbeddedResource(uri="file:///a", text="t", data=b"d")
    link = pegboard.ResourceLink(uri="file:///a.txt", name="a.txt", mime_type="text/plain")
    assert link.name == "a.txt"


def test_progress_normalizes_content() -> None:
    """Progress content takes the same forms as response content."""
    assert (pegboard.Text("partial"),) == pegboard.Progress(content="partial").content
    with pytest.raises(TypeError, match="content items"):
        pegboard.Progress(content=[1])


async def test_extra_definition_fields_reach_the_definition_unchanged(
    location: pegboard.Location,
) -> None:
    """Tool.extra is a read-only JSON copy carried to ToolDefinition.extra, through the
    confined worker's wire too; what is not JSON, too large or not a mapping is refused.
    """
    from pegboard._wire import dump_definition, dump_tool, load_definition

    fields = {"execution": {"taskSupport": "required"}, "icons": [{"src": "a.png"}]}
    made = pegboard.tool(description="Run.", execute=lambda value, context: "ran", extra=fields)
    fields["execution"]["taskSupport"] = "forbidden"  # the caller's dict changes nothing
    assert {"execution": {"taskSupport": "required"}, "icons": [{"src": "a.png"}]} == made.extra
    with pytest.raises(TypeError):
        made.extra["icons"].append({})  # type: ignore[index]
    location.tools.register({"run": made, "plain": pegboard.tool(description="P.", execute=str)})
    definitions = {d.name: d for d in location.prepare().definitions}
    assert made.extra == definitions["run"].extra
    assert definitions["plain"].extra is None
    assert definitions["run"] == load_definition(dump_definition(definitions["run"]))
    assert made.extra == dump_tool("run", made)["extra"]
    assert pegboard.tool(description="E.", execute=str, extra={}).extra is None
    with pytest.raises(TypeError, match="extra is a mapping"):
        pegboard.tool(description="E.", execute=str, extra=["execution"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be JSON"):
        pegboard.tool(description="E.", execute=str, extra={"when": object()})
    with pytest.raises(ValueError, match="at most 64 KiB"):
        pegboard.tool(description="E.", execute=str, extra={"big": "x" * 70_000})
