"""Checks on a plugin's scopes: activation, teardown, and isolation between Locations."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs

import pegboard

from ._bench import Bench, CallResult, Opened, describe_error
from ._report import Findings
from ._subject import Example

__all__ = ("activation", "isolation", "teardown")

_SETUP_FIXES = {
    "import": "make the entry point name an importable module or object whose hooks are "
    "marked @pegboard.hookimpl (and spelled as the hook specifications spell them)",
    "options": "give options that fit the plugin's options_schema, or fix the options_schema",
    "activation": "activate_location must finish without raising, within the activation "
    "timeout; build tools and call tools.register(...) there",
}


def _setup_fix(phase: str, problem: str) -> str:
    """The fix for a plugin that did not load or activate, by what the error says."""
    if "wrapper" in problem:
        return (
            "remove wrapper=True / hookwrapper=True from @pegboard.hookimpl: pegboard runs each "
            "hook once per plugin, in the Location's plugin order"
        )
    if "not a pegboard hook" in problem:
        return "spell each hook as pegboard.hookspecs does: " + ", ".join(_HOOK_NAMES)
    if "prepare_request" in problem and ("async" in problem or "coroutine" in problem):
        return (
            "make prepare_request a plain def: it runs synchronously for every request and "
            "only removes definitions from the list it is given"
        )
    return _SETUP_FIXES.get(phase, "implement activate_location and register tools there")


_HOOK_NAMES = ("activate_location", "execute_after", "prepare_request")


async def activation(bench: Bench, findings: Findings) -> None:
    """A fresh Location, one opened after it closed, and one opened beside another."""
    async with bench.open("activation-1", require_active=False) as first:
        if not _activated(bench, first, "a fresh Location", findings):
            return
    async with bench.open("activation-2", require_active=False) as second:
        if not _activated(bench, second, "a Location opened after another closed", findings):
            return
        async with bench.open("activation-3", require_active=False) as third:
            _activated(bench, third, "a Location opened while another is open", findings)


def _activated(bench: Bench, opened: Opened, where: str, findings: Findings) -> bool:
    problem = bench.setup_error(opened.location)
    if problem is not None:
        phase = problem.partition(":")[0]
        fix = _setup_fix(phase, problem)
        if "ServiceDenied" in problem:
            fix = (
                "the plugin uses trusted services: check it as trusted (trusted = True, or "
                "pegboard check --trusted) and tell hosts to trust it"
            )
        elif "RegistrationError" in problem and "is closed" in problem:
            fix = (
                "register through the Tools each activation receives; one kept from an earlier "
                "Location dies with it"
            )
        findings.problem(f"in {where} the plugin did not activate ({problem})", fix)
        return False
    if not opened.definitions():
        findings.problem(
            f"in {where} the plugin registered no tools",
            "call tools.register({...}) in activate_location with the Tools it receives for "
            "that Location; a Tools kept from an earlier Location registers there, not here",
        )
        return False
    return True


async def teardown(bench: Bench, findings: Findings) -> None:
    """Close one Location while a witness stays open: nothing of it may remain."""
    running = _running_tasks()
    async with bench.open("teardown-witness") as witness:
        before = sorted(witness.definitions())
        async with bench.open("teardown-closed") as closed:
            pass
        _teardown_errors(bench, closed.location, findings)
        after = sorted(witness.definitions())
        if after != before:
            findings.problem(
                "after a Location closed, tools its activation registered remain in another "
                f"open Location: it went from {before} to {after}",
                "register only through the Tools handed to activate_location for that "
                "Location; never keep a Tools or Registration from one Location to use in another",
            )
    _teardown_errors(bench, witness.location, findings)
    left = _running_tasks() - running
    if left:
        names = ", ".join(sorted(_task_name(task) for task in left))
        for task in left:
            task.cancel()  # the kit's own clean-up: they outlived every Location
        findings.problem(
            f"after its Locations closed, the plugin left {len(left)} background task(s) "
            f"running: {names}",
            "start background work with services.tasks.start_soon(...), which the Location "
            "cancels when it closes, never with asyncio.create_task or a task group of its own "
            "that outlives the activation",
        )


def _running_tasks() -> set[Any]:
    """The asyncio tasks not yet done (none under trio, where asyncio cannot run tasks)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return set()
    return {task for task in asyncio.all_tasks() if not task.done()}


