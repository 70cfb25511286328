"""The plugin under test: where it comes from, its options and its example calls."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs
import importlib_metadata

from pegboard._confined import ConfineMode

if TYPE_CHECKING:
    from pegboard import Host

_MODES = typing.get_args(ConfineMode)

__all__ = (
    "Example",
    "Expectation",
    "Files",
    "Installed",
    "Subject",
    "load_reference",
    "locate",
    "reference_to",
    "seed_files",
)

#: How an example call is expected to settle.
Expectation: TypeAlias = Literal["completed", "tool_failure", "invalid_input"]
#: Files to put in every fresh Location: relative path to content, or a folder to copy.
Files: TypeAlias = Mapping[str, str | bytes] | str | os.PathLike[str] | None

_EXPECTATIONS: tuple[str, ...] = typing.get_args(Expectation)


def _expectation(_: object, __: attrs.Attribute[str], value: object) -> None:
    if value not in _EXPECTATIONS:
        raise ValueError(f"expect must be one of {', '.join(_EXPECTATIONS)}; got {value!r}")


@attrs.frozen(kw_only=True)
class Example:
    """One example call of a plugin's tool and how it should settle.

    ``tool`` is the advertised (effective) name, ``input`` the raw JSON text or
    mapping a model would send, ``expect`` the outcome: ``"completed"``,
    ``"tool_failure"`` or ``"invalid_input"``. ``deterministic=False`` marks a
    call whose result changes from run to run (time, randomness), so the
    isolation check does not compare it between Locations.
    """

    tool: str
    input: Mapping[str, Any] | str = attrs.field(factory=dict)
    expect: Expectation = attrs.field(default="completed", validator=_expectation)
    deterministic: bool = True


def _examples(value: object) -> tuple[Example, ...]:
    """``examples``, checked: a tuple (or list) of `Example`, said plainly when it is not."""
    if isinstance(value, Example):
        raise TypeError(
            "examples must be a tuple of Example, got one Example: write "
            "examples = (Example(...),) with the trailing comma"
        )
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise TypeError(
            f"examples must be a tuple of Example, got {type(value).__name__}: write "
            "examples = (Example(tool=..., input={...}),)"
        )
    found = tuple(value)
    for index, item in enumerate(found, 1):
        if not isinstance(item, Example):
            raise TypeError(
                f"examples[{index - 1}] is a {type(item).__name__}, not an Example: write "
                "Example(tool=..., input={...})"
            )
    return found


@attrs.frozen(kw_only=True)
class Subject:
    """Everything the checks need to know about the plugin under test.

    ``plugin`` is an installed plugin name, a ``module`` or ``module:attribute``
    reference (``path/to/file.py:attribute`` works too), or the plugin object
    itself; ``name`` is what an object is installed as.
    """

    plugin: object
    name: str | None = None
    options: Mapping[str, Any] = attrs.field(factory=dict)
    trusted: bool = False
    examples: tuple[Example, ...] = attrs.field(default=(), converter=_examples)
    files: Files = None
    timeout: float = 10.0
    #: Tools the checks do not call, each with the reason a reader of the report sees.
    skip: Mapping[str, str] = attrs.field(factory=dict)
    #: Tools expected to fail on every generated input, each with the reason (they need
    #: a service or credential the checks cannot give).
    expected_failures: Mapping[str, str] = attrs.field(factory=dict)
    #: How many inputs the generated check draws from each tool's input schema.
    generated: int = 25
    #: Seconds the event loop may go without running other tasks (the blocking check).
    blocking_threshold: float = 0.1
    #: Seconds importing the plugin's module may take (the blocking check).
    import_threshold: float = 1.0
    #: Where the plugin runs, as a host would run it: ``"auto"`` confined in a
    #: sandboxed worker unless trusted (in process where no sandbox can confine it,
    #: and the report says so), ``"required"`` confined or not at all, ``"off"`` in
    #: the checks' own process.
    confine: ConfineMode = attrs.field(default="auto", validator=attrs.validators.in_(_MODES))
    #: Whether the host grants the plugin the network (``host.location(network=[...])``).
    network: bool = False
    #: The ``sys.path`` entry a ``module:attribute`` ``plugin`` imports from, when
    #: it is not installed (found where it is, when not given).
    folder: str | None = None

    def install(self, host: Host) -> Installed:
        """Make the plugin available on ``host``: the name to enable, and whether it
        can run confined (why not, when it cannot)."""
        plugin = self.plugin
        if isinstance(plugin, str):
            if plugin in {info.name for info in host.plugins()}:
                return Installed(plugin, None)
            named_by_path = plugin.partition(":")[0].endswith(".py")
            reference, folder = (
                (plugin, self.folder) if self.folder and not named_by_path else locate(plugin)
            )
            name = self.name or _default_name_of_reference(reference)
            if self.trusted or self.confine == "off":
                if self.folder and self.folder not in sys.path:
                    sys.path.append(self.folder)
                host.add_plugin(name, load_reference(plugin))
            else:
                host._plugins.add(name, reference, folder=folder)
            return Installed(name, None)
        name = self.name or _default_name(plugin)
        found = None if self.trusted or self.confine == "off" else reference_to(plugin)
        if found is None:
            host.add_plugin(name, plugin)
            return Installed(
                name,
                "it was given as an object the checks cannot import by name; name it as "
                "'module:attribute' to check it confined",
            )
        host._plugins.add(name, found[0], folder=found[1])
        return Installed(name, None)

    def describe(self) -> str:
        """A short name for reports."""
        if self.name:
            return self.name
        return self.plugin if isinstance(self.plugin, str) else _default_name(self.plugin)

    def hook_object(self) -> object | None:
        """The plugin object, to see which hooks it implements; ``None`` if unknown."""
        plugin = self.plugin
        if not isinstance(plugin, str):
            return plugin
        if plugin == "builtin":
            return importlib.import_module("pegboard.plugins_builtin")
        # The contract fixes the entry-point group: "pegboard".
        for point in importlib_metadata.entry_points(group="pegboard", name=plugin):
            loaded: object = point.load()
            return loaded
        return load_reference(plugin)


@attrs.frozen
class Installed:
    """The name the plugin under test is installed as; ``unnamed`` says why it
    runs in the checks' process although it could otherwise be confined."""

    name: str
    unnamed: str | None


