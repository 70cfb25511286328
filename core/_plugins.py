"""Installed plugins: entry-point discovery and loading on first use."""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import pluggy

from pegboard import hookspecs

__all__ = (
    "BUILTIN",
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "MANIFEST",
    "MCP",
    "PluginError",
    "PluginInfo",
    "Plugins",
)

logger = logging.getLogger("pegboard")

#: The entry-point group third-party packages declare their plugins in.
ENTRY_POINT_GROUP = "pegboard"
#: The built-in plugin's name; it is registered directly, not through an entry point.
BUILTIN = "builtin"
#: The built-in plugin that mounts MCP servers; it needs the ``mcp`` extra to load.
MCP = "mcp"
#: The built-in plugin that loads tools declared in manifest files.
MANIFEST = "manifest"
#: The module of each built-in plugin.
BUILTIN_MODULES = {
    BUILTIN: "pegboard.plugins_builtin",
    MCP: "pegboard.plugins_builtin.mcp",
    MANIFEST: "pegboard.plugins_builtin.manifest",
}
_HOOKS = ("activate_location", "execute_after", "prepare_request")

Phase = Literal["import", "options", "activation", "teardown", "hook", "background", "worker"]


@attrs.frozen(auto_exc=True)
class PluginError(Exception):
    """A plugin failed: which plugin, in which phase, and what happened.

    Recorded in ``location.plugin_errors``; raised instead in strict mode, and
    raised from ``request.execute`` when an ``execute_after`` hook fails.
    """

    plugin: str
    phase: Phase
    message: str

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} failed ({self.phase}): {self.message}"


@attrs.frozen
class PluginInfo:
    """One installed plugin: where it comes from and whether it loads.

    ``state`` is ``"not loaded"`` until a Location enables it (or
    ``host.plugins(load=True)`` tries), then ``"loaded"`` or ``"failed"``
    with the reason in ``error``.
    """

    name: str
    distribution: str | None
    version: str | None
    state: Literal["not loaded", "loaded", "failed"]
    error: str | None = None
    #: Whether the plugin ran confined, in a sandboxed worker process of its own
    #: (``location.plugin_info``); ``None`` where that is not known
    #: (``host.plugins()``: confinement is decided per Location).
    confined: bool | None = None

    @property
    def loads(self) -> bool | None:
        """Whether the plugin loads; ``None`` while that is not yet known."""
        return None if self.state == "not loaded" else self.state == "loaded"


@attrs.define
class _Entry:
    name: str
    load: Callable[[], object]
    #: Reads the distribution's name and version; only `info` needs them, and
    #: reading a distribution's metadata parses its whole METADATA file.
    read_metadata: Callable[[], tuple[str | None, str | None]] = lambda: (None, None)
    plugin: object = None
    error: PluginError | None = None
    hooks: dict[str, pluggy.HookImpl] = attrs.field(factory=dict)
    #: The entry point's ``module:attr`` value and the folder its distribution is
    #: installed in; None for built-in and in-process plugins.
    source: tuple[str, str | None] | None = None
    #: Whether it loaded in a confined process of its own (``info(load=True)``).
    probed: bool = False
    _metadata: tuple[str | None, str | None] | None = attrs.field(default=None, init=False)

    def metadata(self) -> tuple[str | None, str | None]:
        """The distribution's name and version, read once."""
        if self._metadata is None:
            self._metadata = self.read_metadata()
        return self._metadata


