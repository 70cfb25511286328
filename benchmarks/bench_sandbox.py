"""Time the built-in bash tool in the bubblewrap sandbox against the same call unconfined.

Run ``python benchmarks/bench_sandbox.py`` (``--quick`` for 3 rounds of 3
calls over a 500-file tree). It writes a tree of 5,000 files in 50 folders,
with a ``.env`` and a ``secrets/`` folder, and opens four Locations on it with
the built-in plugin: ``sandbox="off"`` and ``sandbox="required"`` with every
action allowed, and the same two with rules that also deny ``read`` of
``.env`` and ``secrets/*`` (the bash tool then walks the tree before each
command for the paths to mask). Each round times a batch of ``bash`` calls of
``true`` on each, through the whole call pipeline, and, to split the cost,
the processes the tool starts, run with ``subprocess.run`` alone: ``true``,
``bwrap … true`` (the sandbox's own command line for it), the subreaper
running ``bash -c true``, and that inside bwrap. The contenders run round
robin, the order rotated each round, so machine noise hits each alike; a
ratio is the median over rounds of the ratio within a round, beside the
quietest round's.

The target: a sandboxed call costs at most 2x the unconfined one. The deny
rules' walk is shown beside it, with no target. It prints Markdown and
exits 0 whatever the figures (1, saying why, where no sandbox works);
``--json PATH`` also writes the readings.
"""

from __future__ import annotations

import argparse
import contextlib
import operator
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
from _targets import add_json_option, difference, paired, ratio, write
from _timing import Job, time_rounds

import pegboard
from pegboard.plugins_builtin._shell import _DRAIN_SECONDS, _REAPER
from pegboard.sandbox import Mode, detect

CONTEXT = pegboard.ToolContext(session_id="s", agent="bench", message_id="m", call_id="c")
ALLOW_ALL = [{"action": "*", "resource": "*", "effect": "allow"}]
DENY_SECRETS = [
    *ALLOW_ALL,
    {"action": "read", "resource": ".env", "effect": "deny"},
    {"action": "read", "resource": "secrets/*", "effect": "deny"},
]

#: The most a sandboxed ``bash`` call of ``true`` may cost, as a multiple of one unconfined.
TARGET = 2.0

OFF = "bash `true`, sandbox='off'"
ON = "bash `true`, sandbox='required'"
OFF_DENY = "bash `true`, sandbox='off', read of .env and secrets/* denied"
ON_DENY = "bash `true`, sandbox='required', read of .env and secrets/* denied"
TRUE = "`true`"
BWRAP = "`bwrap … true`"
REAPER = "subreaper, `bash -c true`"
BWRAP_REAPER = "`bwrap …` subreaper, `bash -c true`"

#: A tool call (awaited) or a process run with ``subprocess.run`` (blocking, as timed).


def generate(root: Path, files: int) -> None:
    """``files`` small files in 50 folders of two levels, a ``.env`` and ``secrets/``."""
    root.mkdir()
    (root / ".env").write_text("TOKEN=not-a-real-token\n")
    (root / "secrets").mkdir()
    for index in range(10):
        (root / "secrets" / f"key{index}.pem").write_text("not a real key\n")
    for index in range(files):
        folder = root / f"pkg{index % 10}" / f"mod{(index // 10) % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{index:05d}.py").write_text(f"value = {index}\n")


def tool_call(request: pegboard.Request) -> Job:
    call = pegboard.ToolCall("bash", {"command": "true"}, CONTEXT)

    async def run() -> None:
        outcome = await request.execute(call)
        if not isinstance(outcome, pegboard.Completed):
            raise SystemExit(f"bash `true` did not complete: {outcome}")

    return run


@contextlib.contextmanager
def started_as(
    argv: list[str], sandbox: pegboard.Sandbox | None, cwd: Path
) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """The command line and inherited descriptors that run ``argv``, in one call's sandbox.

    A confinement serves one command, as in the tool: bwrap reads its seccomp
    filter from a descriptor, to the end.
    """
    if sandbox is None:
        yield argv, ()
        return
    with sandbox.call() as confinement:
        yield confinement.command(argv, cwd=cwd, init=True), confinement.pass_fds


def process(argv: list[str], sandbox: pegboard.Sandbox | None, cwd: Path) -> Job:
    def run() -> None:
        with started_as(argv, sandbox, cwd) as (command, inherited):
            subprocess.run(
                command, stdin=subprocess.DEVNULL, check=True, env={}, pass_fds=inherited
            )

    return run


