"""The conformance kit catches what it claims: each broken plugin fails exactly its check."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import anyio
import attrs
import pytest

import pegboard
from pegboard import hookimpl
from pegboard.testing import Example, check, check_names, run_cli

pytest_plugins = ["pytester"]
#: Inner pytest runs skip plugins they do not need (hypothesis' is slow to start).
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@attrs.frozen
class NoteInput:
    text: str = attrs.field(metadata={"description": "The note"})


@attrs.frozen
class NoteOutput:
    words: int


async def count_words(input: NoteInput, context: pegboard.ToolContext) -> Any:
    """A well-behaved tool: reports progress (it awaits), returns output and metadata."""
    await context.progress(pegboard.Progress(message="counting"))
    words = len(input.text.split())
    return pegboard.ToolResponse(output=NoteOutput(words), metadata={"characters": len(input.text)})


def count_tool(execute: Callable[..., Any] = count_words, **overrides: Any) -> pegboard.Tool:
    settings: dict[str, Any] = {
        "description": "Count the words of a note.",
        "input": NoteInput,
        "output": NoteOutput,
    }
    settings.update(overrides)
    return pegboard.tool(execute=execute, **settings)


EXAMPLES = (
    Example(tool="notes_count", input={"text": "buy milk"}),
    Example(tool="notes_count", input='{"text": 7}', expect="invalid_input"),
)


class Good:
    """Registers its tools per Location, tears down, and has well-behaved hooks."""

    def __init__(self, make: Callable[[], Mapping[str, pegboard.Tool]] | None = None) -> None:
        self.make = make or (lambda: {"count": count_tool()})
        self.active = 0

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        tools.register(self.make(), namespace="notes")
        self.active += 1
        yield
        self.active -= 1

    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome | None:
        return None

    @hookimpl
    def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
        pass


# --- activation ---------------------------------------------------------------------------


class RegistersNothing:
    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> None:
        count_tool()  # built, never registered


class KeepsTheFirstTools:
    """Keeps the first Location's Tools and registers through it ever after."""

    def __init__(self) -> None:
        self.tools: pegboard.Tools | None = None

    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> None:
        self.tools = self.tools or tools
        self.tools.register({"count": count_tool()}, namespace="notes")


# --- teardown -----------------------------------------------------------------------------


class AnnouncesToPeers(Good):
    """Offers each open Location a tool for every other one, and never takes it back."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[pegboard.Tools] = []

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        tools.register({"count": count_tool()}, namespace="notes")
        for peer in self.open:
            peer.register({f"peer_{len(self.open)}": count_tool()}, namespace="notes")
        self.open.append(tools)
        yield
        self.open.remove(tools)


class FailsTeardown(Good):
    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        tools.register({"count": count_tool()}, namespace="notes")
        yield
        raise OSError("could not flush the notes index")


# --- isolation ----------------------------------------------------------------------------


class SharedNotes(Good):
    """Keeps notes on the plugin object: every Location sees every other's notes."""

    notes: list[str] = []  # noqa: RUF012 - the shared state is the bug under test

    def __init__(self) -> None:
        async def add(input: NoteInput, context: pegboard.ToolContext) -> str:
            self.notes.append(input.text)
            return f"{len(self.notes)} notes"

        super().__init__(
            lambda: {"count": pegboard.tool(description="Add.", execute=add, input=NoteInput)}
        )


class CountsLocations(Good):
    """Names an extra tool after how many Locations it has seen."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        self.seen += 1
        tools.register({"count": count_tool(), f"n{self.seen}": count_tool()}, namespace="notes")
        yield


class DescribesItsVisits(Good):
    """Puts how many Locations it has seen in its tool's description."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        self.seen += 1
        tool = count_tool(description=f"Count the words of a note (visit {self.seen}).")
        tools.register({"count": tool}, namespace="notes")
        yield


#: What a careless plugin keeps at module level: the root of the first Location it saw.
FIRST_ROOT: list[Path] = []


class CachesTheFirstRoot(Good):
    """Reads its notes from the first Location's folder, in every Location after it."""

    @hookimpl
    async def activate_location(
        self, location: pegboard.LocationInfo, tools: pegboard.Tools
    ) -> AsyncIterator[None]:
        FIRST_ROOT[:] = FIRST_ROOT or [location.root]

        async def count(input: NoteInput, context: pegboard.ToolContext) -> Any:
            if not FIRST_ROOT[0].exists():
                raise pegboard.ToolFailure(f"notes folder {FIRST_ROOT[0]} is gone")
            return NoteOutput(len(input.text.split()))

        tools.register({"count": count_tool(execute=count)}, namespace="notes")
        yield


# --- definitions --------------------------------------------------------------------------


