"""Activating a Location's plugins in scopes they own, and running their hooks."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread
import attrs
import pluggy

from ._codec import SchemaCodec
from ._config import PluginSpec
from ._errors import CodecError, SchemaError
from ._pipeline import AfterHook, ExecuteEvent
from ._plugins import PluginError, Plugins, call_hook
from ._registry import Board, Scope, Tools
from ._services import BackgroundTasks, LocationInfo, Services
from ._tool import ToolDefinition

if TYPE_CHECKING:
    from ._confined import Worker
    from ._confining import Confining

__all__ = ("Activation", "ActivePlugin")

logger = logging.getLogger("pegboard")

_ABANDONED = "its worker thread was abandoned and may still be running"


@attrs.define
class ActivePlugin:
    """One plugin activated in one Location: its scope, tasks, teardown and hooks."""

    name: str
    scope: Scope
    hooks: dict[str, pluggy.HookImpl]
    tasks: BackgroundTasks | None = None
    teardown: Generator[Any, None, None] | AsyncGenerator[Any, None] | None = None
    #: The worker process of a confined plugin, which holds its hooks.
    worker: Worker | None = None


class _Recorder:
    """Where plugin failures go: a list of errors, or a raise in strict mode.

    Apart from the Activation so that what plugins hold to report problems
    reaches nothing but this list.
    """

    __slots__ = ("errors", "notify", "strict")

    def __init__(self, *, strict: bool) -> None:
        self.strict = strict
        self.errors: list[PluginError] = []
        #: Told of each failure recorded (a confined plugin's worker tells its host).
        self.notify: Callable[[PluginError], None] | None = None

    def record(self, error: PluginError, cause: BaseException | None = None) -> None:
        if self.strict:
            raise error from cause
        if any(_same(error, known) for known in self.errors):
            return  # a hook failing on every request is reported once
        self.errors.append(error)
        logger.warning("%s", error, exc_info=cause)
        if self.notify is not None:
            self.notify(error)


class Activation:
    """The plugins of one Location, from activation to teardown.

    Failures stay contained: each is recorded in ``errors`` and logged, the
    failed plugin's background tasks are cancelled and its registrations
    removed, and the rest keep working. In strict mode the first failure is
    raised instead. Sync hooks (plain and generator functions) run in a worker
    thread, so one that blocks cannot stall the event loop; past the timeout
    it is reported and its thread abandoned.
    """

    def __init__(
        self,
        plugins: Plugins,
        info: LocationInfo,
        board: Board,
        *,
        services: Mapping[str, Any],
        timeout: float,
        strict: bool,
        tools: Callable[[Board, Scope], Tools] = Tools,
        confining: Confining | None = None,
    ) -> None:
        self._plugins = plugins
        self._info = info
        self._board = board
        self._services = services
        self._timeout = timeout
        self._recorder = _Recorder(strict=strict)
        self._tools = tools
        self._confining = confining
        self.active: list[ActivePlugin] = []
        #: Per enabled plugin that activated or was refused: whether it ran confined.
        self.confined: dict[str, bool] = {}

    @property
    def info(self) -> LocationInfo:
        """The Location's public information, as the plugins receive it."""
        return self._info

    @property
    def on_record(self) -> Callable[[PluginError], None] | None:
        """Told of each failure as it is recorded (after activation, say)."""
        return self._recorder.notify

    @on_record.setter
    def on_record(self, notify: Callable[[PluginError], None] | None) -> None:
        self._recorder.notify = notify

    @property
    def errors(self) -> list[PluginError]:
        """The failures recorded so far, in order."""
        return self._recorder.errors

    def record(self, error: PluginError, cause: BaseException | None = None) -> None:
        """Record and log a plugin failure (once), or raise it in strict mode."""
        self._recorder.record(error, cause)

    async def activate(
        self,
        specs: Sequence[PluginSpec],
        trusted: frozenset[str],
        tasks: anyio.abc.TaskGroup | None = None,
    ) -> None:
        """Activate ``specs`` in order, each in a fresh scope of its own.

        Each plugin's background tasks run in a task group of its own inside
        ``tasks`` (the Location's group).
        """
        spawned = await self._spawn(specs, tasks)
        try:
            await self._activate_each(specs, trusted, tasks, spawned)
        finally:
            for plugin in spawned.values():  # not activated: an error came first
                if isinstance(plugin, ActivePlugin) and plugin not in self.active:
                    with anyio.CancelScope(shield=True):
                        await self._discard(plugin)

    async def _spawn(
        self, specs: Sequence[PluginSpec], tasks: anyio.abc.TaskGroup | None
    ) -> dict[str, ActivePlugin | OSError | None]:
        """Start the worker of every plugin that runs confined, all at once: each is
        a new interpreter, and they boot side by side while plugins activate in order."""
        confining = self._confining
        spawned: dict[str, ActivePlugin | OSError | None] = {}
        if confining is None:
            return spawned
        for spec in specs:
            if confining.decide(spec.name, self._plugins) != "confined":
                continue
            from ._confined import Worker  # only where a plugin runs confined

            source = self._plugins.source(spec.name)
            assert source is not None
            assert tasks is not None
            scope = Scope(f"plugin:{spec.name}")
            worker = Worker(spec.name, Tools(self._board, scope), self.record, self._timeout)
            plugin = ActivePlugin(spec.name, scope, {}, worker=worker)
            try:
                await worker.spawn(
                    tasks,
                    folder=source[1],
                    network=spec.name in confining.network,
                    environment=confining.secrets,
                )
            except OSError as error:
                await self._discard(plugin)
                spawned[spec.name] = error
                continue
            spawned[spec.name] = plugin
        return spawned

    async def _discard(self, plugin: ActivePlugin) -> None:
        try:
            if plugin.worker is not None:
                await plugin.worker.close()
        finally:
            plugin.scope.close()

    async def _activate_each(
        self,
        specs: Sequence[PluginSpec],
        trusted: frozenset[str],
        tasks: anyio.abc.TaskGroup | None,
        spawned: dict[str, ActivePlugin | OSError | None],
    ) -> None:
        for spec in specs:
            confining = self._confining
            if confining is not None:
                decision = confining.decide(spec.name, self._plugins)
                if decision == "confined":
                    self.confined[spec.name] = True
                    await self._activate_confined(spec, spawned)
                    continue
                if decision != "in process":
                    self.confined[spec.name] = True
                    self.record(PluginError(spec.name, "activation", f"not activated: {decision}"))
                    continue
            self.confined[spec.name] = False
            try:
                hooks = self._plugins.load(spec.name)
            except PluginError as error:
                self.record(error, error.__cause__)
                continue
            options = self._options(spec)
            if options is None:
                continue
            scope = Scope(f"plugin:{spec.name}")
            plugin = ActivePlugin(spec.name, scope, hooks)
            impl = hooks.get("activate_location")
            if impl is not None:
                if tasks is not None:
                    plugin.tasks = BackgroundTasks(spec.name, self._recorder.record)
                    await plugin.tasks._open(tasks)
                services = Services(
                    spec.name,
                    trusted=spec.name in trusted,
                    available=self._services,
                    tasks=plugin.tasks,
                    record=self._recorder.record,
                )
                arguments = {
                    "location": self._info,
                    "tools": self._tools(self._board, scope),
                    "options": options,
                    "services": services,
                }
                if not await self._run_activation(plugin, impl, arguments):
                    continue
            self.active.append(plugin)

    async def _activate_confined(
        self, spec: PluginSpec, spawned: dict[str, ActivePlugin | OSError | None]
    ) -> None:
        """Activate ``spec`` in its sandboxed worker; never import it here."""
        plugin = spawned.get(spec.name)
        if plugin is None or isinstance(plugin, OSError):
            error = plugin or OSError("it was not started")
            self.record(
                PluginError(spec.name, "activation", f"cannot start its worker: {error}"), error
            )
            return
        worker = plugin.worker
        assert worker is not None
        source = self._plugins.source(spec.name)
        assert source is not None
        activated = await worker.activate(
            entry_point=source[0], options=dict(spec.options), root=self._info.root
        )
        if activated is None and worker.dead is None:
            message = f"did not finish within {self._timeout:g} s; its worker was stopped"
            self.record(PluginError(spec.name, "activation", message))
        if activated is not None:
            for reported in activated.get("errors", ()):
                self.record(PluginError(reported["plugin"], reported["phase"], reported["message"]))
        if activated is None or not activated.get("ok"):
            spawned[spec.name] = None
            await self._discard(plugin)
            return
        self.active.append(plugin)

    def _options(self, spec: PluginSpec) -> dict[str, Any] | None:
        schema = self._plugins.options_schema(spec.name)
        if schema is None:
            return dict(spec.options)
        try:
            codec = SchemaCodec(schema)  # type: ignore[arg-type]
        except SchemaError as error:
            self.record(PluginError(spec.name, "options", f"bad options_schema: {error}"))
            return None
        try:
            options: dict[str, Any] = codec.decode(dict(spec.options))
        except CodecError as error:
            self.record(PluginError(spec.name, "options", f"invalid options: {error}"))
            return None
        return options

    async def _run_activation(
        self, plugin: ActivePlugin, impl: pluggy.HookImpl, arguments: dict[str, Any]
    ) -> bool:
        function = impl.function
        failure: PluginError | None = None
        cause: BaseException | None = None
        threaded = False  # whether the timeout, if it comes, finds the hook in a thread
        try:
            with anyio.fail_after(self._timeout):
                if inspect.isasyncgenfunction(function):
                    generator = call_hook(impl, **arguments)
                    plugin.teardown = generator
                    await generator.__anext__()
                elif inspect.isgeneratorfunction(function):
                    generator = call_hook(impl, **arguments)  # runs none of the hook's code
                    plugin.teardown = generator
                    threaded = True
                    if not await _in_thread(_start, generator):
                        raise StopIteration
                    threaded = False
                elif inspect.iscoroutinefunction(function):
                    await call_hook(impl, **arguments)
                else:
                    threaded = True
                    (result,) = await _in_thread(
                        _boxed, functools.partial(call_hook, impl, **arguments)
                    )
                    threaded = False
                    if inspect.isawaitable(result):
                        await result
        except TimeoutError as error:
            message = f"did not finish within {self._timeout:g} s"
            if threaded:
                # The thread may still run the generator: it cannot be resumed to tear down.
                plugin.teardown = None
                message += f"; {_ABANDONED}"
            failure = PluginError(plugin.name, "activation", message)
            cause = error
        except (StopIteration, StopAsyncIteration) as error:
            plugin.teardown = None
            failure = PluginError(
                plugin.name, "activation", "the generator hook returned without yielding"
            )
            cause = error
        except (Exception, SystemExit) as error:  # noqa: BLE001 - a broken plugin must not break the Location
            failure = PluginError(plugin.name, "activation", _describe(error))
            cause = error
        if failure is None:
            return True
        try:
            self.record(failure, cause)
        finally:
            # Undo what the failed activation did: its teardown, its background
            # tasks, then its registrations.
            try:
                await self._teardown(plugin, record=False)
                await self._stop_tasks(plugin)
            finally:
                plugin.scope.close()
        return False

    async def _stop_tasks(self, plugin: ActivePlugin) -> None:
        if plugin.tasks is None:
            return
        with anyio.move_on_after(self._timeout) as waiting:
            await plugin.tasks._stop()
        if waiting.cancelled_caught:
            logger.warning(
                "plugin %r: background tasks did not end within %g s of being cancelled",
                plugin.name,
                self._timeout,
            )

    async def close(self) -> None:
        """Tear plugins down in reverse order; every scope closes even if one fails."""
        with anyio.CancelScope(shield=True):
            while self.active:
                plugin = self.active.pop()
                try:
                    await self._teardown(plugin, record=True)
                finally:
                    plugin.scope.close()

    async def _teardown(self, plugin: ActivePlugin, *, record: bool) -> None:
        if plugin.worker is not None:
            await plugin.worker.close()  # the plugin tears down in its worker
            return
        generator, plugin.teardown = plugin.teardown, None
        if generator is None:
            return
        problem: str | None = None
        cause: BaseException | None = None
        try:
            with anyio.fail_after(self._timeout):
                if isinstance(generator, AsyncGenerator):
                    try:
                        await generator.__anext__()
                    except StopAsyncIteration:
                        pass
                    else:
                        problem = "the generator hook yielded more than once"
                        await generator.aclose()
                else:
                    problem = await _in_thread(_finish, generator)
        except TimeoutError as error:
            problem, cause = f"teardown did not finish within {self._timeout:g} s", error
            if not isinstance(generator, AsyncGenerator):
                problem += f"; {_ABANDONED}"
        except (Exception, SystemExit) as error:  # noqa: BLE001 - one plugin's teardown must not stop the others
            problem, cause = _describe(error), error
        if problem is not None and record:
            self.record(PluginError(plugin.name, "teardown", problem), cause)

    def after_hooks(self) -> tuple[AfterHook, ...]:
        """The active plugins' ``execute_after`` hooks, in the Location's plugin order."""
        hooks = []
        for plugin in self.active:
            if plugin.worker is not None:
                if "execute_after" in plugin.worker.hooks:
                    hooks.append(AfterHook(plugin.name, plugin.worker.after, self.record))
            elif "execute_after" in plugin.hooks:
                hooks.append(_after_hook(plugin.name, plugin.hooks["execute_after"], self.record))
        return tuple(hooks)

    def prepare_hooks(self) -> tuple[tuple[str, Callable[[list[ToolDefinition], bool], Any]], ...]:
        """The active plugins' ``prepare_request`` hooks, in plugin order: each takes
        the definitions offered (to shorten in place) and whether it is the final step."""
        hooks: list[tuple[str, Callable[[list[ToolDefinition], bool], Any]]] = []
        for plugin in self.active:
            if plugin.worker is not None:
                if "prepare_request" in plugin.worker.hooks:
                    hooks.append((plugin.name, plugin.worker.prepare))
            elif "prepare_request" in plugin.hooks:
                hooks.append((plugin.name, functools.partial(self._prepare, plugin.hooks)))
        return tuple(hooks)

    def _prepare(
        self, hooks: dict[str, pluggy.HookImpl], definitions: list[ToolDefinition], final: bool
    ) -> Any:
        return call_hook(
            hooks["prepare_request"], location=self._info, definitions=definitions, final_step=final
        )

    def withdraw(
        self, definitions: tuple[ToolDefinition, ...], final_step: bool
    ) -> tuple[ToolDefinition, ...]:
        """Run ``prepare_request`` hooks; return the definitions they kept."""
        kept = definitions
        for name, hook in self.prepare_hooks():
            offered = list(kept)
            try:
                hook(offered, final_step)
            except (Exception, SystemExit) as error:  # noqa: BLE001 - a broken hook must not break requests
                self.record(PluginError(name, "hook", f"prepare_request raised {error!r}"), error)
                continue
            remaining = {id(definition) for definition in offered}
            kept = tuple(definition for definition in kept if id(definition) in remaining)
        return kept


