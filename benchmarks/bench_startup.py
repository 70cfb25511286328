"""Time the ``pegboard`` command's start-up against ``python -c pass``.

Run ``python benchmarks/bench_startup.py`` (``--quick`` for 3 rounds). Each
round runs, one after another in fresh processes, ``python -c pass``,
``pegboard --help`` and ``pegboard tools`` (in an empty folder: the built-in
plugin's six tools), ``pegboard tools`` with ``plugins = []`` in
``pegboard.toml`` (the engine without any plugin), and two floors under any
command that opens a Location: a Python that runs an empty coroutine with
``anyio.run`` (a Location is an async context manager), and one that also
imports the libraries the engine is built on (the floor, against which
``pegboard tools`` is also held). Ratios are taken within each round, so
machine noise hits each contender alike, and the median over rounds is
reported, for wall time and for the child's CPU time (steadier on a busy
machine). It also counts the modules each command imports.

The commands run with bytecode caching on (``PYTHONDONTWRITEBYTECODE``
unset) after one untimed round, as an installed wheel runs from the ``.pyc``
files pip compiled. It prints Markdown and always exits 0; ``--json PATH``
also writes the wall ratios that have a target.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _targets import Reading, add_json_option, within, write

#: The most each command may take, as a multiple of ``python -c pass``.
TARGETS = {"pegboard --help": 3.0, "pegboard tools": 6.0}

#: The most each command may take as a multiple of the floor (`FLOOR`): what any
#: command that opens a Location pays before pegboard's own code runs.
FLOOR_TARGETS = {"pegboard tools": 1.3}


#: An event loop, as every Location needs one: anyio's default backend, asyncio.
LOOP = "import anyio; anyio.run(anyio.sleep, 0)"

#: The engine's libraries that opening any Location imports, and its event loop.
FLOOR = "import attrs, cattrs, anyio, pluggy, jsonschema_rs, orjson; anyio.run(anyio.sleep, 0)"


def pegboard_command() -> list[str]:
    """The installed ``pegboard`` script next to this Python, else ``python -m pegboard``."""
    script = Path(sys.executable).parent / "pegboard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pegboard"]


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run; a failing command stops the benchmark."""
    cpu = child_cpu()
    started = time.perf_counter()
    result = subprocess.run(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {result.stderr.decode(errors='replace')}")
    return wall, child_cpu() - cpu


def modules(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> int:
    """How many modules the command imports (``-X importtime`` lines)."""
    result = subprocess.run(
        argv,
        cwd=cwd,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    return sum(line.startswith("import time:") for line in result.stderr.splitlines()) - 1


def main(arguments: argparse.Namespace) -> None:
    rounds = arguments.rounds or (3 if arguments.quick else 30)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    pegboard = pegboard_command()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch_name:
        scratch = Path(scratch_name)
        builtin, bare = scratch / "builtin", scratch / "bare"
        builtin.mkdir()
        bare.mkdir()
        (bare / "pegboard.toml").write_text("plugins = []\n")
        # Each Location keeps its managed output under this scratch folder.
        env["XDG_CACHE_HOME"] = str(scratch / "cache")
        env["XDG_DATA_HOME"] = str(scratch / "data")
        commands = {
            "python -c pass": ([sys.executable, "-c", "pass"], builtin),
            "pegboard --help": ([*pegboard, "--help"], builtin),
            "pegboard tools": ([*pegboard, "tools"], builtin),
            "pegboard tools, plugins = []": ([*pegboard, "tools"], bare),
            # What any Location costs before pegboard's own code runs: an
            # event loop, then the libraries the engine is built on as well.
            f"python -c '{LOOP}'": ([sys.executable, "-c", LOOP], builtin),
            f"python -c '{FLOOR}'": ([sys.executable, "-c", FLOOR], builtin),
        }
        for argv, cwd in commands.values():  # writes the .pyc files, warms the page cache
            run_once(argv, cwd, env)
        wall: dict[str, list[float]] = {label: [] for label in commands}
        cpu: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(rounds):
            for label, (argv, cwd) in commands.items():
                spent_wall, spent_cpu = run_once(argv, cwd, env)
                wall[label].append(spent_wall)
                cpu[label].append(spent_cpu)
        counts = {label: modules(argv, cwd, env) for label, (argv, cwd) in commands.items()}
    print("# Start-up\n")
    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {rounds} rounds; "
        f"pegboard: {' '.join(pegboard)}.\n"
    )
    print("## Start-up against python -c pass\n")
    print(
        "| command | wall (median) | ratio, wall | CPU (median) | ratio, CPU | modules "
        "| target | status |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = "python -c pass"
    readings = []
    for label in commands:
        ratio = statistics.median(w / b for w, b in zip(wall[label], wall[base], strict=True))
        cpu_ratio = statistics.median(c / b for c, b in zip(cpu[label], cpu[base], strict=True))
        target = TARGETS.get(label)
        met = within(ratio, target)
        status = "-" if met is None else "met" if met else "not met"
        if target is not None:
            readings.append(
                Reading(
                    quantity=f"`{label}` / `{base}`, wall",
                    figure=ratio,
                    unit="x",
                    limit=target,
                    met=met,
                )
            )
        print(
            f"| `{label}` | {statistics.median(wall[label]) * 1000:.1f} ms | {ratio:.2f}x "
            f"| {statistics.median(cpu[label]) * 1000:.1f} ms | {cpu_ratio:.2f}x "
            f"| {counts[label]} | {f'<= {target:g}x' if target else '-'} | {status} |"
        )
    print("\nRatios are medians of the ratio within each round; the status reads the wall ratio.\n")
    floor = f"python -c '{FLOOR}'"
    print("## Over the floor: the engine's libraries and an event loop\n")
    print("| command | ratio, wall | ratio, CPU | target | status |")
    print("| --- | --- | --- | --- | --- |")
    for label, target in FLOOR_TARGETS.items():
        ratio = statistics.median(w / b for w, b in zip(wall[label], wall[floor], strict=True))
        cpu_ratio = statistics.median(c / b for c, b in zip(cpu[label], cpu[floor], strict=True))
        met = within(ratio, target)
        readings.append(
            Reading(
                quantity=f"`{label}` / the floor (libraries and event loop), wall",
                figure=ratio,
                unit="x",
                limit=target,
                met=met,
            )
        )
        print(
            f"| `{label}` | {ratio:.2f}x | {cpu_ratio:.2f}x | <= {target:g}x "
            f"| {'met' if met else 'not met'} |"
        )
    print(f"\nThe floor is `{floor}`, timed in the same rounds.\n")
    write(arguments.json, readings)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 30, 3 with --quick)")
    add_json_option(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    main(parse(sys.argv[1:]))
    sys.exit(0)
