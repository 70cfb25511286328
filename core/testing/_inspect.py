"""What a ``module:attribute`` reference names, found without importing it here.

``pegboard check REFERENCE`` takes a plugin or a `PluginConformance` subclass.
Telling which means importing the module, and a module runs code when imported:
a plugin's, which could exit the checks with success or patch them. So the
import happens in a confined process of its own; what crosses back is the
subclass's settings as JSON, with its plugin as a reference the checks' worker
imports in turn.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from ._subject import Example, Subject

__all__ = ("inspect_reference",)

#: Seconds the confined import may take.
TIMEOUT = 60.0

_CODE = "from pegboard.testing._inspect import _main; _main()"


def inspect_reference(reference: str, folder: str | None) -> Subject | None:
    """The `Subject` a `PluginConformance` subclass named by ``reference`` describes,
    or None when ``reference`` names something else (a plugin).

    ``folder`` is the ``sys.path`` entry the reference imports from. Raises
    `LookupError` when the reference does not import.
    """
    from pegboard.sandbox import installation, isolated

    extra = [folder] if folder else []
    with isolated(readable=installation(extra)) as confinement:
        reading, writing = os.pipe()
        argv = [sys.executable, "-I", "-c", _CODE, str(writing), reference, *extra]
        try:
            process = subprocess.Popen(
                confinement.command(argv, cwd=Path("/tmp")),
                **confinement.spawn_options(pass_fds=(writing,)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        finally:
            os.close(writing)
        with os.fdopen(reading, "rb") as answers:
            try:
                _, errors = process.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise LookupError(
                    f"{reference!r}: importing it took longer than {TIMEOUT:g} s"
                ) from None
            answer = answers.read()
    try:
        found: dict[str, Any] = json.loads(answer)
    except ValueError:
        last = (errors.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        status = process.returncode
        raise LookupError(
            f"{reference!r} does not import on its own (it exited with status {status}: {last})"
        ) from None
    if "error" in found:
        raise LookupError(f"{reference!r}: {found['error']}")
    if found["kind"] != "conformance":
        return None
    return _subject(found["settings"])


def _subject(settings: Mapping[str, Any]) -> Subject:
    values = dict(settings)
    values["examples"] = tuple(Example(**example) for example in values["examples"])
    files = values["files"]
    if isinstance(files, dict):
        values["files"] = {
            path: base64.b64decode(content["bytes"]) if isinstance(content, dict) else content
            for path, content in files.items()
        }
    return Subject(**values)


# --- in the confined process ---------------------------------------------------------


def _main() -> None:
    writing, reference, *path = sys.argv[1:]
    answers = os.fdopen(int(writing), "w", encoding="utf-8")
    os.dup2(2, 1)  # what the module prints goes to standard error, not into the answer
    sys.path[:0] = path
    try:
        answer = _describe(reference, path[0] if path else None)
    except Exception as error:  # noqa: BLE001 - reported to the checks, which say so
        answer = {"error": f"{type(error).__name__}: {error}"}
    answers.write(json.dumps(answer))
    answers.close()


def _describe(reference: str, folder: str | None) -> dict[str, Any]:
    import importlib

    from ._conformance import PluginConformance
    from ._subject import reference_to

    module, _, attribute = reference.partition(":")
    target: object = importlib.import_module(module)
    for part in filter(None, attribute.split(".")):
        target = getattr(target, part)
    if not (isinstance(target, type) and issubclass(target, PluginConformance)):
        return {"kind": "plugin"}
    subject = target.subject()
    plugin = subject.plugin
    plugin_folder: str | None = folder
    if not isinstance(plugin, str):
        named = reference_to(plugin)
        if named is None:
            raise TypeError(
                f"{target.__name__}.plugin is an object the checks cannot import by name; "
                "set it to 'module:attribute' (or define the object at module level)"
            )
        plugin, plugin_folder = named
    files: object = subject.files
    if isinstance(files, Mapping):
        files = {
            path: {"bytes": base64.b64encode(content).decode()}
            if isinstance(content, bytes)
            else content
            for path, content in files.items()
        }
    elif isinstance(files, str | os.PathLike):
        files = os.fspath(files)
    settings = {
        "plugin": plugin,
        "folder": plugin_folder,
        "name": subject.name,
        "options": dict(subject.options),
        "trusted": subject.trusted,
        "examples": [attrs.asdict(example) for example in subject.examples],
        "files": files,
        "timeout": subject.timeout,
        "skip": dict(subject.skip),
        "expected_failures": dict(subject.expected_failures),
        "generated": subject.generated,
        "blocking_threshold": subject.blocking_threshold,
        "import_threshold": subject.import_threshold,
        "confine": subject.confine,
        "network": subject.network,
    }
    return {"kind": "conformance", "settings": settings}