class ColumnsCodec:
    """An input codec whose schema is filled in with a Location's columns at activation."""

    def __init__(self) -> None:
        self.schema: dict[str, Any] = {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": False,
        }
        self.checked = pegboard.SchemaCodec(self.schema)

    @property
    def json_schema(self) -> Mapping[str, Any]:
        return self.schema

    def decode(self, raw: Any) -> NoteInput:
        return NoteInput(**self.checked.decode(raw))

    def encode(self, value: Any) -> Any:
        return self.checked.encode(attrs.asdict(value))


class EnrichesItsSchema(Good):
    def __init__(self) -> None:
        self.codec = ColumnsCodec()
        made = count_tool(input=self.codec)  # checked now, while the schema is valid
        super().__init__(lambda: {"count": made})

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        # The mistake: "enum" must be an array, and the tool's schema was checked already.
        self.codec.schema["properties"]["text"]["enum"] = ",".join(["buy milk", "call mum"])
        tools.register(self.make(), namespace="notes")
        yield


class Shadows(Good):
    """Registers a tool as ``read``, without a namespace."""

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        tools.register({"notes_count": count_tool(), "read": count_tool()})
        yield


def description_from_an_empty_file() -> str:
    return "\ufeff"  # an empty file saved with a byte-order mark, read as utf-8


# --- examples -----------------------------------------------------------------------------


async def returns_a_dict(input: NoteInput, context: pegboard.ToolContext) -> Any:
    return {"words": len(input.text.split())}  # not a NoteOutput


