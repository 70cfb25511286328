"""What the tabular tools answer, through pegboard's pytest fixtures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import pegboard
from pegboard.testing import FakeRunner

DATA = Path(__file__).parent / "data"

Call = Callable[..., Awaitable[pegboard.Outcome]]
pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# pegboard's fixtures read these: enable the installed plugin, trust it, seed the Location.
@pytest.fixture
def pegboard_plugins() -> Sequence[str | Mapping[str, Any]]:
    return [{"name": "tabular", "options": {"max_rows": 3}}]


@pytest.fixture
def pegboard_trusted() -> Sequence[str]:
    return ["tabular"]


@pytest.fixture
def pegboard_files() -> Path:
    return DATA


def completed(outcome: pegboard.Outcome) -> pegboard.Completed:
    assert isinstance(outcome, pegboard.Completed), outcome
    return outcome


def failed(outcome: pegboard.Outcome) -> pegboard.ToolError:
    assert isinstance(outcome, pegboard.Failed), outcome
    return outcome.error


async def test_files_lists_the_data_files(pegboard_call: Call) -> None:
    """CSV, TSV and JSON files, in folders too, with their sizes."""
    outcome = completed(await pegboard_call("tabular_files"))
    assert ["config.json", "people.csv", "sales/2024.tsv"] == [
        item["path"] for item in outcome.output["files"]
    ]
    assert "people.csv (csv, 127 bytes)" in outcome.content[0].text  # type: ignore[union-attr]


async def test_describe_infers_column_types_and_ranges(pegboard_call: Call) -> None:
    """Each column's type, blanks, distinct values and numeric range."""
    outcome = completed(await pegboard_call("tabular_describe_csv", {"path": "people.csv"}))
    assert 5 == outcome.output["rows"]
    columns = {column["name"]: column for column in outcome.output["columns"]}
    assert ("integer", 28.0, 52.0) == (
        columns["age"]["type"],
        columns["age"]["minimum"],
        columns["age"]["maximum"],
    )
    assert ("boolean", 1) == (columns["member"]["type"], columns["member"]["empty"])
    assert ("text", 4) == (columns["city"]["type"], columns["city"]["distinct"])
    assert "- age: integer, 5 distinct, 0 blank, from 28 to 52" in outcome.content[0].text  # type: ignore[union-attr]


async def test_query_filters_sorts_and_caps_rows(pegboard_call: Call) -> None:
    """Numeric filters compare numbers; the plugin's max_rows option caps the rows returned."""
    query = {
        "path": "people.csv",
        "where": [{"column": "age", "op": ">=", "value": 36}],
        "columns": ["name", "age"],
        "order_by": "age",
        "descending": True,
        "limit": 10,
    }
    outcome = completed(await pegboard_call("tabular_query_csv", query))
    assert 4 == outcome.output["matched"]
    assert ["Margaret", "Grace", "Alan"] == [row["name"] for row in outcome.output["rows"]]
    assert {"scanned_rows": 5} == outcome.metadata
    assert "at most that many rows" in outcome.content[0].text  # type: ignore[union-attr]


async def test_query_guesses_the_delimiter_and_ignores_case(pegboard_call: Call) -> None:
    """A TSV file needs no delimiter; text compares case-insensitively."""
    query = {"path": "sales/2024.tsv", "where": [{"column": "region", "op": "=", "value": "NORTH"}]}
    outcome = completed(await pegboard_call("tabular_query_csv", query))
    assert ["1200.50", "1430.25"] == [row["revenue"] for row in outcome.output["rows"]]


async def test_an_unknown_column_fails_naming_the_columns(pegboard_call: Call) -> None:
    """The model learns which columns exist."""
    error = failed(
        await pegboard_call("tabular_query_csv", {"path": "people.csv", "order_by": "x"})
    )
    assert "tool_failure" == error.kind
    assert "there is no column 'x'; the columns are name, age, city, member" in error.message


@pytest.mark.parametrize(
    ("pointer", "value"),
    [("/servers/1/port", 8081), ("/paths/a~1b", "a key with a slash"), ("/debug", False)],
)
async def test_json_value_follows_a_pointer(pegboard_call: Call, pointer: str, value: Any) -> None:
    """RFC 6901 pointers, with ~1 for '/' in a key."""
    outcome = completed(
        await pegboard_call("tabular_json_value", {"path": "config.json", "pointer": pointer})
    )
    assert value == outcome.output["value"]


async def test_a_missing_key_fails_naming_the_keys(pegboard_call: Call) -> None:
    """A wrong pointer tells the model what it could have asked for."""
    error = failed(
        await pegboard_call("tabular_json_value", {"path": "config.json", "pointer": "/server"})
    )
    assert "config.json: the document has no key 'server'; its keys:" in error.message
    assert "'servers'" in error.message


async def test_paths_outside_the_location_are_refused(pegboard_call: Call) -> None:
    """The filesystem service keeps every read inside the Location."""
    error = failed(await pegboard_call("tabular_describe_csv", {"path": "/etc/passwd"}))
    assert "tool_failure" == error.kind
    assert "outside the Location" in error.message


async def test_invalid_input_never_runs_the_tool(pegboard_call: Call) -> None:
    """The attrs input class refuses a number where a path goes."""
    error = failed(await pegboard_call("tabular_query_csv", {"path": 5}))
    assert "invalid_input" == error.kind
    assert "$.path: expected string, got integer 5" in error.message


@pytest.mark.parametrize(
    "pegboard_permissions", [[{"action": "read", "resource": "people.csv", "effect": "deny"}]]
)
async def test_a_denied_read_fails_the_call(pegboard_call: Call) -> None:
    """The tools ask the permission service before they read."""
    error = failed(await pegboard_call("tabular_describe_csv", {"path": "people.csv"}))
    assert "permission denied: read on people.csv" in error.message


@pytest.mark.parametrize("pegboard_files", [{"big.csv": "n\n" + "1\n" * 25_000}])
async def test_long_scans_report_progress(
    pegboard_call: Call, pegboard_context: FakeRunner
) -> None:
    """A query over many rows reports how far it got."""
    await pegboard_call("tabular_query_csv", {"path": "big.csv"})
    assert [10_000, 20_000] == [progress.current for progress in pegboard_context.progress]


async def test_the_host_must_trust_the_plugin(tmp_path: Path) -> None:
    """Without trust the plugin does not activate, and the error says how to grant it."""
    host = pegboard.Host()
    async with host.location(tmp_path, plugins=["tabular"], storage=tmp_path / "out") as location:
        [error] = location.plugin_errors
    assert ("tabular", "activation") == (error.plugin, error.phase)
    assert "host.location(trusted=['tabular'])" in error.message