def _task_name(task: Any) -> str:
    coroutine = task.get_coro()
    return str(getattr(coroutine, "__qualname__", None) or task.get_name())


def _teardown_errors(bench: Bench, location: pegboard.Location, findings: Findings) -> None:
    for error in location.plugin_errors:
        if error.plugin == bench.name and error.phase == "teardown":
            findings.problem(
                f"closing a Location, the plugin's teardown failed: {error.message}",
                "the code after the activation hook's single yield must finish without "
                "raising, within the activation timeout; release what activation acquired there",
            )


async def isolation(bench: Bench, findings: Findings) -> None:
    """Two Locations side by side, in both orders: same tools, and each call settles the
    same way in either, before and after the other one closes and its folder is deleted.
    """
    examples = [example for example in bench.subject.examples if example.deterministic]
    generated = not examples
    if generated:  # no example to compare: each tool's simplest input, if it repeats
        examples = await _generated_examples(bench, findings)
    for order, scenario in (
        ("the later one", _later_closes_first),
        ("the earlier one", _earlier_closes_first),
    ):
        run = await scenario(bench, examples)
        if run.names[0] != run.names[1]:
            findings.problem(
                f"two Locations with the same files and options got different tools: "
                f"{run.names[0]} in the first, {run.names[1]} in the second",
                _ISOLATION_FIX,
            )
            return
        mask = _Mask(run.opened, bench.storage)
        for index, example in enumerate(examples):
            seen = [mask.comparable(result[index]) for result in (run.kept, run.other, run.after)]
            where = f"example {index + 1} ({example.tool})"
            if seen[0] != seen[1]:
                findings.problem(
                    f"{where} settled differently in two Locations open side by side: "
                    f"{_short(seen[1])} in one, {_short(seen[0])} in the other",
                    _ISOLATION_FIX,
                )
            elif seen[0] != seen[2]:
                findings.problem(
                    f"{where} settled differently in a Location once another one ({order} "
                    f"of the two) closed and its folder was deleted: {_short(seen[0])} before, "
                    f"{_short(seen[2])} after",
                    _ISOLATION_FIX,
                )
        if findings.problems:
            return
    if not examples:
        findings.note("no deterministic examples, so only the tool names were compared")
    elif generated:
        tools = ", ".join(example.tool for example in examples)
        findings.note(f"no deterministic examples: compared each tool's simplest input ({tools})")


async def _generated_examples(bench: Bench, findings: Findings) -> list[Example]:
    """The simplest input of each tool whose result repeats within one Location.

    A result that changes from call to call (a counter, a random pick) proves
    nothing about two Locations, so that tool is left out, and the report says so.
    """
    from ._check_generated import simplest_input

    found: list[Example] = []
    # A tool with an example has been described by its author: deterministic or not.
    described = {example.tool for example in bench.subject.examples}
    async with bench.open("isolation-inputs") as opened:
        mask = _Mask((opened,), bench.storage)
        for name, definition in sorted(opened.tools().items()):
            if name in bench.subject.skip or name in described:
                continue
            value = await anyio.to_thread.run_sync(simplest_input, definition)
            if value is None:
                continue
            first, second = [
                mask.comparable(await bench.call(opened, name, value)) for _ in range(2)
            ]
            if first == second:
                found.append(Example(tool=name, input=value))
            else:
                findings.note(
                    f"tool {name!r} was not compared between Locations: its result changes "
                    "from call to call; give it a deterministic example"
                )
    return found


@attrs.frozen
class _Side:
    """One isolation scenario: the tools of both Locations and the calls in each."""

    opened: tuple[Opened, Opened]
    names: tuple[list[str], list[str]]
    #: The examples in the Location that stays open, in the other one, and in the first
    #: again after the other closed.
    kept: list[CallResult]
    other: list[CallResult]
    after: list[CallResult]


