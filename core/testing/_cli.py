"""``pegboard check PLUGIN``: the conformance checks from the command line."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs

from ._checks import check_names, run_subject
from ._conformance import PluginConformance
from ._subject import Example, Subject, load_reference

__all__ = ("run_cli",)

_DESCRIPTION = """\
Check that a pegboard plugin keeps pegboard's laws: activate it in fresh Locations,
inspect its tool definitions, run its example calls, cancel them, feed them invalid
input, close the Locations. Prints one verdict per check, with the fix for each problem.
Exit status: 0 when no check failed, 1 when one did, 2 when the checks could not start.
"""

_PLUGIN_HELP = """\
an installed plugin name (its entry point in the 'pegboard' group), a module or
'module:attribute' naming the plugin object, or 'module:Class' / 'path/to/file.py:Class'
naming a PluginConformance subclass, whose attributes supply everything below"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pegboard check",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("plugin", help=_PLUGIN_HELP)
    parser.add_argument("--options", type=_json_object, help="the plugin's options, as JSON")
    parser.add_argument(
        "--trusted", action="store_true", default=None, help="trust it with trusted services"
    )
    parser.add_argument(
        "--example",
        action="append",
        type=_example,
        metavar="JSON",
        help='an example call, repeatable: {"tool": ..., "input": {...}, "expect": "completed"}',
    )
    parser.add_argument("--files", type=Path, help="a folder every fresh Location starts with")
    parser.add_argument("--timeout", type=float, help="seconds one call may take (default 10)")
    parser.add_argument("--only", action="append", choices=check_names(), help="run this check")
    parser.add_argument(
        "--backend",
        action="append",
        choices=("asyncio", "trio"),
        help="run on this backend (default: asyncio, and trio when it is installed)",
    )
    return parser


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Run ``pegboard check`` with ``argv`` (the words after ``check``).

    Prints a readable report, pass or fail per check with the fix for each
    problem, and returns the exit status: 0 only when no check failed.
    """
    parser = _parser()
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as stop:  # argparse exits on --help and on usage errors
        return stop.code if isinstance(stop.code, int) else 2
    try:
        subject = _subject(arguments)
    except (LookupError, TypeError, ValueError) as error:
        print(f"pegboard check: {error}")
        return 2
    backends = arguments.backend or [
        name for name in ("asyncio", "trio") if name == "asyncio" or _installed(name)
    ]
    passed = True
    with _quiet():
        for backend in backends:
            run = functools.partial(run_subject, subject, only=arguments.only)
            try:
                report = anyio.run(run, backend=backend)
            except (LookupError, ValueError) as error:
                print(f"pegboard check: {error}")
                return 2
            print(f"pegboard check {subject.describe()} on {backend}")
            print(report.format())
            passed = passed and report.passed
    return 0 if passed else 1


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep pegboard's warnings off the terminal: the report already says it all."""
    logger = logging.getLogger("pegboard")
    propagate = logger.propagate
    logger.propagate = False
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _subject(arguments: argparse.Namespace) -> Subject:
    target: object = arguments.plugin
    if ":" in arguments.plugin:
        target = load_reference(arguments.plugin)
    if isinstance(target, type) and issubclass(target, PluginConformance):
        subject = target.subject()
    else:
        subject = Subject(plugin=target)
    changes: dict[str, Any] = {}
    if arguments.options is not None:
        changes["options"] = arguments.options
    if arguments.trusted is not None:
        changes["trusted"] = arguments.trusted
    if arguments.example:
        changes["examples"] = tuple(arguments.example)
    if arguments.files is not None:
        if not arguments.files.is_dir():
            raise ValueError(f"--files {arguments.files}: not a folder")
        changes["files"] = arguments.files
    if arguments.timeout is not None:
        changes["timeout"] = arguments.timeout
    return attrs.evolve(subject, **changes)


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _example(text: str) -> Example:
    value = _json_object(text)
    try:
        return Example(**value)
    except (TypeError, ValueError) as error:
        raise argparse.ArgumentTypeError(f"bad example {text}: {error}") from None


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
