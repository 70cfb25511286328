"""Many tools: deferred loading, request.search and the search_tools tool."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import ToolUnionParam
from openai.types.responses import ToolParam as ResponsesToolParam
from test_providers import PROVIDERS, conforms, validate_tool_choice, validate_tools

import pegboard
from pegboard import hookimpl
from pegboard.providers import (
    CompatibilityError,
    anthropic,
    gemini,
    openai_chat,
    openai_responses,
)

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


def named(description: str, properties: dict[str, Any] | None = None) -> pegboard.Tool:
    """A tool that answers with its own description's first word."""
    schema = {"type": "object", "properties": properties or {}, "additionalProperties": False}

    async def execute(input: Any, context: pegboard.ToolContext) -> str:
        return f"ran {description.split()[0]}"

    return pegboard.tool(description=description, input=schema, execute=execute)


TOOLS = {
    "create_issue": named("Open a new issue in a repository.", {"title": {"type": "string"}}),
    "list_pull_requests": named("List the pull requests of a repository."),
    "get_weather": named(
        "Report the conditions somewhere.",
        {"city": {"type": "string", "description": "The city to forecast for."}},
    ),
    "takeScreenshot": named("Capture the visible browser page as a PNG."),
    "send-message": named("Post text to a chat channel.", {"channel": {"type": "string"}}),
    "read_notes": named("Read the notes file."),
}


@pytest.fixture
def board(location: pegboard.Location) -> pegboard.Location:
    location.tools.register(TOOLS)
    return location


def names(definitions: tuple[pegboard.ToolDefinition, ...]) -> list[str]:
    return [definition.name for definition in definitions]


async def call(
    request: pegboard.Request, context: Context, name: str, input: Any
) -> pegboard.Outcome:
    return await request.execute(pegboard.ToolCall(name, input, context()))


def found(outcome: pegboard.Outcome) -> list[str]:
    assert isinstance(outcome, pegboard.Completed), outcome
    return [tool["name"] for tool in outcome.output["tools"]]


# -- what a request advertises and defers -----------------------------------------------


async def test_deferred_tools_are_captured_but_not_advertised(board: pegboard.Location) -> None:
    """defer= moves the named tools to request.deferred; search_tools comes last."""
    request = board.prepare(defer=["get_weather", "takeScreenshot"])
    assert ["create_issue", "list_pull_requests", "read_notes", "send-message"] == names(
        request.definitions
    )[:-1]
    assert "search_tools" == request.definitions[-1].name
    assert ["get_weather", "takeScreenshot"] == names(request.deferred)


async def test_without_defer_nothing_changes(board: pegboard.Location) -> None:
    """The default advertises every tool and no search_tools; search finds nothing."""
    request = board.prepare()
    assert sorted(TOOLS) == names(request.definitions)
    assert () == request.deferred
    assert () == request.search("weather")


async def test_deferring_nothing_advertises_no_search_tools(
    board: pegboard.Location, context: Context
) -> None:
    """With nothing deferred, search_tools is neither advertised nor callable."""
    request = board.prepare(defer=[])
    assert "search_tools" not in names(request.definitions)
    outcome = await call(request, context, "search_tools", {"query": "weather"})
    assert isinstance(outcome, pegboard.Failed)
    assert "unknown_tool" == outcome.error.kind


async def test_a_deferred_tool_executes_from_the_same_request(
    board: pegboard.Location, context: Context
) -> None:
    """A deferred tool is in the snapshot: a call to it runs through the pipeline."""
    request = board.prepare(defer=["get_weather"])
    outcome = await call(request, context, "get_weather", '{"city": "Oslo"}')
    assert isinstance(outcome, pegboard.Completed)
    assert "ran Report" == outcome.content[0].text  # type: ignore[union-attr]
    assert "get_weather" == outcome.name


async def test_loaded_tools_are_advertised_and_win_over_defer(board: pegboard.Location) -> None:
    """A tool the model has already seen stays advertised even when deferred."""
    request = board.prepare(defer=["get_weather", "read_notes"], loaded=["read_notes"])
    assert "read_notes" in names(request.definitions)
    assert ["get_weather"] == names(request.deferred)
    assert [] == names(request.search("read the notes file"))