class LaxOutputCodec:
    """An output codec that advertises a schema and never checks against it."""

    json_schema: Mapping[str, Any] = pegboard.FrozenDict(
        {"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]}
    )

    def decode(self, raw: Any) -> Any:
        return raw

    def encode(self, value: Any) -> Any:
        return {"words": str(value.words)}  # a string where the schema says integer


async def raises_key_error(input: NoteInput, context: pegboard.ToolContext) -> Any:
    raise KeyError("text")


# --- generated ----------------------------------------------------------------------------

#: Accepts an object without "text": the tool below trusts a key its schema never required.
LOOSE_NOTE = {"type": "object", "properties": {"text": {"type": "string"}}}


async def trusts_a_key(input: dict[str, Any], context: pegboard.ToolContext) -> Any:
    return NoteOutput(len(input["text"].split()))


@attrs.frozen
class TaggedNote:
    text: str
    tags: list[str] = attrs.Factory(list)


async def tags_its_input(input: TaggedNote, context: pegboard.ToolContext) -> Any:
    input.tags.append("counted")  # a frozen class, yet its list can still change
    return NoteOutput(len(input.text.split()))


# --- blocking -----------------------------------------------------------------------------


class SleepsInActivation(Good):
    """Opens a 'connection' with a blocking call inside its async activation."""

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        time.sleep(0.3)  # noqa: ASYNC251 - the broken behaviour under test
        tools.register({"count": count_tool()}, namespace="notes")
        yield


async def blocks_the_loop(input: NoteInput, context: pegboard.ToolContext) -> Any:
    if input.text == "buy milk":  # the example's input: other inputs stay quick
        time.sleep(0.3)  # noqa: ASYNC251 - the broken behaviour under test
    return NoteOutput(len(input.text.split()))


class SleepsInItsHook(Good):
    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome | None:
        if event.name == "notes_count":
            time.sleep(0.15)  # an audit log written synchronously, on the loop
        return None


# --- metadata -----------------------------------------------------------------------------


async def metadata_list(input: NoteInput, context: pegboard.ToolContext) -> Any:
    return pegboard.ToolResponse(output=NoteOutput(2), metadata=["not", "an", "object"])  # type: ignore[arg-type]


async def metadata_copy(input: NoteInput, context: pegboard.ToolContext) -> Any:
    return pegboard.ToolResponse(output=NoteOutput(2), metadata={"words": 2})


async def always_refuses(input: NoteInput, context: pegboard.ToolContext) -> Any:
    raise pegboard.ToolFailure("the notes server is not reachable")


# --- cancellation -------------------------------------------------------------------------


async def swallows_cancellation(input: NoteInput, context: pegboard.ToolContext) -> Any:
    try:
        await context.progress(pegboard.Progress(message="counting"))
    except BaseException:  # noqa: BLE001 - the broken behaviour under test
        return NoteOutput(0)
    return NoteOutput(len(input.text.split()))


async def converts_cancellation(input: NoteInput, context: pegboard.ToolContext) -> Any:
    try:
        await anyio.sleep(0.05)
    except BaseException as error:  # the broken behaviour under test
        raise RuntimeError("interrupted") from error
    return NoteOutput(len(input.text.split()))


# --- invalid input ------------------------------------------------------------------------


class LaxInputCodec(ColumnsCodec):
    """Advertises a strict schema; decodes anything."""

    def decode(self, raw: Any) -> Any:
        return NoteInput(str(raw))


# --- hooks --------------------------------------------------------------------------------


class GarbageHook(Good):
    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> Any:
        return "all good"


class RaisingHook(Good):
    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> Any:
        raise LookupError("no audit log")


class RewritesOutput(Good):
    @hookimpl
    def execute_after(self, event: pegboard.ExecuteEvent) -> Any:
        if isinstance(event.outcome, pegboard.Completed):
            return pegboard.Completed({"redacted": True}, "redacted")
        return None


class RaisingPrepare(Good):
    @hookimpl
    def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
        raise ValueError("cannot read the allow-list")


class AddsADefinition(Good):
    @hookimpl
    def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
        extra = {"type": "object", "properties": {}}
        definitions.append(pegboard.ToolDefinition("notes_extra", "An extra.", extra, None))


class LogsEachRequest(Good):
    @hookimpl
    def prepare_request(
        self, location: pegboard.LocationInfo, definitions: list[pegboard.ToolDefinition]
    ) -> None:
        with open(location.root / "requests.log", "a") as log:
            log.write(f"{len(definitions)}\n")


def tools_with(**overrides: Any) -> Callable[[], Good]:
    return lambda: Good(lambda: {"count": count_tool(**overrides)})


BROKEN = [
    pytest.param(RegistersNothing, "activation", "registered no tools", id="registers-nothing"),
    pytest.param(KeepsTheFirstTools, "activation", "scope 'plugin:", id="keeps-first-tools"),
    # It reaches into the other open Location, which isolation sees as well.
    pytest.param(
        AnnouncesToPeers,
        ("teardown", "isolation"),
        "notes_peer_1",
        id="leaks",
    ),
    pytest.param(FailsTeardown, "teardown", "could not flush", id="teardown-raises"),
    pytest.param(SharedNotes, "isolation", "settled differently in two Locations", id="shared"),
    pytest.param(CountsLocations, ("definitions", "isolation"), "got different tools", id="grows"),
    pytest.param(
        lambda: Good(lambda: {"count": count_tool(description="Count the words. " * 70)}),
        "definitions",
        "characters (more than 1,024)",
        id="long-description",
    ),
    pytest.param(
        DescribesItsVisits, "definitions", "differs between two activations", id="restless"
    ),
    # Every closed Location's folder is deleted, so the stale root shows in the examples.
    pytest.param(
        lambda: (FIRST_ROOT.clear(), CachesTheFirstRoot())[1],
        "examples",
        " is gone; the example expects completed",
        id="caches-first-root",
    ),
    pytest.param(
        lambda: Good(lambda: {"count": count_tool(description=description_from_an_empty_file())}),
        "definitions",
        "has no description a model can read",
        id="blank-description",
    ),
    pytest.param(EnrichesItsSchema, "definitions", "keyword 'enum'", id="schema-changed"),
    pytest.param(Shadows, "definitions", "takes the name of a built-in tool", id="shadows"),
    # A tool broken on every input fails its examples and every generated input alike.
    pytest.param(
        tools_with(execute=returns_a_dict),
        ("examples", "generated"),
        "invalid_output",
        id="output",
    ),
    pytest.param(
        tools_with(output=LaxOutputCodec()),
        ("examples", "generated"),
        "expected integer",
        id="lax-encode",
    ),
    pytest.param(
        tools_with(execute=raises_key_error),
        ("examples", "generated"),
        "raised KeyError",
        id="raises",
    ),
    pytest.param(
        tools_with(input=LOOSE_NOTE, execute=trusts_a_key),
        "generated",
        "raised KeyError: 'text' on input its input schema accepts: {}",
        id="trusts-a-key",
    ),
    pytest.param(
        SleepsInActivation,
        "blocking",
        "activating plugin 'notes' (activate_location) blocked the event loop for",
        id="sleeps-in-activation",
    ),
    pytest.param(
        tools_with(execute=blocks_the_loop),
        "blocking",
        "a call of tool 'notes_count' (its execute, or a hook) blocked the event loop",
        id="async-tool-blocks",
    ),
    pytest.param(tools_with(execute=metadata_list), "metadata", "not a JSON object", id="meta"),
    pytest.param(tools_with(execute=metadata_copy), "metadata", "copy of its output", id="copy"),
    pytest.param(
        tools_with(execute=swallows_cancellation),
        "cancellation",
        "swallowed the cancellation",
        id="swallows",
    ),
    pytest.param(
        tools_with(execute=converts_cancellation),
        "cancellation",
        "raised RuntimeError: interrupted",
        id="converts",
    ),
    pytest.param(
        tools_with(input=LaxInputCodec()), "invalid_input", "was not protected", id="lax-decode"
    ),
    pytest.param(
        tools_with(input=TaggedNote, execute=tags_its_input),
        "generated",
        "changed its input from",
        id="mutates-input",
    ),
    # A hook broken on every outcome breaks every generated call as well.
    pytest.param(GarbageHook, ("generated", "hooks"), "execute_after hook", id="garbage-hook"),
    pytest.param(RaisingHook, ("generated", "hooks"), "no audit log", id="raising-hook"),
    pytest.param(
        RewritesOutput, ("generated", "hooks"), "output schema refuses", id="rewrites-output"
    ),
    pytest.param(RaisingPrepare, "hooks", "cannot read the allow-list", id="raising-prepare"),
    pytest.param(AddsADefinition, "hooks", "added definitions (notes_extra)", id="adds"),
    pytest.param(LogsEachRequest, "hooks", "did I/O while preparing a request: open", id="io"),
]


def _laws(param: Any) -> tuple[str, ...]:
    laws = param.values[1]
    return laws if isinstance(laws, tuple) else (laws,)


@pytest.mark.parametrize(("make", "laws", "message"), BROKEN)
def test_each_broken_plugin_fails_exactly_its_check(
    make: Callable[[], object],
    laws: str | tuple[str, ...],
    message: str,
    backend: str,
    tmp_path: Path,
) -> None:
    """A plugin that breaks one law fails that check alone, saying what broke and the fix."""
    expected = laws if isinstance(laws, tuple) else (laws,)
    report = check(make(), name="notes", examples=EXAMPLES, backend=backend, directory=tmp_path)
    assert list(expected) == [result.name for result in report.failed], report.format()
    for failed in report.failed:
        assert any(message in problem.message for problem in failed.problems), failed.describe()
        assert all(problem.fix for problem in failed.problems)
        assert failed.law in failed.describe()


def test_names_that_differ_only_by_dash_and_underscore_are_a_note(tmp_path: Path) -> None:
    plugin = Good(lambda: {"count_words": count_tool(), "count-words": count_tool()})
    report = check(plugin, name="notes", only=["definitions"], directory=tmp_path)
    [result] = report.results
    assert "passed" == result.status, report.format()
    assert any("differ only by '-' and '_'" in note for note in result.notes)


def test_a_failure_without_a_message_fails_examples(tmp_path: Path) -> None:
    """A ToolFailure must tell the model something."""

    async def mute(input: NoteInput, context: pegboard.ToolContext) -> Any:
        raise pegboard.ToolFailure(" ")

    example = Example(tool="notes_count", input={"text": "x"}, expect="tool_failure")
    plugin = tools_with(execute=mute)()
    report = check(plugin, examples=[example], only=["examples"], directory=tmp_path)
    assert "failed with an empty message" in report.results[0].problems[0].message


def test_a_tool_that_hangs_after_cancellation_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cleanup that outlasts the grace period fails the cancellation check."""
    from pegboard.testing import _check_cancellation

    monkeypatch.setattr(_check_cancellation, "GRACE_SECONDS", 0.05)

    async def lingers(input: NoteInput, context: pegboard.ToolContext) -> Any:
        try:
            await anyio.sleep(1)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.5)
        return NoteOutput(1)

    plugin = tools_with(execute=lingers)()
    report = check(plugin, examples=EXAMPLES, only=["cancellation"], directory=tmp_path)
    assert "had not finished 0.05 s later" in report.results[0].problems[0].message


def test_a_good_plugin_passes_every_check(backend: str, tmp_path: Path) -> None:
    """The well-behaved plugin passes every check; side effects, watched only in a
    confined worker, are not judged for an object in the checks' process."""
    report = check(Good(), examples=EXAMPLES, backend=backend, directory=tmp_path)
    assert list(check_names()) == [result.name for result in report.results]
    statuses = {result.name: result.status for result in report.results}
    assert "skipped" == statuses.pop("side_effects")
    assert {"passed"} == set(statuses.values()), report.format()
    assert report.passed
    assert "conforms: 11 passed, 1 skipped" in report.format()


def test_every_check_is_failed_by_some_broken_plugin() -> None:
    """A check that no broken plugin can fail is not a check. (The side effects
    corpus, plugins that run confined, is in test_kit_side_effects.py.)"""
    failed = {law for param in BROKEN for law in _laws(param)} | {"side_effects"}
    assert set(check_names()) == failed


def test_checks_without_anything_to_judge_are_skipped(tmp_path: Path) -> None:
    """No examples: the examples check is skipped, with the reason; the others judge
    generated inputs instead; none fails."""
    report = check(Good(), only=["examples", "cancellation", "metadata"], directory=tmp_path)
    assert ["skipped", "passed", "passed"] == [result.status for result in report.results]
    assert "no examples" in (report.results[0].reason or "")
    assert report.passed


NO_EXAMPLES_BROKEN = [
    pytest.param(tools_with(execute=metadata_list), "metadata", "not a JSON object", id="meta"),
    pytest.param(tools_with(execute=metadata_copy), "metadata", "copy of its output", id="copy"),
    pytest.param(
        tools_with(execute=swallows_cancellation),
        "cancellation",
        "swallowed the cancellation",
        id="swallows",
    ),
    pytest.param(
        tools_with(execute=always_refuses),
        "generated",
        "every call of 'notes_count' failed (",
        id="always-fails",
    ),
]


@pytest.mark.parametrize(("make", "law", "message"), NO_EXAMPLES_BROKEN)
def test_without_examples_generated_inputs_catch_the_same_defects(
    make: Callable[[], object], law: str, message: str, tmp_path: Path
) -> None:
    """No examples is no excuse: generated inputs drive the metadata and cancellation checks."""
    report = check(make(), name="notes", only=[law], directory=tmp_path)
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert any(message in problem.message for problem in result.problems), result.describe()
    twin = check(Good(), name="notes", only=[law], directory=tmp_path / "twin")
    assert twin.passed, twin.format()


def test_a_tool_expected_to_fail_everywhere_is_noted_not_failed(tmp_path: Path) -> None:
    plugin = tools_with(execute=always_refuses)()
    report = check(
        plugin,
        name="notes",
        only=["generated"],
        expected_failures={"notes_count": "needs the notes server"},
        directory=tmp_path,
    )
    [result] = report.results
    assert "passed" == result.status, report.format()
    assert any("as expected: needs the notes server" in note for note in result.notes)


def test_a_plugin_that_does_not_activate_fails_activation_alone(tmp_path: Path) -> None:
    """The other checks cannot judge a plugin that never activates; they skip, naming why."""

    class Crashes:
        @hookimpl
        def activate_location(self) -> None:
            raise RuntimeError("no database")

    report = check(Crashes(), examples=EXAMPLES, directory=tmp_path)
    assert ["activation"] == [result.name for result in report.failed]
    assert "RuntimeError: no database" in report.failed[0].problems[0].message
    reasons = {result.name: result.reason for result in report.results if result.reason}
    assert "the plugin implements no execute_after" in str(reasons.pop("hooks"))
    assert "watched in a confined plugin's worker" in str(reasons.pop("side_effects"))
    assert 9 == len(reasons)
    assert all("did not activate (activation: RuntimeError" in str(r) for r in reasons.values())


class WrapsActivation(Good):
    @hookimpl(wrapper=True)
    def activate_location(self, tools: pegboard.Tools) -> Any:
        return (yield)


class MisspellsAHook(Good):
    @hookimpl
    def execute_before(self) -> None:
        pass


@pytest.mark.parametrize(
    ("plugin", "fix"),
    [
        (WrapsActivation, "remove wrapper=True / hookwrapper=True"),
        (MisspellsAHook, "spell each hook as pegboard.hookspecs does: activate_location"),
    ],
    ids=["wrapper", "misspelt"],
)
def test_a_plugin_that_does_not_load_is_told_the_specific_fix(
    plugin: Callable[[], object], fix: str, tmp_path: Path
) -> None:
    """A hook wrapper or a misspelt hook gets its own fix, not generic import advice."""
    report = check(plugin(), only=["activation"], directory=tmp_path)
    [failed] = report.failed
    assert fix in failed.problems[0].fix, failed.describe()


def test_an_example_naming_an_unknown_tool_fails_examples(tmp_path: Path) -> None:
    """Examples name advertised tools; a typo is reported with what the plugin advertises."""
    report = check(Good(), examples=[Example(tool="count")], only=["examples"], directory=tmp_path)
    [result] = report.results
    assert "does not advertise; it advertises notes_count" in result.problems[0].message


def test_the_isolation_check_can_be_told_a_tool_is_not_deterministic(tmp_path: Path) -> None:
    """deterministic=False keeps a varying result from being taken for shared state."""
    examples = [Example(tool="notes_count", input={"text": "x"}, deterministic=False)]
    report = check(SharedNotes(), examples=examples, only=["isolation"], directory=tmp_path)
    assert report.passed
    assert "only the tool names were compared" in report.results[0].notes[0]


def test_a_plugin_without_examples_is_still_exercised(backend: str, tmp_path: Path) -> None:
    """No examples at all: generated inputs call every tool, and a good plugin passes."""
    calls: list[str] = []

    async def counts(input: NoteInput, context: pegboard.ToolContext) -> Any:
        calls.append(input.text)
        return NoteOutput(len(input.text.split()))

    plugin = tools_with(execute=counts)()
    report = check(plugin, only=["generated"], backend=backend, directory=tmp_path)
    assert report.passed, report.format()
    assert 25 == len(calls)


def test_a_tool_nothing_exercised_is_not_verified(tmp_path: Path) -> None:
    """Without examples or generated inputs a tool is not verified: the check fails."""
    report = check(Good(), only=["generated"], generated=0, directory=tmp_path)
    assert not report.passed
    [problem] = report.failed[0].problems
    assert "'notes_count' is not verified" in problem.message
    assert "skip={'notes_count':" in problem.fix
    assert "not verified: notes_count" in report.format()


def test_a_skipped_tool_is_not_called_and_says_why(tmp_path: Path) -> None:
    """An author may skip a tool with a reason; the report shows the reason."""
    plugin = tools_with(execute=raises_key_error)()
    report = check(
        plugin,
        only=["generated"],
        skip={"notes_count": "it needs the network"},
        directory=tmp_path,
    )
    assert report.passed, report.format()
    assert "tool 'notes_count' is skipped: it needs the network" in report.format()


def test_a_slow_import_fails_blocking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin module that takes longer than the threshold to import fails, with the time."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "slow_notes.py").write_text(
        "import time\n"
        "import pegboard\n"
        "time.sleep(0.6)\n"
        "@pegboard.hookimpl\n"
        "def activate_location(tools):\n"
        "    ok = pegboard.tool(description='Say ok.', execute=lambda i, c: 'ok')\n"
        "    tools.register({'ok': ok})\n"
    )
    monkeypatch.syspath_prepend(str(source))
    monkeypatch.setenv("PYTHONPATH", str(source))
    report = check(
        "slow_notes", only=["blocking"], import_threshold=0.3, directory=tmp_path / "checks"
    )
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert "importing 'slow_notes' takes 0." in result.problems[0].message
    assert "import heavy libraries" in result.problems[0].fix


