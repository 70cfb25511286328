"""Managed storage: what opening a Location costs when its storage holds many files.

Run from the repository root::

    .venv/bin/python benchmarks/bench_storage.py [--quick]

Opening a Location prunes its own area of managed storage, reading each
file's age from its name (no stat per file), never listing other
Locations' areas, and listing its own at most once per 1/64 of the retention
in one process. Timed: opening a Location (no plugins) with an empty
storage, with 50,000 files in other Locations' areas, with 50,000 current
files in its own area (the first open in this process lists them; later
opens do not), and once with 50,000 expired files in its own area (that
open deletes them all).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio

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


def report(label: str, samples: list[float]) -> None:
    median, best = statistics.median(samples) * 1e3, min(samples) * 1e3
    print(f"{label:<50} median {median:8.2f} ms   best {best:8.2f} ms")


async def main(quick: bool) -> None:
    rounds, files = (3, 5_000) if quick else (9, 50_000)
    with tempfile.TemporaryDirectory() as temporary:
        scratch = Path(temporary)
        roots = {name: scratch / name for name in ("root", "other", "full", "expired")}
        for folder in roots.values():
            folder.mkdir()
        storage = scratch / "storage"

        def area(name: str) -> Path:
            return pegboard.ManagedStorage(storage).for_location(roots[name].resolve()).directory

        root = roots["root"]
        week = datetime.timedelta(days=7)
        await open_once(root, storage)  # imports and caches, not timed
        print(f"## Opening a Location whose storage holds {files:,} files\n")
        report("empty storage", [await open_once(root, storage) for _ in range(rounds)])
        fill(area("other"), files, age=2 * week)
        report(
            f"{files:,} files in another Location's area",
            [await open_once(root, storage) for _ in range(rounds)],
        )
        fill(area("full"), files, age=datetime.timedelta(0))
        report(
            f"{files:,} current files in its own area, first open",
            [await open_once(roots["full"], storage)],
        )
        report(
            f"{files:,} current files in its own area, again",
            [await open_once(roots["full"], storage) for _ in range(rounds)],
        )
        fill(area("expired"), files, age=2 * week)
        report(
            f"{files:,} expired files in its own area (deleted)",
            [await open_once(roots["expired"], storage)],
        )
        assert [] == list(area("expired").iterdir()), "the expired files were pruned"
        assert files == len(list(area("other").iterdir())), "another Location's files were kept"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer files, for smoke tests")
    anyio.run(main, parser.parse_args().quick)
