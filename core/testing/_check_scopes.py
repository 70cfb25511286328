"""Checks on a plugin's scopes: activation, teardown, and isolation between Locations."""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread

import pegboard

from ._bench import Bench, CallResult, Opened, describe_error
from ._report import Findings

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


def _teardown_errors(bench: Bench, location: pegboard.Location, findings: Findings) -> None:
    for error in location.plugin_errors:
        if error.plugin == bench.name and error.phase == "teardown":
            findings.problem(
                f"closing a Location, the plugin's teardown failed: {error.message}",
                "the code after the activation hook's single yield must finish without "
                "raising, within the activation timeout; release what activation acquired there",
            )


async def isolation(bench: Bench, findings: Findings) -> None:
    """Two Locations side by side: same tools, and the same calls settle the same way."""
    examples = [example for example in bench.subject.examples if example.deterministic]
    async with bench.open("isolation-first") as first:
        first_names = sorted(first.definitions())
        async with bench.open("isolation-second") as second:
            second_names = sorted(second.definitions())
            in_second = [await bench.call(second, e.tool, e.input) for e in examples]
        # A plugin that kept the second Location's root would now fail in the first.
        await anyio.to_thread.run_sync(shutil.rmtree, second.root)
        in_first = [await bench.call(first, e.tool, e.input) for e in examples]
    if first_names != second_names:
        findings.problem(
            f"two Locations with the same files and options got different tools: "
            f"{first_names} in the first, {second_names} in the second",
            _ISOLATION_FIX,
        )
    mask = _Mask([first, second], bench.storage)
    for index, (example, one, two) in enumerate(zip(examples, in_first, in_second, strict=True)):
        seen_first, seen_second = mask.comparable(one), mask.comparable(two)
        if seen_first != seen_second:
            findings.problem(
                f"example {index + 1} ({example.tool}) settled differently in two Locations: "
                f"{_short(seen_second)} in a Location opened second (then closed and deleted), "
                f"{_short(seen_first)} in the one opened first",
                _ISOLATION_FIX,
            )
    if not examples:
        findings.note("no deterministic examples, so only the tool names were compared")


_ISOLATION_FIX = (
    "keep per-Location state inside activate_location (a closure or an object made there) and "
    "release it at teardown; module globals and attributes of the plugin object are shared by "
    "every Location. If a tool's result varies from call to call, mark its example "
    "deterministic=False"
)


class _Mask:
    """Hides what legitimately differs between Locations: their roots, managed files."""

    def __init__(self, opened: Sequence[Opened], storage: Path) -> None:
        roots = {str(path) for each in opened for path in (each.root, each.location.root)}
        self._roots = re.compile("|".join(re.escape(root) for root in sorted(roots, key=len)[::-1]))
        storage_paths = {str(storage), str(storage.resolve())}
        pattern = "|".join(re.escape(path) for path in storage_paths)
        self._managed = re.compile(rf"(?:{pattern})[/\\][^\s'\"]*")

    def text(self, value: str) -> str:
        return self._roots.sub("<location>", self._managed.sub("<managed file>", value))

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.json(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.json(item) for item in value]
        return value

    def content(self, items: Sequence[pegboard.ContentItem]) -> list[str]:
        return [
            self.text(item.text) if isinstance(item, pegboard.Text) else repr(item)
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