def test_a_blocking_hook_is_named(tmp_path: Path) -> None:
    """A hook that holds the loop during a call is caught while that call runs."""
    report = check(SleepsInItsHook(), only=["blocking"], directory=tmp_path)
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert "notes_count" in result.problems[0].message


def test_a_clock_tool_is_not_taken_for_shared_state(tmp_path: Path) -> None:
    """Times and UUIDs change from call to call in any plugin; isolation ignores them."""
    import datetime
    import uuid

    async def now(input: NoteInput, context: pegboard.ToolContext) -> str:
        await anyio.sleep(0.002)
        moment = datetime.datetime.now(datetime.UTC).isoformat()
        return f"{moment} ({uuid.uuid4()}) {input.text}"

    plugin = Good(
        lambda: {"count": pegboard.tool(description="Now.", execute=now, input=NoteInput)}
    )
    example = Example(tool="notes_count", input={"text": "x"})
    report = check(plugin, examples=[example], only=["isolation"], directory=tmp_path)
    assert report.passed, report.format()


class LinksIntoItsLocation:
    """Answers with a link to, and the text of, a file in its own Location, made now."""

    @hookimpl
    def activate_location(self, tools: pegboard.Tools, location: pegboard.LocationInfo) -> None:
        import datetime

        root = location.root

        async def report(input: NoteInput, context: pegboard.ToolContext) -> Any:
            await anyio.sleep(0.002)
            made = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
            return [
                pegboard.ResourceLink(uri=(root / "report.txt").as_uri(), name="report.txt"),
                pegboard.EmbeddedResource(
                    uri=(root / "report.txt").as_uri(), text=f"{input.text}, made at {made}"
                ),
            ]

        tools.register(
            {"report": pegboard.tool(description="Report.", execute=report, input=NoteInput)},
            namespace="notes",
        )


