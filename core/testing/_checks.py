"""Every conformance check, the law it holds, and running them on a plugin."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import attrs

from pegboard._confined import ConfineMode

from . import (
    _check_blocking,
    _check_calls,
    _check_cancellation,
    _check_definitions,
    _check_generated,
    _check_hooks,
    _check_scopes,
    _check_side_effects,
)
from ._bench import Bench, describe_error
from ._report import CheckResult, Findings, NotJudged, Report, Status
from ._subject import Example, Files, Subject
from ._watchdog import watching

__all__ = ("CHECKS", "Check", "check", "check_names", "run_checks", "run_subject")


@attrs.frozen
class Check:
    """One conformance check: its name, the law it holds a plugin to, and its code."""

    name: str
    law: str
    run: Callable[[Bench, Findings], Awaitable[None]]


#: The checks, in the order they run and report.
CHECKS: tuple[Check, ...] = (
    Check(
        "activation",
        "activating the plugin registers at least one tool, through the Tools it is handed "
        "for that Location",
        _check_scopes.activation,
    ),
    Check(
        "definitions",
        "every tool definition has a name every provider accepts, a non-empty description "
        "of at most 1,024 characters, and input and output schemas that pass the JSON Schema "
        "2020-12 meta-schema; two activations get the same definitions",
        _check_definitions.definitions,
    ),
    Check(
        "examples",
        "every example settles as expected; a completed call has output valid against the "
        "output schema and canonical, non-empty content (laws 2 and 3: codec boundary, "
        "canonical representation)",
        _check_calls.examples,
    ),
    Check(
        "generated",
        "every tool settles on every input its input schema accepts: it completes with valid "
        "output and content or raises pegboard.ToolFailure, and no tool goes unexercised "
        "(laws 2 and 3: codec boundary, canonical representation)",
        _check_generated.generated,
    ),
    Check(
        "metadata",
        "metadata is a JSON object within its size bound and never a copy of the output "
        "(law 4: metadata opt-in)",
        _check_calls.metadata,
    ),
    Check(
        "teardown",
        "closing a Location runs the plugin's teardown and removes every tool registered for "
        "it (law 6: scoped registration)",
        _check_scopes.teardown,
    ),
    Check(
        "isolation",
        "two Locations with the plugin share no state: each gets the same tools and settles "
        "the same calls the same way",
        _check_scopes.isolation,
    ),
    Check(
        "cancellation",
        "a call cancelled while its tool awaits yields no outcome: the cancellation "
        "propagates through the tool's cleanup",
        _check_cancellation.cancellation,
    ),
    Check(
        "invalid_input",
        "input the tool's input schema refuses never reaches the tool (law 2: codec boundary)",
        _check_calls.invalid_input,
    ),
    Check(
        "side_effects",
        "the plugin leaves its process as it found it and reaches only what it was given: "
        "no writes outside its temporary directory, no connections without a network "
        "grant, no environment beyond the allow-list, nothing printed to standard output, "
        "the working directory unchanged, no progress after a call settled, and no thread, "
        "task or file descriptor left after teardown",
        _check_side_effects.side_effects,
    ),
    Check(
        "hooks",
        "execute_after hooks return a valid pegboard.Completed, a pegboard.Failed or None and "
        "never raise; prepare_request hooks never raise",
        _check_hooks.hooks,
    ),
    Check(
        "blocking",
        "the plugin never blocks the event loop: its activation, hooks, tools and teardown "
        "each leave it free within the blocking threshold (100 ms by default), in every call "
        "the checks make, and its module imports within the import threshold (1 s by "
        "default)",
        _check_blocking.blocking,
    ),
)


def check_names() -> tuple[str, ...]:
    """The names of every check, in order."""
    return tuple(each.name for each in CHECKS)


async def run_checks(
    plugin: object,
    *,
    name: str | None = None,
    options: Mapping[str, Any] | None = None,
    trusted: bool = False,
    examples: Iterable[Example] = (),
    files: Files = None,
    timeout: float = 10.0,  # noqa: ASYNC109 - bounds each call, not this function
    skip: Mapping[str, str] | None = None,
    expected_failures: Mapping[str, str] | None = None,
    generated: int = 25,
    blocking_threshold: float = 0.1,
    import_threshold: float = 1.0,
    confine: ConfineMode = "auto",
    network: bool = False,
    only: Iterable[str] | None = None,
    directory: str | os.PathLike[str] | None = None,
) -> Report:
    """Run the conformance checks on ``plugin`` in the running event loop.

    ``plugin`` is an installed plugin name, a ``module[:attribute]`` or
    ``file.py:attribute`` reference, or the plugin object (installed as
    ``name``). ``options`` go to the plugin as a host would give them;
    ``trusted`` grants it the trusted services; ``examples`` are calls of its
    tools; ``files`` seed every fresh Location (a mapping of relative paths to
    content, or a folder to copy); ``timeout`` bounds each call and activation.
    ``skip`` maps tools the checks must not call to the reason why;
    ``expected_failures`` maps tools expected to fail on every generated input to
    the reason (a tool that fails on every input otherwise fails);
    ``generated`` is how many inputs to draw from each tool's input schema;
    ``blocking_threshold`` and ``import_threshold`` are the seconds the event loop
    may stay blocked and the plugin's import may take. ``confine`` is where the
    plugin runs: ``"auto"`` confined in a sandboxed worker unless trusted, as hosts
    run it (in this process where no sandbox can confine it; the report says which),
    ``"required"`` confined or not at all, ``"off"`` in this process; ``network``
    grants it the network, as ``host.location(network=[...])`` does.
    ``only`` selects checks by name; ``directory`` is where Locations are made
    (default: a temporary folder, removed afterwards).
    """
    subject = Subject(
        plugin=plugin,
        name=name,
        options=dict(options or {}),
        trusted=trusted,
        examples=examples,  # checked by Subject
        files=files,
        timeout=timeout,
        skip=dict(skip or {}),
        expected_failures=dict(expected_failures or {}),
        generated=generated,
        blocking_threshold=blocking_threshold,
        import_threshold=import_threshold,
        confine=confine,
        network=network,
    )
    return await run_subject(subject, only=only, directory=directory)


async def run_subject(
    subject: Subject,
    *,
    only: Iterable[str] | None = None,
    directory: str | os.PathLike[str] | None = None,
    on_result: Callable[[Bench, CheckResult], None] | None = None,
) -> Report:
    """`run_checks` for a ready `Subject`; ``on_result`` hears each verdict as it is known."""
    selected = _select(only)
    if directory is not None:
        return await _run(subject, selected, Path(directory), on_result)
    made = Path(await anyio.to_thread.run_sync(_temporary_directory))
    try:
        return await _run(subject, selected, made, on_result)
    finally:
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, made, ignore_errors=True))


def check(
    plugin: object,
    *,
    backend: str = "asyncio",
    **settings: Any,
) -> Report:
    """Run the conformance checks on ``plugin`` in a new event loop; see `run_checks`.

    ``backend`` is ``"asyncio"`` or ``"trio"``.
    """
    return anyio.run(functools.partial(run_checks, plugin, **settings), backend=backend)


def _select(only: Iterable[str] | None) -> tuple[Check, ...]:
    if only is None:
        return CHECKS
    wanted = set(only)
    unknown = wanted - set(check_names())
    if unknown:
        raise ValueError(
            f"no check named {', '.join(sorted(unknown))}; checks: {', '.join(check_names())}"
        )
    return tuple(each for each in CHECKS if each.name in wanted)


async def _run(
    subject: Subject,
    selected: tuple[Check, ...],
    directory: Path,
    on_result: Callable[[Bench, CheckResult], None] | None,
) -> Report:
    bench = Bench(subject, directory)
    backend = _backend()
    results: list[CheckResult] = []
    # With the blocking check among them, every call of every check is watched.
    watched = (
        watching(subject.blocking_threshold)
        if any(each.name == "blocking" for each in selected)
        else contextlib.nullcontext(None)
    )
    async with watched as dog:
        bench.dog = dog
        await _each(bench, selected, backend, results, on_result)
    return Report(subject.describe(), tuple(results), bench.where)


async def _each(
    bench: Bench,
    selected: tuple[Check, ...],
    backend: str,
    results: list[CheckResult],
    on_result: Callable[[Bench, CheckResult], None] | None,
) -> None:
    for each in selected:
        findings = Findings()
        reason = None
        try:
            await each.run(bench, findings)
        except NotJudged as skipped:
            reason = str(skipped)
        except Exception as error:  # noqa: BLE001 - a check that cannot run is a failed check
            findings.problem(
                f"the check could not run: {describe_error(error)}",
                "fix the error above; it comes from the plugin or from the check's settings",
            )
        status: Status = "failed" if findings.problems else "skipped" if reason else "passed"
        result = CheckResult(
            name=each.name,
            law=each.law,
            backend=backend,
            status=status,
            problems=tuple(findings.problems),
            notes=tuple(findings.notes),
            reason=reason,
            unverified=tuple(findings.unverified),
        )
        results.append(result)
        if on_result is not None:
            on_result(bench, result)


def _temporary_directory() -> str:
    return tempfile.mkdtemp(prefix="pegboard-check-")


def _backend() -> str:
    # anyio runs on asyncio or trio; only asyncio has a running loop here.
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "trio"
    return "asyncio"
