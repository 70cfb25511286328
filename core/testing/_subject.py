"""The plugin under test: where it comes from, its options and its example calls."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs
import importlib_metadata

if TYPE_CHECKING:
    from pegboard import Host

__all__ = ("Example", "Expectation", "Files", "Subject", "load_reference", "seed_files")

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
    examples: tuple[Example, ...] = ()
    files: Files = None
    timeout: float = 10.0
    #: Tools the checks do not call, each with the reason a reader of the report sees.
    skip: Mapping[str, str] = attrs.field(factory=dict)
    #: How many inputs the generated check draws from each tool's input schema.
    generated: int = 25
    #: Seconds the event loop may go without running other tasks (the blocking check).
    blocking_threshold: float = 0.1
    #: Seconds importing the plugin's module may take (the blocking check).
    import_threshold: float = 1.0

    def install(self, host: Host) -> str:
        """Make the plugin available on ``host``; return the name to enable."""
        plugin = self.plugin
        if isinstance(plugin, str):
            if plugin in {info.name for info in host.plugins()}:
                return plugin
            plugin = load_reference(plugin)
        name = self.name or _default_name(plugin)
        host.add_plugin(name, plugin)
        return name

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