class Plugins:
    """The host's plugins: scanned once, each imported only when first enabled.

    The built-in plugins are known without the scan, and always win over an
    entry point of the same name: a Location that enables only built-in
    plugins reads no installed distribution.
    """

    def __init__(self) -> None:
        self._manager = pluggy.PluginManager(hookspecs.PROJECT)
        self._manager.add_hookspecs(hookspecs)
        self._builtins = {
            name: _Entry(name, _importer(path), _pegboard_metadata)
            for name, path in BUILTIN_MODULES.items()
        }
        self._entries: dict[str, _Entry] | None = None

    def _scan(self) -> dict[str, _Entry]:
        if self._entries is not None:
            return self._entries
        import importlib_metadata  # the scan happens once; so does this import

        entries = dict(self._builtins)
        for point in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
            entry = _Entry(
                point.name,
                point.load,
                functools.partial(_distribution, point),
                source=(point.value, _folder(point)),
            )
            if point.name in entries:
                logger.warning(
                    "ignoring plugin %r from %s: the name is taken by %s",
                    point.name,
                    entry.metadata()[0],
                    entries[point.name].metadata()[0],
                )
                continue
            entries[point.name] = entry
        self._entries = entries
        return entries

    def add(self, name: str, plugin: object, *, folder: str | None = None) -> None:
        """Install ``plugin`` as ``name``: a module or object with hookimpls (in
        process), or a ``module[:attribute]`` reference imported only when enabled,
        as an entry point's value is. ``folder`` is the ``sys.path`` entry the
        reference imports from (found when not given)."""
        entries = self._scan()
        if name in entries:
            raise ValueError(f"a plugin named {name!r} is already installed")
        if not isinstance(plugin, str):
            entries[name] = _Entry(name, lambda: plugin)
            return
        module = plugin.partition(":")[0]
        if not module or not all(part.isidentifier() for part in module.split(".")):
            raise ValueError(
                f"plugin {name!r}: {plugin!r} is not a 'module' or 'module:attribute' reference"
            )
        folder = folder if folder is not None else _module_folder(module)
        load = functools.partial(_load_reference, plugin, folder)
        entries[name] = _Entry(name, load, source=(plugin, folder))

    @classmethod
    def only(cls, name: str, value: str) -> Plugins:
        """Plugins that know one entry point, ``name = value``, and nothing else: a
        confined plugin's worker, which imports nothing but the plugin it runs."""
        import importlib_metadata

        plugins = cls()
        point = importlib_metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)
        plugins._entries = {name: _Entry(name, point.load)}
        return plugins

    def source(self, name: str) -> tuple[str, str | None] | None:
        """Where plugin ``name`` comes from, if from an installed entry point:
        its ``module:attr`` value and its distribution's folder. None for the
        built-in plugins and in-process ones (`pegboard.Host.add_plugin`)."""
        entry = self._find(name)
        return None if entry is None else entry.source

    def info_of(self, name: str, *, confined: bool) -> PluginInfo:
        """The `PluginInfo` of plugin ``name`` as it ran in one Location."""
        entry = self._find(name)
        if entry is None:
            raise KeyError(name)
        distribution, version = entry.metadata()
        if confined:
            state: Literal["not loaded", "loaded", "failed"] = "not loaded"
        else:
            state = "failed" if entry.error else "loaded" if entry.plugin else "not loaded"
        error = None if confined or entry.error is None else entry.error.message
        return PluginInfo(name, distribution, version, state, error, confined=confined)

    def names(self) -> Collection[str]:
        """The names of every installed plugin, the built-in ones first.

        Asking whether a built-in name is among them does not scan; listing them does.
        """
        return _Names(self)

    def _find(self, name: str) -> _Entry | None:
        if self._entries is None and name in self._builtins:
            return self._builtins[name]
        return self._scan().get(name)

    def info(self, *, load: bool = False) -> list[PluginInfo]:
        """One `PluginInfo` per installed plugin; ``load=True`` imports each to find out:
        a plugin from an entry point in a confined process of its own where a sandbox
        works (never in this one), the built-in ones and objects here."""
        entries = list(self._scan().values())
        if load:
            probing = [entry for entry in entries if entry.source is not None]
            if probing and not self._probe(probing):
                probing = []  # no sandbox: in this process, as documented
            for entry in entries:
                if entry not in probing:
                    with contextlib.suppress(PluginError):  # recorded on the entry
                        self.load(entry.name)
        infos = []
        for entry in entries:
            loaded = entry.plugin is not None or entry.probed
            state: Literal["not loaded", "loaded", "failed"] = (
                "failed" if entry.error else "loaded" if loaded else "not loaded"
            )
            error = entry.error.message if entry.error else None
            distribution, version = entry.metadata()
            infos.append(PluginInfo(entry.name, distribution, version, state, error))
        return infos

    def _probe(self, entries: list[_Entry]) -> bool:
        """Load ``entries`` in one confined process; False where no sandbox can confine it."""
        from ._confining import confinement_missing

        if confinement_missing() is not None:
            return False
        from .sandbox import installation, isolated

        sources = [(entry.name, *entry.source) for entry in entries if entry.source]
        folders = [folder for _, _, folder in sources if folder]
        found: dict[str, str | None] = {}
        # A plugin that ends the process is blamed alone and the rest go on, each run
        # in a confinement of its own (bwrap reads its seccomp filter once).
        while sources:
            argv = [sys.executable, "-I", "-c", _PROBE, json.dumps(sources)]
            with isolated(readable=installation(folders)) as confinement:
                try:
                    done = subprocess.run(
                        confinement.command(argv, cwd=Path("/tmp")),
                        **confinement.spawn_options(),
                        capture_output=True,
                        timeout=_PROBE_SECONDS,
                        check=False,
                    )
                    output, why = done.stdout, _last_line(done.stderr)
                except subprocess.TimeoutExpired as expired:
                    output, why = expired.stdout or b"", f"did not load within {_PROBE_SECONDS:g} s"
            found.update(_reports(output))
            sources = [source for source in sources if source[0] not in found]
            if sources:
                found[sources.pop(0)[0]] = f"importing it ended the process: {why}"
        for entry in entries:
            problem = found.get(entry.name)
            if problem is None:
                entry.probed = True
            elif entry.error is None:
                entry.error = PluginError(entry.name, "import", str(problem))
        return True

    def load(self, name: str) -> dict[str, pluggy.HookImpl]:
        """Import and register plugin ``name`` once; return its hook implementations."""
        entry = self._find(name)
        if entry is None:
            raise KeyError(name)
        if entry.error is not None:
            raise entry.error
        if entry.plugin is None:
            try:
                self._register(entry)
            except PluginError as error:
                entry.error = error
                raise
        return entry.hooks

    def options_schema(self, name: str) -> object:
        """The JSON Schema a loaded plugin declares for its options, if any."""
        entry = self._find(name)
        if entry is None:
            raise KeyError(name)
        return getattr(entry.plugin, "options_schema", None)

    def _register(self, entry: _Entry) -> None:
        try:
            plugin = entry.load()
        except (Exception, SystemExit) as error:
            # SystemExit too: a plugin that calls sys.exit() on import fails
            # alone. KeyboardInterrupt is the user's, so it propagates.
            raise PluginError(entry.name, "import", _describe(error)) from error
        if plugin is None:
            raise PluginError(entry.name, "import", "the entry point names None")
        try:
            self._manager.register(plugin, name=entry.name)
        except (ValueError, pluggy.PluginValidationError) as error:
            raise PluginError(entry.name, "import", str(error)) from error
        hooks: dict[str, pluggy.HookImpl] = {}
        for caller in self._manager.get_hookcallers(plugin) or ():
            impl = next(i for i in caller.get_hookimpls() if i.plugin is plugin)
            problem = None
            if caller.name not in _HOOKS:
                problem = (
                    f"it implements {caller.name!r}, which is not a pegboard hook; "
                    f"known hooks: {', '.join(_HOOKS)}"
                )
            elif impl.hookwrapper or impl.wrapper:
                problem = f"its {caller.name!r} is a wrapper; pegboard hooks run in plugin order"
            elif caller.name == "prepare_request" and _not_plain(impl.function):
                problem = (
                    "its 'prepare_request' is a coroutine or generator function, but "
                    "location.prepare() is synchronous and would never run it; make it a "
                    "plain function (def, not async def, no yield)"
                )
            if problem is not None:
                self._manager.unregister(plugin)
                raise PluginError(entry.name, "import", problem)
            hooks[caller.name] = impl
        entry.plugin, entry.hooks = plugin, hooks


