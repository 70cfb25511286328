"""Time pegboard at scale: many registrations of one name, many tools, many prepares.

Run ``python benchmarks/bench_scale.py`` (``--quick`` for a smoke run). Each
scenario runs at growing sizes; a linear cost keeps the time per item flat, so
the table shows the time per item and its growth from the smallest size to the
largest (a quadratic path would grow with the size ratio; the target is growth of
at most 2x). Opening a Location with ``plugins=[]`` (a new Host each time, so
no earlier scan is reused) is held against one scan of the installed entry
points: an open that scanned would cost at least that. The script prints
Markdown tables and always exits 0; ``--json PATH`` also writes the targets.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns

import anyio
import attrs
import importlib_metadata
from _add import ADD_TOOL  # beside this script on sys.path
from _targets import Reading, add_json_option, within, write
from _timing import collector_paused

import pegboard


@attrs.frozen
class Settings:
    name: str
    sizes: tuple[int, ...]
    snapshot_sizes: tuple[int, ...]
    rounds: int


#: The most the time per item may grow from the smallest size to the largest: linear
#: with noise (n log n grows 1.3x from 1,000 to 10,000; quadratic 10x).
GROWTH = 2.0
#: The most prepare() after one change may take with the most tools, as a multiple
#: of the fewest.
SNAPSHOT = 10.0

FULL = Settings("full", (1_000, 2_000, 5_000, 10_000), (10_000, 100_000), rounds=3)
QUICK = Settings("quick", (100, 400), (1_000, 4_000), rounds=1)


def best_ms(measure: Callable[[], int], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        with collector_paused():
            best = min(best, measure() / 1e6)
    return best


def close_one_name(location: pegboard.Location, n: int, *, latest_first: bool) -> int:
    """Register one name ``n`` times, then close every registration; the closing is timed."""
    registrations = [location.tools.register({"add": ADD_TOOL}) for _ in range(n)]
    order = reversed(registrations) if latest_first else iter(registrations)
    start = perf_counter_ns()
    for registration in order:
        registration.close()
    return perf_counter_ns() - start


def register_then_prepare(location: pegboard.Location, n: int) -> int:
    """``n`` times: register one new name, then prepare a request; all of it timed."""
    start = perf_counter_ns()
    registrations = []
    for index in range(n):
        registrations.append(location.tools.register({f"tool_{index}": ADD_TOOL}))
        location.prepare()
    elapsed = perf_counter_ns() - start
    for registration in registrations:
        registration.close()
    return elapsed


def prepare_after_change(
    location: pegboard.Location, n: int, rounds: int
) -> tuple[float, float, float]:
    """With ``n`` tools, after one new registration: prepare(), reading its
    definitions, and prepare() again unchanged (ms each).
    """
    kept = location.tools.register({f"tool_{index:06d}": ADD_TOOL for index in range(n)})
    assert len(location.prepare().definitions) == n
    first, read, again = float("inf"), float("inf"), float("inf")
    for round_ in range(max(rounds, 3)):
        extra = location.tools.register({f"extra_{round_}": ADD_TOOL})
        gc.collect()
        with collector_paused():
            start = perf_counter_ns()
            request = location.prepare()
            prepared = perf_counter_ns()
            definitions = request.definitions
            defined = perf_counter_ns()
            location.prepare()
            end = perf_counter_ns()
        assert len(definitions) == n + 1
        first = min(first, (prepared - start) / 1e6)
        read = min(read, (defined - prepared) / 1e6)
        again = min(again, (end - defined) / 1e6)
        extra.close()
    kept.close()
    return first, read, again


async def open_empty(root: Path, storage: Path) -> int:
    """Open a Location with no plugins in a new Host, whose plugins were never scanned."""
    host = pegboard.Host()
    start = perf_counter_ns()
    async with host.location(root, plugins=[], storage=storage):
        pass
    return perf_counter_ns() - start


def scan_entry_points() -> int:
    """One scan of the installed distributions' entry points, as a Host's first one."""
    start = perf_counter_ns()
    importlib_metadata.entry_points(group="pegboard")
    return perf_counter_ns() - start


def verdict(met: bool | None) -> str:
    return "met" if met else "not met"


def growth_rows(
    label: str,
    sizes: tuple[int, ...],
    per_size: Callable[[int], float],
    unit: str,
    readings: list[Reading],
) -> list[tuple[str, ...]]:
    times = {n: per_size(n) for n in sizes}
    smallest, largest = sizes[0], sizes[-1]
    per_item = {n: times[n] / n * 1000 for n in sizes}  # µs per item
    growth = per_item[largest] / per_item[smallest]
    met = within(growth, GROWTH)
    rows: list[tuple[str, ...]] = [
        (f"{label}, n = {n:,}", f"{times[n]:,.1f} {unit}", f"{per_item[n]:.2f} µs") for n in sizes
    ]
    rows.append(
        (
            f"{label}: per-item growth from {smallest:,} to {largest:,} "
            f"(quadratic would be {largest / smallest:.0f}x; target <= {GROWTH:g}x): "
            f"{verdict(met)}",
            "",
            f"{growth:.2f}x",
        )
    )
    readings.append(
        Reading(
            quantity=f"{label}: time per item, n = {largest:,} / n = {smallest:,} "
            f"(quadratic: {largest / smallest:.0f}x)",
            figure=growth,
            unit="x",
            limit=GROWTH,
            met=met,
        )
    )
    return rows


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        padded = (
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join("-" * w for w in widths) + " |"
    return "\n".join([line(header), rule, *map(line, rows)])


async def main(settings: Settings, json: str | None) -> int:
    host = pegboard.Host()
    rows: list[tuple[str, ...]] = []
    readings: list[Reading] = []
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        storage = scratch / "managed"
        async with host.location(scratch, plugins=[], storage=storage) as location:
            for latest_first in (False, True):
                order = "latest first" if latest_first else "oldest first"

                def closing(n: int, latest_first: bool = latest_first) -> float:
                    return best_ms(
                        lambda: close_one_name(location, n, latest_first=latest_first),
                        settings.rounds,
                    )

                rows += growth_rows(
                    f"close n registrations of one name, {order}",
                    settings.sizes,
                    closing,
                    "ms",
                    readings,
                )
            rows += growth_rows(
                "register one tool then prepare(), n times",
                settings.sizes,
                lambda n: best_ms(lambda: register_then_prepare(location, n), settings.rounds),
                "ms",
                readings,
            )
            snapshot: dict[int, tuple[float, float, float]] = {}
            for n in settings.snapshot_sizes:
                snapshot[n] = prepare_after_change(location, n, settings.rounds)
                first, read, again = snapshot[n]
                rows.append((f"prepare() after one change, {n:,} tools", f"{first:,.3f} ms", ""))
                rows.append((f"then reading its definitions, {n:,} tools", f"{read:,.2f} ms", ""))
                rows.append((f"prepare() unchanged, {n:,} tools", f"{again:,.3f} ms", ""))
            small, large = settings.snapshot_sizes[0], settings.snapshot_sizes[-1]
            for index, what in ((0, "prepare()"), (1, "prepare() and its definitions")):
                ratio = sum(snapshot[large][: index + 1]) / sum(snapshot[small][: index + 1])
                # Reading the definitions sorts them all: only prepare() has a target.
                limit = SNAPSHOT if index == 0 else None
                met = within(ratio, limit)
                target = f"target <= {limit:g}x): {verdict(met)}" if limit else "no target)"
                rows.append(
                    (
                        f"{what} after one change: {large:,} tools / {small:,} tools ({target}",
                        "",
                        f"{ratio:.2f}x",
                    )
                )
                readings.append(
                    Reading(
                        quantity=f"{what} after one change, {large:,} tools / {small:,} tools",
                        figure=ratio,
                        unit="x",
                        limit=limit,
                        met=met,
                    )
                )
        rounds = max(settings.rounds, 3)
        opened, scanned = float("inf"), float("inf")
        for _ in range(rounds):
            opened = min(opened, await open_empty(scratch, storage) / 1e6)
            scanned = min(scanned, scan_entry_points() / 1e6)
        met = within(opened, scanned, strict=True)
        rows.append(
            (
                "open a Location with plugins=[] in a new Host "
                f"(target < one entry-point scan): {verdict(met)}",
                f"{opened:.2f} ms",
                "",
            )
        )
        rows.append(("one scan of the installed entry points", f"{scanned:.2f} ms", ""))
        readings.append(
            Reading(
                quantity="open a Location with plugins=[] in a new Host "
                "(limit: one entry-point scan)",
                figure=opened,
                unit="ms",
                limit=scanned,
                met=met,
            )
        )
    print(f"## Scale ({settings.name} run; best of {settings.rounds} rounds)\n")
    print(table(("scenario", "time", "per item"), rows))
    write(json, readings)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Time pegboard at scale.")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    add_json_option(parser)
    arguments = parser.parse_args(sys.argv[1:])
    sys.exit(anyio.run(main, QUICK if arguments.quick else FULL, arguments.json))
