"""The per-call pipeline: every call settles into exactly one outcome."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import anyio
import attrs
import pytest

import pegboard

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


@attrs.frozen
class AddInput:
    a: int
    b: int


@attrs.frozen
class AddOutput:
    total: int


class Spy:
    """Counts executions of the tools it makes."""

    def __init__(self) -> None:
        self.inputs: list[Any] = []

    def add(self) -> pegboard.Tool:
        async def execute(input: AddInput, context: pegboard.ToolContext) -> Any:
            self.inputs.append(input)
            return pegboard.ToolResponse(output=AddOutput(input.a + input.b))

        return pegboard.tool(
            description="Add two integers.", execute=execute, input=AddInput, output=AddOutput
        )

    def write(self) -> pegboard.Tool:
        async def execute(input: dict[str, Any], context: pegboard.ToolContext) -> str:
            self.inputs.append(input)
            return f"wrote {len(input['content'])} characters"

        schema = {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        }
        return pegboard.tool(description="Write a file.", execute=execute, input=schema)


async def call(
    location: pegboard.Location, name: str, raw: Any, context: pegboard.ToolContext
) -> pegboard.Outcome:
    return await location.prepare().execute(pegboard.ToolCall(name, raw, context))


BAD_INPUTS = [
    pytest.param("add", '{"a": 1}', "'b' is a required property", "required", id="missing"),
    pytest.param("add", '{"a": 1, "b": 2, "c": 3}', "'c'", "additionalProperties", id="extra"),
    pytest.param("add", '{"a": "1", "b": 2}', "$.a: expected integer", "type", id="string-int"),
    pytest.param("add", '{"a": true, "b": 2}', "$.a: expected integer", "type", id="bool-int"),
    pytest.param("add", '{"a": 2.5, "b": 2}', "$.a: expected integer", "type", id="float-int"),
    pytest.param("add", '{"a": null, "b": 2}', "$.a: expected integer", "type", id="null-field"),
    pytest.param("add", "null", "were null, read as {}: 'a' is a required", "required", id="null"),
    pytest.param("add", "[1, 2]", "expected object, got array", "type", id="array"),
    pytest.param("add", "[1, 2]", "expected object, got array", "type", id="list"),
    pytest.param("add", '{"a": 1,', "not valid JSON", "json", id="invalid-json"),
    pytest.param("add", '{"a": NaN, "b": 1}', "$.a: NaN", "number", id="nan"),
    pytest.param("add", '{"a": Infinity, "b": 1}', "$.a: Infinity", "number", id="infinity"),
    pytest.param("add", '{"a": 1e999, "b": 1}', "$.a: Infinity", "number", id="overflow"),
    pytest.param("add", "[" * 100_000 + "]" * 100_000, "deeper than 64", "json", id="deep"),
    pytest.param(
        "write",
        '{"path": "a", "content": "' + "x" * 2_000_000 + '"}',
        "the largest field is $.content (2,000,000 characters)",
        "size",
        id="2MB-string",
    ),
    pytest.param(
        "write",
        '{"path": "a", "content": "' + "x" * 50_000_000 + '"}',
        "input is 50,000,028 bytes, over the 1,048,576-byte limit; send a smaller input",
        "size",
        id="50MB-string-never-parsed",
    ),
    pytest.param(
        "write",
        '{"path": "\\ud800", "content": ""}',
        "$.path: string contains a lone UTF-16 surrogate",
        "unicode",
        id="lone-surrogate",
    ),
    pytest.param(
        "write",
        {"path": "\udfff", "content": ""},
        "$.path: string contains a lone UTF-16 surrogate",
        "unicode",
        id="lone-surrogate-mapping",
    ),
    pytest.param(
        "write", {"path": float("nan"), "content": ""}, "$.path: NaN", "number", id="nan-mapping"
    ),
    pytest.param("write", ["path"], "expected JSON text or a mapping", "type", id="list-object"),
    pytest.param(
        "add",
        '{"a": ' + "7" * 5000 + ', "b": 1}',
        "$.a: integer has more",
        "number",
        id="5000-digits",
    ),
    pytest.param(
        "write",
        {"path": 10**5000, "content": ""},
        "$.path: integer has more",
        "number",
        id="5000-digits-mapping",
    ),
    pytest.param(
        "add",
        '{"a": 1, "b": 12345678901234567890123, "c": NaN}',
        "$.c: NaN",
        "number",
        id="nan-beside-a-big-integer",
    ),
]


@pytest.mark.parametrize(("name", "raw", "message", "rule"), BAD_INPUTS)
async def test_bad_input_fails_clearly_and_never_executes(
    location: pegboard.Location, context: Context, name: str, raw: Any, message: str, rule: str
) -> None:
    """Bad input settles as invalid_input naming the field and the rule; the tool never runs."""
    spy = Spy()
    location.tools.register({"add": spy.add(), "write": spy.write()})
    outcome = await call(location, name, raw, context())
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.kind == "invalid_input"
    assert outcome.error.message.startswith(f"invalid input for tool {name!r}: ")
    assert message in outcome.error.message
    assert f"(rule: {rule})" in outcome.error.message
    assert spy.inputs == []


async def test_deeply_nested_mapping_input_is_refused(
    location: pegboard.Location, context: Context
) -> None:
    """A parsed mapping nested 100,000 levels deep is refused without recursion."""
    spy = Spy()
    location.tools.register({"write": spy.write()})
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100_000):
        node["a"] = {}
        node = node["a"]
    outcome = await call(location, "write", {"path": "p", "content": "c", "x": deep}, context())
    assert isinstance(outcome, pegboard.Failed)
    assert "deeper than 64 levels" in outcome.error.message
    assert spy.inputs == []


async def test_bad_inputs_do_not_disturb_concurrent_calls(
    location: pegboard.Location, context: Context
) -> None:
    """Concurrent bad calls each fail alone; the good calls among them complete."""
    spy = Spy()
    location.tools.register({"add": spy.add(), "write": spy.write()})
    request = location.prepare()
    bad = [(param.values[0], param.values[1]) for param in BAD_INPUTS]
    calls = [*bad, ("add", '{"a": 1, "b": 2}'), ("add", {"a": 3, "b": 4})]
    outcomes: dict[int, pegboard.Outcome] = {}

    async def run(index: int, name: str, raw: Any) -> None:
        call_ = pegboard.ToolCall(name, raw, context(f"call-{index}"))
        outcomes[index] = await request.execute(call_)

    async with anyio.create_task_group() as group:
        for index, (name, raw) in enumerate(calls):
            group.start_soon(run, index, name, raw)
    kinds = [outcomes[index] for index in range(len(calls))]
    assert all(isinstance(outcome, pegboard.Failed) for outcome in kinds[: len(bad)])
    assert [outcome.output["total"] for outcome in kinds[len(bad) :]] == [3, 7]  # type: ignore[union-attr]
    assert [AddInput(1, 2), AddInput(3, 4)] == sorted(spy.inputs, key=lambda value: value.a)


async def test_law_per_call_rejection(location: pegboard.Location, context: Context) -> None:
    """Law 8: an unknown, a withdrawn-style and an invalid call never fail their neighbours."""
    spy = Spy()
    location.tools.register({"add": spy.add()})
    request = location.prepare()
    unknown = await request.execute(pegboard.ToolCall("nope", "{}", context("c1")))
    invalid = await request.execute(pegboard.ToolCall("add", "{}", context("c2")))
    good = await request.execute(pegboard.ToolCall("add", '{"a": 1, "b": 1}', context("c3")))
    assert [
        unknown.error.kind,  # type: ignore[union-attr]
        invalid.error.kind,  # type: ignore[union-attr]
    ] == ["unknown_tool", "invalid_input"]
    assert isinstance(good, pegboard.Completed)
    assert good.output == {"total": 2}


async def test_unknown_tool_lists_what_is_available(
    location: pegboard.Location, context: Context
) -> None:
    """Calling a name nobody registered fails that call with the names that exist."""
    location.tools.register({"add": Spy().add()})
    outcome = await call(location, "subtract", "{}", context())
    assert (
        pegboard.Failed(
            pegboard.ToolError(
                "unknown_tool", "there is no tool named 'subtract'; available tools: add"
            ),
            call=outcome.call,
            name="subtract",
        )
        == outcome
    )


async def test_final_step_keeps_definitions_and_refuses_calls(
    location: pegboard.Location, context: Context
) -> None:
    """The final step advertises the same definitions with tool_choice 'none'."""
    spy = Spy()
    location.tools.register({"add": spy.add()})
    normal, final = location.prepare(), location.prepare(final_step=True)
    assert (normal.tool_choice, final.tool_choice) == ("auto", "none")
    assert normal.definitions == final.definitions
    outcome = await final.execute(pegboard.ToolCall("add", '{"a": 1, "b": 1}', context()))
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.kind == "final_step"
    assert spy.inputs == []


async def test_law_codec_boundary(location: pegboard.Location, context: Context) -> None:
    """Law 2: the tool sees decoded input; output is the encoded value; content is the tool's."""
    seen: list[Any] = []

    @pegboard.tool(description="Add.", input=AddInput, output=AddOutput)
    async def add(input: AddInput, ctx: pegboard.ToolContext) -> Any:
        seen.append(input)
        return pegboard.ToolResponse(
            output=AddOutput(input.a + input.b), content="the sum", metadata={"ui": 1}
        )

    location.tools.register({"add": add})
    outcome = await call(location, "add", '{"a": 2, "b": 3}', context())
    assert [AddInput(2, 3)] == seen
    assert (
        pegboard.Completed(
            {"total": 5}, (pegboard.Text("the sum"),), {"ui": 1}, call=outcome.call, name="add"
        )
        == outcome
    )


