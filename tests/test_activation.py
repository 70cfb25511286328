"""Per-Location activation in plugin-owned scopes, teardown, trust, options and hooks."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from reach import reaches

import pegboard
from pegboard import hookimpl
from pegboard._registry import Board, Scope

pytestmark = pytest.mark.anyio

Context = Callable[..., pegboard.ToolContext]


async def constant(text: str) -> pegboard.Tool:
    async def execute(input: Any, context: pegboard.ToolContext) -> str:
        return text

    return pegboard.tool(description=f"Says {text}.", execute=execute)


class Recording:
    """A plugin that registers one tool and records what happens to it."""

    def __init__(self, name: str, events: list[str]) -> None:
        self.name = name
        self.events = events

    @hookimpl
    async def activate_location(
        self, location: pegboard.LocationInfo, tools: pegboard.Tools
    ) -> AsyncIterator[None]:
        self.events.append(f"activate {self.name}")
        tools.register({self.name: await constant(self.name)})
        yield
        self.events.append(f"teardown {self.name}")


async def run(request: pegboard.Request, name: str, context: Context) -> pegboard.Outcome:
    return await request.execute(pegboard.ToolCall(name, "{}", context()))


def names(location: pegboard.Location) -> list[str]:
    return [definition.name for definition in location.prepare().definitions]


async def test_plugins_activate_in_order_and_tear_down_in_reverse(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Activation follows the enabled list; teardown runs after the yield, in reverse."""
    events: list[str] = []
    for name in ("first", "second", "third"):
        host.add_plugin(name, Recording(name, events))
    async with host.location(
        workspace, plugins=["first", "second", "third"], storage=storage_dir
    ) as location:
        assert ["first", "second", "third"] == names(location)
        assert ("first", "second", "third") == location.plugins
    assert [
        "activate first",
        "activate second",
        "activate third",
        "teardown third",
        "teardown second",
        "teardown first",
    ] == events
    assert [] == names_after_close(location)


def names_after_close(location: pegboard.Location) -> list[str]:
    with pytest.raises(RuntimeError, match="closed"):
        location.prepare()
    return []


