"""Durable outcomes: dump_outcome and load_outcome."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import strategies
from hypothesis import given

import pegboard

Context = Callable[..., pegboard.ToolContext]

_IDENTITY = pegboard.CallIdentity(session_id="s", agent="a", message_id="m", call_id="c")


def _failed() -> pegboard.Failed:
    return pegboard.Failed(
        pegboard.ToolError("tool_failure", "disk full", metadata={"errno": 28}),
        (pegboard.Text("wrote 3 of 5"), pegboard.Image(b"\x89PNG", "image/png")),
        call=_IDENTITY,
        name="write",
    )


@given(strategies.outcomes)
def test_every_outcome_round_trips_through_json_text(outcome: pegboard.Outcome) -> None:
    """dump, json.dumps, json.loads, load gives back an equal outcome of the same type,
    except the ephemeral output, which is not stored.
    """
    stored = json.loads(json.dumps(pegboard.dump_outcome(outcome)))
    loaded = pegboard.load_outcome(stored)
    assert _stored(outcome) == loaded
    assert type(outcome) is type(loaded)
    assert [type(item) for item in _items(outcome)] == [type(item) for item in _items(loaded)]
    assert pegboard.dump_outcome(loaded) == stored


def _stored(outcome: pegboard.Outcome) -> pegboard.Outcome:
    """What a stored outcome holds: all but a success's ephemeral output."""
    if isinstance(outcome, pegboard.Completed):
        return attrs.evolve(outcome, output=None)
    return outcome


def _items(outcome: pegboard.Outcome) -> tuple[pegboard.ContentItem, ...]:
    return outcome.content if isinstance(outcome, pegboard.Completed) else outcome.partial


def test_stored_form_is_versioned_plain_json_with_base64_bytes() -> None:
    """The stored form is exactly this: a version, the status, base64 for bytes."""
    assert {
        "version": 1,
        "status": "failed",
        "error": {"kind": "tool_failure", "message": "disk full", "metadata": {"errno": 28}},
        "partial": [
            {"type": "text", "text": "wrote 3 of 5"},
            {"type": "image", "data": "iVBORw==", "mime_type": "image/png"},
        ],
        "name": "write",
        "call": {"session_id": "s", "agent": "a", "message_id": "m", "call_id": "c"},
    } == pegboard.dump_outcome(_failed())


def test_metadata_stays_absent_and_null_output_stays_null() -> None:
    """Absent metadata is stored as null and loads as None, never as an empty object."""
    outcome = pegboard.Completed(None, (pegboard.Text("ok"),))
    loaded = pegboard.load_outcome(pegboard.dump_outcome(outcome))
    assert loaded.metadata is None
    assert loaded.output is None
    assert loaded.call is None
    assert loaded.name is None


def test_loaded_metadata_and_provider_state_are_read_only() -> None:
    """A loaded outcome is as immutable as a live one."""
    outcome = pegboard.Completed(
        None, (pegboard.Text("ok"),), {"took": 3}, provider_state={"anthropic": [{"a": 1}]}
    )
    loaded = pegboard.load_outcome(pegboard.dump_outcome(outcome))
    assert isinstance(loaded, pegboard.Completed)
    with pytest.raises(TypeError, match="read-only"):
        loaded.metadata["took"] = 4  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        loaded.provider_state["anthropic"].append(3)  # type: ignore[index]


def test_dump_gives_a_copy_the_caller_may_change() -> None:
    """Changing the stored form never changes the outcome it came from."""
    outcome = pegboard.Completed(None, (pegboard.Text("ok"),), {"rows": [1]})
    stored = pegboard.dump_outcome(outcome)
    stored["metadata"]["rows"].append(2)
    assert {"rows": [1]} == outcome.metadata


def test_durable_form_a_success_stores_exactly_content_metadata_and_provider_state() -> None:
    """The ephemeral output is never stored, however large: 5 MB of it add nothing."""
    content = (pegboard.Text("5 MB of rows, summarized"),)
    outcome = pegboard.Completed(
        {"rows": "x" * 5_000_000},
        content,
        {"took": 3},
        call=_IDENTITY,
        name="rows",
        provider_state={"anthropic": [{"type": "text", "text": "verbatim"}]},
    )
    stored = pegboard.dump_outcome(outcome)
    assert {
        "version": 1,
        "status": "completed",
        "content": [{"type": "text", "text": "5 MB of rows, summarized"}],
        "metadata": {"took": 3},
        "provider_state": {"anthropic": [{"type": "text", "text": "verbatim"}]},
        "name": "rows",
        "call": {"session_id": "s", "agent": "a", "message_id": "m", "call_id": "c"},
    } == stored
    assert len(json.dumps(stored)) < 1000
    loaded = pegboard.load_outcome(stored)
    assert attrs.evolve(outcome, output=None) == loaded