def test_links_and_resources_into_the_location_are_not_taken_for_shared_state(
    tmp_path: Path,
) -> None:
    """A resource link or embedded resource naming a file of its own Location, or a time,
    differs between two Locations only by their roots and the clock: isolation masks them
    in every content item, as it does in text."""
    example = Example(tool="notes_report", input={"text": "x"})
    report = check(
        LinksIntoItsLocation(), examples=[example], only=["isolation"], directory=tmp_path
    )
    assert report.passed, report.format()


class RegistersInTheBackground(Good):
    """Keeps re-registering from a bare asyncio task that nothing ever cancels."""

    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        import asyncio

        tools.register({"count": count_tool()}, namespace="notes")

        async def refresh() -> None:
            while True:
                await asyncio.sleep(0.05)
                with contextlib.suppress(pegboard.RegistrationError):
                    tools.register({"count": count_tool()}, namespace="notes")

        self.task = asyncio.get_running_loop().create_task(refresh())
        yield


def test_a_background_task_that_outlives_the_location_fails_teardown(tmp_path: Path) -> None:
    """A bare asyncio task started in activation is still running after close: named."""
    report = check(RegistersInTheBackground(), only=["teardown"], directory=tmp_path)
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert "left 2 background task(s) running" in result.problems[0].message
    assert "refresh" in result.problems[0].message
    assert "services.tasks.start_soon" in result.problems[0].fix