def _boxed(function: Callable[[], Any]) -> tuple[Any]:
    """Call ``function``; its result in a tuple, since trio refuses a thread that returns a
    coroutine (a plain hook may return one, to be awaited on the event loop)."""
    return (function(),)


def _start(generator: Generator[Any, None, None]) -> bool:
    """Run a sync generator hook to its yield; whether it got there.

    StopIteration cannot cross from a worker thread into a coroutine.
    """
    try:
        next(generator)
    except StopIteration:
        return False
    return True


def _finish(generator: Generator[Any, None, None]) -> str | None:
    """Run a sync generator hook's teardown; say what is wrong with it, if anything."""
    try:
        next(generator)
    except StopIteration:
        return None
    generator.close()
    return "the generator hook yielded more than once"


async def _in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Run a sync hook in a worker thread; a cancel (the timeout) abandons the thread.

    Python cannot stop a thread, so one that never returns keeps running
    until the process ends; the Location goes on without waiting for it.
    """
    return await anyio.to_thread.run_sync(function, *args, abandon_on_cancel=True)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _same(one: PluginError, other: PluginError) -> bool:
    return (one.plugin, one.phase, one.message) == (other.plugin, other.phase, other.message)


def _after_hook(
    plugin: str,
    impl: pluggy.HookImpl,
    record: Callable[[PluginError, BaseException | None], None],
) -> AfterHook:
    function = impl.function
    # Resolved once: the hook runs on every call in the Location.
    arguments: tuple[str, ...] = tuple(impl.argnames)

    async def run(event: ExecuteEvent) -> object:
        result: object = function(event) if arguments else function()
        if inspect.isawaitable(result):
            result = await result
        return result

    # The pipeline turns what the hook raises or returns wrong into a
    # PluginError, recorded here on the Location.
    return AfterHook(plugin, run, record)