class _Names(Collection[str]):
    """`Plugins.names`: membership of a built-in name is answered without the scan."""

    def __init__(self, plugins: Plugins) -> None:
        self._plugins = plugins

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._plugins._find(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._plugins._scan()))

    def __len__(self) -> int:
        return len(self._plugins._scan())


def _not_plain(function: Callable[..., object]) -> bool:
    return (
        inspect.iscoroutinefunction(function)
        or inspect.isasyncgenfunction(function)
        or inspect.isgeneratorfunction(function)
    )


#: Seconds the confined load of every installed plugin may take.
_PROBE_SECONDS = 120.0
#: Loads each plugin named on the command line as a host would, and prints, as the
#: last line, which failed and why (a plugin printing or exiting cannot hide that).
_PROBE = """
import json, os, sys
from pegboard._plugins import PluginError, Plugins
sources = json.loads(sys.argv[1])
out = os.dup(1)
os.dup2(2, 1)
for name, value, folder in sources:
    if folder and folder not in sys.path:
        sys.path.append(folder)
    problem = None
    try:
        Plugins.only(name, value).load(name)
    except PluginError as error:
        problem = error.message
    except (Exception, SystemExit) as error:  # a plugin's sys.exit() fails it alone
        problem = f"{type(error).__name__}: {error}"
    os.write(out, ("\\n" + json.dumps([name, problem]) + "\\n").encode())
"""


