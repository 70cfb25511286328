"""Registration: name normalization, the two placements, scopes and captured requests."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from reach import reaches
from strategies import authored_names, names, namespaces, valid_names

import pegboard
from pegboard._registry import Board, Scope

PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")
CONTEXT = pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c")


def labelled(label: str) -> pegboard.Tool:
    """A tool whose description and content are ``label``, to tell tools apart."""

    async def execute(input: object, context: pegboard.ToolContext) -> str:
        return label

    return pegboard.tool(description=label, execute=execute)


def advertised(location: pegboard.Location) -> dict[str, str]:
    """What a request prepared now advertises: effective name to tool label."""
    return {tool.name: tool.description for tool in location.prepare().definitions}


def normalized(name: str, namespace: str | None = None) -> str:
    """The contract's normalization, written independently of the code under test."""
    effective = OUTSIDE.sub("_", name)
    return effective if namespace is None else f"{OUTSIDE.sub('_', namespace)}_{effective}"


def acceptable(name: str, namespace: str | None = None) -> bool:
    """Whether the contract accepts ``name``; an empty authored name is never a name."""
    effective = normalized(name, namespace)
    return bool(name) and PATTERN.fullmatch(effective) is not None and effective != "execute"


# Name normalization


@pytest.mark.parametrize(
    ("name", "namespace", "expected"),
    [
        ("read", None, "read"),
        ("web search", None, "web_search"),
        ("x-y_Z9", None, "x-y_Z9"),
        ("café", None, "caf_"),
        ("a/b:c.d", None, "a_b_c_d"),
        ("🙂smile", "emoji", "emoji__smile"),  # one character, one underscore
        ("create issue", "mcp.github", "mcp_github_create_issue"),
        ("execute", "code", "code_execute"),
        ("a" * 64, None, "a" * 64),
        ("a" * 61, "ns", "ns_" + "a" * 61),
    ],
)
def test_effective_name_normalizes(name: str, namespace: str | None, expected: str) -> None:
    """Characters outside [A-Za-z0-9_-] become underscores; a namespace prefixes the name."""
    assert expected == pegboard.effective_name(name, namespace)


@pytest.mark.parametrize(
    ("name", "namespace"),
    [
        ("", None),
        ("1st", None),
        ("_private", None),
        ("-dash", None),
        ("émoji", None),
        ("a" * 65, None),
        ("a" * 62, "ns"),
        ("read", "1ns"),
        ("read", ""),
        ("execute", None),
    ],
)
def test_bad_names_are_refused(name: str, namespace: str | None) -> None:
    """A name that does not normalize to a valid, unreserved name raises RegistrationError."""
    with pytest.raises(pegboard.RegistrationError, match=r"rename|non-empty"):
        pegboard.effective_name(name, namespace)


@given(name=names, namespace=namespaces)
@settings(max_examples=300, deadline=None)
def test_effective_name_is_valid_or_refused(name: str, namespace: str | None) -> None:
    """Every name normalizes as the contract says to a valid name, or is refused."""
    expected = normalized(name, namespace)
    if not acceptable(name, namespace):
        with pytest.raises(pegboard.RegistrationError):
            pegboard.effective_name(name, namespace)
        return
    actual = pegboard.effective_name(name, namespace)
    assert expected == actual
    assert PATTERN.fullmatch(actual)


@given(name=valid_names)
@settings(max_examples=200, deadline=None)
def test_valid_names_stay_as_they_are(name: str) -> None:
    """Normalizing an already valid name returns it unchanged."""
    assert name == pegboard.effective_name(name)


@given(name=authored_names)
@settings(max_examples=200, deadline=None)
def test_normalization_is_idempotent(name: str) -> None:
    """Normalizing an effective name again changes nothing."""
    effective = pegboard.effective_name(name[:64])
    assert effective == pegboard.effective_name(effective)


@given(namespace=valid_names, name=valid_names)
@settings(max_examples=200, deadline=None)
def test_namespace_prefixes_the_name(namespace: str, name: str) -> None:
    """With a namespace the effective name is <namespace>_<name>, if it fits in 64."""
    expected = f"{namespace}_{name}"
    if len(expected) > 64:
        with pytest.raises(pegboard.RegistrationError, match="64"):
            pegboard.effective_name(name, namespace)
    else:
        assert expected == pegboard.effective_name(name, namespace)


# Registering


def bare(
    host: pegboard.Host, root: Path, storage: Path
) -> contextlib.AbstractAsyncContextManager[pegboard.Location]:
    """Open a Location with no plugins, so only the test registers tools."""
    return host.location(root, plugins=[], storage=storage)


