"""Activating a Location's plugins in scopes they own, and running their hooks."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import Any

import anyio
import attrs
import pluggy

from ._codec import SchemaCodec
from ._config import PluginSpec
from ._errors import CodecError, SchemaError
from ._pipeline import AfterHook, ExecuteEvent
from ._plugins import PluginError, Plugins, call_hook
from ._registry import Board, Scope, Tools
from ._services import LocationInfo, Services
from ._tool import ToolDefinition

__all__ = ("Activation", "ActivePlugin")

logger = logging.getLogger("pegboard")


@attrs.define
class ActivePlugin:
    """One plugin activated in one Location: its scope, teardown and hooks."""

    name: str
    scope: Scope
    hooks: dict[str, pluggy.HookImpl]
    teardown: Generator[Any, None, None] | AsyncGenerator[Any, None] | None = None


class Activation:
    """The plugins of one Location, from activation to teardown.

    Failures stay contained: each is recorded in ``errors`` and logged, the
    failed plugin's registrations are removed, and the rest keep working.
    In strict mode the first failure is raised instead.
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
    ) -> None:
        self._plugins = plugins
        self._info = info
        self._board = board
        self._services = services
        self._timeout = timeout
        self._strict = strict
        self.active: list[ActivePlugin] = []
        self.errors: list[PluginError] = []

    def record(self, error: PluginError, cause: BaseException | None = None) -> None:
        """Record and log a plugin failure (once), or raise it in strict mode."""
        if self._strict:
            raise error from cause
        if any(_same(error, known) for known in self.errors):
            return  # a hook failing on every request is reported once
        self.errors.append(error)
        logger.warning("%s", error, exc_info=cause)

    async def activate(self, specs: Sequence[PluginSpec], trusted: frozenset[str]) -> None:
        """Activate ``specs`` in order, each in a fresh scope of its own."""
        for spec in specs:
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
            services = Services(spec.name, trusted=spec.name in trusted, available=self._services)
            impl = hooks.get("activate_location")
            if impl is not None:
                arguments = {
                    "location": self._info,
                    "tools": Tools(self._board, scope),
                    "options": options,
                    "services": services,
                }
                if not await self._run_activation(plugin, impl, arguments):
                    scope.close()
                    continue
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
        try:
            with anyio.fail_after(self._timeout):
                if inspect.isasyncgenfunction(function):
                    generator = call_hook(impl, **arguments)
                    plugin.teardown = generator
                    await generator.__anext__()
                elif inspect.isgeneratorfunction(function):
                    generator = call_hook(impl, **arguments)
                    plugin.teardown = generator
                    next(generator)
                else:
                    result = call_hook(impl, **arguments)
                    if inspect.isawaitable(result):
                        await result
        except TimeoutError as error:
            failure = PluginError(
                plugin.name, "activation", f"did not finish within {self._timeout:g} s"
            )
            cause = error
        except (StopIteration, StopAsyncIteration) as error:
            plugin.teardown = None
            failure = PluginError(
                plugin.name, "activation", "the generator hook returned without yielding"
            )
            cause = error
        except Exception as error:  # noqa: BLE001 - a broken plugin must not break the Location
            failure = PluginError(plugin.name, "activation", f"{type(error).__name__}: {error}")
            cause = error
        if failure is None:
            return True
        try:
            self.record(failure, cause)
        finally:
            # Undo what the failed activation did: its teardown, then its registrations.
            await self._teardown(plugin, record=False)
            plugin.scope.close()
        return False

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
                    try:
                        next(generator)
                    except StopIteration:
                        pass
                    else:
                        problem = "the generator hook yielded more than once"
                        generator.close()
        except TimeoutError as error:
            problem, cause = f"teardown did not finish within {self._timeout:g} s", error
        except Exception as error:  # noqa: BLE001 - one plugin's teardown must not stop the others
            problem, cause = f"{type(error).__name__}: {error}", error
        if problem is not None and record:
            self.record(PluginError(plugin.name, "teardown", problem), cause)

    def after_hooks(self) -> tuple[AfterHook, ...]:
        """The active plugins' ``execute_after`` hooks, in the Location's plugin order."""
        return tuple(
            _after_hook(plugin.name, plugin.hooks["execute_after"], self.record)
            for plugin in self.active
            if "execute_after" in plugin.hooks
        )

    def prepare_hooks(self) -> tuple[tuple[str, pluggy.HookImpl], ...]:
        """The active plugins' ``prepare_request`` hooks, in plugin order."""
        return tuple(
            (plugin.name, plugin.hooks["prepare_request"])
            for plugin in self.active
            if "prepare_request" in plugin.hooks
        )

    def withdraw(
        self, definitions: tuple[ToolDefinition, ...], final_step: bool
    ) -> tuple[ToolDefinition, ...]:
        """Run ``prepare_request`` hooks; return the definitions they kept."""
        kept = definitions
        for name, impl in self.prepare_hooks():
            offered = list(kept)
            try:
                call_hook(impl, location=self._info, definitions=offered, final_step=final_step)
            except Exception as error:  # noqa: BLE001 - a broken hook must not break requests
                self.record(PluginError(name, "hook", f"prepare_request raised {error!r}"), error)
                continue
            remaining = {id(definition) for definition in offered}
            kept = tuple(definition for definition in kept if id(definition) in remaining)
        return kept


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