class SleepsPastTheTimeout(Good):
    """A plain (sync) activation that overruns the activation timeout."""

    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> None:
        time.sleep(1.5)
        tools.register({"count": count_tool()}, namespace="notes")


def test_a_sync_activation_past_the_timeout_is_reported_not_passed(tmp_path: Path) -> None:
    """The kit's timeout bounds a blocking sync activation; the report says it overran."""
    started = time.monotonic()
    report = check(SleepsPastTheTimeout(), only=["activation"], timeout=0.5, directory=tmp_path)
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert "did not finish within 0.5 s" in result.problems[0].message
    assert time.monotonic() - started < 1.4  # the kit did not wait for the sleeping thread


def test_unknown_check_names_are_refused() -> None:
    """only= takes check names; a typo says which names exist."""
    with pytest.raises(ValueError, match="no check named cancelation; checks: activation"):
        check(Good(), only=["cancelation"])


# --- the pytest base class, end to end ----------------------------------------------------

PLUGIN_SOURCE = """
    import anyio
    import pegboard
    from pegboard import hookimpl
    from pegboard.testing import Example, PluginConformance


    async def wait(input, context):
        {body}
        return "waited"


    class Waits:
        @hookimpl
        def activate_location(self, tools):
            tools.register({{"wait": pegboard.tool(description="Wait.", execute=wait)}})


    waits = Waits()


    class TestWaits(PluginConformance):
        plugin = waits
        name = "waits"
        examples = (Example(tool="wait"),)
"""


