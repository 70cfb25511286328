"""Time the built-in grep, glob, bash and read tools against grep, find, cat and sed.

Run ``python benchmarks/bench_builtin.py`` (``--quick`` for a 2,000-file,
20 MB tree, 20 MB of output and a 10 MB file to read). It generates a tree of
20,000 files / 200 MB (``--root`` keeps it in a folder of your choice for
reuse), then times, round robin so machine noise hits each alike and through
the whole call pipeline:

* ``grep`` against ``rg -n`` (the same binary, reading the same files) and
  ``grep -rn``, for a rare literal, a common literal, a regular expression and a
  case-insensitive literal;
* ``glob`` against ``rg --files`` and ``find -name``;
* ``bash`` printing 200 MB against ``cat`` to a file (and through a pipe to a
  file), with the Python heap's peak during the call;
* ``read`` of one page at 90% of a 100 MB text file against ``sed -n 'A,Bp'``
  printing the same lines (and ``sed -n 'A,Bp;Bq'``, which stops after them).

It prints Markdown tables with medians and ratios, and always exits 0;
``--json PATH`` also writes the read target (so needs ``--only read`` or the
whole run). Wall times on a busy machine drift; the CPU columns (this
process, or the child) are steadier.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
from _targets import Reading, add_json_option, within, write

import pegboard
from pegboard.plugins_builtin._ripgrep import binary

CONTEXT = pegboard.ToolContext(session_id="s", agent="bench", message_id="m", call_id="c")
ALLOW_ALL = [{"action": "*", "resource": "*", "effect": "allow"}]
WORDS = [
    *("def", "class", "return", "import", "self", "value", "result", "config", "data"),
    *("items", "index", "parser", "token", "buffer", "stream", "handler", "request"),
    *("response", "error", "status", "count", "offset", "length", "name", "path"),
]
#: (label, pattern for the tool, grep arguments, ripgrep arguments)
SEARCHES = (
    ("rare literal", "needle_marker", ["-F", "needle_marker"], ["-F", "needle_marker"]),
    ("common literal", "handler42", ["-F", "handler42"], ["-F", "handler42"]),
    ("regex", r"def \w+_\d+\(", ["-E", r"def \w+_[0-9]+\("], [r"def \w+_\d+\("]),
    (
        "(?i) literal",
        "(?i)NEEDLE_MARKER",
        ["-i", "-F", "needle_marker"],
        ["-i", "-F", "needle_marker"],
    ),
)


def generate(root: Path, files: int, total_bytes: int) -> None:
    """A code-like tree: 20 packages of 10 modules, a .gitignore, a few ignored files."""
    rng = random.Random(7)
    pool = []
    for index in range(20_000):
        indent = "    " * rng.randint(0, 3)
        if index % 50 == 0:
            pool.append(f"{indent}def {rng.choice(WORDS)}_{rng.randint(0, 99)}(self, value):\n")
            continue
        words = (
            rng.choice(WORDS) + (str(rng.randint(0, 99)) if rng.random() < 0.2 else "")
            for _ in range(rng.randint(2, 14))
        )
        pool.append(indent + " ".join(words) + "\n")
    blob = "".join(pool).encode()
    size = total_bytes // files
    root.mkdir(parents=True, exist_ok=True)
    (root / ".gitignore").write_text("*.log\nbuild/\n__pycache__/\n")
    for index in range(files):
        folder = root / f"pkg{index % 20:02d}" / f"mod{(index // 20) % 10}"
        if index % 100 == 0:
            folder = folder / "build"
        folder.mkdir(parents=True, exist_ok=True)
        start = blob.index(b"\n", rng.randrange(0, len(blob) - size * 2)) + 1
        end = blob.index(b"\n", start + rng.randint(size // 2, size * 3 // 2)) + 1
        body = blob[start:end] + (b"    needle_marker = 42\n" if index % 997 == 0 else b"")
        suffix = ".log" if index % 100 == 1 else ".py"
        (folder / f"file{index:05d}{suffix}").write_bytes(body)


def write_lines(path: Path, size: int) -> None:
    """``size`` bytes of 37-byte text lines."""
    block = b"0123456789abcdefghijklmnopqrstuvwxyz\n" * (1 << 15)
    with path.open("wb") as file:
        for start in range(0, size, len(block)):
            file.write(block[: size - start])


def tree_size(root: Path) -> tuple[int, int]:
    count = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            count += 1
            size += os.path.getsize(os.path.join(folder, name))
    return count, size


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timer:
    """Runs contenders round robin; keeps each one's wall and CPU seconds."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    async def run(
        self,
        contenders: Sequence[tuple[str, Callable[[], Awaitable[object]], bool]],
        rounds: int,
        after: Callable[[object], Awaitable[None]] | None = None,
    ) -> None:
        """Time each contender ``rounds`` times; ``after`` cleans up each result, untimed."""
        for _ in range(rounds):
            for label, job, in_child in contenders:
                # Tools that run a child (grep and glob run rg) pay its CPU too.
                cpu = child_cpu() + (0.0 if in_child else time.process_time())
                started = time.perf_counter()
                result = await job()
                self.wall.setdefault(label, []).append(time.perf_counter() - started)
                spent = child_cpu() + (0.0 if in_child else time.process_time()) - cpu
                self.cpu.setdefault(label, []).append(spent)
                if after is not None:
                    await after(result)

    def median(self, label: str) -> tuple[float, float]:
        return statistics.median(self.wall[label]), statistics.median(self.cpu[label])