async def test_output_without_content_is_serialized_once(
    location: pegboard.Location, context: Context
) -> None:
    """Omitted content: an encoded string is one text item, other JSON is serialized once."""

    @pegboard.tool(description="Greet.", output={"type": "string"})
    async def greet(input: Any, ctx: pegboard.ToolContext) -> str:
        return "hello"

    @pegboard.tool(description="List.", output={"type": "array"})
    async def listing(input: Any, ctx: pegboard.ToolContext) -> list[str]:
        return ["a", "é"]

    location.tools.register({"greet": greet, "list": listing})
    greeting = await call(location, "greet", "{}", context())
    listed = await call(location, "list", "{}", context())
    assert (pegboard.Text("hello"),) == greeting.content  # type: ignore[union-attr]
    assert (pegboard.Text('["a","é"]'),) == listed.content  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (pegboard.ToolResponse(content="no output"), "declares an output but returned none"),
        (pegboard.ToolResponse(output=AddInput(1, 2)), "expected a AddOutput instance"),
        (pegboard.ToolResponse(output=AddOutput("3")), "$.total: expected integer"),  # type: ignore[arg-type]
        (
            pegboard.ToolResponse(output=AddOutput(3), content=42),
            "content is an int",
        ),
    ],
)
async def test_invalid_output_never_becomes_a_success(
    location: pegboard.Location, context: Context, response: Any, message: str
) -> None:
    """An output the codec refuses, or content that is not content, fails as invalid_output."""

    @pegboard.tool(description="Broken.", output=AddOutput)
    async def broken(input: Any, ctx: pegboard.ToolContext) -> Any:
        return response

    location.tools.register({"broken": broken})
    outcome = await call(location, "broken", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.kind == "invalid_output"
    assert message in outcome.error.message


async def test_a_coroutine_returned_unawaited_is_invalid_output_and_closed(
    location: pegboard.Location, context: Context
) -> None:
    """A tool that returns a coroutine instead of awaiting it fails as invalid_output saying
    so, and the coroutine is closed (it will never run, and warns no one at exit)."""
    returned = []

    async def later() -> str:
        return "too late"

    @pegboard.tool(description="Forgets to await.")
    async def forgetful(input: Any, ctx: pegboard.ToolContext) -> Any:
        returned.append(later())
        return returned[-1]

    location.tools.register({"forgetful": forgetful})
    outcome = await call(location, "forgetful", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert ("invalid_output", True) == (
        outcome.error.kind,
        "content is a coroutine (an await is missing where the tool returns it)"
        in outcome.error.message,
    )
    assert "CORO_CLOSED" == inspect.getcoroutinestate(returned[0])


async def test_the_first_output_of_a_new_class_is_checked_like_any_later_one(
    location: pegboard.Location, context: Context
) -> None:
    """The codec builds its encoder at the first encode: that first output is still checked."""
    fresh = attrs.frozen(type("Fresh", (), {"__annotations__": {"total": int}}))
    returned = iter([fresh("three"), fresh(3)])  # attrs does not check field types

    @pegboard.tool(description="Fresh.", output=fresh)
    async def first(input: Any, ctx: pegboard.ToolContext) -> Any:
        return next(returned)

    location.tools.register({"first": first})
    outcome = await call(location, "first", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_output" == outcome.error.kind
    assert "$.total" in outcome.error.message
    outcome = await call(location, "first", "{}", context("call-2"))
    assert isinstance(outcome, pegboard.Completed)
    assert {"total": 3} == outcome.output


@pytest.mark.parametrize("content", [None, "", [], [""]])
async def test_a_tool_without_output_must_return_content(
    location: pegboard.Location, context: Context, content: Any
) -> None:
    """Empty content from a tool without output is invalid output, not an empty success."""

    @pegboard.tool(description="Silent.")
    async def silent(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(content=content)

    location.tools.register({"silent": silent})
    outcome = await call(location, "silent", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.kind == "invalid_output"
    assert "non-empty content" in outcome.error.message


async def test_output_from_a_tool_without_output_codec_is_refused(
    location: pegboard.Location, context: Context
) -> None:
    """Returning an output the tool never declared is invalid output."""

    @pegboard.tool(description="Sneaky.")
    async def sneaky(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output={"x": 1}, content="hi")

    location.tools.register({"sneaky": sneaky})
    outcome = await call(location, "sneaky", "{}", context())
    assert outcome.error.kind == "invalid_output"  # type: ignore[union-attr]


async def test_law_canonical_representation(location: pegboard.Location, context: Context) -> None:
    """Law 3: content is one canonical tuple; a failure has one error and one partial snapshot."""

    @pegboard.tool(description="Mixed.")
    async def mixed(input: Any, ctx: pegboard.ToolContext) -> Any:
        image = pegboard.Image(b"\x89PNG", "image/png")
        return pegboard.ToolResponse(content=["a", "", pegboard.Text("b"), image])

    @pegboard.tool(description="Fails after progress.")
    async def failing(input: Any, ctx: pegboard.ToolContext) -> Any:
        await ctx.progress(pegboard.Progress(message="one", content="first"))
        await ctx.progress(pegboard.Progress(message="two", content=["second", "part"]))
        await ctx.progress(pegboard.Progress(message="no content"))
        raise pegboard.ToolFailure("it broke", metadata={"code": 7})

    location.tools.register({"mixed": mixed, "failing": failing})
    completed = await call(location, "mixed", "{}", context())
    assert (
        pegboard.Text("a"),
        pegboard.Text("b"),
        pegboard.Image(b"\x89PNG", "image/png"),
    ) == completed.content  # type: ignore[union-attr]
    failed = await call(location, "failing", "{}", context())
    assert (
        pegboard.Failed(
            pegboard.ToolError("tool_failure", "it broke", metadata={"code": 7}),
            (pegboard.Text("second"), pegboard.Text("part")),
            call=failed.call,
            name="failing",
        )
        == failed
    )


async def test_progress_reaches_the_runner(location: pegboard.Location, context: Context) -> None:
    """Every progress report is forwarded to the runner's callback, in order."""
    received: list[pegboard.Progress] = []

    async def forward(progress: pegboard.Progress) -> None:
        received.append(progress)

    @pegboard.tool(description="Slow.")
    async def slow(input: Any, ctx: pegboard.ToolContext) -> str:
        for step in range(3):
            await ctx.progress(pegboard.Progress(message=f"step {step}", current=step, total=3))
        return "done"

    location.tools.register({"slow": slow})
    await call(location, "slow", "{}", context(progress=forward))
    assert [progress.message for progress in received] == ["step 0", "step 1", "step 2"]


async def test_law_metadata_opt_in(location: pegboard.Location, context: Context) -> None:
    """Law 4: absent metadata stays absent; it is never a copy of the output."""
    location.tools.register({"add": Spy().add()})
    outcome = await call(location, "add", '{"a": 1, "b": 2}', context())
    assert isinstance(outcome, pegboard.Completed)
    assert outcome.output == {"total": 3}
    assert outcome.metadata is None


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _holding_itself() -> dict[str, Any]:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    return value


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        (["not", "an", "object"], "not a JSON object"),
        ({"x": float("nan")}, "not plain JSON"),
        ({"x": object()}, "not plain JSON"),
        ({"blob": "x" * 20_000}, "over the 16,384 limit"),
        (_nested(5000), "value nests deeper than 64 levels"),
        (MappingProxyType(_nested(5000)), "value nests deeper than 64 levels"),
        (_holding_itself(), "value nests deeper than 64 levels"),
    ],
    ids=["list", "NaN", "object", "oversized", "deep", "deep mapping", "holds itself"],
)
async def test_bad_metadata_is_dropped_with_a_warning(
    location: pegboard.Location,
    context: Context,
    caplog: pytest.LogCaptureFixture,
    metadata: Any,
    reason: str,
) -> None:
    """Invalid or oversized metadata is dropped and logged; the call still completes."""

    @pegboard.tool(description="Meta.")
    async def meta(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(content="ok", metadata=metadata)

    location.tools.register({"meta": meta})
    with caplog.at_level(logging.WARNING, logger="pegboard"):
        outcome = await call(location, "meta", "{}", context())
    assert isinstance(outcome, pegboard.Completed)
    assert outcome.metadata is None
    assert reason in caplog.text
    assert "'meta'" in caplog.text


async def test_metadata_is_a_private_copy(location: pegboard.Location, context: Context) -> None:
    """Mutating the metadata a tool returned cannot change the settled outcome."""
    shared: dict[str, Any] = {"items": [1]}

    @pegboard.tool(description="Meta.")
    async def meta(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(content="ok", metadata=shared)

    location.tools.register({"meta": meta})
    outcome = await call(location, "meta", "{}", context())
    shared["items"].append(2)
    assert outcome.metadata == {"items": [1]}  # type: ignore[union-attr]


class Shifty(Mapping[str, Any]):
    """A Mapping that is small when first read and 200 KB on every read after."""

    def __init__(self) -> None:
        self.reads = 0

    def _data(self) -> dict[str, Any]:
        self.reads += 1
        return {"note": "small" if self.reads == 1 else "x" * 200_000}

    def __getitem__(self, key: str) -> Any:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(["note"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("where", ["response", "failure"])
async def test_law_metadata_opt_in_metadata_from_any_mapping_is_copied_once_and_measured(
    location: pegboard.Location, context: Context, where: str
) -> None:
    """A custom Mapping that answers differently when read again cannot pass its bound."""

    @pegboard.tool(description="Shifty metadata.")
    async def shifty(input: Any, ctx: pegboard.ToolContext) -> Any:
        if where == "failure":
            raise pegboard.ToolFailure("no", metadata=Shifty())
        return pegboard.ToolResponse(content="ok", metadata=Shifty())

    location.tools.register({"shifty": shifty})
    outcome = await call(location, "shifty", "{}", context())
    metadata = (
        outcome.metadata if isinstance(outcome, pegboard.Completed) else outcome.error.metadata
    )
    assert {"note": "small"} == metadata
    assert type(metadata) is pegboard.FrozenDict


def _cyclic() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    return loop


def _deep() -> dict[str, Any]:
    nested: list[Any] = []
    for _ in range(5_000):
        nested = [nested]
    return {"deep": nested}


@pytest.mark.parametrize("where", ["response", "failure", "provider_state"])
@pytest.mark.parametrize("shape", [_cyclic, _deep], ids=["cyclic", "deep"])
async def test_law_metadata_opt_in_metadata_nested_past_the_bound_is_dropped_not_a_defect(
    location: pegboard.Location,
    context: Context,
    where: str,
    shape: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Metadata (or provider state) nested 5,000 deep, or holding itself, is read
    only to the depth bound: dropped with a warning, the call settled as usual.
    """

    @pegboard.tool(description="Bottomless metadata.")
    async def bottomless(input: Any, ctx: pegboard.ToolContext) -> Any:
        if where == "failure":
            raise pegboard.ToolFailure("no", metadata=shape())
        if where == "provider_state":
            return pegboard.ToolResponse(content="ok", provider_state={"anthropic": shape()})
        return pegboard.ToolResponse(content="ok", metadata=shape())

    location.tools.register({"bottomless": bottomless})
    outcome = await call(location, "bottomless", "{}", context())
    if where == "failure":
        assert isinstance(outcome, pegboard.Failed)
        assert outcome.error.metadata is None
    else:
        assert isinstance(outcome, pegboard.Completed)
        assert (None, None) == (outcome.metadata, outcome.provider_state)
    assert "nests deeper than 64 levels" in caplog.text


async def test_law_durable_identity(location: pegboard.Location, context: Context) -> None:
    """Law 5: outcomes carry exactly the IDs the runner supplied, and so does the tool's context."""
    seen: list[pegboard.ToolContext] = []

    @pegboard.tool(description="Who.")
    async def who(input: Any, ctx: pegboard.ToolContext) -> str:
        seen.append(ctx)
        return "me"

    @pegboard.tool(description="Fail.")
    async def fail(input: Any, ctx: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("no")

    location.tools.register({"who": who, "fail": fail})
    runner = context("call-42", session_id="s-9", agent="planner", message_id="m-7")
    identity = pegboard.CallIdentity(
        session_id="s-9", agent="planner", message_id="m-7", call_id="call-42"
    )
    for name in ("who", "fail", "missing"):
        outcome = await call(location, name, "{}", runner)
        assert identity == outcome.call
    assert [identity] == [pegboard.CallIdentity.of(ctx) for ctx in seen]


async def test_plain_functions_run_in_a_worker_thread(
    location: pegboard.Location, context: Context
) -> None:
    """A synchronous execute runs off the event loop thread."""
    import threading

    main = threading.get_ident()

    @pegboard.tool(description="Blocking.")
    def blocking(input: Any, ctx: pegboard.ToolContext) -> str:
        return "worker" if threading.get_ident() != main else "loop"

    location.tools.register({"blocking": blocking})
    outcome = await call(location, "blocking", "{}", context())
    assert (pegboard.Text("worker"),) == outcome.content  # type: ignore[union-attr]


async def test_unexpected_exceptions_propagate_unchanged(
    location: pegboard.Location, context: Context
) -> None:
    """A defect in a tool reaches the runner as itself, never as a model-visible failure."""

    class DefectError(Exception):
        pass

    defect = DefectError("boom")

    @pegboard.tool(description="Buggy.")
    async def buggy(input: Any, ctx: pegboard.ToolContext) -> str:
        raise defect

    location.tools.register({"buggy": buggy})
    with pytest.raises(DefectError) as caught:
        await call(location, "buggy", "{}", context())
    assert defect is caught.value


async def test_cancellation_propagates_and_produces_no_outcome(
    location: pegboard.Location, context: Context
) -> None:
    """A cancelled call raises cancellation, runs the tool's cleanup and returns nothing."""
    started, cleaned = anyio.Event(), anyio.Event()
    outcomes: list[pegboard.Outcome] = []

    @pegboard.tool(description="Waits forever.")
    async def waits(input: Any, ctx: pegboard.ToolContext) -> str:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            cleaned.set()
        return "never"

    location.tools.register({"waits": waits})
    request = location.prepare()

    async def run() -> None:
        outcomes.append(await request.execute(pegboard.ToolCall("waits", "{}", context())))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        group.cancel_scope.cancel()
    assert cleaned.is_set()
    assert outcomes == []


async def test_a_tool_returning_its_output_directly(
    location: pegboard.Location, context: Context
) -> None:
    """Returning the output value (not a ToolResponse) is the same as ToolResponse(output=...)."""

    @pegboard.tool(description="Add.", input=AddInput, output=AddOutput)
    async def add(input: AddInput, ctx: pegboard.ToolContext) -> AddOutput:
        return AddOutput(input.a + input.b)

    location.tools.register({"add": add})
    outcome = await call(location, "add", {"a": 1, "b": 1}, context())
    assert outcome.output == {"total": 2}  # type: ignore[union-attr]


async def test_content_with_a_lone_surrogate_is_invalid_output(
    location: pegboard.Location, context: Context
) -> None:
    """Text that cannot be written as UTF-8 is refused rather than published."""

    @pegboard.tool(description="Binary.")
    async def binary(input: Any, ctx: pegboard.ToolContext) -> str:
        return b"caf\xe9".decode("utf-8", "surrogateescape")

    location.tools.register({"binary": binary})
    outcome = await call(location, "binary", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert outcome.error.kind == "invalid_output"
    assert "lone UTF-16 surrogate" in outcome.error.message


async def test_input_limit_is_per_location(
    host: pegboard.Host, workspace: Any, storage_dir: Any, context: Context
) -> None:
    """max_input_bytes bounds each call's raw input and names the largest field."""
    spy = Spy()
    async with host.location(workspace, storage=storage_dir, max_input_bytes=100) as location:
        location.tools.register({"write": spy.write()})
        raw = {"path": "p", "content": "y" * 200}
        outcome = await call(location, "write", raw, context())
    assert isinstance(outcome, pegboard.Failed)
    assert "over the 100-byte limit; the largest field" in outcome.error.message
    assert "$.content (200 characters)" in outcome.error.message
    assert spy.inputs == []


async def test_the_tool_gets_the_runners_own_context(
    location: pegboard.Location, context: Context
) -> None:
    """The context a tool sees is the very object the runner supplied."""
    seen: list[pegboard.ToolContext] = []

    @pegboard.tool(description="Who.")
    async def who(input: Any, ctx: pegboard.ToolContext) -> str:
        seen.append(ctx)
        return "me"

    location.tools.register({"who": who})
    runner = context()
    await call(location, "who", "{}", runner)
    assert [runner] == seen
    assert seen[0] is runner


async def test_a_sync_tool_reports_progress_from_its_thread(
    location: pegboard.Location, context: Context
) -> None:
    """A plain function reports progress through anyio.from_thread; it becomes the partial."""
    received: list[str | None] = []

    async def forward(progress: pegboard.Progress) -> None:
        received.append(progress.message)

    @pegboard.tool(description="Blocking.")
    def blocking(input: Any, ctx: pegboard.ToolContext) -> str:
        anyio.from_thread.run(ctx.progress, pegboard.Progress(message="half", content="50%"))
        raise pegboard.ToolFailure("gave up")

    location.tools.register({"blocking": blocking})
    outcome = await call(location, "blocking", "{}", context(progress=forward))
    assert ["half"] == received
    assert (pegboard.Text("50%"),) == outcome.partial  # type: ignore[union-attr]


async def test_nested_calls_record_their_own_progress(
    location: pegboard.Location, context: Context
) -> None:
    """A tool running another request keeps its own partial snapshot; so does the inner call."""

    @pegboard.tool(description="Inner.")
    async def inner(input: Any, ctx: pegboard.ToolContext) -> str:
        await ctx.progress(pegboard.Progress(content="inner partial"))
        raise pegboard.ToolFailure("inner failed")

    @pegboard.tool(description="Outer.")
    async def outer(input: Any, ctx: pegboard.ToolContext) -> str:
        await ctx.progress(pegboard.Progress(content="outer partial"))
        nested = await location.prepare().execute(
            pegboard.ToolCall("inner", "{}", context("inner-call"))
        )
        assert (pegboard.Text("inner partial"),) == nested.partial  # type: ignore[union-attr]
        await ctx.progress(pegboard.Progress(message="no new content"))
        raise pegboard.ToolFailure("outer failed")

    location.tools.register({"inner": inner, "outer": outer})
    outcome = await call(location, "outer", "{}", context("outer-call"))
    assert (pegboard.Text("outer partial"),) == outcome.partial  # type: ignore[union-attr]
    assert pegboard._tool.RECORDER.get() is None


async def test_progress_takes_only_progress_values(
    location: pegboard.Location, context: Context
) -> None:
    """Reporting something that is not a Progress is a defect in the tool, raised as such."""

    @pegboard.tool(description="Sloppy.")
    async def sloppy(input: Any, ctx: pegboard.ToolContext) -> str:
        await ctx.progress("half way")  # type: ignore[arg-type]
        return "never"

    location.tools.register({"sloppy": sloppy})
    with pytest.raises(TypeError, match=r"takes a pegboard\.Progress"):
        await call(location, "sloppy", "{}", context())


async def test_outcomes_carry_the_effective_tool_name(
    location: pegboard.Location, context: Context
) -> None:
    """Completed and failed outcomes name the tool the call asked for, as providers need."""
    registration = location.tools.register({"add": Spy().add()}, namespace="math")
    [name] = registration.names.values()
    completed = await call(location, name, '{"a": 1, "b": 2}', context("c1"))
    invalid = await call(location, name, "{}", context("c2"))
    unknown = await call(location, "nope", "{}", context("c3"))
    assert ["math_add", "math_add", "nope"] == [completed.name, invalid.name, unknown.name]


# --- edges: cancellation lives in tests/test_cancellation.py ------------------------------


class IntegerCodec:
    """A custom codec whose encode returns whatever the tool gave it."""

    json_schema: Any = pegboard.FrozenDict({"type": "integer"})

    def decode(self, raw: Any) -> Any:
        return raw

    def encode(self, value: Any) -> Any:
        return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not an int", "expected integer, got string"),
        (float("nan"), "NaN is not a JSON number"),
        (object(), "object is not a JSON type"),
    ],
)
async def test_law_codec_boundary_custom_codec_output_is_validated(
    location: pegboard.Location, context: Context, value: Any, message: str
) -> None:
    """What a custom codec's encode() returns is checked against its own json_schema."""

    @pegboard.tool(description="Lax.", output=IntegerCodec())
    async def lax(input: Any, ctx: pegboard.ToolContext) -> Any:
        return value

    location.tools.register({"lax": lax})
    outcome = await call(location, "lax", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_output" == outcome.error.kind
    assert message in outcome.error.message


async def test_law_codec_boundary_tool_gets_its_own_input(
    location: pegboard.Location, context: Context
) -> None:
    """A tool that mutates its decoded input never changes the runner's ToolCall.input."""

    @pegboard.tool(description="Mutates.", input={"type": "object"})
    async def mutates(input: dict[str, Any], ctx: pegboard.ToolContext) -> str:
        input["added"] = True
        input["items"].append("sneaked in")
        input["nested"]["key"] = "changed"
        return "done"

    location.tools.register({"mutates": mutates})
    raw = {"items": ["a"], "nested": {"key": "kept"}, "pair": ("x", 1)}
    runner_call = pegboard.ToolCall("mutates", raw, context())
    outcome = await location.prepare().execute(runner_call)
    assert (pegboard.Text("done"),) == outcome.content  # type: ignore[union-attr]
    assert {"items": ["a"], "nested": {"key": "kept"}, "pair": ("x", 1)} == runner_call.input


async def test_law_canonical_representation_outcomes_are_read_only(
    location: pegboard.Location, context: Context
) -> None:
    """output, metadata and error.metadata of a settled outcome refuse in-place edits."""

    @pegboard.tool(description="Add.", input=AddInput, output=AddOutput)
    async def add(input: AddInput, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output=AddOutput(3), metadata={"ui": {"rows": [1]}})

    @pegboard.tool(description="Fails.")
    async def fails(input: Any, ctx: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("no", metadata={"status": [503]})

    location.tools.register({"add": add, "fails": fails})
    done = await call(location, "add", '{"a": 1, "b": 2}', context())
    failed = await call(location, "fails", "{}", context())
    assert isinstance(done, pegboard.Completed)
    assert isinstance(failed, pegboard.Failed)
    assert failed.error.metadata is not None
    assert done.metadata is not None
    for edit in (
        lambda: done.output.__setitem__("total", 4),
        lambda: done.metadata["ui"]["rows"].append(2),  # type: ignore[index]
        lambda: failed.error.metadata["status"].clear(),  # type: ignore[index]
    ):
        with pytest.raises(TypeError, match="read-only"):
            edit()
    assert ({"total": 3}, {"ui": {"rows": [1]}}) == (done.output, done.metadata)
    assert {"status": [503]} == failed.error.metadata
    assert {"total": 3} == pegboard.thaw(done.output)


BIG = 12345678901234567890123
INTEGER_INPUT = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "raw",
    [
        f'{{"n": {BIG}}}',
        f'{{"n": -{BIG}}}'.encode(),
        {"n": BIG},
        '{"n": 18446744073709551616}',
        '{"n": -9223372036854775809}',
    ],
)
async def test_law_codec_boundary_integers_of_any_size_reach_the_tool_exactly(
    location: pegboard.Location, context: Context, raw: Any
) -> None:
    """Integers beyond 64 bits reach the tool exactly, from text or from a mapping."""
    seen: list[Any] = []

    @pegboard.tool(description="Echo.", input=INTEGER_INPUT, output={"type": "integer"})
    async def echo(input: dict[str, Any], ctx: pegboard.ToolContext) -> int:
        seen.append(input["n"])
        return int(input["n"])

    location.tools.register({"echo": echo})
    outcome = await call(location, "echo", raw, context())
    expected = orjson_free_int(raw)
    assert [expected] == seen
    assert type(seen[0]) is int
    assert isinstance(outcome, pegboard.Completed)
    assert expected == outcome.output
    assert (pegboard.Text(str(expected)),) == outcome.content


def orjson_free_int(raw: Any) -> int:
    import json

    loaded = json.loads(raw) if isinstance(raw, str | bytes) else raw
    return int(loaded["n"])


@pytest.mark.parametrize("digits", [4001, 4300, 5000])
async def test_law_codec_boundary_an_output_integer_too_long_for_json_fails_named(
    location: pegboard.Location, context: Context, digits: int
) -> None:
    """An attrs output holding an integer of more than 4,000 digits fails as invalid
    output naming the field, like such an input: never the interpreter's conversion error."""

    @attrs.frozen
    class Huge:
        n: int

    @pegboard.tool(description="Huge.", output=Huge)
    async def huge(input: Any, ctx: pegboard.ToolContext) -> Huge:
        return Huge(10**digits - 1)

    location.tools.register({"huge": huge})
    outcome = await call(location, "huge", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_output" == outcome.error.kind
    assert "$.n: integer has more than 4,000 digits" in outcome.error.message
    assert "set_int_max_str_digits" not in outcome.error.message


async def test_law_codec_boundary_integers_beyond_64_bits_never_raise(
    location: pegboard.Location, context: Context, caplog: pytest.LogCaptureFixture
) -> None:
    """A 2**80 output is kept exactly; 2**80 in metadata drops the metadata with a warning."""

    @pegboard.tool(description="Big.", output={"type": "object"})
    async def big(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output={"n": 2**80}, metadata={"n": 2**80})

    @pegboard.tool(description="Fails big.")
    async def fails_big(input: Any, ctx: pegboard.ToolContext) -> str:
        raise pegboard.ToolFailure("too big", metadata={"n": 2**80})

    location.tools.register({"big": big, "fails_big": fails_big})
    with caplog.at_level(logging.WARNING, logger="pegboard"):
        done = await call(location, "big", "{}", context())
        failed = await call(location, "fails_big", "{}", context())
    assert isinstance(done, pegboard.Completed)
    assert {"n": 2**80} == done.output
    assert (pegboard.Text(f'{{"n":{2**80}}}'),) == done.content
    assert done.metadata is None
    assert isinstance(failed, pegboard.Failed)
    assert failed.error.metadata is None
    assert 2 == caplog.text.count("send integers beyond 64 bits as strings")


async def test_law_codec_boundary_null_output_when_the_schema_allows_it(
    location: pegboard.Location, context: Context
) -> None:
    """None is the null output when the schema allows null; otherwise it is no output at all."""

    @pegboard.tool(description="Maybe.", output={"type": ["integer", "null"]})
    async def maybe(input: Any, ctx: pegboard.ToolContext) -> Any:
        return None

    @pegboard.tool(description="Never null.", output={"type": "integer"})
    async def never(input: Any, ctx: pegboard.ToolContext) -> Any:
        return None

    location.tools.register({"maybe": maybe, "never": never})
    nothing = await call(location, "maybe", "{}", context())
    refused = await call(location, "never", "{}", context())
    assert isinstance(nothing, pegboard.Completed)
    assert (None, (pegboard.Text("null"),)) == (nothing.output, nothing.content)
    assert isinstance(refused, pegboard.Failed)
    assert "declares an output but returned none" in refused.error.message


class Untouchable(list[Any]):
    """A list too long for the budget; iterating it is a failure of the walk."""

    def __iter__(self) -> Any:
        raise AssertionError("an oversized list was walked")


async def test_law_per_call_rejection_oversized_mapping_is_refused_before_it_is_walked(
    location: pegboard.Location, context: Context
) -> None:
    """The walk stops once the budget is spent: what lies beyond is never read."""
    spy = Spy()
    location.tools.register({"write": spy.write()})
    # The walk reads the list from its end; the set at its start is never reached.
    beyond = {"path": [{1, 2}, "x" * 2_000_000], "content": ""}
    refused = await call(location, "write", beyond, context())
    huge = await call(location, "write", {"path": "p", "content": [0] * 12_500_000}, context())
    untouched = await call(location, "write", {"path": Untouchable([0] * 2_000_000)}, context())
    for outcome in (refused, huge, untouched):
        assert isinstance(outcome, pegboard.Failed)
        assert "over the 1,048,576-byte limit" in outcome.error.message
        assert "(rule: size)" in outcome.error.message
    assert "$.path[1] (2,000,000 characters)" in refused.error.message  # type: ignore[union-attr]
    assert [] == spy.inputs


class Plugin:
    """A plugin whose execute_after hook is the function it is given."""

    def __init__(self, hook: Callable[[pegboard.ExecuteEvent], Any]) -> None:
        self.hook = hook

    @pegboard.hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> Any:
        return self.hook(event)


SECRET = "the password is hunter2"


async def hooked(
    host: pegboard.Host,
    workspace: Any,
    storage_dir: Any,
    hook: Callable[[pegboard.ExecuteEvent], Any],
    context: Context,
    *,
    calls: int = 1,
    content: str = SECRET,
) -> tuple[list[BaseException], list[pegboard.PluginError]]:
    """Call a tool through a Location whose one plugin runs ``hook``; collect what was raised."""

    @pegboard.tool(description="Add.", input=AddInput, output=AddOutput)
    async def add(input: AddInput, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(output=AddOutput(3), content=content)

    host.add_plugin("redact", Plugin(hook))
    raised: list[BaseException] = []
    async with host.location(workspace, plugins=["redact"], storage=storage_dir) as location:
        location.tools.register({"add": add})
        for _ in range(calls):
            with pytest.raises(pegboard.PluginError) as caught:
                await call(location, "add", '{"a": 1, "b": 2}', context())
            raised.append(caught.value)
        errors = list(location.plugin_errors)
    return raised, errors


def breaks(event: pegboard.ExecuteEvent) -> Any:
    raise LookupError("the redaction rules are missing")


def edits_in_place(event: pegboard.ExecuteEvent) -> Any:
    event.outcome.output["total"] = "redacted"  # type: ignore[union-attr]


def invalid_output(event: pegboard.ExecuteEvent) -> Any:
    return pegboard.Completed({"total": "redacted"}, "redacted")


def empty(event: pegboard.ExecuteEvent) -> Any:
    return pegboard.Completed({"total": 3}, "")


def wrong_type(event: pegboard.ExecuteEvent) -> Any:
    return {"output": {"total": 3}}


def unknown_kind(event: pegboard.ExecuteEvent) -> Any:
    return pegboard.Failed(pegboard.ToolError("redacted", "hidden"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        (breaks, "execute_after raised LookupError: the redaction rules are missing"),
        (edits_in_place, "execute_after raised TypeError: this JSON value is shared and read-only"),
        (invalid_output, "an output its output schema refuses: $.total: expected integer"),
        (empty, "a Completed that has no content"),
        (wrong_type, "returned a dict for 'add'; return a pegboard.Completed"),
        (unknown_kind, "not a pegboard.ToolError of a known kind"),
    ],
)
async def test_law_per_call_rejection_a_broken_hook_fails_its_call_closed(
    host: pegboard.Host,
    workspace: Any,
    storage_dir: Any,
    context: Context,
    hook: Callable[[pegboard.ExecuteEvent], Any],
    message: str,
) -> None:
    """A hook that raises or returns a bad outcome fails its call with PluginError, recorded once.

    Nothing the hook would have changed is published without it.
    """
    raised, errors = await hooked(host, workspace, storage_dir, hook, context, calls=2)
    for error in raised:
        assert ("redact", "hook") == (error.plugin, error.phase)  # type: ignore[attr-defined]
        assert message in str(error)
        assert SECRET not in str(error)
    [recorded] = errors
    assert ("redact", "hook") == (recorded.plugin, recorded.phase)
    assert message in recorded.message


async def test_law_per_call_rejection_a_broken_hook_leaves_no_managed_file(
    host: pegboard.Host, workspace: Any, storage_dir: Any, context: Context
) -> None:
    """The output a broken redaction hook saw in managed storage is deleted with the call."""
    seen: list[tuple[Any, ...]] = []

    def sees_then_breaks(event: pegboard.ExecuteEvent) -> Any:
        seen.append(event.managed)
        raise LookupError("broken")

    await hooked(
        host, workspace, storage_dir, sees_then_breaks, context, content=SECRET + "\n" * 5000
    )
    [(path,)] = seen
    assert not path.exists()
    assert [] == [path for path in storage_dir.rglob("*") if path.is_file()]


@attrs.frozen
class Rows:
    rows: list[str]


@attrs.frozen
class Count:
    n: int


async def test_bare_attrs_output_over_the_byte_limit_is_bounded(
    location: pegboard.Location, context: Context
) -> None:
    """An attrs output returned bare whose JSON is over max_bytes is cut, not published whole."""

    @pegboard.tool(description="Rows.", output=Rows)
    async def rows(input: Any, ctx: pegboard.ToolContext) -> Rows:
        return Rows([f"row {index}" for index in range(20_000)])

    location.tools.register({"rows": rows})
    outcome = await call(location, "rows", "{}", context())
    assert isinstance(outcome, pegboard.Completed)
    (preview,) = outcome.content
    assert isinstance(preview, pegboard.Text)
    assert len(preview.text.encode()) <= location.limits.max_bytes
    assert "omitted" in preview.text
    assert 20_000 == len(outcome.output["rows"])


async def test_bare_attrs_output_is_read_only_and_exact(
    location: pegboard.Location, context: Context
) -> None:
    """A bare attrs output settles read-only; integers beyond 64 bits stay exact in its text."""
    kept: list[Rows] = []

    @pegboard.tool(description="Rows.", output=Rows)
    async def rows(input: Any, ctx: pegboard.ToolContext) -> Rows:
        kept.append(Rows(["a"]))
        return kept[-1]

    @pegboard.tool(description="Big.", output=Count)
    async def big(input: Any, ctx: pegboard.ToolContext) -> Count:
        return Count(BIG)

    location.tools.register({"rows": rows, "big": big})
    done = await call(location, "rows", "{}", context())
    assert isinstance(done, pegboard.Completed)
    with pytest.raises(TypeError, match="read-only"):
        done.output["rows"].append("b")
    kept[0].rows.append("b")  # the tool keeps editing its own value
    assert {"rows": ["a"]} == done.output
    exact = await call(location, "big", "{}", context())
    assert isinstance(exact, pegboard.Completed)
    assert {"n": BIG} == exact.output
    assert (pegboard.Text(f'{{"n":{BIG}}}'),) == exact.content


async def test_bare_attrs_output_against_its_schema_fails_the_call(
    location: pegboard.Location, context: Context
) -> None:
    """attrs does not check field types; the output schema still refuses a wrong one."""

    @pegboard.tool(description="Count.", output=Count)
    async def count(input: Any, ctx: pegboard.ToolContext) -> Count:
        return Count("three")  # type: ignore[arg-type]

    location.tools.register({"count": count})
    outcome = await call(location, "count", "{}", context())
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_output" == outcome.error.kind
    assert "$.n: expected integer" in outcome.error.message


async def test_bare_and_wrapped_outputs_settle_the_same_outcome(
    location: pegboard.Location, context: Context
) -> None:
    """The short path for a bare attrs output builds the outcome the general path builds."""

    @pegboard.tool(description="Bare.", output=Rows)
    async def bare(input: Any, ctx: pegboard.ToolContext) -> Rows:
        return Rows(["a", "b"])

    @pegboard.tool(description="Wrapped.", output=Rows)
    async def wrapped(input: Any, ctx: pegboard.ToolContext) -> pegboard.ToolResponse[Rows]:
        return pegboard.ToolResponse(output=Rows(["a", "b"]))

    location.tools.register({"bare": bare, "wrapped": wrapped})
    runner = context(call_id="call-7")
    short = await call(location, "bare", "{}", runner)
    general = await call(location, "wrapped", "{}", runner)
    assert isinstance(short, pegboard.Completed)
    assert attrs.evolve(general, name="bare") == short
    assert pegboard.CallIdentity.of(runner) == short.call
    assert (pegboard.Text('{"rows":["a","b"]}'),) == short.content
    assert type(short.output) is pegboard.FrozenDict
    assert short.metadata is None


def test_call_identity_of_a_context_is_its_four_ids() -> None:
    """CallIdentity.of copies exactly the runner's IDs, for the class and its subclasses."""

    class Tagged(pegboard.CallIdentity):
        pass

    runner = pegboard.ToolContext("session-1", "agent-1", "message-1", "call-1")
    ids = {"session_id": "session-1", "agent": "agent-1", "message_id": "message-1"}
    assert pegboard.CallIdentity(**ids, call_id="call-1") == pegboard.CallIdentity.of(runner)
    tagged = Tagged.of(runner)
    assert type(tagged) is Tagged
    assert attrs.asdict(tagged) == {**ids, "call_id": "call-1"}


@pytest.mark.parametrize("raw", ["", "   \n", "null", b"", " null "])
async def test_empty_arguments_decode_as_an_empty_object_where_the_schema_accepts_it(
    location: pegboard.Location, context: Context, raw: str | bytes
) -> None:
    """ "", whitespace and null for a tool whose input accepts {} run it with {}."""
    seen: list[Any] = []

    @pegboard.tool(description="No input.", input={"type": "object", "properties": {}})
    async def now(input: Any, ctx: pegboard.ToolContext) -> str:
        seen.append(input)
        return "12:00"

    @attrs.frozen
    class Paging:
        limit: int = 10

    @pegboard.tool(description="Defaults.", input=Paging)
    async def listing(input: Paging, ctx: pegboard.ToolContext) -> str:
        seen.append(input)
        return "listed"

    location.tools.register({"now": now, "listing": listing})
    request = location.prepare()
    first = await request.execute(pegboard.ToolCall("now", raw, context()))
    second = await request.execute(pegboard.ToolCall("listing", raw, context()))
    assert isinstance(first, pegboard.Completed)
    assert isinstance(second, pegboard.Completed)
    assert [{}, Paging(10)] == seen


@pytest.mark.parametrize(
    ("raw", "said"), [("", "empty ('')"), ("  ", "only whitespace ('  ')"), ("null", "null")]
)
async def test_empty_arguments_for_a_tool_that_needs_input_say_what_arrived(
    location: pegboard.Location, context: Context, raw: str, said: str
) -> None:
    """Without a valid empty input, the message names what arrived and what is missing."""
    ran: list[Any] = []

    @pegboard.tool(
        description="Needs a path.",
        input={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    async def read(input: Any, ctx: pegboard.ToolContext) -> str:
        ran.append(input)
        return "never"

    location.tools.register({"read": read})
    outcome = await location.prepare().execute(pegboard.ToolCall("read", raw, context()))
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_input" == outcome.error.kind
    assert f"the arguments were {said}" in outcome.error.message
    assert "'path' is a required property" in outcome.error.message
    assert [] == ran