async def test_loaded_names_that_are_gone_are_ignored(board: pegboard.Location) -> None:
    """loaded= comes from earlier turns: a tool since removed is no error."""
    request = board.prepare(defer=["get_weather"], loaded=["no_longer_here"])
    assert ["get_weather"] == names(request.deferred)


async def test_auto_defers_only_over_the_budget(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """defer="auto" defers everything but the loaded tools once the budget is passed."""
    async with host.location(workspace, plugins=[], storage=storage_dir) as roomy:
        roomy.tools.register(TOOLS)
        request = roomy.prepare(defer="auto")
        assert sorted(TOOLS) == names(request.definitions)
        assert () == request.deferred
    budget = pegboard.ToolBudget(tokens=20)
    async with host.location(
        workspace, plugins=[], storage=storage_dir, tool_budget=budget
    ) as tight:
        tight.tools.register(TOOLS)
        assert budget == tight.tool_budget
        request = tight.prepare(defer="auto", loaded=["read_notes"])
        assert ["read_notes", "search_tools"] == names(request.definitions)
        assert sorted(set(TOOLS) - {"read_notes"}) == names(request.deferred)
        everything = tight.prepare(defer="auto", loaded=list(TOOLS))
        assert sorted(TOOLS) == names(everything.definitions)


async def test_auto_counts_the_definitions_json_characters(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The budget is JSON characters / 4: just over it defers, at it does not."""
    definitions_only = {"read_notes": TOOLS["read_notes"]}
    async with host.location(workspace, plugins=[], storage=storage_dir) as probe:
        probe.tools.register(definitions_only)
        (definition,) = probe.prepare().definitions
    size = len(
        json.dumps(
            {
                "name": definition.name,
                "description": definition.description,
                "input_schema": pegboard.thaw(definition.input_schema),
            },
            separators=(",", ":"),
        )
    )
    for characters, deferred in ((size, False), (size - 1, True)):
        budget = pegboard.ToolBudget(tokens=characters, characters_per_token=1)
        async with host.location(
            workspace, plugins=[], storage=storage_dir, tool_budget=budget
        ) as location:
            location.tools.register(definitions_only)
            assert deferred == bool(location.prepare(defer="auto").deferred)


async def test_auto_follows_changes_to_the_boards(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The size a later snapshot corrects by the changed names equals a fresh count."""
    budget = pegboard.ToolBudget(tokens=60)
    async with host.location(
        workspace, plugins=[], storage=storage_dir, tool_budget=budget
    ) as location:
        small = location.tools.register({"read_notes": TOOLS["read_notes"]})
        assert () == location.prepare(defer="auto").deferred
        more = location.tools.register({k: v for k, v in TOOLS.items() if k != "read_notes"})
        over = location.prepare(defer="auto")
        assert ["search_tools"] == names(over.definitions)
        assert len(TOOLS) == len(over.deferred)
        more.close()
        assert () == location.prepare(defer="auto").deferred
        small.close()
        assert () == location.prepare(defer="auto").definitions


async def test_tool_budget_is_checked() -> None:
    """A budget is positive whole numbers."""
    with pytest.raises(ValueError, match=r"ToolBudget\.tokens must be a positive integer"):
        pegboard.ToolBudget(tokens=0)
    with pytest.raises(ValueError, match="characters_per_token"):
        pegboard.ToolBudget(characters_per_token=True)
    assert 40_000 == pegboard.ToolBudget().characters


async def test_host_location_takes_only_a_tool_budget(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    with pytest.raises(TypeError, match=r"tool_budget takes a pegboard\.ToolBudget"):
        async with host.location(workspace, storage=storage_dir, tool_budget=100):  # type: ignore[arg-type]
            pass


async def test_defer_naming_an_unknown_tool_is_an_error(board: pegboard.Location) -> None:
    """A name the Location does not have is a typo: prepare() says which."""
    with pytest.raises(ValueError, match="defer= names tools this Location does not have: 'nope'"):
        board.prepare(defer=["get_weather", "nope"])


async def test_defer_and_loaded_take_names_not_a_string(board: pegboard.Location) -> None:
    """A lone string would be read letter by letter: refused."""
    with pytest.raises(ValueError, match="defer= takes None, 'auto' or an iterable"):
        board.prepare(defer="get_weather")
    with pytest.raises(TypeError, match="loaded= takes an iterable of tool names"):
        board.prepare(loaded="read_notes")
    with pytest.raises(TypeError, match="defer= takes an iterable of tool names"):
        board.prepare(defer=[1])  # type: ignore[list-item]
    assert ["get_weather"] == names(board.prepare(defer=iter(["get_weather"])).deferred)


async def test_search_tools_is_reserved(location: pegboard.Location) -> None:
    """No plugin may register the name the framework advertises itself."""
    with pytest.raises(pegboard.RegistrationError, match="reserved for tool search"):
        location.tools.register({"search_tools": TOOLS["read_notes"]})
    with pytest.raises(pegboard.RegistrationError, match="reserved for Code Mode"):
        location.tools.register({"execute": TOOLS["read_notes"]})


# -- request.search ---------------------------------------------------------------------


async def test_search_ranks_names_descriptions_and_parameters(board: pegboard.Location) -> None:
    """Names split at _, - and camelCase; descriptions and parameters count too."""
    request = board.prepare(defer=list(TOOLS))
    assert "takeScreenshot" == request.search("take a screenshot")[0].name
    assert "send-message" == request.search("send a message")[0].name
    assert "get_weather" == request.search("forecast for a city")[0].name
    assert "create_issue" == request.search("open an issue with a title")[0].name
    assert "list_pull_requests" == request.search("show me the PRs")[0].name


async def test_search_returns_at_most_limit_best_first(board: pegboard.Location) -> None:
    request = board.prepare(defer=list(TOOLS))
    assert 1 == len(request.search("repository", limit=1))
    assert ["create_issue", "list_pull_requests"] == sorted(
        names(request.search("repository", limit=5))
    )
    assert () == request.search("zebra")


async def test_search_is_deterministic_and_breaks_ties_by_name(location: pegboard.Location) -> None:
    """Two tools alike in everything but name rank in name order, every time."""
    twin = named("Convert a currency amount.")
    location.tools.register({"b_convert": twin, "a_convert": twin})
    first = location.prepare(defer=["a_convert", "b_convert"])
    second = location.prepare(defer=["b_convert", "a_convert"])
    for request in (first, first, second):
        assert ["a_convert", "b_convert"] == names(request.search("currency"))


async def test_search_rejects_a_blank_query_and_a_bad_limit(board: pegboard.Location) -> None:
    request = board.prepare(defer=["get_weather"])
    with pytest.raises(ValueError, match="search\\(\\) needs a query"):
        request.search("  ")
    with pytest.raises(TypeError, match="takes the query as a string"):
        request.search(None)  # type: ignore[arg-type]
    for limit in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="positive integer limit"):
            request.search("weather", limit=limit)  # type: ignore[arg-type]


async def test_search_finds_only_the_requests_snapshot(board: pegboard.Location) -> None:
    """A tool registered after prepare() is never found by that request."""
    request = board.prepare(defer=["get_weather"])
    board.tools.register({"get_umbrella": named("Say whether it will rain in a city.")})
    assert ["get_weather"] == names(request.search("rain in a city"))
    later = board.prepare(defer=["get_weather", "get_umbrella"])
    assert "get_umbrella" == later.search("rain in a city")[0].name


# -- the search_tools tool --------------------------------------------------------------


async def test_search_tools_returns_definitions_best_first(
    board: pegboard.Location, context: Context
) -> None:
    """The call's content is the JSON list; its output the same, under "tools"."""
    request = board.prepare(defer=list(TOOLS))
    outcome = await call(request, context, "search_tools", '{"query": "weather", "limit": 2}')
    assert ["get_weather"] == found(outcome)
    assert isinstance(outcome, pegboard.Completed)
    listed = json.loads(outcome.content[0].text)  # type: ignore[union-attr]
    assert [
        {
            "name": "get_weather",
            "description": "Report the conditions somewhere.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city to forecast for."}
                },
                "additionalProperties": False,
            },
        }
    ] == listed
    assert "search_tools" == outcome.name