def locate(reference: str) -> tuple[str, str | None]:
    """A ``module[:attribute]`` or ``file.py:attribute`` reference as an entry
    point's value and the folder it imports from."""
    where, _, attribute = reference.partition(":")
    if not where.endswith(".py"):
        try:
            found = importlib.util.find_spec(where.partition(".")[0]) if where else None
        except (ImportError, ValueError):
            found = None
        if found is None or not all(part.isidentifier() for part in where.split(".")):
            raise LookupError(
                f"{reference!r} is neither an installed plugin nor an importable module; "
                "name an installed plugin, 'package.module', 'package.module:attribute' or "
                "'path/to/file.py:attribute'"
            )
        from pegboard._plugins import _module_folder

        return reference, _module_folder(where)
    path = Path(where).resolve()
    if not path.is_file():
        raise LookupError(f"{reference!r}: there is no file {where!r}")
    if not path.stem.isidentifier():
        raise LookupError(
            f"{reference!r}: {path.name!r} is not an importable module name; rename the file"
        )
    value = f"{path.stem}:{attribute}" if attribute else path.stem
    return value, str(path.parent)


def _default_name_of_reference(reference: str) -> str:
    where, _, attribute = reference.partition(":")
    return re.sub(r"[^A-Za-z0-9_-]", "-", (attribute or where).rsplit(".", 1)[-1])


def reference_to(plugin: object) -> tuple[str, str | None] | None:
    """An importable reference to ``plugin`` and its folder, if it has one."""
    if isinstance(plugin, types.ModuleType):
        module, attribute = plugin.__name__, ""
    else:
        module = getattr(plugin, "__module__", None) or type(plugin).__module__
        owner = sys.modules.get(module)
        attribute = (
            next(
                (
                    key
                    for key, value in vars(owner).items()
                    if value is plugin and key.isidentifier()
                ),
                "",
            )
            if owner is not None
            else ""
        )
        if not attribute:
            return None
    if module == "__main__" or module.startswith("_pegboard_check_"):
        return None
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.has_location:
        return None
    from pegboard._plugins import _module_folder

    try:
        folder = _module_folder(module)
    except ValueError:
        return None
    return (f"{module}:{attribute}" if attribute else module), folder


def _default_name(plugin: object) -> str:
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return re.sub(r"[^A-Za-z0-9_-]", "-", str(name).rsplit(".", 1)[-1])


def load_reference(reference: str) -> object:
    """Import what ``module``, ``module:attribute`` or ``file.py:attribute`` names.

    Raises ``LookupError`` with what to write instead when nothing matches.
    """
    where, _, attribute = reference.partition(":")
    try:
        if where.endswith(".py"):
            module = _import_file(Path(where))
        else:
            module = importlib.import_module(where)
    except (ImportError, OSError) as error:
        raise LookupError(
            f"{reference!r} is neither an installed plugin nor an importable module "
            f"({type(error).__name__}: {error}); name an installed plugin, "
            "'package.module', 'package.module:attribute' or 'path/to/file.py:attribute'"
        ) from error
    target: object = module
    for part in filter(None, attribute.split(".")):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise LookupError(f"{where!r} has no attribute {attribute!r}") from None
    return target


def _import_file(path: Path) -> object:
    name = f"_pegboard_check_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as a normal import does, so dataclass-like
    # machinery that looks the module up by name works.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_files(root: Path, files: Files) -> None:
    """Create ``root`` holding ``files``: a mapping of relative paths, or a folder to copy."""
    root.mkdir(parents=True, exist_ok=True)
    if files is None:
        return
    if not isinstance(files, Mapping):
        shutil.copytree(os.fspath(files), root, dirs_exist_ok=True)
        return
    for relative, content in files.items():
        path = root / relative
        if not path.resolve().is_relative_to(root.resolve()):
            raise ValueError(f"files: {relative!r} is outside the Location; use a relative path")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