def test_a_subclass_runs_every_check_on_both_backends(pytester: pytest.Pytester) -> None:
    """An author's subclass of PluginConformance gets one test per check and backend."""
    pytester.makepyfile(textwrap.dedent(PLUGIN_SOURCE.format(body="await anyio.sleep(0.01)")))
    result = pytester.runpytest(*QUIET, "-v")
    # No execute_after or prepare_request hook: the hooks check skips on both backends.
    result.assert_outcomes(passed=22, skipped=2)
    result.stdout.fnmatch_lines(["*TestWaits::test_cancellation[[]trio[]] PASSED*"])


def test_a_subclass_reports_the_broken_law_and_the_fix(pytester: pytest.Pytester) -> None:
    """A failing check fails its test with the law, the problem and the fix, no traceback."""
    body = "try:\n            await anyio.sleep(1)\n        except BaseException:\n            pass"
    pytester.makepyfile(textwrap.dedent(PLUGIN_SOURCE.format(body=body)))
    result = pytester.runpytest(*QUIET, "-k", "cancellation")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*FAIL cancellation [[]asyncio[]]*",
            "*law: a call cancelled while its tool awaits yields no outcome*",
            "*tool 'wait' was cancelled while it awaited, yet it returned a result*",
            "*fix: let cancellation propagate*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


# --- the command line ---------------------------------------------------------------------


@pytest.fixture
def plugin_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "waits_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN_SOURCE.format(body="await anyio.sleep(0.01)")))
    yield path
    sys.modules.pop("_pegboard_check_waits_plugin", None)