async def _later_closes_first(bench: Bench, examples: Sequence[Any]) -> _Side:
    async with bench.open("isolation-a") as first:
        async with bench.open("isolation-b") as second:
            names = (sorted(first.definitions()), sorted(second.definitions()))
            kept = await _calls(bench, first, examples)
            other = await _calls(bench, second, examples)
        after = await _calls(bench, first, examples)
    return _Side((first, second), names, kept, other, after)


async def _earlier_closes_first(bench: Bench, examples: Sequence[Any]) -> _Side:
    # A Location closes in the task that opened it: the earlier one lives in a task
    # of its own so that it can close while the later one stays open.
    release, gone = anyio.Event(), anyio.Event()
    raised: Exception | None = None
    async with anyio.create_task_group() as group:
        held = await group.start(_held, bench, "isolation-c", release, gone)
        try:
            if isinstance(held, Exception):
                raise held
            async with bench.open("isolation-d") as second:
                names = (sorted(held.definitions()), sorted(second.definitions()))
                kept = await _calls(bench, second, examples)
                other = await _calls(bench, held, examples)
                release.set()
                await gone.wait()
                after = await _calls(bench, second, examples)
        except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
            raised = error
        finally:
            release.set()
    if raised is not None:
        raise raised
    return _Side((held, second), names, kept, other, after)


async def _held(
    bench: Bench,
    label: str,
    release: anyio.Event,
    gone: anyio.Event,
    *,
    task_status: anyio.abc.TaskStatus[Opened | Exception],
) -> None:
    started = False
    try:
        async with bench.open(label) as opened:
            task_status.started(opened)
            started = True
            await release.wait()
    except Exception as error:
        if started:
            raise
        task_status.started(error)
    finally:
        gone.set()


async def _calls(bench: Bench, opened: Opened, examples: Sequence[Any]) -> list[CallResult]:
    return [await bench.call(opened, example.tool, example.input) for example in examples]


_ISOLATION_FIX = (
    "keep per-Location state inside activate_location (a closure or an object made there) and "
    "release it at teardown; module globals and attributes of the plugin object are shared by "
    "every Location. If a tool's result varies from call to call for another reason (random "
    "choices, live data; times and UUIDs are already ignored), mark its example "
    "deterministic=False"
)


#: Times and random identifiers differ from call to call in any plugin (a clock tool):
#: they are not evidence of state shared between Locations.
_MOMENT = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"
)
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b")


class _Mask:
    """Hides what legitimately differs between Locations: their roots, managed files."""

    def __init__(self, opened: Sequence[Opened], storage: Path) -> None:
        roots = {str(path) for each in opened for path in (each.root, each.location.root)}
        self._roots = re.compile("|".join(re.escape(root) for root in sorted(roots, key=len)[::-1]))
        storage_paths = {str(storage), str(storage.resolve())}
        pattern = "|".join(re.escape(path) for path in storage_paths)
        self._managed = re.compile(rf"(?:{pattern})[/\\][^\s'\"]*")

    def text(self, value: str) -> str:
        value = self._roots.sub("<location>", self._managed.sub("<managed file>", value))
        return _MOMENT.sub("<time>", _UUID.sub("<uuid>", value))

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(item) for item in value]
        return value

    def content(self, items: Sequence[pegboard.ContentItem]) -> list[str]:
        # Every item is masked: a link or a resource names files of its own Location.
        return [
            self.text(item.text if isinstance(item, pegboard.Text) else repr(item))
            for item in items
        ]

    def comparable(self, result: CallResult) -> tuple[Any, ...]:
        outcome = result.own
        if outcome is None:
            error = result.error
            return ("raised", self.text(describe_error(error)) if error else "nothing")
        # Metadata is left out: it is for the host's UI and may hold timings.
        if isinstance(outcome, pegboard.Completed):
            return ("completed", self.json(outcome.output), self.content(outcome.content))
        return (
            "failed",
            outcome.error.kind,
            self.text(outcome.error.message),
            self.content(outcome.partial),
        )


def _short(value: object, limit: int = 240) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}…"