def _reports(output: bytes) -> dict[str, str | None]:
    """The probe's ``[name, problem]`` lines, each plugin's as it finished loading."""
    found: dict[str, str | None] = {}
    for line in output.decode(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            match json.loads(line):
                case [str(name), None | str() as problem]:
                    found[name] = problem
    return found


def _last_line(text: bytes) -> str:
    return (text.decode(errors="replace").strip().splitlines() or ["no output"])[-1]


def _importer(module: str) -> Callable[[], object]:
    return functools.partial(importlib.import_module, module)


def _distribution(point: Any) -> tuple[str | None, str | None]:
    # One distribution's broken metadata must not break discovery of the rest.
    dist = point.dist
    if dist is None:
        return None, None
    metadata = dist.metadata
    return metadata.get("Name"), metadata.get("Version")


def _folder(point: Any) -> str | None:
    """The folder holding ``point``'s distribution (a ``sys.path`` entry), if known."""
    dist = point.dist
    try:
        located = dist.locate_file("") if dist is not None else None
    except (AttributeError, NotImplementedError):
        return None
    return None if located is None else str(located)


def _module_folder(module: str) -> str:
    """The ``sys.path`` entry ``module`` would be imported from, found without importing it."""
    import importlib.util

    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise ValueError(f"no module named {top!r} can be imported; install it or fix the name")
    if spec.submodule_search_locations:
        return str(Path(next(iter(spec.submodule_search_locations))).parent)
    if spec.origin is None or not spec.has_location:
        raise ValueError(f"module {top!r} is built in, not a plugin that can be imported")
    return str(Path(spec.origin).parent)


def _load_reference(reference: str, folder: str | None) -> object:
    import sys

    import importlib_metadata

    if folder is not None and folder not in sys.path:
        sys.path.append(folder)
    return importlib_metadata.EntryPoint("", reference, ENTRY_POINT_GROUP).load()


def _pegboard_metadata() -> tuple[str | None, str | None]:
    import importlib_metadata

    try:
        return "pegboard", importlib_metadata.version("pegboard")
    except importlib_metadata.PackageNotFoundError:
        return "pegboard", None


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def call_hook(impl: pluggy.HookImpl, **arguments: Any) -> Any:
    """Call one implementation with the subset of arguments it accepts."""
    return impl.function(*(arguments[name] for name in impl.argnames))