async def test_law_scoped_registration_plugin_scopes_close_with_the_location(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Closing the Location removes every plugin registration and reveals the app tool."""
    host.tools.register({"shared": await constant("application")})
    events: list[str] = []
    host.add_plugin("shared", Recording("shared", events))
    async with host.location(workspace, plugins=["shared"], storage=storage_dir) as location:
        request = location.prepare()
        outcome = await request.execute(
            pegboard.ToolCall(
                "shared",
                "{}",
                pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c"),
            )
        )
        assert (pegboard.Text("shared"),) == outcome.content  # type: ignore[union-attr]
    async with host.location(workspace, plugins=[], storage=storage_dir) as bare:
        outcome = await bare.prepare().execute(
            pegboard.ToolCall(
                "shared",
                "{}",
                pegboard.ToolContext(session_id="s", agent="a", message_id="m", call_id="c"),
            )
        )
        assert (pegboard.Text("application"),) == outcome.content  # type: ignore[union-attr]


async def test_each_hook_form_activates_and_tears_down(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Plain, coroutine, generator and async generator hooks all work."""
    events: list[str] = []

    class Plain:
        @hookimpl
        def activate_location(self, tools: pegboard.Tools) -> None:
            events.append("plain")

    class Coroutine:
        @hookimpl
        async def activate_location(self, tools: pegboard.Tools) -> None:
            await anyio.lowlevel.checkpoint()
            events.append("coroutine")

    class SyncGenerator:
        @hookimpl
        def activate_location(self, tools: pegboard.Tools) -> Iterator[None]:
            events.append("generator")
            yield
            events.append("generator teardown")

    for name, plugin in [("plain", Plain()), ("co", Coroutine()), ("gen", SyncGenerator())]:
        host.add_plugin(name, plugin)
    async with host.location(workspace, plugins=["plain", "co", "gen"], storage=storage_dir):
        assert ["plain", "coroutine", "generator"] == events
    assert ["plain", "coroutine", "generator", "generator teardown"] == events


async def test_hooks_receive_the_location_options_and_a_scoped_tools(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """The hook gets the Location's public info, its options and a Tools capability."""
    seen: dict[str, Any] = {}

    class Curious:
        @hookimpl
        def activate_location(
            self,
            location: pegboard.LocationInfo,
            tools: pegboard.Tools,
            options: dict[str, Any],
            services: pegboard.Services,
        ) -> None:
            seen.update(location=location, tools=tools, options=options, services=services)

    host.add_plugin("curious", Curious())
    spec = {"name": "curious", "options": {"depth": 2}}
    async with host.location(workspace, plugins=[spec], storage=storage_dir) as location:
        assert pegboard.LocationInfo(location.root) == seen["location"]
        assert isinstance(seen["tools"], pegboard.Tools)
        assert {"depth": 2} == seen["options"]
        assert not seen["services"].trusted


async def test_generator_teardown_runs_when_the_body_is_cancelled(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Cancelling the code inside a Location still tears its plugins down."""
    events: list[str] = []
    host.add_plugin("rec", Recording("rec", events))
    with anyio.CancelScope() as scope:
        async with host.location(workspace, plugins=["rec"], storage=storage_dir):
            scope.cancel()
            await anyio.sleep_forever()
    assert ["activate rec", "teardown rec"] == events


async def test_two_locations_with_the_same_plugin_are_isolated(
    host: pegboard.Host, tmp_path: Path, storage_dir: Path
) -> None:
    """Each Location gets its own scope; closing one leaves the other's tools in place."""
    events: list[str] = []
    host.add_plugin("rec", Recording("rec", events))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with host.location(tmp_path / "a", plugins=["rec"], storage=storage_dir) as first:
        async with host.location(tmp_path / "b", plugins=[], storage=storage_dir) as second:
            assert ["rec"] == names(first)
            assert [] == names(second)
        async with host.location(tmp_path / "b", plugins=["rec"], storage=storage_dir) as third:
            assert ["rec"] == names(third)
        assert ["rec"] == names(first)
    assert ["activate rec", "activate rec", "teardown rec", "teardown rec"] == events


async def test_law_host_authority_only_host_trust_opens_trusted_services(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A trusted plugin sees trusted services; an untrusted one is refused by name."""
    seen: dict[str, pegboard.Services] = {}

    class Probe:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl
        def activate_location(self, services: pegboard.Services) -> None:
            seen[self.name] = services

    host.add_plugin("trusted", Probe("trusted"))
    host.add_plugin("untrusted", Probe("untrusted"))
    async with host.location(
        workspace, plugins=["trusted", "untrusted"], trusted=["trusted"], storage=storage_dir
    ):
        assert seen["trusted"].trusted
        assert not seen["untrusted"].trusted
        with pytest.raises(pegboard.ServiceDenied, match="'untrusted' is not trusted"):
            seen["untrusted"].filesystem  # noqa: B018 - the access is the test


class WithOptions:
    options_schema = {  # noqa: RUF012 - read, never mutated
        "type": "object",
        "properties": {"depth": {"type": "integer"}},
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self.options: list[Any] = []

    @hookimpl
    def activate_location(self, options: dict[str, Any], tools: pegboard.Tools) -> None:
        self.options.append(options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"depth": "deep"}, "$.depth: expected integer"),
        ({"width": 3}, "unexpected property 'width'"),
    ],
)
async def test_options_are_validated_against_the_plugins_schema(
    host: pegboard.Host, workspace: Path, storage_dir: Path, options: Any, message: str
) -> None:
    """Options that break the plugin's options_schema keep it from activating, by name."""
    plugin = WithOptions()
    host.add_plugin("opts", plugin)
    spec = {"name": "opts", "options": options}
    async with host.location(workspace, plugins=[spec], storage=storage_dir) as location:
        assert [] == plugin.options
        [error] = location.plugin_errors
        assert ("opts", "options") == (error.plugin, error.phase)
        assert message in error.message
        assert () == location.plugins


async def test_valid_options_reach_the_plugin(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Options that fit the schema are passed to the hook."""
    plugin = WithOptions()
    host.add_plugin("opts", plugin)
    spec = {"name": "opts", "options": {"depth": 3}}
    async with host.location(workspace, plugins=[spec], storage=storage_dir) as location:
        assert [{"depth": 3}] == plugin.options
        assert () == location.plugin_errors


class Raises:
    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> None:
        tools.register({"half": pegboard.tool(description="Half.", execute=lambda i, c: "x")})
        raise RuntimeError("database is down")


class Hangs:
    @hookimpl
    async def activate_location(self, tools: pegboard.Tools) -> AsyncIterator[None]:
        tools.register({"hung": pegboard.tool(description="Hung.", execute=lambda i, c: "x")})
        try:
            await anyio.sleep_forever()
            yield
        finally:
            Hangs.cleaned = True

    cleaned = False


class FailsTeardown:
    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> Iterator[None]:
        tools.register({"ok": pegboard.tool(description="Ok.", execute=lambda i, c: "x")})
        yield
        raise OSError("could not flush")


class NeverYields:
    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> Iterator[None]:
        return
        yield


async def test_failing_plugins_are_recorded_and_harmless(
    workspace: Path, storage_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Raising, hanging and generator mistakes are recorded; the others keep working."""
    host = pegboard.Host(activation_timeout=0.2)
    events: list[str] = []
    host.add_plugin("raises", Raises())
    host.add_plugin("hangs", Hangs())
    host.add_plugin("never", NeverYields())
    host.add_plugin("good", Recording("good", events))
    enabled = ["raises", "hangs", "never", "good"]
    with caplog.at_level(logging.WARNING, logger="pegboard"):
        async with host.location(workspace, plugins=enabled, storage=storage_dir) as location:
            assert ["good"] == names(location)
            assert [
                ("raises", "activation", "RuntimeError: database is down"),
                ("hangs", "activation", "did not finish within 0.2 s"),
                ("never", "activation", "the generator hook returned without yielding"),
            ] == [(e.plugin, e.phase, e.message) for e in location.plugin_errors]
            assert ("good",) == location.plugins
    assert Hangs.cleaned
    assert "database is down" in caplog.text
    assert ["activate good", "teardown good"] == events


async def test_teardown_failures_are_recorded_and_every_scope_closes(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A teardown that raises is recorded; the plugins before it still tear down."""
    events: list[str] = []
    host.add_plugin("first", Recording("first", events))
    host.add_plugin("flaky", FailsTeardown())
    async with host.location(workspace, plugins=["first", "flaky"], storage=storage_dir) as loc:
        pass
    assert [("flaky", "teardown", "OSError: could not flush")] == [
        (e.plugin, e.phase, e.message) for e in loc.plugin_errors
    ]
    assert ["activate first", "teardown first"] == events


async def test_strict_mode_raises_plugin_failures(workspace: Path, storage_dir: Path) -> None:
    """In strict mode a failing activation raises PluginError and undoes the others."""
    host = pegboard.Host(strict=True)
    events: list[str] = []
    host.add_plugin("good", Recording("good", events))
    host.add_plugin("raises", Raises())
    with pytest.raises(pegboard.PluginError) as caught:
        async with host.location(workspace, plugins=["good", "raises"], storage=storage_dir):
            pytest.fail("the Location must not open")
    assert ("raises", "activation") == (caught.value.plugin, caught.value.phase)
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert ["activate good", "teardown good"] == events


async def test_strict_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """PEGBOARD_STRICT=1 turns strict mode on; an explicit argument wins."""
    monkeypatch.setenv("PEGBOARD_STRICT", "1")
    assert pegboard.Host().strict
    assert not pegboard.Host(strict=False).strict
    monkeypatch.setenv("PEGBOARD_STRICT", "0")
    assert not pegboard.Host().strict


async def test_enabling_an_unknown_plugin_is_a_clear_error(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A name no installed plugin has fails the Location's opening, naming it."""
    with pytest.raises(pegboard.ConfigError, match=r"plugin 'nope' .* is not installed"):
        async with host.location(workspace, plugins=["nope"], storage=storage_dir):
            pytest.fail("the Location must not open")


async def test_an_unknown_hook_name_fails_the_import_phase(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A misspelled hook is reported instead of silently never running."""

    class Typo:
        @hookimpl
        def activate_locaton(self) -> None:
            pass

    host.add_plugin("typo", Typo())
    async with host.location(workspace, plugins=["typo"], storage=storage_dir) as location:
        [error] = location.plugin_errors
        assert ("typo", "import") == (error.plugin, error.phase)
        assert "'activate_locaton', which is not a pegboard hook" in error.message


class Rewrite:
    """An execute_after hook that appends its name to text content."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> None:
        pass

    @hookimpl
    async def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome | None:
        self.seen.append(f"{self.name} saw {event.outcome.content[0].text}")  # type: ignore[union-attr]
        text = event.outcome.content[0].text  # type: ignore[union-attr]
        return pegboard.Completed(None, f"{text}+{self.name}")


async def test_execute_after_hooks_chain_in_plugin_order(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """Each hook sees the previous hook's result, in the Location's plugin order."""
    seen: list[str] = []
    host.add_plugin("one", Rewrite("one", seen))
    host.add_plugin("two", Rewrite("two", seen))
    host.tools.register({"base": await constant("base")})
    async with host.location(workspace, plugins=["two", "one"], storage=storage_dir) as location:
        outcome = await run(location.prepare(), "base", context)
    assert ["two saw base", "one saw base+two"] == seen
    assert (pegboard.Text("base+two+one"),) == outcome.content  # type: ignore[union-attr]
    assert outcome.call == pegboard.CallIdentity.of(context())


async def test_hooks_run_only_where_their_plugin_is_enabled(
    host: pegboard.Host, tmp_path: Path, storage_dir: Path, context: Context
) -> None:
    """A Location that does not enable a plugin never runs its hooks."""
    seen: list[str] = []
    host.add_plugin("one", Rewrite("one", seen))
    host.tools.register({"base": await constant("base")})
    async with host.location(tmp_path, plugins=[], storage=storage_dir) as location:
        outcome = await run(location.prepare(), "base", context)
    assert [] == seen
    assert (pegboard.Text("base"),) == outcome.content  # type: ignore[union-attr]


async def test_a_replacement_is_bounded_again(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A hook's oversized replacement becomes a preview with a managed file."""
    managed: list[tuple[Path, ...]] = []

    class Inflate:
        @hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> pegboard.Outcome:
            return pegboard.Completed(None, "line\n" * 10_000)

    class Observe:
        @hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            managed.append(event.managed)

    host.add_plugin("inflate", Inflate())
    host.add_plugin("observe", Observe())
    host.tools.register({"base": await constant("base")})
    enabled = ["observe", "inflate", "observe2"]
    host.add_plugin("observe2", Observe())
    async with host.location(workspace, plugins=enabled, storage=storage_dir) as location:
        outcome = await run(location.prepare(), "base", context)
    text = outcome.content[0].text  # type: ignore[union-attr]
    assert "omitted; the full output is saved in" in text
    assert [(), (next(location.storage.directory.iterdir()),)] == managed


async def test_a_raising_execute_after_hook_fails_only_that_call(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """The call whose hook raised fails operationally; the next call is untouched."""

    class Picky:
        @hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> None:
            if event.name == "bad":
                raise ValueError("cannot stand it")

    host.add_plugin("picky", Picky())
    host.tools.register({"bad": await constant("b"), "good": await constant("g")})
    async with host.location(workspace, plugins=["picky"], storage=storage_dir) as location:
        request = location.prepare()
        with pytest.raises(pegboard.PluginError, match="cannot stand it") as caught:
            await run(request, "bad", context)
        assert ("picky", "hook") == (caught.value.plugin, caught.value.phase)
        outcome = await run(request, "good", context)
        assert (pegboard.Text("g"),) == outcome.content  # type: ignore[union-attr]


async def test_a_hook_returning_garbage_fails_operationally(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A hook must return an outcome or None; anything else fails the call as its plugin's fault."""

    class Garbage:
        @hookimpl
        def execute_after(self, event: pegboard.ExecuteEvent) -> Any:
            return "not an outcome"

    host.add_plugin("garbage", Garbage())
    host.tools.register({"base": await constant("base")})
    async with host.location(workspace, plugins=["garbage"], storage=storage_dir) as location:
        with pytest.raises(
            pegboard.PluginError, match=r"return a pegboard\.Completed, a pegboard\.Failed"
        ) as caught:
            await run(location.prepare(), "base", context)
    assert ("garbage", "hook") == (caught.value.plugin, caught.value.phase)


class Withdraw:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def prepare_request(self, definitions: list[pegboard.ToolDefinition], final_step: bool) -> None:
        definitions[:] = [d for d in definitions if d.name != self.name]


async def test_withdrawn_tools_fail_as_unavailable(
    host: pegboard.Host, workspace: Path, storage_dir: Path, context: Context
) -> None:
    """A prepare_request hook removes a tool from this request; calls to it are unavailable."""
    host.add_plugin("withdraw", Withdraw("secret"))
    host.tools.register({"secret": await constant("s"), "open": await constant("o")})
    async with host.location(workspace, plugins=["withdraw"], storage=storage_dir) as location:
        request = location.prepare()
        assert ["open"] == [definition.name for definition in request.definitions]
        withdrawn = await run(request, "secret", context)
        kept = await run(request, "open", context)
    assert isinstance(withdrawn, pegboard.Failed)
    assert "unavailable" == withdrawn.error.kind
    assert (pegboard.Text("o"),) == kept.content  # type: ignore[union-attr]


async def test_a_raising_prepare_hook_is_recorded_and_ignored(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A broken prepare_request hook is recorded once; requests still advertise everything."""

    class Broken:
        @hookimpl
        def prepare_request(self, definitions: list[pegboard.ToolDefinition]) -> None:
            definitions.clear()
            raise KeyError("oops")

    host.add_plugin("broken", Broken())
    host.tools.register({"open": await constant("o")})
    async with host.location(workspace, plugins=["broken"], storage=storage_dir) as location:
        assert ["open"] == names(location)
        assert ["open"] == names(location)
        assert [("broken", "hook")] == [(e.plugin, e.phase) for e in location.plugin_errors]


# Sync hooks that block, plugins that exit, and what a failed activation leaves


class Blocks:
    """Sync hooks that block their thread until released (at most 5 s), as time.sleep would."""

    def __init__(self, *, in_teardown: bool) -> None:
        self.release = threading.Event()
        self.in_teardown = in_teardown

    @hookimpl
    def activate_location(self, tools: pegboard.Tools) -> Iterator[None]:
        if not self.in_teardown:
            self.release.wait(5)
        yield
        if self.in_teardown:
            self.release.wait(5)


async def ticking(ticks: list[float]) -> None:
    """Count the event loop's turns: a blocked loop stops counting."""
    while True:
        ticks.append(anyio.current_time())
        await anyio.sleep(0.01)


@pytest.mark.parametrize("in_teardown", [False, True], ids=["activation", "teardown"])
async def test_a_blocking_sync_hook_is_abandoned_without_blocking_the_event_loop(
    workspace: Path, storage_dir: Path, in_teardown: bool
) -> None:
    """A plain or generator hook runs in a worker thread: past the activation timeout it is
    recorded and abandoned, and the event loop kept running all along."""
    host = pegboard.Host(activation_timeout=0.3)
    blocks = Blocks(in_teardown=in_teardown)
    host.add_plugin("blocks", blocks)
    ticks: list[float] = []
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(ticking, ticks)
            started = anyio.current_time()
            async with host.location(workspace, plugins=["blocks"], storage=storage_dir) as loc:
                pass
            elapsed = anyio.current_time() - started
            group.cancel_scope.cancel()
    finally:
        blocks.release.set()
    phase = "teardown" if in_teardown else "activation"
    [error] = loc.plugin_errors
    assert ("blocks", phase) == (error.plugin, error.phase)
    assert "did not finish within 0.3 s" in error.message
    assert "worker thread was abandoned" in error.message
    assert elapsed < 4  # the hook alone would have blocked for 5 s
    assert len(ticks) >= 10  # ~30 turns in 0.3 s; a blocked loop gets 1 or 2


async def test_a_plugin_that_exits_in_activation_is_recorded_and_harmless(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """SystemExit from an activation hook, sync or async, fails that plugin alone."""
    events: list[str] = []

    class ExitsInThread:
        @hookimpl
        def activate_location(self) -> None:
            raise SystemExit(3)

    class ExitsOnLoop:
        @hookimpl
        async def activate_location(self) -> None:
            raise SystemExit("bye")

    host.add_plugin("thread", ExitsInThread())
    host.add_plugin("loop", ExitsOnLoop())
    host.add_plugin("good", Recording("good", events))
    enabled = ["thread", "loop", "good"]
    async with host.location(workspace, plugins=enabled, storage=storage_dir) as location:
        assert [
            ("thread", "activation", "SystemExit: 3"),
            ("loop", "activation", "SystemExit: bye"),
        ] == [(e.plugin, e.phase, e.message) for e in location.plugin_errors]
        assert ["good"] == names(location)


class StartsThenFails:
    """Registers a tool and starts background work, then fails its activation."""

    def __init__(self, *, sync: bool) -> None:
        self.sync = sync
        self.events: list[str] = []

    async def work(self) -> None:
        self.events.append("working")
        try:
            await anyio.sleep_forever()
        finally:
            self.events.append("cancelled")

    def start(self, tools: pegboard.Tools, services: pegboard.Services) -> None:
        tools.register({"half": pegboard.tool(description="Half.", execute=lambda i, c: "x")})
        services.tasks.start_soon(self.work)
        raise RuntimeError("configuration is missing")

    @hookimpl
    def activate_location(self, tools: pegboard.Tools, services: pegboard.Services) -> Any:
        if self.sync:
            return self.start(tools, services)

        async def activate() -> None:
            await anyio.wait_all_tasks_blocked()  # the task is running now
            self.start(tools, services)

        return activate()


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_a_failed_activation_cancels_its_tasks_and_withdraws_its_tools(
    host: pegboard.Host, workspace: Path, storage_dir: Path, sync: bool
) -> None:
    """When activation fails, the plugin's background tasks end and its tools go, before the
    Location is handed out; its later attempts to start tasks are refused."""
    plugin = StartsThenFails(sync=sync)
    host.add_plugin("half", plugin)
    async with host.location(workspace, plugins=["half"], storage=storage_dir) as location:
        [error] = location.plugin_errors
        assert ("half", "activation") == (error.plugin, error.phase)
        assert [] == names(location)
        # A sync hook's task may be cancelled before it ever ran; an async one's was running.
        expected = [["working", "cancelled"]] + ([[]] if sync else [])
        assert plugin.events in expected
        await anyio.wait_all_tasks_blocked()
        assert plugin.events in expected


async def test_tasks_of_a_plugin_that_failed_are_refused(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """A failed plugin that kept its services cannot start background work later."""
    kept: list[pegboard.Services] = []

    class Keeps:
        @hookimpl
        async def activate_location(self, services: pegboard.Services) -> None:
            kept.append(services)
            raise RuntimeError("broken")

    async def work() -> None:
        raise AssertionError("never runs")

    host.add_plugin("keeps", Keeps())
    async with host.location(workspace, plugins=["keeps"], storage=storage_dir):
        with pytest.raises(RuntimeError, match="can start no background task"):
            kept[0].tasks.start_soon(work)


# What an untrusted plugin holds


async def test_law_host_authority_untrusted_services_hold_no_trusted_reference(
    host: pegboard.Host, workspace: Path, storage_dir: Path
) -> None:
    """Nothing an untrusted plugin is handed (services, tools, options, location info, what
    register returns) reaches a trusted service or a board through attributes, closures,
    bound methods or containers; a trusted plugin's view does reach them (the walk works)."""
    handed: dict[str, tuple[Any, ...]] = {}

    class Probe:
        def __init__(self, name: str) -> None:
            self.name = name

        @hookimpl
        async def activate_location(
            self,
            location: pegboard.LocationInfo,
            tools: pegboard.Tools,
            options: dict[str, Any],
            services: pegboard.Services,
        ) -> None:
            registration = tools.register({self.name: await constant(self.name)})
            handed[self.name] = (location, tools, options, services, registration)

    host.add_plugin("trusted", Probe("trusted"))
    host.add_plugin("untrusted", Probe("untrusted"))
    enabled = ["builtin", "trusted", "untrusted"]
    async with host.location(
        workspace, plugins=enabled, trusted=["trusted"], storage=storage_dir
    ) as location:
        secrets = (location.filesystem, location.permissions, location.storage)
        assert [] == reaches(handed["untrusted"], *secrets, Board, Scope)
        assert {id(s) for s in secrets} <= {
            id(found) for found in reaches(handed["trusted"], *secrets)
        }
        with pytest.raises(pegboard.ServiceDenied):
            handed["untrusted"][3].storage  # noqa: B018 - the access is the test


async def test_law_scoped_registration_an_abandoned_hook_registers_nothing_late(
    workspace: Path, storage_dir: Path
) -> None:
    """A sync hook that outlives its timeout and then registers is refused: the Location
    never shows a tool from a plugin whose activation failed."""
    release, finished = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    class Late:
        @hookimpl
        def activate_location(self, tools: pegboard.Tools) -> None:
            release.wait(5)
            try:
                tools.register(
                    {"late": pegboard.tool(description="Late.", execute=lambda i, c: "")}
                )
            except pegboard.RegistrationError as error:
                outcome.append(error)
            finally:
                finished.set()

    host = pegboard.Host(activation_timeout=0.2)
    host.add_plugin("late", Late())
    try:
        async with host.location(workspace, plugins=["late"], storage=storage_dir) as location:
            release.set()
            await anyio.to_thread.run_sync(finished.wait, 5)
            assert [] == names(location)
    finally:
        release.set()
    [error] = outcome
    assert "scope 'plugin:late' is closed" in str(error)