@pytest.fixture
def board(host: pegboard.Host, workspace: Path, storage_dir: Path) -> Iterator[pegboard.Location]:
    """An open Location, reached from synchronous tests through a blocking portal."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(bare(host, workspace, storage_dir)) as opened,
    ):
        yield opened


@pytest.mark.parametrize(
    "tools",
    [
        {"read": labelled("one"), "execute": labelled("two")},
        {"read": labelled("one"), "web search": labelled("two"), "web_search": labelled("three")},
        {"read": labelled("one"), "1st": labelled("two")},
        {"read": labelled("one"), "grep": lambda *arguments: "not a tool"},
        {"read": labelled("one"), "grep": "grep"},
        {"read": labelled("one"), 7: labelled("two")},
    ],
    ids=["reserved", "collision", "bad-name", "function", "string", "not-a-str"],
)
def test_a_refused_registration_registers_nothing(
    host: pegboard.Host, board: pegboard.Location, tools: dict[Any, Any]
) -> None:
    """A reserved or bad name, a collision or a non-Tool value refuses the whole mapping."""
    with pytest.raises(pegboard.RegistrationError):
        board.tools.register(tools)
    with pytest.raises(pegboard.RegistrationError):
        host.tools.register(tools)
    assert {} == advertised(board)


def test_law_scoped_registration_tools_expose_nothing_but_register(
    board: pegboard.Location,
) -> None:
    """The capability a plugin gets, and the Registration it returns, reach no board or
    scope by attribute (vars, dir, slots), closure or bound method: a plugin cannot use
    them to read or remove other plugins' tools."""
    tools = board.tools
    registration = tools.register({"mine": labelled("mine")})
    assert ["register"] == [name for name in dir(tools) if not name.startswith("__")]
    with pytest.raises(TypeError):
        vars(tools)
    assert [] == reaches((tools, registration), Board, Scope)
    for name in type(tools).__slots__ + type(registration).__slots__:
        if name != "__weakref__":
            assert not isinstance(getattr(registration, name, None), Board | Scope)
    registration.close()
    assert {} == advertised(board)


def test_a_copied_tools_object_registers_nothing(board: pegboard.Location) -> None:
    """A copy of the capability is bound to no board: it refuses, it does not guess."""
    import copy

    with pytest.raises(RuntimeError, match="not bound to a board"):
        copy.copy(board.tools).register({"mine": labelled("mine")})
    assert {} == advertised(board)


def test_a_collision_names_both_authored_names(board: pegboard.Location) -> None:
    """The error for two names that normalize to one says which two."""
    with pytest.raises(pegboard.RegistrationError, match=r"'a\.b'.*'a_b'.*'x_a_b'"):
        board.tools.register({"a.b": labelled("one"), "a_b": labelled("two")}, namespace="x")


def test_register_takes_only_a_mapping(board: pegboard.Location) -> None:
    """Pairs or any other non-mapping are refused with RegistrationError."""
    with pytest.raises(pegboard.RegistrationError, match="mapping"):
        board.tools.register([("read", labelled("one"))])  # type: ignore[arg-type]
    assert {} == advertised(board)


def test_registration_names_map_authored_to_effective(board: pegboard.Location) -> None:
    """Registration.names maps each authored name to its effective name."""
    registration = board.tools.register(
        {"create issue": labelled("one"), "list": labelled("two")}, namespace="github"
    )
    assert {"create issue": "github_create_issue", "list": "github_list"} == dict(
        registration.names
    )
    assert {"github_create_issue": "one", "github_list": "two"} == advertised(board)


def test_mutating_the_callers_mapping_changes_nothing(board: pegboard.Location) -> None:
    """Changing the mapping after register() affects neither the board nor names."""
    tools = {"read": labelled("one")}
    registration = board.tools.register(tools)
    tools["read"] = labelled("two")
    tools["grep"] = labelled("three")
    assert {"read": "read"} == dict(registration.names)
    assert {"read": "one"} == advertised(board)
    tools.clear()
    registration.close()
    assert {} == advertised(board)


def test_close_is_idempotent(board: pegboard.Location) -> None:
    """Closing a closed registration leaves a later one of the same name in place."""
    first = board.tools.register({"read": labelled("one")})
    first.close()
    board.tools.register({"read": labelled("two")})
    first.close()
    assert {"read": "two"} == advertised(board)


def test_a_registration_is_a_context_manager(board: pegboard.Location) -> None:
    """Leaving the with block closes the registration."""
    with board.tools.register({"read": labelled("one")}) as registration:
        assert {"read": "read"} == dict(registration.names)
        assert {"read": "one"} == advertised(board)
    assert {} == advertised(board)