def test_durable_form_load_outcome_refuses_empty_content() -> None:
    """A stored success without content is refused, naming where; so is dumping one."""
    stored = pegboard.dump_outcome(pegboard.Completed(None, (pegboard.Text("ok"),)))
    stored["content"] = []
    with pytest.raises(ValueError, match=r"stored outcome at \$\.content: .*non-empty"):
        pegboard.load_outcome(stored)
    with pytest.raises(ValueError, match="non-empty content"):
        pegboard.dump_outcome(pegboard.Completed(None, ()))


def test_durable_form_an_earlier_stored_output_is_not_read() -> None:
    """A record an earlier pegboard wrote with its output loads, without the output."""
    stored = pegboard.dump_outcome(pegboard.Completed(None, (pegboard.Text("ok"),)))
    stored["output"] = {"rows": [1]}
    loaded = pegboard.load_outcome(stored)
    assert isinstance(loaded, pegboard.Completed)
    assert loaded.output is None


def test_dump_refuses_metadata_that_is_not_json() -> None:
    """A hand-built outcome with a non-JSON value is refused, naming where it is."""
    outcome = pegboard.Completed(None, (pegboard.Text("ok"),), {"when": {1, 2}})
    with pytest.raises(ValueError, match=r"metadata\.when is not JSON"):
        pegboard.dump_outcome(outcome)
    failed = pegboard.Failed(pegboard.ToolError("tool_failure", "x", metadata={"n": float("nan")}))
    with pytest.raises(ValueError, match=r"error\.metadata\.n is not JSON"):
        pegboard.dump_outcome(failed)


def _with(**changes: Any) -> dict[str, Any]:
    stored = pegboard.dump_outcome(_failed())
    stored.update(changes)
    return stored


_IMAGE = {"type": "image", "data": "iVBORw==", "mime_type": "image/png"}


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        (_with(version=2), "$.version", "version 2"),
        ({"status": "failed"}, "$.version", "version None"),
        (_with(status="done"), "$.status", "'done'"),
        (_with(error={"kind": "oops", "message": "m"}), "$.error.kind", "'oops'"),
        (_with(error={"kind": "tool_failure"}), "$.error", "'message' is a required"),
        (_with(partial=[{**_IMAGE, "data": "!!"}]), r"$.partial[0].data", "base64"),
        (_with(partial=[{**_IMAGE, "data": 3}]), r"$.partial[0].data", "not of type 'string'"),
        (_with(partial=[{**_IMAGE, "mime_type": "text/png"}]), r"$.partial[0]", "image/*"),
        (_with(partial=[{"type": "video"}]), r"$.partial[0].type", "'video'"),
        (_with(partial=[{"type": "resource", "uri": "u"}]), r"$.partial[0]", "exactly one"),
        (_with(partial=[{"type": "text", "text": "t", "x": 1}]), r"$.partial[0]", "'x'"),
        (_with(call={"call_id": "c"}), "$.call", "'session_id' is a required"),
        (_with(extra=True), "$", "'extra' was unexpected"),
        (
            {"version": 1, "status": "completed", "output": None, "content": [], "metadata": []},
            "$.metadata",
            "not of type",
        ),
    ],
)
def test_bad_stored_data_raises_a_value_error_naming_the_path(
    data: Any, where: str, what: str
) -> None:
    """Every defect in stored data is a ValueError saying where it is and what is wrong."""
    with pytest.raises(ValueError, match="stored outcome at") as raised:
        pegboard.load_outcome(data)
    message = str(raised.value)
    assert message.startswith(f"stored outcome at {where}:")
    assert what in message


def test_load_refuses_what_is_not_an_object() -> None:
    """A list or a string is not a stored outcome."""
    with pytest.raises(ValueError, match="JSON object, got list"):
        pegboard.load_outcome([])  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_live_outcomes_round_trip_with_identity_and_name(
    location: pegboard.Location, context: Context
) -> None:
    """Outcomes from the pipeline, completed and failed, store their call and tool name."""

    @pegboard.tool(description="Echo.", input={"type": "object"}, output={"type": "object"})
    async def echo(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse[Any]:
        return pegboard.ToolResponse(output=input, metadata={"seen": True})

    location.tools.register({"echo": echo})
    request = location.prepare()
    completed = await request.execute(pegboard.ToolCall("echo", '{"a": [1, 2]}', context("c1")))
    failed = await request.execute(pegboard.ToolCall("nope", "{}", context("c2")))
    for outcome in (completed, failed):
        stored = json.loads(json.dumps(pegboard.dump_outcome(outcome)))
        assert _stored(outcome) == pegboard.load_outcome(stored)
    assert "echo" == pegboard.dump_outcome(completed)["name"]
    assert "c2" == pegboard.dump_outcome(failed)["call"]["call_id"]
    assert "nope" == pegboard.dump_outcome(failed)["name"]
