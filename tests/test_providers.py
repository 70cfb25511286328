"""pegboard.providers: every rendering is a value the provider's own SDK types accept."""

from __future__ import annotations

import functools
import inspect
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from anthropic.types import ToolChoiceParam, ToolParam, ToolResultBlockParam
from google.genai import types as genai
from hypothesis import HealthCheck, given, settings
from openai.types.chat import (
    ChatCompletionMessageParam,
    ChatCompletionToolChoiceOptionParam,
    ChatCompletionToolMessageParam,
    ChatCompletionToolParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import FunctionToolParam, ToolChoiceOptions
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter
from strategies import answered_outcomes

import pegboard
from pegboard.providers import (
    CompatibilityError,
    anthropic,
    gemini,
    openai_chat,
    openai_responses,
)

Context = Callable[..., pegboard.ToolContext]
PROVIDERS = [openai_chat, openai_responses, anthropic, gemini]

_IDENTITY = pegboard.CallIdentity(session_id="s", agent="a", message_id="m", call_id="call_7")
_PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
_SVG = b'<svg xmlns="http://www.w3.org/2000/svg"/>'


def _materialize(value: Any) -> Any:
    """Plain lists and dicts; pydantic validates ``Iterable`` fields only when consumed."""
    if isinstance(value, dict):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, list | tuple | Iterator):
        return [_materialize(item) for item in value]
    return value


@functools.cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    # Kept alive: a lazily validated Iterable needs its adapter while it is consumed.
    return TypeAdapter(shape)


def conforms(shape: Any, value: Any) -> None:
    """``value`` validates against the SDK's TypedDict ``shape`` with nothing dropped.

    pydantic ignores unknown TypedDict keys; comparing the validated value with
    the original catches a key the SDK does not know.
    """
    validated = _materialize(_adapter(shape).validate_python(value))
    assert _materialize(value) == validated


def gemini_conforms(model: type[Any], value: Any) -> None:
    """``value`` validates against a google-genai model (which forbids unknown keys)."""
    model.model_validate(value)


def validate_result(provider: Any, rendered: Any) -> None:
    if provider is openai_chat:
        conforms(ChatCompletionToolMessageParam, rendered[0])
        for message in rendered[1:]:
            conforms(ChatCompletionUserMessageParam, message)
        conforms(list[ChatCompletionMessageParam], rendered)
    elif provider is openai_responses:
        conforms(FunctionCallOutput, rendered)
    elif provider is anthropic:
        conforms(ToolResultBlockParam, rendered)
    else:
        for part in rendered:
            gemini_conforms(genai.Part, part)


def validate_tools(provider: Any, rendered: Any) -> None:
    if provider is openai_chat:
        conforms(list[ChatCompletionToolParam], rendered)
    elif provider is openai_responses:
        conforms(list[FunctionToolParam], rendered)
    elif provider is anthropic:
        conforms(list[ToolParam], rendered)
    else:
        for tool in rendered:
            gemini_conforms(genai.Tool, tool)


def validate_tool_choice(provider: Any, rendered: Any) -> None:
    if provider is openai_chat:
        conforms(ChatCompletionToolChoiceOptionParam, rendered)
    elif provider is openai_responses:
        conforms(ToolChoiceOptions, rendered)
    elif provider is anthropic:
        conforms(ToolChoiceParam, rendered)
    else:
        gemini_conforms(genai.ToolConfig, rendered)


@pytest.fixture
async def board(tmp_path: Path) -> AsyncIterator[pegboard.Location]:
    """A Location with the built-in tools and the example plugin's."""
    root = tmp_path / "board"
    root.mkdir()
    async with pegboard.Host().location(
        root, plugins=["builtin", "tabular"], trusted=["tabular"], storage=tmp_path / "s"
    ) as opened:
        assert opened.plugin_errors == ()
        yield opened


# -- the checks themselves catch bad values ---------------------------------------------


def test_the_sdk_checks_refuse_what_the_providers_refuse() -> None:
    """The validation helpers are not vacuous: known-bad values fail them."""
    with pytest.raises(ValueError, match="validation error"):
        conforms(ToolChoiceParam, "auto")
    with pytest.raises(ValueError, match="validation error"):
        conforms(
            ToolResultBlockParam,
            {
                "type": "tool_result",
                "tool_use_id": "x",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/svg+xml", "data": "PA=="},
                    }
                ],
            },
        )
    with pytest.raises(AssertionError):
        conforms(
            ChatCompletionToolMessageParam,
            {"role": "tool", "tool_call_id": "x", "content": "a", "is_error": True},
        )
    with pytest.raises(ValueError, match="validation error"):
        gemini_conforms(genai.Part, {"function_response": {"name": "x", "answer": {}}})