def command(*argv: str | os.PathLike[str]) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        return await anyio.run_process(list(argv), check=False)

    return run


def shell(line: str) -> Callable[[], Awaitable[object]]:
    return command("/bin/sh", "-c", line)


def tool(request: pegboard.Request, name: str, **input: object) -> Callable[[], Awaitable[object]]:
    async def run() -> object:
        outcome = await request.execute(pegboard.ToolCall(name, input, CONTEXT))
        if not isinstance(outcome, pegboard.Completed):
            raise RuntimeError(f"{name} failed: {outcome}")
        return outcome

    return run


def row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def table(timer: Timer, pairs: Sequence[tuple[str, str]], heading: str) -> None:
    print(
        row(
            [
                heading,
                "pegboard wall",
                "baseline wall",
                "ratio",
                "pegboard CPU",
                "baseline CPU",
                "CPU ratio",
            ]
        )
    )
    print(row(["---"] * 7))
    for ours, theirs in pairs:
        wall, cpu = timer.median(ours)
        base_wall, base_cpu = timer.median(theirs)
        print(
            row(
                [
                    f"{ours} vs {theirs}",
                    f"{wall * 1000:.0f} ms",
                    f"{base_wall * 1000:.0f} ms",
                    f"{wall / base_wall:.2f}x",
                    f"{cpu * 1000:.0f} ms",
                    f"{base_cpu * 1000:.0f} ms",
                    f"{cpu / base_cpu:.2f}x" if base_cpu else "n/a",
                ]
            )
        )
    print()


async def bench_bash(location: pegboard.Location, scratch: Path, size: int, rounds: int) -> None:
    # Inside the Location: the sandbox gives each command a /tmp of its own.
    source = location.root / ".bench-bash-output.txt"
    try:
        await _bench_bash(location, source, scratch, size, rounds)
    finally:
        source.unlink(missing_ok=True)


async def _bench_bash(
    location: pegboard.Location, source: Path, scratch: Path, size: int, rounds: int
) -> None:
    await anyio.to_thread.run_sync(write_lines, source, size)
    # Flushed first, so no contender pays for writing the source back to disk.
    await anyio.to_thread.run_sync(os.sync)
    request = location.prepare()
    copy = scratch / "copy.txt"

    async def remove_spool(result: object) -> None:
        # Spools left behind would load the page cache for the next rounds;
        # the baselines overwrite one file.
        if isinstance(result, pegboard.Completed) and result.metadata:
            await anyio.Path(result.metadata["spool"]).unlink(missing_ok=True)

    contenders = [
        ("bash tool", tool(request, "bash", command=f"cat {source}"), False),
        ("cat > file", shell(f"cat {source} > {copy}"), True),
        ("cat, pipe, cat > file", shell(f"cat {source} | cat > {copy}"), True),
    ]
    # The first writes of a few hundred MB into new files cost the kernel
    # more than later ones: one untimed round first, for everyone.
    await Timer().run(contenders, 1, after=remove_spool)
    timer = Timer()
    await timer.run(contenders, rounds, after=remove_spool)
    tracemalloc.start()
    outcome = await tool(request, "bash", command=f"cat {source}")()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert isinstance(outcome, pegboard.Completed)
    assert outcome.metadata is not None
    megabytes = size / 1e6
    print(f"## bash printing {megabytes:,.0f} MB\n")
    table(timer, [("bash tool", "cat > file"), ("bash tool", "cat, pipe, cat > file")], "command")
    wall, _ = timer.median("bash tool")
    print(
        f"Throughput: bash tool {megabytes / wall:,.0f} MB/s, cat > file "
        f"{megabytes / timer.median('cat > file')[0]:,.0f} MB/s. Python heap peak during the call "
        f"(tracemalloc): {peak / (1 << 20):.1f} MiB; the process's peak RSS so far: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB. The result kept "
        f"{outcome.metadata['kept_bytes']:,} bytes in memory, spooled "
        f"{outcome.metadata['spooled_bytes']:,}, lost {outcome.metadata['lost_bytes']:,}.\n"
    )
    for path in (source, copy, Path(outcome.metadata["spool"])):
        await anyio.Path(path).unlink(missing_ok=True)


