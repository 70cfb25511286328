"""The host: the application board, the installed plugins, and the door to Locations."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import attrs

from ._activation import Activation
from ._bounding import OutputLimits
from ._config import (
    ConfigError,
    LocationConfig,
    PluginSpec,
    location_rules,
    permission_rules,
    plugin_specs,
)
from ._confining import ConfineMode, Confining, network_names
from ._deferral import ToolBudget
from ._filesystem import Filesystem
from ._location import Location
from ._permissions import Approver, PermissionRule, Permissions, default_approvals_file
from ._pipeline import Pipeline
from ._plugins import BUILTIN, PluginInfo, Plugins
from ._registry import Board, Scope, Tools
from ._secrets import Secrets, redacting_logs
from ._services import LocationInfo
from ._storage import ManagedStorage
from .sandbox import Mode, Sandbox

if TYPE_CHECKING:
    from ._elicitation import Elicit
    from .codemode import CodeModeLimits

__all__ = ("Host",)

#: Default bound on one call's raw input: far above what a model sends.
DEFAULT_MAX_INPUT_BYTES = 1_048_576
#: Set to 1 to make plugin failures raise instead of being recorded.
STRICT_ENVIRONMENT_VARIABLE = "PEGBOARD_STRICT"


def _strict_from_environment() -> bool:
    return os.environ.get(STRICT_ENVIRONMENT_VARIABLE, "").lower() in ("1", "true", "yes", "on")


class Host:
    """The process: application tools on ``host.tools``, installed plugins, Locations.

    Installed plugins are discovered once, from the ``pegboard`` entry-point
    group, and each is imported only when a Location first enables it.
    ``strict=True`` (or ``PEGBOARD_STRICT=1``) makes plugin failures raise
    instead of being recorded: for plugin developers. ``activation_timeout`` is
    how long, in seconds, one plugin may take to activate or tear down.
    """

    def __init__(self, *, strict: bool | None = None, activation_timeout: float = 30.0) -> None:
        self._board = Board()
        self._scope = Scope("application")
        self._plugins = Plugins()
        self.strict = _strict_from_environment() if strict is None else strict
        self.activation_timeout = activation_timeout
        #: Registers application tools, available in every Location.
        self.tools = Tools(self._board, self._scope)

    def plugins(self, *, load: bool = False) -> list[PluginInfo]:
        """Every installed plugin with its distribution, version and load state.

        ``load=True`` imports each plugin to find out whether it loads: those from
        entry points in one confined process (never in the host's) where a sandbox can
        confine it, else here.
        """
        return self._plugins.info(load=load)

    def add_plugin(self, name: str, plugin: object) -> None:
        """Install a plugin under ``name``, as if an entry point named it.

        ``plugin`` is a ``"module"`` or ``"module:attribute"`` reference, imported
        only where a Location enables it and, like an installed plugin the host
        did not trust, confined to a worker of its own; or a module or any object
        with `pegboard.hookimpl` methods, already in the host's process and run
        there. Like an installed plugin, it takes part only where a Location
        enables it. A reference whose module cannot be found raises `ValueError`.
        """
        self._plugins.add(name, plugin)

    @contextlib.asynccontextmanager
    async def location(
        self,
        root: str | os.PathLike[str],
        *,
        plugins: Sequence[str | Mapping[str, Any]] | None = None,
        trusted: Iterable[str] = (),
        limits: OutputLimits | None = None,
        storage: str | os.PathLike[str] | ManagedStorage | None = None,
        permissions: Iterable[PermissionRule | Mapping[str, str]] = (),
        approver: Approver | None = None,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
        code_mode: CodeModeLimits | None = None,
        sandbox: Mode = "auto",
        writable: Iterable[str | os.PathLike[str]] = (),
        environment: Mapping[str, str] | None = None,
        confine: ConfineMode = "auto",
        network: Iterable[str] = (),
        tool_budget: ToolBudget | None = None,
        elicit: Elicit | None = None,
        secrets: Mapping[str, str] | None = None,
        trace_content: bool | None = None,
    ) -> AsyncIterator[Location]:
        """Open the Location at ``root`` with its plugins activated.

        ``plugins`` is an ordered list of plugin names or ``{"name": ...,
        "options": {...}}`` entries; ``None`` reads ``pegboard.toml`` at the
        root, else enables ``builtin`` alone. Only the host grants trust:
        ``trusted`` names the plugins that may use trusted services (``builtin``
        always may). ``limits`` bound each call's model content (default: the
        config file's ``[tool_output]``, else `OutputLimits()`), ``storage`` is
        where oversized output is retained (each Location in an area of its
        own, ``location.storage.directory``), ``max_input_bytes`` bounds each
        call's raw input. ``permissions`` is the ordered rule list
        (``{"action", "resource", "effect"}``) and ``approver`` the async
        callable asked when a rule says ``ask``. ``code_mode`` sets the limits
        of each Code Mode ``execute`` call a request of this Location makes
        (`pegboard.codemode.CodeModeLimits`; see docs/code-mode.md).
        ``tool_budget`` is how many tokens of definitions a request prepared
        with ``defer="auto"`` advertises before it defers its tools
        (`pegboard.ToolBudget`; see docs/host-guide.md, "Many tools").
        ``elicit`` is the async handler that asks the user what a trusted plugin's
        back end wants to know (a mounted MCP server's elicitation): it takes a
        `pegboard.Elicitation` and returns a `pegboard.ElicitationAnswer`; without
        one, no plugin offers to ask (see docs/host-guide.md, "Questions for the user").

        ``sandbox`` is the host's choice alone (a Location's config cannot make
        it): ``"auto"`` runs every command a tool starts (``bash``, manifest
        tools) in an OS sandbox where one works and asks for each command where
        none does; ``"required"`` refuses commands without one; ``"off"`` runs
        them with the host's authority. Confined commands write only inside the
        Location, their own ``TMPDIR`` and the ``writable`` folders, and see only
        an allow-listed environment plus ``environment``; ``location.sandbox``
        says which sandbox is in force. See docs/host-guide.md, "Security".

        ``confine`` decides where the installed plugins the host did not trust
        run: ``"auto"`` and ``"required"`` import, activate and run each in a
        sandboxed worker process of its own that reads only the Python
        installation, writes only a private temporary folder and reaches the
        network only when named in ``network``; where no sandbox can, such a
        plugin is not activated and ``location.plugin_errors`` says why.
        ``"required"`` also refuses untrusted in-process plugins
        (`add_plugin`), which cannot be confined; ``"off"`` runs every plugin in
        this process. ``location.plugin_info`` says which way each ran; see
        docs/host-guide.md, "Confined plugins".

        ``secrets`` maps names to values only the host knows (a Location's config
        can neither add nor read them; a value has at least 8 characters). Every
        value, and its base64 and URL encodings, is replaced by ``[secret NAME]``
        in all a call publishes or keeps: outcomes, progress, retained files,
        spans, pegboard's log records and the questions the approver sees. A
        command (``bash``, manifest tools) gets a secret as an environment
        variable only where a host rule allows it: ``{"action": "secret",
        "resource": NAME, "effect": "allow"}``. ``trace_content=True`` records
        each call's arguments and result, bounded and redacted, on its span
        (default: the ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
        environment variable); see docs/host-guide.md, "Tracing" and "Secrets". Closing
        tears plugins down in reverse order and removes every registration made
        in the Location.
        """
        if code_mode is not None:
            _check_code_mode(code_mode)
        if elicit is not None and not callable(elicit):
            raise TypeError(
                f"elicit takes an async function (pegboard.Elicitation) -> "
                f"pegboard.ElicitationAnswer, or None; got {elicit!r}"
            )
        if tool_budget is not None and not isinstance(tool_budget, ToolBudget):
            raise TypeError(f"tool_budget takes a pegboard.ToolBudget or None, got {tool_budget!r}")
        known = Secrets.of(secrets)
        if trace_content is not None and not isinstance(trace_content, bool):
            raise TypeError(f"trace_content takes True, False or None, got {trace_content!r}")
        if not os.fspath(root):
            # Path("") is the current folder: an unset variable must not open it.
            raise NotADirectoryError(
                "a Location's root is an empty path; give a folder ('.' for the current one)"
            )
        if "\0" in os.fspath(root):
            raise NotADirectoryError(f"a Location's root holds a NUL character: {root!r}")
        resolved, config = await anyio.to_thread.run_sync(_root_and_config, Path(root))
        specs = self._enabled(plugins, config, resolved)
        if limits is None:
            limits = _limits(config, resolved)
        if not isinstance(storage, ManagedStorage):
            storage = ManagedStorage(storage)
        # Each Location keeps, sees and prunes only its own area of the storage.
        areas = storage.directory
        storage = attrs.evolve(storage.for_location(resolved), secrets=known or None)
        await storage.prune()
        # The config's own rules come after the host's: they narrow, never widen.
        ordered = location_rules(
            permission_rules(list(permissions), source="permissions="), config.permissions
        )
        approvals = default_approvals_file(resolved)
        try:
            rules = Permissions(
                ordered, approver=approver, approvals_file=approvals, secrets=known or None
            )
        except (TypeError, ValueError) as error:
            raise ConfigError(f"permissions=: {error}") from None
        # Only what a host rule grants; a config's rules can only narrow.
        granted = {
            name: known.value(name)
            for name in known.names
            if rules.evaluate("secret", name) == "allow"
        }
        try:
            confinement = await anyio.to_thread.run_sync(
                functools.partial(
                    Sandbox,
                    sandbox,
                    root=resolved,
                    writable=writable,
                    environment=environment,
                    secrets=granted,
                    visible=[storage.directory],
                    # A command may not save approvals for itself, nor read or plant
                    # another Location's retained output.
                    data=[approvals.parent],
                    areas=areas,
                )
            )
        except ValueError as error:
            raise ConfigError(str(error)) from None
        filesystem = Filesystem(resolved, readable=[storage.directory])
        location = Location(
            resolved,
            self._board,
            Pipeline(
                limits,
                storage,
                max_input_bytes,
                secrets=known or None,
                trace_content=trace_content,
            ),
            filesystem=filesystem,
            permissions=rules,
            enabled=tuple(spec.name for spec in specs),
            code_mode=code_mode,
            sandbox=confinement.info,
            tool_budget=tool_budget,
        )
        trust = frozenset(trusted) | {BUILTIN}
        try:
            confining = Confining(confine, trust, network_names(network), secrets=granted)
        except (TypeError, ValueError) as error:
            raise ConfigError(str(error)) from None
        if any(confining.decide(spec.name, self._plugins) == "confined" for spec in specs):
            # Only a plugin that must run confined needs to know whether a sandbox can.
            confining = attrs.evolve(confining, reason=await _confinement_missing())
        activation = Activation(
            self._plugins,
            LocationInfo(resolved),
            location._board,
            services={
                "filesystem": filesystem,
                "permissions": rules,
                "storage": storage,
                "sandbox": confinement,
                "elicit": elicit,
            },
            timeout=self.activation_timeout,
            strict=self.strict,
            confining=confining,
        )
        raised: BaseException | None = None
        # Plugins' background tasks (services.tasks) live in this group, each
        # plugin's in a group of its own, until every plugin's teardown has run.
        # pegboard's log records never show a secret while the Location is open.
        with redacting_logs(known):
            async with anyio.create_task_group() as tasks:
                try:
                    await activation.activate(specs, trust, tasks)
                    location._attach(activation, self._plugins)
                    yield location
                except BaseException as error:  # noqa: BLE001 - re-raised below, unwrapped
                    # Raised outside the task group, so the caller sees its own
                    # exception rather than an ExceptionGroup around it.
                    raised = error
                finally:
                    try:
                        await activation.close()
                    finally:
                        location._close()
                        tasks.cancel_scope.cancel()
        if raised is not None:
            raise raised

    def _enabled(
        self,
        plugins: Sequence[str | Mapping[str, Any]] | None,
        config: LocationConfig,
        root: Path,
    ) -> tuple[PluginSpec, ...]:
        if plugins is not None and not plugins and not config.options:
            return ()  # nothing to look up: no entry-point scan
        installed = self._plugins.names()
        for table in config.options:
            if table not in installed:
                raise ConfigError(
                    f"{config.path}: [{table}] is neither a pegboard setting nor the options "
                    f"of an installed plugin; settings: plugins, tool_output, permissions; "
                    f"installed plugins: {', '.join(installed)}"
                )
        if plugins is not None:
            specs, source = plugin_specs(plugins, source="plugins="), "the host's plugins="
        elif config.plugins is not None:
            specs, source = config.plugins, str(root / "pegboard.toml")
        else:
            specs, source = (PluginSpec(BUILTIN),), "default"
        # A [name] table gives options; options the host or plugin list names win.
        specs = tuple(
            attrs.evolve(spec, options={**config.options.get(spec.name, {}), **spec.options})
            for spec in specs
        )
        for spec in specs:
            if spec.name not in installed:
                raise ConfigError(
                    f"plugin {spec.name!r} (enabled by {source}) is not installed; "
                    f"installed plugins: {', '.join(installed)}"
                )
        return specs


def _root_and_config(root: Path) -> tuple[Path, LocationConfig]:
    """The Location's resolved root and its configuration, read in one worker thread."""
    if not root.is_dir():
        raise NotADirectoryError(f"a Location's root must be a directory: {root}")
    resolved = root.resolve()
    return resolved, LocationConfig.read(resolved)


async def _confinement_missing() -> str | None:
    """Why no sandbox can confine a plugin's worker here, or None while one can."""
    from . import _confining  # looked up here, so a test can stand in for it

    return await anyio.to_thread.run_sync(_confining.confinement_missing)


def _limits(config: LocationConfig, root: Path) -> OutputLimits:
    try:
        return OutputLimits(**config.tool_output)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{root / 'pegboard.toml'}: tool_output: {error}") from None


def _check_code_mode(code_mode: object) -> None:
    # Imported by name: only a host that sets Code Mode limits pays for it.
    codemode = importlib.import_module("pegboard.codemode")
    if not isinstance(code_mode, codemode.CodeModeLimits):
        raise TypeError(
            f"code_mode takes a pegboard.codemode.CodeModeLimits or None, got {code_mode!r}"
        )