# -- tools() and tool_choice() --------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
@pytest.mark.parametrize("strict", [False, True])
async def test_tools_of_the_builtin_and_example_plugins_validate(
    board: pegboard.Location, provider: Any, strict: bool
) -> None:
    """Every provider renders the built-in and example tools, strict or not, as its SDK types."""
    request = board.prepare()
    rendered = provider.tools(request, strict=strict)
    validate_tools(provider, rendered)
    names = [definition.name for definition in request.definitions]
    assert len(names) == 10
    assert names == _rendered_names(provider, rendered)


def _rendered_names(provider: Any, rendered: list[dict[str, Any]]) -> list[str]:
    if provider is openai_chat:
        return [tool["function"]["name"] for tool in rendered]
    if provider is gemini:
        return [item["name"] for item in rendered[0]["function_declarations"]]
    return [tool["name"] for tool in rendered]


@pytest.mark.anyio
async def test_tools_carry_descriptions_schemas_and_output_schemas(
    board: pegboard.Location,
) -> None:
    """Non-strict schemas are the definitions' own; output schemas go where a format has them."""
    request = board.prepare()
    definition = next(d for d in request.definitions if d.name == "tabular_files")
    chat = next(t for t in openai_chat.tools(request) if t["function"]["name"] == definition.name)
    assert {
        "type": "function",
        "function": {
            "name": "tabular_files",
            "description": definition.description,
            "parameters": definition.input_schema,
            "strict": False,
        },
    } == chat
    responses = next(t for t in openai_responses.tools(request) if t["name"] == definition.name)
    assert definition.output_schema == responses["output_schema"]
    declaration = next(
        d for d in gemini.tools(request)[0]["function_declarations"] if d["name"] == definition.name
    )
    assert definition.output_schema == declaration["response_json_schema"]
    assert definition.input_schema == declaration["parameters_json_schema"]
    claude = next(t for t in anthropic.tools(request) if t["name"] == definition.name)
    assert {"name", "description", "input_schema"} == set(claude)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
async def test_rendered_schemas_are_plain_copies_the_host_may_edit(
    board: pegboard.Location, provider: Any
) -> None:
    """Schemas come out as plain dicts and lists, so SDK helpers may edit them in place."""
    request = board.prepare()
    rendered = provider.tools(request)
    before = json.dumps([d.input_schema for d in request.definitions])

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            assert type(value) is dict
            value["x-edited"] = True
            for item in list(value.values()):
                walk(item)
        elif isinstance(value, list):
            assert type(value) is list
            for item in value:
                walk(item)

    walk(rendered)
    assert before == json.dumps([d.input_schema for d in request.definitions])


def _fake_request(*names: str, final_step: bool = False) -> Any:
    schema = {"type": "object", "properties": {}, "additionalProperties": False}
    definitions = tuple(pegboard.ToolDefinition(name, "A tool.", schema, None) for name in names)
    return SimpleNamespace(
        definitions=definitions, tool_choice="none" if final_step else "auto", final_step=final_step
    )


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        (openai_chat, "a" * 65),
        (openai_responses, "has.dot"),
        (anthropic, "a" * 129),
        (anthropic, "has:colon"),
        (gemini, "9starts_with_digit"),
        (gemini, "a" * 129),
        (openai_chat, "spaced name"),
    ],
)
def test_provider_name_rules_raise_compatibility_error(provider: Any, name: str) -> None:
    """A name the provider refuses raises CompatibilityError naming tool, path and rule."""
    with pytest.raises(CompatibilityError) as raised:
        provider.tools(_fake_request("fine", name))
    error = raised.value
    assert (name, "$", "name") == (error.tool, error.path, error.rule)
    assert repr(name) in str(error)


@pytest.mark.parametrize(
    ("provider", "name"),
    [(anthropic, "a" * 100), (gemini, "has.dot:and-colon"), (gemini, "_under")],
)
def test_names_within_a_providers_rule_pass(provider: Any, name: str) -> None:
    """Each rule is the provider's own, not the strictest of all."""
    validate_tools(provider, provider.tools(_fake_request(name)))