def under_reaper(sandbox: pegboard.Sandbox | None, cwd: Path) -> Job:
    """The subreaper running ``bash -c true`` as the tool starts it, in ``sandbox`` if any."""
    bash = ["bash", "-c", "true"]

    def run() -> None:
        reader, writer = os.pipe()
        try:
            reaper = [sys.executable, "-I", "-S", str(_REAPER), "5", f"{_DRAIN_SECONDS:g}"]
            with started_as([*reaper, str(writer), *bash], sandbox, cwd) as (command, inherited):
                subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    check=True,
                    env={},
                    pass_fds=(writer, *inherited),
                )
        finally:
            os.close(reader)
            os.close(writer)

    return run


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e3:.2f} ms"


async def main(arguments: argparse.Namespace) -> None:
    info = detect("required")
    if info.kind is None:
        raise SystemExit(f"bench_sandbox.py times the sandbox, and none works here: {info.reason}")
    rounds = arguments.rounds or (3 if arguments.quick else 15)
    calls = 3 if arguments.quick else 10
    files = 500 if arguments.quick else 5_000
    host = pegboard.Host()
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-") as scratch_name:
        scratch = Path(scratch_name)
        root = scratch / "tree"
        generate(root, files)
        count = sum(len(names) for _, _, names in os.walk(root))

        def location(
            name: str, sandbox: Mode, rules: list[dict[str, str]]
        ) -> contextlib.AbstractAsyncContextManager[pegboard.Location]:
            return host.location(
                root,
                plugins=["builtin"],
                storage=scratch / name,
                permissions=rules,
                sandbox=sandbox,
            )

        sandbox = pegboard.Sandbox("required", root=root)
        async with (
            location("off", "off", ALLOW_ALL) as off,
            location("on", "required", ALLOW_ALL) as on,
            location("off-deny", "off", DENY_SECRETS) as off_deny,
            location("on-deny", "required", DENY_SECRETS) as on_deny,
        ):
            contenders = {
                OFF: tool_call(off.prepare()),
                ON: tool_call(on.prepare()),
                OFF_DENY: tool_call(off_deny.prepare()),
                ON_DENY: tool_call(on_deny.prepare()),
                TRUE: process(["true"], None, root),
                BWRAP: process(["true"], sandbox, root),
                REAPER: under_reaper(None, root),
                BWRAP_REAPER: under_reaper(sandbox, root),
            }
            # One untimed round: imports, the page cache, the first walk.
            await time_rounds(contenders, 1, 1)
            samples = await time_rounds(contenders, rounds, calls)
    print("# The bash tool in the sandbox\n")
    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {info.describe()}; "
        f"{rounds} rounds of {calls} calls each; the tree holds {count:,} files.\n"
    )
    print("## Per call, medians over rounds\n")
    print("| contender | per call | / bash `true`, sandbox='off' |")
    print("| --- | --- | --- |")
    for label, figures in samples.items():
        against = paired(figures, samples[OFF], operator.truediv)
        print(f"| {label} | {ms(figures)} | {against:.2f}x |")
    target = ratio(f"{ON} / sandbox='off', wall", samples[ON], samples[OFF], TARGET)
    denied = ratio(
        f"{ON_DENY}, {count:,} files / sandbox='off', wall", samples[ON_DENY], samples[OFF], None
    )
    walk = difference(
        f"{ON_DENY}, {count:,} files - no rule denying, per call",
        samples[ON_DENY],
        samples[ON],
        scale=1e3,
        unit="ms",
    )
    added = difference(f"{ON} - sandbox='off'", samples[ON], samples[OFF], scale=1e3, unit="ms")
    bwrap_alone = difference(
        f"{BWRAP} - {TRUE}", samples[BWRAP], samples[TRUE], scale=1e3, unit="ms"
    )
    print("\n## Against the target\n")
    print("| quantity | median | quietest round | limit | verdict |")
    print("| --- | --- | --- | --- | --- |")
    for reading in (target, denied, walk, added, bwrap_alone):
        unit = "x" if reading.unit == "x" else f" {reading.unit}"
        limit = "-" if reading.limit is None else f"{reading.limit:g}x"
        verdict = "-" if reading.met is None else "met" if reading.met else "not met"
        print(
            f"| {reading.quantity} | {reading.figure:.2f}{unit} "
            f"| {reading.quietest:.2f}{unit} | {limit} | {verdict} |"
        )
    print(
        "\nThe sandbox's own cost is bwrap's (new namespaces, the mounts of the policy); "
        "the denied paths add the walk of the tree that finds them, before each command.\n"
    )
    write(arguments.json, [target, denied, walk])


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="3 rounds of 3 calls over a 500-file tree"
    )
    parser.add_argument("--rounds", type=int, help="timed rounds (default 15, 3 with --quick)")
    add_json_option(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse(sys.argv[1:]))
    sys.exit(0)
