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

from pegboard import _confining

from ._bench import Bench
from ._checks import run_subject
from ._conformance import PluginConformance
from ._inspect import inspect_reference
from ._report import CheckResult
from ._subject import Example, Subject, load_reference, locate

__all__ = ("run_cli", "run_parsed")


def _parser() -> argparse.ArgumentParser:
    from pegboard.cli._check import DESCRIPTION, add_options

    parser = argparse.ArgumentParser(
        prog="pegboard check",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(parser)
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
    return run_parsed(arguments)


def run_parsed(arguments: argparse.Namespace) -> int:
    """`run_cli` for arguments already parsed by ``pegboard check``'s options."""
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
            print(f"pegboard check {subject.describe()} on {backend}", flush=True)
            run = functools.partial(
                run_subject, subject, only=arguments.only, on_result=_Printer(subject.describe())
            )
            try:
                report = anyio.run(run, backend=backend)
            except (LookupError, ValueError) as error:
                print(f"pegboard check: {error}")
                return 2
            print(report.summary(), flush=True)
            passed = passed and report.passed
    return 0 if passed else 1


class _Printer:
    """Prints each verdict as soon as it is known; where the plugin ran, before the first."""

    def __init__(self, plugin: str) -> None:
        self._plugin = plugin
        self._started = False

    def __call__(self, bench: Bench, result: CheckResult) -> None:
        if not self._started:
            self._started = True
            print(f"plugin {self._plugin!r} ran {bench.where}", flush=True)
        print(result.describe(), flush=True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep pegboard's warnings off the terminal: the report already says it all."""
    logger = logging.getLogger("pegboard")
    propagate, handlers = logger.propagate, logger.handlers[:]
    logger.propagate = False
    logger.handlers[:] = [logging.NullHandler()]
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate


def _subject(arguments: argparse.Namespace) -> Subject:
    subject = _named(arguments.plugin, arguments.confine or "auto")
    changes: dict[str, Any] = {}
    if arguments.options is not None:
        changes["options"] = arguments.options
    if arguments.trusted is not None:
        changes["trusted"] = arguments.trusted
    if arguments.confine is not None:
        changes["confine"] = arguments.confine
    if arguments.network is not None:
        changes["network"] = arguments.network
    if arguments.example:
        changes["examples"] = tuple(_example(value) for value in arguments.example)
    if arguments.files is not None:
        files = Path(arguments.files)
        if not files.is_dir():
            raise ValueError(f"--files {files}: not a folder; name a folder to copy")
        changes["files"] = files
    if arguments.timeout is not None:
        changes["timeout"] = arguments.timeout
    if arguments.skip:
        changes["skip"] = {**subject.skip, **dict(arguments.skip)}
    if arguments.expect_failure:
        changes["expected_failures"] = {
            **subject.expected_failures,
            **dict(arguments.expect_failure),
        }
    if arguments.generated is not None:
        changes["generated"] = arguments.generated
    return attrs.evolve(subject, **changes)


def _named(plugin: str, confine: str) -> Subject:
    """The subject ``plugin`` names: a plugin, or a `PluginConformance` subclass's."""
    if ":" not in plugin:
        return Subject(plugin=plugin)
    if confine == "off" or _confining.confinement_missing() is not None:
        target = load_reference(plugin)  # in this process, as the checks will run it
        if isinstance(target, type) and issubclass(target, PluginConformance):
            return target.subject()
        return Subject(plugin=target)
    # Imported in a confined process of its own: this one never runs the plugin's code.
    reference, folder = locate(plugin)
    found = inspect_reference(reference, folder)
    if found is not None:
        return found
    return Subject(plugin=reference, folder=folder)


def _example(value: dict[str, Any]) -> Example:
    try:
        return Example(**value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"--example {json.dumps(value)}: {error}; write "
            '{"tool": NAME, "input": {...}, "expect": "completed"}'
        ) from None


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