def test_location_tools_take_precedence(host: pegboard.Host, board: pegboard.Location) -> None:
    """A Location registration wins over an application one, whichever came first."""
    location_first = board.tools.register({"read": labelled("location")})
    application = host.tools.register({"read": labelled("application")})
    assert {"read": "location"} == advertised(board)
    location_first.close()
    assert {"read": "application"} == advertised(board)
    board.tools.register({"read": labelled("location again")})
    assert {"read": "location again"} == advertised(board)
    application.close()
    assert {"read": "location again"} == advertised(board)


def test_law_scoped_registration_closing_a_location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Law 6: closing a Location removes its registrations and nothing else."""
    host.tools.register({"read": labelled("application")})
    with start_blocking_portal() as portal:
        first = portal.wrap_async_context_manager(bare(host, workspace, storage_dir))
        with first as location:
            registration = location.tools.register(
                {"read": labelled("location"), "grep": labelled("grep")}
            )
            assert {"read": "location", "grep": "grep"} == advertised(location)
        assert registration.closed
        with pytest.raises(pegboard.RegistrationError, match="closed"):
            location.tools.register({"edit": labelled("late")})
        second = portal.wrap_async_context_manager(bare(host, workspace, storage_dir))
        with second as reopened:
            registration.close()
            assert {"read": "application"} == advertised(reopened)


# Captured execution


@pytest.mark.anyio
async def test_law_captured_execution_runs_the_advertised_tool(
    host: pegboard.Host,
    location: pegboard.Location,
    context: Callable[..., pegboard.ToolContext],
) -> None:
    """Law 7: a request executes what it captured, whatever changed after prepare()."""
    first = host.tools.register({"read": labelled("one")})
    before = location.prepare()
    location.tools.register({"read": labelled("two"), "grep": labelled("grep")})
    first.close()
    after = location.prepare()
    call = pegboard.ToolCall("read", "{}", context())
    assert (pegboard.Text("one"),) == (await before.execute(call)).content
    assert (pegboard.Text("two"),) == (await after.execute(call)).content
    late = await before.execute(pegboard.ToolCall("grep", "{}", context()))
    assert isinstance(late, pegboard.Failed)
    assert "unknown_tool" == late.error.kind


@pytest.mark.anyio
async def test_law_captured_execution_survives_closing(
    location: pegboard.Location, context: Callable[..., pegboard.ToolContext]
) -> None:
    """Law 7: closing the registration a request captured does not stop its call."""
    with location.tools.register({"read": labelled("one")}):
        request = location.prepare()
    assert {} == advertised(location)
    outcome = await request.execute(pegboard.ToolCall("read", "{}", context()))
    assert (pegboard.Text("one"),) == outcome.content


# The overlay as a state machine


@attrs.define
class Record:
    """What the model knows of one accepted registration."""

    registration: pegboard.Registration
    placement: str
    generation: int
    tools: dict[str, str]  # effective name -> label
    mapping: dict[str, pegboard.Tool]  # the caller's own mapping
    active: bool = True


POOL = ["read", "grep", "web search", "web_search", "web-search", "execute", "Ünïcode", "a.b"]


class Overlay(RuleBasedStateMachine):
    """Registrations on both placements, closed and reopened in any order."""

    backend = "asyncio"
    registrations = Bundle("registrations")

    def __init__(self) -> None:
        super().__init__()
        self.host = pegboard.Host()
        self.records: list[Record] = []
        self.requests: list[tuple[pegboard.Request, dict[str, str]]] = []
        self.generation = 0
        self.counter = 0
        self.opened = contextlib.ExitStack()
        with contextlib.ExitStack() as resources:
            self.root = Path(resources.enter_context(tempfile.TemporaryDirectory()))
            self.portal = resources.enter_context(start_blocking_portal(self.backend))
            self._open()
            self.resources = resources.pop_all()

    def _open(self) -> None:
        opening = bare(self.host, self.root, self.root / "managed")
        self.location = self.opened.enter_context(self.portal.wrap_async_context_manager(opening))

    def teardown(self) -> None:
        with self.resources:
            self.opened.close()

    def expected(self) -> dict[str, str]:
        winners: dict[str, str] = {}
        for placement in ("application", "location"):
            for record in self.records:
                if record.active and record.placement == placement:
                    winners.update(record.tools)
        return winners

    @rule(
        target=registrations,
        placement=st.sampled_from(["application", "location"]),
        authored=st.lists(st.sampled_from(POOL), unique=True, max_size=3),
        namespace=st.sampled_from([None, "mcp"]),
    )
    def register(self, placement: str, authored: list[str], namespace: str | None) -> Any:
        labels = {name: f"tool {self.counter + index}" for index, name in enumerate(authored)}
        self.counter += len(authored)
        mapping = {name: labelled(label) for name, label in labels.items()}
        tools = self.host.tools if placement == "application" else self.location.tools
        effective = {name: normalized(name, namespace) for name in authored}
        values = list(effective.values())
        refused = not all(acceptable(name, namespace) for name in authored)
        if refused or len(set(values)) != len(values):
            with pytest.raises(pegboard.RegistrationError):
                tools.register(mapping, namespace=namespace)
            return multiple()
        registration = tools.register(mapping, namespace=namespace)
        assert effective == dict(registration.names)
        winners = {effective[name]: label for name, label in labels.items()}
        self.records.append(Record(registration, placement, self.generation, winners, mapping))
        return self.records[-1]

    @rule(record=registrations, how=st.sampled_from(["close", "with"]))
    def close(self, record: Record, how: str) -> None:
        if how == "close":
            record.registration.close()
        else:
            with record.registration:
                pass
        record.active = False
        assert record.registration.closed

    @rule(record=registrations, label=st.sampled_from(POOL))
    def mutate_mapping(self, record: Record, label: str) -> None:
        names = dict(record.registration.names)
        record.mapping.clear()
        record.mapping[label] = labelled("mutated")
        assert names == dict(record.registration.names)

    @rule()
    def reopen_location(self) -> None:
        self.opened.close()
        for record in self.records:
            if record.placement == "location" and record.generation == self.generation:
                record.active = False
                assert record.registration.closed
        self.generation += 1
        self._open()

    @rule()
    def prepare(self) -> None:
        self.requests.append((self.location.prepare(), self.expected()))

    @precondition(lambda self: any(captured for _, captured in self.requests))
    @rule(data=st.data())
    def execute_captured(self, data: st.DataObject) -> None:
        request, captured = data.draw(st.sampled_from([r for r in self.requests if r[1]]))
        name = data.draw(st.sampled_from(sorted(captured)))
        call = pegboard.ToolCall(name, "{}", CONTEXT)
        outcome = self.portal.call(request.execute, call)
        assert (pegboard.Text(captured[name]),) == outcome.content

    @invariant()
    def advertises_the_model(self) -> None:
        assert self.expected() == advertised(self.location)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_law_scoped_registration_overlay_matches_the_model(backend: str) -> None:
    """Laws 6 and 7: any history of registering and closing leaves the latest active winner."""
    machine = type("Overlay", (Overlay,), {"backend": backend})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=40, stateful_step_count=30, deadline=None)
    )


@pytest.mark.parametrize("order", ["oldest-first", "latest-first", "shuffled"])
def test_closing_many_registrations_of_one_name_keeps_the_latest_active_winner(
    order: str,
) -> None:
    """However many registrations of one name close, in any order, the latest open one wins."""
    import random

    board, scope = Board(), Scope("test")
    tools = pegboard.Tools(board, scope)
    made = [
        pegboard.tool(description=f"Tool {index}.", execute=lambda i, c: "") for index in range(300)
    ]
    registrations = [tools.register({"same": tool}) for tool in made]
    indices = list(range(len(made)))
    if order == "latest-first":
        indices.reverse()
    elif order == "shuffled":
        random.Random(7).shuffle(indices)
    open_ = set(indices)
    for index in indices:
        registrations[index].close()
        open_.discard(index)
        expected = {"same": made[max(open_)]} if open_ else {}
        assert expected == board.winners()
    assert {} == board._stacks
    assert {} == board._buried


# Snapshots after changes share their predecessor's layers and patch its definitions

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["register", "register", "close", "prepare", "read"]),
        st.lists(st.integers(0, 150), min_size=1, max_size=40, unique=True),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_law_captured_execution_snapshots_after_changes_match_a_fresh_one(
    steps: list[tuple[str, list[int]]],
) -> None:
    """However changes, prepares and definition reads interleave, each request holds the
    tools and definitions a snapshot built from nothing would hold."""
    from pegboard._request import Snapshot

    board, scope = Board(), Scope("test")
    tools = pegboard.Tools(board, scope)
    made = {index: labelled(f"tool {index}") for index in range(151)}
    open_: list[pegboard.Registration] = []
    previous: Snapshot | None = None
    for action, indices in steps:
        if action == "register":
            open_.append(tools.register({f"t{index:03d}": made[index] for index in indices}))
        elif action == "close" and open_:
            open_.pop(indices[0] % len(open_)).close()
        previous = Snapshot.of([board], previous)
        if action == "read":
            previous.definitions  # noqa: B018 - reading builds (and caches) the definitions
    final = Snapshot.of([board], previous)
    fresh = Snapshot.of([board])
    assert dict(fresh.tools) == dict(final.tools) == board.winners()
    assert len(fresh.tools) == len(final.tools)
    assert fresh.definitions == final.definitions
    assert [definition.name for definition in final.definitions] == sorted(board.winners())