def test_the_command_line_checks_a_conformance_class(
    plugin_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """run_cli takes what the test class says, prints a verdict per check, exits 0."""
    assert 0 == run_cli([f"{plugin_file}:TestWaits", "--backend", "asyncio"])
    out = capsys.readouterr().out
    assert "PASS cancellation [asyncio]" in out
    assert "SKIP hooks [asyncio]" in out
    assert "plugin 'waits' conforms: 11 passed, 1 skipped" in out


def test_the_command_line_exits_1_when_a_check_fails(
    plugin_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An example that cannot settle as expected fails the run, printing the fix."""
    example = '{"tool": "wait", "expect": "tool_failure"}'
    code = run_cli([f"{plugin_file}:waits", "--example", example, "--only", "examples"])
    out = capsys.readouterr().out
    assert 1 == code
    assert "FAIL examples" in out
    assert "the example expects tool_failure" in out
    assert "fix: the tool accepted what the example expects it to refuse" in out


def test_the_command_line_exits_2_when_it_cannot_start(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown plugin and bad arguments are usage errors, said plainly."""
    assert 2 == run_cli(["no-such-plugin-anywhere"])
    assert "neither an installed plugin nor an importable module" in capsys.readouterr().out
    assert 2 == run_cli(["builtin", "--options", "[1]"])
    assert 2 == run_cli(["builtin", "--only", "nope"])


def test_options_go_before_or_after_the_plugin(
    plugin_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pegboard check --trusted PLUGIN`` and ``pegboard check PLUGIN --trusted`` agree."""
    from pegboard.cli._main import build_parser

    target = f"{plugin_file}:TestWaits"
    for words in (["--only", "teardown", target], [target, "--only", "teardown"]):
        arguments = build_parser().parse_args(["check", "--trusted", *words])
        assert (target, True, ["teardown"]) == (
            arguments.plugin,
            arguments.trusted,
            arguments.only,
        )
        assert 0 == arguments.run(arguments)
    assert 2 == capsys.readouterr().out.count("PASS teardown [asyncio]")


def test_python_dash_m_runs_the_same_command(plugin_file: Path) -> None:
    """``python -m pegboard.testing`` is ``pegboard check``."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pegboard.testing",
            f"{plugin_file}:TestWaits",
            "--only",
            "teardown",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr
    assert "PASS teardown" in done.stdout


def test_the_watchdog_covers_every_call_the_checks_make(tmp_path: Path) -> None:
    """A tool that blocks only on its twentieth call: the blocking check's own round
    never gets there; the calls of the checks before it do, and the watchdog saw them."""
    calls: list[int] = []

    async def blocks_late(input: NoteInput, context: pegboard.ToolContext) -> Any:
        calls.append(1)
        if len(calls) == 20:
            time.sleep(0.3)  # noqa: ASYNC251 - the broken behaviour under test
        return NoteOutput(len(input.text.split()))

    alone = check(tools_with(execute=blocks_late)(), examples=EXAMPLES, only=["blocking"])
    assert alone.passed, alone.format()
    assert len(calls) < 20
    calls.clear()
    report = check(tools_with(execute=blocks_late)(), examples=EXAMPLES, directory=tmp_path)
    assert ["blocking"] == [result.name for result in report.failed], report.format()
    (problem,) = report.failed[0].problems
    assert "a call of tool 'notes_count' (its execute, or a hook) blocked" in problem.message


def test_examples_that_are_not_a_tuple_of_examples_get_one_clear_line(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    with pytest.raises(
        TypeError, match=r"got one Example: write examples = \(Example\(\.\.\.\),\)"
    ):
        check(Good(), examples=EXAMPLES[0], directory=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"examples\[1\] is a dict, not an Example"):
        check(Good(), examples=[EXAMPLES[0], {"tool": "x"}], directory=tmp_path)  # type: ignore[list-item]
    source = textwrap.dedent(PLUGIN_SOURCE.format(body="pass")).replace(
        'examples = (Example(tool="wait"),)', 'examples = Example(tool="wait")'
    )
    pytester.makepyfile(source)
    result = pytester.runpytest(*QUIET, "-k", "activation and asyncio")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*TestWaits: examples must be a tuple of Example, got one Example*"]
    )
    assert "Traceback" not in result.stdout.str()


class ListsTheLatestRoot(Good):
    """Lists the files of the latest Location it saw, whichever Location calls it."""

    latest: ClassVar[list[Path]] = []

    @hookimpl
    async def activate_location(
        self, location: pegboard.LocationInfo, tools: pegboard.Tools
    ) -> AsyncIterator[None]:
        self.latest[:] = [location.root]

        async def listing(input: object, context: pegboard.ToolContext) -> str:
            return ", ".join(sorted(path.name for path in self.latest[0].iterdir()))

        tool = pegboard.tool(description="List the notes.", execute=listing)
        tools.register({"list": tool}, namespace="notes")
        yield


def test_without_examples_isolation_compares_each_tools_simplest_input(tmp_path: Path) -> None:
    """A tool whose result repeats is compared between Locations on its simplest input."""
    report = check(
        ListsTheLatestRoot(),
        name="notes",
        only=["isolation"],
        files={"a.txt": "x"},
        directory=tmp_path,
    )
    [result] = report.results
    assert "failed" == result.status, report.format()
    assert "example 1 (notes_list) settled differently" in result.describe()
    twin = check(Good(), name="notes", only=["isolation"], directory=tmp_path / "twin")
    assert twin.passed, twin.format()
    assert "compared each tool's simplest input (notes_count)" in twin.format()