def test_a_schema_that_is_not_an_object_is_refused() -> None:
    """Every provider wants an object schema for a tool's input."""
    request = SimpleNamespace(
        definitions=(pegboard.ToolDefinition("t", "T.", {"type": "string"}, None),)
    )
    for provider in PROVIDERS:
        with pytest.raises(CompatibilityError) as raised:
            provider.tools(request)
        assert ("t", "$", "root-object") == (
            raised.value.tool,
            raised.value.path,
            raised.value.rule,
        )


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
@pytest.mark.parametrize("final_step", [False, True])
def test_tool_choice_validates_and_says_auto_or_none(provider: Any, final_step: bool) -> None:
    """auto, or none on the final step, each in the provider's own form."""
    rendered = provider.tool_choice(_fake_request("t", final_step=final_step))
    validate_tool_choice(provider, rendered)
    word = "none" if final_step else "auto"
    expected = {
        openai_chat: word,
        openai_responses: word,
        anthropic: {"type": word},
        gemini: {"function_calling_config": {"mode": word.upper()}},
    }[provider]
    assert expected == rendered


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_no_tools_means_no_tool_choice(provider: Any) -> None:
    """Without tools, tool_choice is None (omit it): providers refuse a choice without tools."""
    assert provider.tool_choice(_fake_request()) is None
    assert [] == provider.tools(_fake_request())


# -- result() -------------------------------------------------------------------------


def _completed(*content: pegboard.ContentItem, **extra: Any) -> pegboard.Completed:
    return pegboard.Completed(
        extra.get("output"), content, extra.get("metadata"), call=_IDENTITY, name="shot"
    )


_TEXT = pegboard.Text("three files")
_IMAGE = pegboard.Image(_PNG, "image/png")
_SVG_IMAGE = pegboard.Image(_SVG, "image/svg+xml")
_WAV = pegboard.Audio(b"RIFF....WAVE", "audio/wav")
_OGG = pegboard.Audio(b"OggS", "audio/ogg")
_LINK = pegboard.ResourceLink(
    uri="file:///r/report.pdf", name="report", title="Q3", mime_type="application/pdf", size=12
)
_TEXT_RESOURCE = pegboard.EmbeddedResource(
    uri="file:///r/a.txt", text="alpha", mime_type="text/plain"
)
_PDF = pegboard.EmbeddedResource(
    uri="file:///r/b.pdf", data=b"%PDF-1.7", mime_type="application/pdf"
)
_BLOB = pegboard.EmbeddedResource(uri="file:///r/c.bin", data=b"\x00\x01")

SAMPLES = {
    "text": _completed(_TEXT),
    "image": _completed(_TEXT, _IMAGE),
    "svg": _completed(_SVG_IMAGE),
    "audio": _completed(_WAV, _OGG),
    "resource": _completed(_LINK, _TEXT_RESOURCE, _PDF, _BLOB),
    "failure": pegboard.Failed(
        pegboard.ToolError("tool_failure", "disk full"), call=_IDENTITY, name="shot"
    ),
    "failure_with_partial": pegboard.Failed(
        pegboard.ToolError("tool_failure", "disk full", metadata={"errno": 28}),
        (pegboard.Text("wrote 3 of 5"), _IMAGE, _SVG_IMAGE),
        call=_IDENTITY,
        name="shot",
    ),
}


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
@pytest.mark.parametrize("sample", list(SAMPLES))
def test_result_validates_for_every_content_type_and_failure(provider: Any, sample: str) -> None:
    """Text, image, audio, resources, failures with partial output: all valid SDK values."""
    outcome = SAMPLES[sample]
    rendered = provider.result(outcome)
    validate_result(provider, rendered)
    assert "call_7" in json.dumps(rendered, default=repr)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(answered_outcomes)