async def test_search_tools_says_when_nothing_matches(
    board: pegboard.Location, context: Context
) -> None:
    request = board.prepare(defer=["get_weather"])
    outcome = await call(request, context, "search_tools", {"query": "zebra"})
    assert [] == found(outcome)
    assert "no tool matches 'zebra'" in outcome.content[0].text  # type: ignore[union-attr]


async def test_search_tools_results_come_from_the_requests_snapshot(
    board: pegboard.Location, context: Context
) -> None:
    request = board.prepare(defer=["get_weather"])
    board.tools.register({"get_umbrella": named("Say whether it will rain in a city.")})
    outcome = await call(request, context, "search_tools", {"query": "rain city"})
    assert ["get_weather"] == found(outcome)


@pytest.mark.parametrize(
    "raw",
    ['{"query": ""}', '{"query": "x", "limit": 0}', '{"query": "x", "limit": 21}', "{}"],
)
async def test_search_tools_refuses_bad_input(
    board: pegboard.Location, context: Context, raw: str
) -> None:
    """An empty query or a limit outside 1..20 fails that call as invalid input."""
    request = board.prepare(defer=["get_weather"])
    outcome = await call(request, context, "search_tools", raw)
    assert isinstance(outcome, pegboard.Failed)
    assert "invalid_input" == outcome.error.kind