async def bench_search(location: pegboard.Location, root: Path, rounds: int) -> None:
    request = location.prepare()
    # The same rg the tools run, with the options that make it read the same
    # files (.gitignore without a git repository, hidden files, no .git).
    ripgrep = binary()
    same_files = ["--no-require-git", "--hidden", "--glob=!.git"]
    timer = Timer()
    contenders: list[tuple[str, Callable[[], Awaitable[object]], bool]] = []
    pairs: list[tuple[str, str]] = []
    for label, pattern, grep_arguments, rg_arguments in SEARCHES:
        contenders.append((f"grep {label}", tool(request, "grep", pattern=pattern), False))
        contenders.append(
            (f"rg -n {label}", command(ripgrep, "-n", *same_files, *rg_arguments, root), True)
        )
        contenders.append(
            (f"grep -rn {label}", command("grep", "-rn", *grep_arguments, root), True)
        )
        pairs.append((f"grep {label}", f"rg -n {label}"))
        pairs.append((f"grep {label}", f"grep -rn {label}"))
    contenders.append(("glob **/*.py", tool(request, "glob", pattern="**/*.py"), False))
    contenders.append(
        ("rg --files", command(ripgrep, "--files", *same_files, "-g", "*.py", root), True)
    )
    contenders.append(("find -name", command("find", root, "-type", "f", "-name", "*.py"), True))
    pairs.append(("glob **/*.py", "rg --files"))
    pairs.append(("glob **/*.py", "find -name"))
    # One untimed round warms the page cache for everyone.
    await timer.run(contenders, 1)
    timer = Timer()
    await timer.run(contenders, rounds)
    print("## grep and glob\n")
    print(f"rg: {ripgrep} (the ripgrep package's binary, which the tools run)\n")
    table(timer, pairs, "search")
    against_rg = [
        timer.median(f"grep {label}")[0] / timer.median(f"rg -n {label}")[0]
        for label, *_ in SEARCHES
    ]
    against_grep = [
        timer.median(f"grep {label}")[0] / timer.median(f"grep -rn {label}")[0]
        for label, *_ in SEARCHES
    ]
    print(
        f"grep tool against rg -n: {min(against_rg):.2f}-{max(against_rg):.2f}x wall "
        f"(target <= 1.2x); against grep -rn: {min(against_grep):.2f}-{max(against_grep):.2f}x "
        "(target <= 1x).\n"
    )
    sample = await tool(request, "grep", pattern="handler42")()
    assert isinstance(sample, pegboard.Completed)
    assert sample.metadata is not None
    print(
        f"The tool found {sample.metadata['matches']:,} lines for 'handler42' in "
        f"{sample.metadata['files']:,} files (.gitignore leaves some out; grep -rn reads "
        "them all).\n"
    )


async def bench_big_gitignore(host: pegboard.Host, scratch: Path, rounds: int) -> None:
    """A 3 MB .gitignore (120,000 rules) over a small tree, at the root and above a folder."""
    root = scratch / "ignored-tree"
    (root / "sub").mkdir(parents=True)
    rules = "".join(f"generated/file{index:07d}.txt\n" for index in range(120_000))
    (root / ".gitignore").write_text(rules + "ignored.txt\n")
    for index in range(200):
        (root / "sub" / f"f{index}.txt").write_text("needle\n" if index % 10 == 0 else "hay\n")
    size = (root / ".gitignore").stat().st_size
    async with host.location(root, permissions=ALLOW_ALL, storage=scratch / "s2") as location:
        request = location.prepare()
        contenders = [
            ("grep at the root", tool(request, "grep", pattern="needle"), False),
            ("grep in sub/", tool(request, "grep", pattern="needle", path="sub"), False),
            ("rg -n", command(binary(), "-n", "--no-require-git", "needle", root), True),
        ]
        await Timer().run(contenders, 1)
        timer = Timer()
        await timer.run(contenders, rounds)
    print(f"## grep with a {size / 1e6:.1f} MB .gitignore (200 files)\n")
    table(timer, [("grep at the root", "rg -n"), ("grep in sub/", "rg -n")], "search")


