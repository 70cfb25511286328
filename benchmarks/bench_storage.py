"""Managed storage: what opening a Location costs when its storage holds many files.

Run from the repository root::

    .venv/bin/python benchmarks/bench_storage.py [--quick]

Opening a Location prunes its own area of managed storage, reading each
file's age from its name (no stat per file), never listing other
Locations' areas, and listing its own at most once per 1/64 of the retention
by any process (its ``.pruned`` stamp says when it last was). Timed:
opening a Location (no plugins) with an empty storage, with 50,000 files in
other Locations' areas, with 50,000 current files in its own area (the
first open lists them; later opens do not, in this process or in a new
one, as a command run again is), and once with 50,000 expired files in its
own area (that open deletes them all). The empty storage, the other
Locations' files and the later opens over its own files are timed round
robin, so machine noise hits each alike, and held to the empty storage's
cost (the median of the ratios within each round, at most 1.5x: the noise of
a few milliseconds); so is the first open in a new process, each timed
inside a fresh interpreter against one over the empty storage. ``--json
PATH`` also writes those ratios against their target.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from _targets import add_json_option, ratio, write

import pegboard


def fill(directory: Path, count: int, *, age: datetime.timedelta) -> None:
    """Write ``count`` managed-looking files whose names are ``age`` old."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() - age.total_seconds()))
    for index in range(count):
        name = f"tool-output-{stamp}-{index:016x}.txt"
        os.close(os.open(directory / name, os.O_WRONLY | os.O_CREAT, 0o600))


async def open_once(root: Path, storage: Path) -> float:
    start = time.perf_counter()
    async with pegboard.Host().location(root, plugins=[], storage=storage):
        pass
    return time.perf_counter() - start


#: Opens a Location in a fresh interpreter and prints how long the opening took.
CHILD = """
import sys, time, anyio, pegboard

async def main():
    start = time.perf_counter()
    async with pegboard.Host().location(sys.argv[1], plugins=[], storage=sys.argv[2]):
        pass
    print(time.perf_counter() - start)

anyio.run(main)
"""


async def open_in_a_new_process(root: Path, storage: Path) -> float:
    """The first open in a new process, as each run of a ``pegboard`` command makes."""
    result = await anyio.run_process([sys.executable, "-c", CHILD, str(root), str(storage)])
    return float(result.stdout)


#: The most opening may cost with many stored files, as a multiple of an empty storage.
TARGET = 1.5


def report(label: str, samples: list[float]) -> None:
    median, best = statistics.median(samples) * 1e3, min(samples) * 1e3
    print(f"{label:<50} median {median:8.2f} ms   best {best:8.2f} ms")


async def main(quick: bool, json: str | None) -> None:
    rounds, files = (3, 5_000) if quick else (15, 50_000)
    with tempfile.TemporaryDirectory() as temporary:
        scratch = Path(temporary)
        roots = {name: scratch / name for name in ("root", "other", "full", "expired")}
        for folder in roots.values():
            folder.mkdir()
        storage, empty = scratch / "storage", scratch / "empty-storage"

        def area(name: str) -> Path:
            return pegboard.ManagedStorage(storage).for_location(roots[name].resolve()).directory

        root = roots["root"]
        week = datetime.timedelta(days=7)
        fill(area("other"), files, age=2 * week)
        fill(area("full"), files, age=datetime.timedelta(0))
        await open_once(root, empty)  # imports and caches, not timed
        await open_once(root, storage)
        first = await open_once(roots["full"], storage)
        contenders = {
            "empty storage": (open_once, root, empty),
            f"{files:,} files in another Location's area": (open_once, root, storage),
            f"{files:,} current files in its own area, again": (open_once, roots["full"], storage),
            "empty storage, in a new process": (open_in_a_new_process, root, empty),
            f"{files:,} current files in its own area, in a new process": (
                open_in_a_new_process,
                roots["full"],
                storage,
            ),
        }
        samples: dict[str, list[float]] = {label: [] for label in contenders}
        labels = list(contenders)
        for round_ in range(rounds):
            # Rotate the order so no contender always runs first.
            shift = round_ % len(labels)
            for label in labels[shift:] + labels[:shift]:
                opener, where, kept = contenders[label]
                samples[label].append(await opener(where, kept))
        print(f"## Opening a Location whose storage holds {files:,} files\n")
        report(labels[0], samples[labels[0]])
        report(labels[1], samples[labels[1]])
        report(f"{files:,} current files in its own area, first open", [first])
        report(labels[2], samples[labels[2]])
        report(labels[3], samples[labels[3]])
        report(labels[4], samples[labels[4]])
        fill(area("expired"), files, age=2 * week)
        report(
            f"{files:,} expired files in its own area (deleted)",
            [await open_once(roots["expired"], storage)],
        )
        left = [path.name for path in area("expired").iterdir()]
        assert [".pruned"] == left, "the expired files were pruned, the prune stamp left"
        assert files == len(list(area("other").iterdir())), "another Location's files were kept"
    print(
        f"\nAgainst the empty storage (median of the ratios within each round; "
        f"target <= {TARGET:g}x):\n"
    )
    readings = []
    pairs = [(label, labels[0]) for label in labels[1:3]] + [(labels[4], labels[3])]
    for label, base in pairs:
        reading = ratio(f"open a Location, {label} / {base}", samples[label], samples[base], TARGET)
        verdict = "met" if reading.met else "not met"
        print(f"{label:<50} {reading.figure:5.2f}x  quietest {reading.quietest:5.2f}x  {verdict}")
        readings.append(reading)
    write(json, readings)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer files, for smoke tests")
    add_json_option(parser)
    arguments = parser.parse_args()
    anyio.run(main, arguments.quick, arguments.json)