def test_any_outcome_renders_as_the_sdk_types_and_replays_identically(
    outcome: pegboard.Outcome,
) -> None:
    """Arbitrary outcomes validate for every provider, and their stored form renders the same."""
    stored = pegboard.load_outcome(json.loads(json.dumps(pegboard.dump_outcome(outcome))))
    for provider in PROVIDERS:
        rendered = provider.result(outcome)
        validate_result(provider, rendered)
        assert rendered == provider.result(stored)


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_metadata_and_machine_output_are_never_sent(provider: Any) -> None:
    """The model sees content; metadata and the encoded output stay with the host."""
    completed = _completed(_TEXT, output={"rows": "OUTPUT-MARK"}, metadata={"k": "META-MARK"})
    failed = pegboard.Failed(
        pegboard.ToolError("tool_failure", "no", metadata={"k": "META-MARK"}),
        call=_IDENTITY,
        name="shot",
    )
    for outcome in (completed, failed):
        text = json.dumps(provider.result(outcome), default=repr)
        assert "META-MARK" not in text
        assert "OUTPUT-MARK" not in text


def test_openai_chat_puts_media_in_a_user_message_after_the_tool_message() -> None:
    """The tool message holds text only; images, audio and PDF follow in a user message."""
    tool, user = openai_chat.result(SAMPLES["image"])
    assert "tool" == tool["role"]
    assert "call_7" == tool["tool_call_id"]
    assert all(part["type"] == "text" for part in tool["content"])
    assert "user" == user["role"]
    assert [part["type"] for part in user["content"]] == ["text", "image_url"]
    assert user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    only_text = openai_chat.result(SAMPLES["text"])
    assert [{"role": "tool", "tool_call_id": "call_7", "content": "three files"}] == only_text


def test_openai_chat_sends_wav_and_mp3_audio_and_notes_the_rest() -> None:
    """input_audio takes wav and mp3 only; ogg becomes a note in the tool message."""
    tool, user = openai_chat.result(SAMPLES["audio"])
    assert [{"data": "UklGRi4uLi5XQVZF", "format": "wav"}] == [
        part["input_audio"] for part in user["content"] if part["type"] == "input_audio"
    ]
    assert "audio/ogg content of 4 bytes left out" in json.dumps(tool["content"])


def test_openai_responses_output_parts() -> None:
    """A single text is a string; otherwise input_text, input_image and input_file parts."""
    assert "three files" == openai_responses.result(SAMPLES["text"])["output"]
    parts = openai_responses.result(SAMPLES["resource"])["output"]
    assert ["input_text", "input_text", "input_file", "input_text"] == [p["type"] for p in parts]
    assert "b.pdf" == parts[2]["filename"]
    assert "application/octet-stream content of 2 bytes left out" in parts[3]["text"]
    image = openai_responses.result(SAMPLES["image"])["output"][1]
    assert image["image_url"].startswith("data:image/png;base64,")


def test_anthropic_replaces_svg_and_audio_with_notes_and_marks_errors() -> None:
    """Anthropic takes PNG/JPEG/GIF/WebP and PDF; SVG and audio become notes; is_error is set."""
    svg = anthropic.result(SAMPLES["svg"])
    assert svg["is_error"] is False
    assert [{"type": "text", "text": svg["content"][0]["text"]}] == svg["content"]
    assert "image/svg+xml content of" in svg["content"][0]["text"]
    failed = anthropic.result(SAMPLES["failure_with_partial"])
    assert failed["is_error"] is True
    assert ["text", "text", "text", "image", "text"] == [
        block["type"] for block in failed["content"]
    ]
    assert "Error: disk full" == failed["content"][0]["text"]
    assert "wrote 3 of 5" == failed["content"][2]["text"]
    resource = anthropic.result(SAMPLES["resource"])
    assert "document" in [block["type"] for block in resource["content"]]


def test_gemini_function_response_names_the_tool_and_carries_errors() -> None:
    """Gemini answers by tool name and call ID; failures go under "error"; media follow."""
    parts = gemini.result(SAMPLES["failure_with_partial"])
    response = parts[0]["function_response"]
    assert ("call_7", "shot") == (response["id"], response["name"])
    assert ["error"] == list(response["response"])
    assert "Error: disk full" in response["response"]["error"]
    assert "wrote 3 of 5" in response["response"]["error"]
    assert "image/svg+xml content of" in response["response"]["error"]
    assert [{"inline_data": {"mime_type": "image/png", "data": _PNG}}] == parts[1:]
    assert ["output"] == list(gemini.result(SAMPLES["text"])[0]["function_response"]["response"])


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_failures_render_the_error_and_the_partial_snapshot(provider: Any) -> None:
    """Every provider shows the error message and the partial text."""
    text = json.dumps(provider.result(SAMPLES["failure_with_partial"]), default=repr)
    assert "disk full" in text
    assert "wrote 3 of 5" in text


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_an_outcome_without_call_identity_is_refused(provider: Any) -> None:
    """result() must name the call it answers; a hand-built outcome without one is an error."""
    with pytest.raises(ValueError, match=r"outcome\.call"):
        provider.result(pegboard.Completed(None, (_TEXT,), name="shot"))


