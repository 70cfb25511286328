"""Run every benchmark that holds a performance target and print one table of the targets.

Run ``python benchmarks/bench_targets.py`` (``--quick`` for a smoke run,
``--only NAME`` for one part, ``--keep DIR`` to keep each script's JSON and
Markdown). Each part runs its script in a child process with this Python, one
after another, with ``--json``; the table is read from those files, one row
per target (and the peers shown beside them), with the median, the quietest
round where the script has one, the limit, the script's verdict and the
command that measured it. It exits 0 whatever the verdicts (it reports, it
does not assert) and 1, saying which script and why, when a script fails.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import attrs
from _targets import Reading, load

HERE = Path(__file__).resolve().parent


@attrs.frozen
class Part:
    """One script run: its arguments, and those it adds with or without ``--quick``."""

    name: str
    script: str
    arguments: tuple[str, ...] = ()
    quick: tuple[str, ...] = ()
    full: tuple[str, ...] = ()

    def argv(self, folder: Path, quick: bool, json: Path) -> list[str]:
        extra = ("--quick", *self.quick) if quick else self.full
        script = str(folder / self.script)
        return [sys.executable, script, *self.arguments, *extra, "--json", str(json)]


#: The parts, in the order of the targets they measure.
PARTS = (
    Part("calls", "bench_calls.py", ("--only", "calls")),
    Part("construction", "bench_construction.py"),
    Part("scale", "bench_scale.py"),
    Part("bounding", "bench_calls.py", ("--only", "bounding")),
    Part("storage", "bench_storage.py"),
    Part(
        "read",
        "bench_builtin.py",
        ("--only", "read"),
        quick=("--rounds", "1"),
        full=("--rounds", "9"),
    ),
    Part("startup", "bench_startup.py"),
    Part("sandbox", "bench_sandbox.py"),
    Part("confined", "bench_confined.py"),
    Part("journal", "bench_journal.py"),
)


class ScriptError(Exception):
    """A benchmark script exited with an error or wrote no readable targets."""


@attrs.frozen
class Measured:
    part: Part
    readings: list[Reading]
    seconds: float


def measure(part: Part, folder: Path, scratch: Path, *, quick: bool) -> Measured:
    """Run ``part``'s script; its readings, or ScriptError saying which script and why."""
    json, markdown = scratch / f"{part.name}.json", scratch / f"{part.name}.md"
    argv = part.argv(folder, quick, json)
    shown = " ".join([Path(argv[1]).name, *argv[2:-2]])
    print(f"running {shown} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    markdown.write_text(result.stdout, encoding="utf-8")
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-15:])
        raise ScriptError(
            f"{shown} failed with exit status {result.returncode} after {seconds:.1f} s; "
            f"the end of its error output:\n{tail}"
        )
    try:
        readings = load(json)
    except ValueError as error:
        raise ScriptError(f"{shown} exited 0 but wrote no readable targets: {error}") from None
    print(f"  done in {seconds:.1f} s", file=sys.stderr, flush=True)
    return Measured(part, readings, seconds)


def show(value: float | None, unit: str) -> str:
    """Three decimals below one, so small ratios keep a digit; two above."""
    if value is None:
        return "-"
    number = f"{value:,.3f}" if abs(value) < 1 else f"{value:,.2f}"
    return f"{number}x" if unit == "x" else f"{number} {unit}"


def verdict(met: bool | None) -> str:
    if met is None:
        return "context"
    return "**met**" if met else "**not met**"


def row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def target_table(measured: Sequence[Measured]) -> list[str]:
    header = ("target", "median", "quietest", "limit", "verdict", "command")
    lines = [row(header), "| --- | ---: | ---: | ---: | --- | --- |"]
    for done in measured:
        for reading in done.readings:
            lines.append(
                row(
                    (
                        reading.quantity,
                        show(reading.figure, reading.unit),
                        show(reading.quietest, reading.unit),
                        show(reading.limit, reading.unit),
                        verdict(reading.met),
                        f"`{reading.command}`",
                    )
                )
            )
    return lines


def load_average() -> str:
    if not hasattr(os, "getloadavg"):
        return "unknown"
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def commit() -> str:
    """The checked-out commit, marked when the work tree has changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=HERE,
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" (with uncommitted changes)" if status.stdout.strip() else "")


def cpus() -> str:
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    count = os.cpu_count()
    if available is None or available == count:
        return str(count)
    return f"{count} ({available} available to this process)"


def report(
    measured: Sequence[Measured], facts: list[tuple[str, str]], quick: bool, seconds: float
) -> str:
    readings = [reading for done in measured for reading in done.readings]
    targets = [reading for reading in readings if reading.met is not None]
    missed = [reading.quantity for reading in targets if not reading.met]
    lines = [f"## Performance targets ({'quick' if quick else 'full'} run)", ""]
    lines += [row(("fact", "value")), "| --- | --- |", *(row(fact) for fact in facts)]
    lines += ["", "## Against the targets", ""]
    lines += target_table(measured)
    lines += [
        "",
        f"{len(targets) - len(missed)} of {len(targets)} targets met "
        f"(the verdict reads the median; rows without a limit are shown for context).",
    ]
    if missed:
        lines += ["", "Not met:", "", *(f"- {quantity}" for quantity in missed)]
    parts = ", ".join(f"{done.part.name} {done.seconds:.0f} s" for done in measured)
    lines += ["", f"Total time {seconds:.0f} s ({parts})."]
    return "\n".join(lines)


def main(argv: Sequence[str], parts: Sequence[Part] = PARTS, folder: Path = HERE) -> int:
    arguments = parse(argv, [part.name for part in parts])
    chosen = [part for part in parts if arguments.only in (None, part.name)]
    facts = [
        ("date (UTC)", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")),
        ("commit", commit()),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("platform", platform.platform()),
        ("CPUs", cpus()),
        ("load average (1 / 5 / 15 min) before", load_average()),
    ]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as scratch_name:
        scratch = Path(arguments.keep) if arguments.keep else Path(scratch_name)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            measured = [measure(part, folder, scratch, quick=arguments.quick) for part in chosen]
        except ScriptError as error:
            print(f"bench_targets.py: {error}", file=sys.stderr)
            return 1
    facts.append(("load average (1 / 5 / 15 min) after", load_average()))
    print(report(measured, facts, arguments.quick, time.perf_counter() - started))
    return 0


def parse(argv: Sequence[str], names: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script")
    parser.add_argument("--only", choices=names, help="run one part")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep each script's JSON and Markdown output in DIR"
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