async def test_unknown_and_withdrawn_calls_still_fail_alone(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A hook-withdrawn deferred tool is neither found nor run; unknown names fail."""

    class Withdraw:
        @hookimpl
        def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
            definitions[:] = [d for d in definitions if d.name != "get_weather"]

    host.add_plugin("withdraw", Withdraw())
    async with host.location(workspace, plugins=["withdraw"], storage=storage_dir) as location:
        location.tools.register(TOOLS)
        request = location.prepare(defer=["get_weather", "takeScreenshot"])
        assert ["takeScreenshot"] == names(request.deferred)
        assert () == request.search("weather conditions")
        assert [] == found(await call(request, context, "search_tools", {"query": "weather"}))
        outcomes = await request.execute_all(
            [
                pegboard.ToolCall("get_weather", {}, context("1")),
                pegboard.ToolCall("nope", {}, context("2")),
                pegboard.ToolCall("takeScreenshot", {}, context("3")),
            ]
        )
    kinds = [o.error.kind if isinstance(o, pegboard.Failed) else "ok" for o in outcomes]
    assert ["unavailable", "unknown_tool", "ok"] == kinds


async def test_auto_over_the_budget_leaves_out_withdrawn_tools(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """With hooks, defer="auto" counts and defers only what the hooks kept."""

    class Withdraw:
        @hookimpl
        def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
            definitions[:] = [d for d in definitions if d.name != "get_weather"]

    host.add_plugin("withdraw", Withdraw())
    budget = pegboard.ToolBudget(tokens=20)
    async with host.location(
        workspace, plugins=["withdraw"], storage=storage_dir, tool_budget=budget
    ) as location:
        location.tools.register(TOOLS)
        request = location.prepare(defer="auto", loaded=["get_weather", "read_notes"])
        assert ["read_notes", "search_tools"] == names(request.definitions)
        assert "get_weather" not in names(request.deferred)
        assert len(TOOLS) - 2 == len(request.deferred)


async def test_final_step_keeps_search_tools_with_tool_choice_none(
    board: pegboard.Location, context: Context
) -> None:
    """The definitions stay (a cached prefix survives); every call fails as final_step."""
    request = board.prepare(final_step=True, defer=["get_weather"])
    assert "search_tools" == request.definitions[-1].name
    assert "none" == request.tool_choice
    for name in ("search_tools", "get_weather"):
        outcome = await call(request, context, name, {"query": "weather"})
        assert isinstance(outcome, pegboard.Failed)
        assert "final_step" == outcome.error.kind
    assert {"type": "none"} == anthropic.tool_choice(request)
    assert "none" == openai_responses.tool_choice(request)


# -- providers --------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda module: module.__name__)
@pytest.mark.parametrize("strict", [False, True])
async def test_the_portable_form_validates_everywhere(
    board: pegboard.Location, provider: Any, strict: bool
) -> None:
    """Every provider takes the advertised tools plus search_tools, as its SDK types it."""
    request = board.prepare(defer=["get_weather"], final_step=True)
    rendered = provider.tools(request, strict=strict)
    validate_tools(provider, rendered)
    validate_tool_choice(provider, provider.tool_choice(request))
    text = json.dumps(rendered)
    assert "search_tools" in text
    assert "get_weather" not in text


async def test_anthropic_native_search_defers_loading(board: pegboard.Location) -> None:
    request = board.prepare(defer=["get_weather", "takeScreenshot"])
    rendered = anthropic.tools(request, native_search=True)
    conforms(list[ToolUnionParam], rendered)
    by_name = {tool["name"]: tool for tool in rendered}
    assert "search_tools" not in by_name
    assert {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"} == (
        rendered[-1]
    )
    assert {"get_weather", "takeScreenshot"} == {
        name for name, tool in by_name.items() if tool.get("defer_loading")
    }
    assert "defer_loading" not in by_name["read_notes"]
    conforms(list[ToolUnionParam], anthropic.tools(request, native_search=True, strict=True))


async def test_openai_responses_native_search_defers_loading(board: pegboard.Location) -> None:
    request = board.prepare(defer=["get_weather"])
    rendered = openai_responses.tools(request, native_search=True)
    conforms(list[ResponsesToolParam], rendered)
    assert {"type": "tool_search"} == rendered[-1]
    deferred = [tool["name"] for tool in rendered if tool.get("defer_loading")]
    assert ["get_weather"] == deferred
    assert "search_tools" not in [tool.get("name") for tool in rendered]


async def test_native_search_without_deferred_tools_is_the_plain_form(
    board: pegboard.Location,
) -> None:
    request = board.prepare()
    assert anthropic.tools(request) == anthropic.tools(request, native_search=True)
    assert openai_responses.tools(request) == openai_responses.tools(request, native_search=True)


@pytest.mark.parametrize(
    ("provider", "label"),
    [(openai_chat, "OpenAI Chat Completions"), (gemini, "Gemini")],
    ids=["openai_chat", "gemini"],
)
async def test_native_search_elsewhere_names_the_provider(
    board: pegboard.Location, provider: Any, label: str
) -> None:
    request = board.prepare(defer=["get_weather"])
    with pytest.raises(CompatibilityError, match=f"{label} has no native tool search") as caught:
        provider.tools(request, native_search=True)
    assert label == caught.value.provider


# -- Code Mode --------------------------------------------------------------------------


async def test_code_mode_finds_and_calls_a_deferred_tool(
    board: pegboard.Location, context: Context
) -> None:
    """The program searches the deferred tools, then calls what it found."""
    request = board.prepare(code_mode=True, defer=["get_weather", "takeScreenshot"])
    (execute,) = request.definitions
    assert "search_tools(query=" in execute.description
    assert "async def read_notes" in execute.description
    assert "async def get_weather" not in execute.description
    code = (
        "found = await search_tools(query='weather in a city', limit=3)\n"
        "print(found[0]['name'], sorted(found[0]['input_schema']['properties']))\n"
        "await get_weather(city='Oslo')"
    )
    outcome = await call(request, context, "execute", {"code": code})
    assert isinstance(outcome, pegboard.Completed), outcome
    assert "get_weather ['city']\nran Report" == outcome.content[0].text  # type: ignore[union-attr]


async def test_code_mode_without_deferred_tools_has_no_search(
    board: pegboard.Location, context: Context
) -> None:
    request = board.prepare(code_mode=True)
    assert "search_tools" not in request.definitions[0].description
    outcome = await call(request, context, "execute", {"code": "await search_tools(query='x')"})
    assert isinstance(outcome, pegboard.Failed)
    assert "is not defined" in outcome.error.message


async def test_code_mode_search_tools_keeps_its_name_beside_a_look_alike(
    location: pegboard.Location, context: Context
) -> None:
    """A tool named search-tools reads as search_tools in Python: it yields the name."""
    location.tools.register({"search-tools": named("Look for tools elsewhere.")})
    location.tools.register({"get_weather": TOOLS["get_weather"]})
    request = location.prepare(code_mode=True, defer=["get_weather"])
    code = "[t['name'] for t in await search_tools(query='weather')], await search_tools2()"
    outcome = await call(request, context, "execute", {"code": code})
    assert isinstance(outcome, pegboard.Completed), outcome
    assert '[["get_weather"], "ran Look"]' == outcome.content[0].text  # type: ignore[union-attr]