def test_gemini_refuses_an_outcome_without_a_tool_name() -> None:
    """Gemini answers by name; an outcome without one cannot be answered."""
    with pytest.raises(ValueError, match=r"outcome\.name"):
        gemini.result(pegboard.Completed(None, (_TEXT,), call=_IDENTITY))


# -- interrupted() --------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_interrupted_answers_the_call_with_an_error(provider: Any, context: Context) -> None:
    """A call without an outcome still gets an answer, validated, naming the reason."""
    call = pegboard.ToolCall("read", "{}", context("call_9"))
    rendered = provider.interrupted(call, "cancelled by the user")
    validate_result(provider, rendered)
    text = json.dumps(rendered)
    assert "call_9" in text
    assert "cancelled by the user" in text
    if provider is anthropic:
        assert rendered["is_error"] is True
    if provider is gemini:
        assert "read" == rendered[0]["function_response"]["name"]
        assert "error" in rendered[0]["function_response"]["response"]


# -- live outcomes and their stored form ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
async def test_stored_live_outcomes_render_exactly_as_the_live_ones(
    location: pegboard.Location, context: Context, provider: Any
) -> None:
    """An outcome stored as JSON text and loaded back renders to the identical value."""

    @pegboard.tool(description="A picture and some words.")
    async def shot(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse[Any]:
        return pegboard.ToolResponse(content=["look", _IMAGE, _SVG_IMAGE], metadata={"w": 1})

    @pegboard.tool(description="Fails after some progress.")
    async def flaky(input: Any, context: pegboard.ToolContext) -> None:
        await context.progress(pegboard.Progress(content=["half done", _IMAGE]))
        raise pegboard.ToolFailure("gave up")

    location.tools.register({"shot": shot, "flaky": flaky})
    request = location.prepare()
    outcomes = [
        await request.execute(pegboard.ToolCall("shot", "{}", context("c1"))),
        await request.execute(pegboard.ToolCall("flaky", "{}", context("c2"))),
        await request.execute(pegboard.ToolCall("ghost", "{}", context("c3"))),
    ]
    assert [pegboard.Completed, pegboard.Failed, pegboard.Failed] == [type(o) for o in outcomes]
    for outcome in outcomes:
        row = json.dumps(pegboard.dump_outcome(outcome))
        live = provider.result(outcome)
        validate_result(provider, live)
        assert live == provider.result(pegboard.load_outcome(json.loads(row)))


# -- the public face ------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
def test_each_provider_module_has_the_four_functions(provider: Any) -> None:
    """tools(request, *, strict=False), tool_choice(request), result(outcome),
    interrupted(call, reason): the same names and parameters in every module.
    """
    signatures = {
        name: inspect.signature(getattr(provider, name))
        for name in ("tools", "tool_choice", "result", "interrupted")
    }
    assert ["request", "strict", "native_search"] == list(signatures["tools"].parameters)
    strict = signatures["tools"].parameters["strict"]
    assert (inspect.Parameter.KEYWORD_ONLY, False) == (strict.kind, strict.default)
    assert ["request"] == list(signatures["tool_choice"].parameters)
    assert ["outcome"] == list(signatures["result"].parameters)
    assert ["call", "reason"] == list(signatures["interrupted"].parameters)
    assert {"interrupted", "result", "tool_choice", "tools"} <= set(provider.__all__)


def test_the_package_imports_no_sdk() -> None:
    """Importing pegboard.providers loads none of the provider SDKs."""
    code = (
        "import sys, pegboard.providers; "
        "print(sorted(m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "[]" == shown.strip()


# -- provider-owned result state --------------------------------------------------------

_SEARCH_RESULT = {
    "type": "search_result",
    "source": "https://example.com/cited",
    "title": "CITED-MARK",
    "content": [{"type": "text", "text": "The verbatim passage."}],
    "citations": {"enabled": True},
}


@pytest.mark.anyio
async def test_provider_state_reaches_only_its_providers_result_verbatim(
    tmp_path: Path, context: Context
) -> None:
    """Anthropic search_result blocks ride in provider state: its result() sends them as
    they are, after the content; other providers, content, output and metadata never see them.
    """

    @pegboard.tool(description="Searches.", output={"type": "object"})
    async def search(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(
            output={"hits": 1},
            content="One result, below.",
            provider_state={"anthropic": [_SEARCH_RESULT]},
        )

    async with pegboard.Host().location(tmp_path, plugins=[], storage=tmp_path / "s") as location:
        location.tools.register({"search": search})
        outcome = await location.prepare().execute(pegboard.ToolCall("search", "{}", context()))
    assert isinstance(outcome, pegboard.Completed)
    assert {"anthropic": [_SEARCH_RESULT]} == outcome.provider_state
    assert "CITED-MARK" not in json.dumps(
        [
            pegboard.thaw(outcome.output),
            pegboard.dump_outcome(attrs.evolve(outcome, provider_state=None)),
        ]
    )
    block = anthropic.result(outcome)
    validate_result(anthropic, block)
    assert [{"type": "text", "text": "One result, below."}, _SEARCH_RESULT] == block["content"]
    for provider in (openai_chat, openai_responses, gemini):
        rendered = provider.result(outcome)
        validate_result(provider, rendered)
        assert "CITED-MARK" not in json.dumps(rendered, default=repr)
    stored = pegboard.load_outcome(json.loads(json.dumps(pegboard.dump_outcome(outcome))))
    assert block == anthropic.result(stored)


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ({"anthropic": [{"when": {1, 2}}]}, "not plain JSON"),
        ({"anthropic": [{"text": "x" * 20_000}]}, "over the"),
        (["not", "an", "object"], "not a JSON object"),
    ],
    ids=["not-json", "oversized", "not-an-object"],
)
@pytest.mark.anyio
async def test_provider_state_is_validated_as_json_and_bounded_like_metadata(
    tmp_path: Path, context: Context, caplog: pytest.LogCaptureFixture, state: Any, why: str
) -> None:
    """Bad or oversized provider state is dropped with a warning; the call still completes."""

    @pegboard.tool(description="Bad state.")
    async def bad(input: Any, ctx: pegboard.ToolContext) -> Any:
        return pegboard.ToolResponse(content="ok", provider_state=state)

    async with pegboard.Host().location(tmp_path, plugins=[], storage=tmp_path / "s") as location:
        location.tools.register({"bad": bad})
        outcome = await location.prepare().execute(pegboard.ToolCall("bad", "{}", context()))
    assert isinstance(outcome, pegboard.Completed)
    assert outcome.provider_state is None
    assert "dropped provider state" in caplog.text
    assert why in caplog.text


def test_provider_state_that_is_not_a_list_of_blocks_is_refused_by_anthropic() -> None:
    """Anthropic's state must be a list of blocks: anything else is one clear error."""
    outcome = attrs.evolve(_completed(_TEXT), provider_state={"anthropic": {"type": "x"}})
    with pytest.raises(ValueError, match=r"provider_state\['anthropic'\] is a list"):
        anthropic.result(outcome)


# -- tool-count limits ------------------------------------------------------------------


def _many(count: int) -> Any:
    request = _fake_request(*(f"tool_{number}" for number in range(count)))
    request.deferred = ()
    return request


@pytest.mark.parametrize(
    ("provider", "limit"),
    [(openai_chat, 128), (openai_responses, 128), (gemini, 512)],
    ids=["chat", "responses", "gemini"],
)
def test_tools_raises_compatibility_error_past_a_providers_documented_tool_count_limit(
    provider: Any, limit: int
) -> None:
    """OpenAI takes at most 128 tools and Gemini 512: the limit renders, two more are
    one clear error naming the first tool past it.
    """
    validate_tools(provider, provider.tools(_many(limit)))
    with pytest.raises(CompatibilityError) as caught:
        provider.tools(_many(limit + 2))
    error = caught.value
    assert ("max_tools", f"tool_{limit}") == (error.rule, error.tool)
    assert f"at most {limit} tools in one request and this one has {limit + 2}" in str(error)
    assert "defer" in str(error)


def test_providers_without_a_documented_tool_count_limit_take_many_tools() -> None:
    """Anthropic documents no per-request maximum: 600 tools render."""
    validate_tools(anthropic, anthropic.tools(_many(600)))