def write_text_file(path: Path, size: int) -> int:
    """About ``size`` bytes of code-like lines of 2 to 14 words; returns the line count."""
    rng = random.Random(11)
    pool = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 14))) + "\n" for _ in range(10_000)
    ]
    chunk = "".join(pool).encode()
    lines = 0
    with path.open("wb") as file:
        for _ in range(max(1, size // len(chunk))):
            file.write(chunk)
            lines += len(pool)
    return lines


#: The most the read tool may take for a page deep in a large file, as a multiple of sed -n.
READ_TARGET = 1.5


async def bench_read(host: pegboard.Host, scratch: Path, size: int, rounds: int) -> Reading:
    folder = scratch / "read"
    folder.mkdir()
    path = folder / "big.txt"
    total = await anyio.to_thread.run_sync(write_text_file, path, size)
    await anyio.to_thread.run_sync(os.sync)
    offset = total * 9 // 10
    async with host.location(
        folder, plugins=["builtin"], permissions=ALLOW_ALL, storage=scratch / "s3"
    ) as location:
        request = location.prepare()
        sample = await tool(request, "read", path="big.txt", offset=offset)()
        assert isinstance(sample, pegboard.Completed)
        assert sample.metadata is not None
        last = offset + sample.metadata["lines"] - 1
        contenders = [
            ("read tool", tool(request, "read", path="big.txt", offset=offset), False),
            ("sed -n 'A,Bp'", command("sed", "-n", f"{offset},{last}p", path), True),
            ("sed -n 'A,Bp;Bq'", command("sed", "-n", f"{offset},{last}p;{last}q", path), True),
        ]
        # One untimed round reads the file into the page cache for everyone.
        await Timer().run(contenders, 1)
        timer = Timer()
        await timer.run(contenders, rounds)
    print(
        f"## read of lines {offset:,}-{last:,} in a {path.stat().st_size / 1e6:,.0f} MB file "
        f"of {total:,} lines\n"
    )
    table(timer, [("read tool", "sed -n 'A,Bp'"), ("read tool", "sed -n 'A,Bp;Bq'")], "page")
    ratio = timer.median("read tool")[0] / timer.median("sed -n 'A,Bp'")[0]
    met = within(ratio, READ_TARGET)
    print(
        f"read tool against sed -n 'A,Bp': {ratio:.2f}x wall (target <= {READ_TARGET:g}x): "
        f"{'met' if met else 'not met'}.\n"
    )
    path.unlink()
    megabytes = f"{size / 1e6:,.0f} MB"
    return Reading(
        quantity=f"read of a page at 90% of a {megabytes} file / sed -n 'A,Bp', wall",
        figure=ratio,
        unit="x",
        limit=READ_TARGET,
        met=met,
    )


async def main(arguments: argparse.Namespace) -> None:
    files, size = (2_000, 20_000_000) if arguments.quick else (20_000, 200_000_000)
    rounds = arguments.rounds or (2 if arguments.quick else 5)
    with tempfile.TemporaryDirectory(prefix="bench-builtin-") as scratch_name:
        scratch = Path(scratch_name)
        print("# Built-in tools\n")
        print(
            f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; backend "
            f"{arguments.backend}; medians of {rounds} rounds.\n"
        )
        host = pegboard.Host()
        if arguments.only in (None, "read"):
            read_size = 10_000_000 if arguments.quick else 100_000_000
            write(arguments.json, [await bench_read(host, scratch, read_size, rounds)])
        if arguments.only == "read":
            return
        root = Path(arguments.root) if arguments.root else scratch / "tree"
        if not (root / ".gitignore").exists():
            started = time.perf_counter()
            generate(root, files, size)
            print(f"(generated the tree in {time.perf_counter() - started:.1f} s)\n")
        count, total = tree_size(root)
        print(f"The tree for bash, grep and glob: {count:,} files, {total / 1e6:,.0f} MB.\n")
        storage = scratch / "storage"
        async with host.location(root, permissions=ALLOW_ALL, storage=storage) as location:
            if arguments.only in (None, "bash"):
                await bench_bash(location, scratch, size, rounds)
            if arguments.only in (None, "search"):
                await bench_search(location, root, rounds)
        if arguments.only in (None, "search"):
            await bench_big_gitignore(host, scratch, rounds)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 2,000-file, 20 MB tree")
    parser.add_argument("--root", help="generate (or reuse) the tree here")
    parser.add_argument("--rounds", type=int, help="timed rounds (default 5, 2 with --quick)")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--only", choices=["bash", "read", "search"], help="run one part")
    add_json_option(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = parse(sys.argv[1:])
    anyio.run(main, options, backend=options.backend)
    sys.exit(0)
