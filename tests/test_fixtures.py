"""pegboard's pytest plugin: fixtures for plugin authors, loaded through pytest11."""

from __future__ import annotations

import textwrap
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pytest

import pegboard
from pegboard import hookimpl
from pegboard.testing import FakeRunner

pytest_plugins = ["pytester"]
#: Inner pytest runs skip plugins they do not need (hypothesis' is slow to start).
QUIET = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")

Call = Callable[..., Awaitable[pegboard.Outcome]]


class Notes:
    """Counts the lines of notes.txt, reporting progress."""

    @hookimpl
    def activate_location(self, tools: pegboard.Tools, services: pegboard.Services) -> None:
        filesystem = services.filesystem

        async def count(input: Any, context: pegboard.ToolContext) -> str:
            await context.progress(pegboard.Progress(message="reading notes.txt"))
            text = (await filesystem.read_bytes("notes.txt")).decode()
            return f"{len(text.splitlines())} notes"

        tools.register(
            {"count": pegboard.tool(description="Count notes.", execute=count)}, namespace="notes"
        )


@pytest.fixture
def pegboard_host(pegboard_host: pegboard.Host) -> pegboard.Host:
    pegboard_host.add_plugin("notes", Notes())
    return pegboard_host


@pytest.fixture
def pegboard_plugins() -> Sequence[str | Mapping[str, Any]]:
    return ["notes"]


@pytest.fixture
def pegboard_trusted() -> Sequence[str]:
    return ["notes"]


@pytest.fixture
def pegboard_files() -> Mapping[str, str | bytes]:
    return {"notes.txt": "buy milk\ncall mum\n"}


@pytest.mark.anyio
async def test_a_call_runs_in_a_location_with_the_plugin_and_files(
    pegboard_call: Call, pegboard_context: FakeRunner
) -> None:
    """The overridden fixtures enable the plugin, trust it and seed the Location."""
    outcome = await pegboard_call("notes_count")
    assert (
        pegboard.Completed(None, (pegboard.Text("2 notes"),), call=outcome.call, name=outcome.name)
        == outcome
    )
    assert "call-1" == outcome.call.call_id  # type: ignore[union-attr]
    assert [pegboard.Progress(message="reading notes.txt")] == pegboard_context.progress_of(
        "call-1"
    )


@pytest.mark.anyio
async def test_the_location_enables_only_what_it_is_told(
    pegboard_location: pegboard.Location,
) -> None:
    """No builtin, no other installed plugin: only pegboard_plugins."""
    assert ("notes",) == pegboard_location.plugins
    assert ["notes_count"] == [d.name for d in pegboard_location.prepare().definitions]


@pytest.mark.anyio
async def test_the_final_step_refuses_calls(pegboard_call: Call) -> None:
    """pegboard_call(final_step=True) prepares a final-step request."""
    outcome = await pegboard_call("notes_count", "{}", final_step=True)
    assert isinstance(outcome, pegboard.Failed)
    assert "final_step" == outcome.error.kind


def test_the_fake_runner_makes_fresh_ids() -> None:
    """Each context gets its own call ID unless one is given."""
    runner = FakeRunner(session_id="s")
    assert ["call-1", "call-2", "mine"] == [
        runner().call_id,
        runner().call_id,
        runner("mine").call_id,
    ]
    assert "s" == runner().session_id


def test_the_fixtures_load_by_entry_point_in_any_project(pytester: pytest.Pytester) -> None:
    """A project with pegboard installed gets the fixtures without configuring anything."""
    pytester.makepyfile(
        textwrap.dedent(
            """
            import pytest

            @pytest.fixture
            def anyio_backend():
                return "trio"

            @pytest.mark.anyio
            async def test_empty(pegboard_location, pegboard_call):
                assert () == pegboard_location.plugins
                outcome = await pegboard_call("missing")
                assert "unknown_tool" == outcome.error.kind
            """
        )
    )
    pytester.runpytest(*QUIET).assert_outcomes(passed=1)


def test_no_fixture_is_autouse(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the plugin adds fixtures, never side effects."""
    # Only pegboard's plugin: other installed plugins (syrupy, pytest-asyncio …) have their own.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(
        "def test_nothing(request):\n    assert request.fixturenames == ['request']\n"
    )
    pytester.runpytest(*QUIET, "-p", "pegboard.testing.fixtures").assert_outcomes(passed=1)
