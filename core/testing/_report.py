"""Conformance results: what each check found, and the report a person reads."""

from __future__ import annotations

from typing import Literal, TypeAlias

import attrs

__all__ = ("CheckResult", "Findings", "NotJudged", "Problem", "Report", "Status")

Status: TypeAlias = Literal["passed", "failed", "skipped"]

_LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}


@attrs.frozen
class Problem:
    """One way the plugin broke a check's law: what happened and how to fix it."""

    message: str
    fix: str


class NotJudged(Exception):  # noqa: N818 - reads as what happened
    """A check cannot judge the plugin (it did not activate, or has nothing to check)."""


@attrs.define
class Findings:
    """What one check finds while it runs: problems, and notes that are not failures."""

    problems: list[Problem] = attrs.field(factory=list)
    notes: list[str] = attrs.field(factory=list)
    #: Tools no call exercised: the plugin cannot be said to conform.
    unverified: list[str] = attrs.field(factory=list)

    def problem(self, message: str, fix: str) -> None:
        """Record one way the plugin broke the check's law."""
        self.problems.append(Problem(message, fix))

    def note(self, text: str) -> None:
        """Record something worth knowing that is not a failure."""
        self.notes.append(text)


@attrs.frozen(kw_only=True)
class CheckResult:
    """The verdict of one check on one async backend.

    ``law`` is what the check holds the plugin to; a failed check lists its
    ``problems``; a skipped one says why in ``reason`` (it could not judge, for
    example because the plugin did not activate or has nothing to check).
    ``notes`` are things worth knowing that are not failures.
    """

    name: str
    law: str
    backend: str
    status: Status
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()
    reason: str | None = None
    unverified: tuple[str, ...] = ()

    def describe(self) -> str:
        """The verdict as readable lines: a failed check's law and each problem with its fix."""
        lines = [f"{_LABELS[self.status]} {self.name} [{self.backend}]"]
        if self.status == "failed":
            lines.append(f"  law: {self.law}")
        if self.reason:
            lines.append(f"  skipped: {self.reason}")
        for problem in self.problems:
            lines.append(f"  - {problem.message}")
            lines.append(f"    fix: {problem.fix}")
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)


@attrs.frozen
class Report:
    """Every check's verdict on one plugin; ``passed`` when none failed."""

    plugin: str
    results: tuple[CheckResult, ...]
    #: Where the plugin ran: confined in a worker of its own, or in the checks' process.
    where: str = ""

    @property
    def passed(self) -> bool:
        """Whether no check failed (skipped checks do not fail a plugin)."""
        return not self.failed

    @property
    def unverified(self) -> tuple[str, ...]:
        """The tools no example and no generated input exercised (each fails a check)."""
        return tuple(dict.fromkeys(tool for result in self.results for tool in result.unverified))

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        """The checks that failed."""
        return tuple(result for result in self.results if result.status == "failed")

    def format(self) -> str:
        """The whole report: one block per check, then a one-line summary."""
        blocks = [result.describe() for result in self.results]
        if self.where:
            blocks.insert(0, f"plugin {self.plugin!r} ran {self.where}")
        return "\n".join([*blocks, self.summary()])

    def summary(self) -> str:
        """The one-line verdict that ends `format`."""
        counts = dict.fromkeys(_LABELS, 0)
        for result in self.results:
            counts[result.status] += 1
        summary = ", ".join(f"{count} {status}" for status, count in counts.items() if count)
        verdict = "conforms" if self.passed else "does not conform"
        if self.unverified:
            verdict = f"is not verified: {', '.join(self.unverified)} never called; it {verdict}"
        return f"plugin {self.plugin!r} {verdict}: {summary or 'no checks'}"
