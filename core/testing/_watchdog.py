"""The watchdog: stalls of the event loop, and which of the plugin's activities caused them."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import attrs

from pegboard._confined import Worker

__all__ = ("TICK", "WARM_UP", "Watchdog", "following", "watching")

#: Activities labelled so run once per process (first imports, first calls): their
#: stalls are the import time's, not blocking.
WARM_UP = "warm-up: "

#: How often the watchdog's task asks to run; a later wake-up means the loop was held.
TICK = 0.005


@attrs.define
class _Activity:
    label: str
    start: float
    end: float | None = None


@attrs.define
class Watchdog:
    """Finds stalls of the event loop and names the activity that was running then.

    A task sleeps ``TICK`` seconds over and over; when it wakes up more than
    ``threshold`` seconds late, nothing else could run on the loop meanwhile.
    Activities are labelled spans of time (an activation, one call); a stall is
    blamed on the activity that overlaps it most (the watchdog notices a stall
    only when it wakes, after the next activity may have begun).

    A thread of its own ticks alongside: when it was late too, the whole
    process was held up (a busy machine), not the loop by the plugin, and the
    stall is set aside rather than blamed.
    """

    threshold: float
    activities: list[_Activity] = attrs.field(factory=list)
    stalls: list[tuple[float, float]] = attrs.field(factory=list)
    #: Lateness of the watchdog's own thread: ``(start, seconds)``.
    starved: list[tuple[float, float]] = attrs.field(factory=list)
    #: Stalls set aside because the whole process was held up.
    set_aside: int = 0

    def pulse(self, stop: threading.Event) -> None:
        """Tick in a thread until ``stop`` is set, noting when the process itself was late."""
        while not stop.is_set():
            before = time.monotonic()
            time.sleep(TICK)
            late = time.monotonic() - before - TICK
            if late > self.threshold / 2:
                self.starved.append((before + TICK, late))

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            before = time.monotonic()
            await anyio.sleep(TICK)
            late = time.monotonic() - before - TICK
            if late > self.threshold:
                self.stalls.append((before + TICK, late))

    async def follow(self, worker: Worker) -> None:
        """Watch a confined plugin's event loop, from here, until cancelled or it is gone.

        Each ping is answered by the worker's event loop, so an answer later than
        ``threshold`` means the plugin held that loop. Nothing the plugin does in
        its process changes when the answer arrives here.
        """
        while True:
            before = time.monotonic()
            await anyio.sleep(TICK)
            if not await worker.ping():
                return
            late = time.monotonic() - before - TICK
            if late > self.threshold:
                self.stalls.append((before + TICK, late))

    @contextlib.contextmanager
    def activity(self, label: str) -> Iterator[None]:
        """Label what runs inside the block."""
        entry = _Activity(label, time.monotonic())
        self.activities.append(entry)
        try:
            yield
        finally:
            entry.end = time.monotonic()

    def blocked(self) -> list[tuple[str, float]]:
        """``(activity, seconds)`` for every stall, the worst first."""
        found: dict[str, float] = {}
        now = time.monotonic()
        self.set_aside = 0
        for start, late in self.stalls:
            end = start + late
            if any(begun < end and begun + slow > start for begun, slow in self.starved):
                self.set_aside += 1
                continue
            overlaps: dict[str, float] = {}
            for each in self.activities:  # a label recurs: each call of a tool has one
                overlap = min(end, now if each.end is None else each.end) - max(start, each.start)
                overlaps[each.label] = max(overlaps.get(each.label, overlap), overlap)
            label = max(overlaps, key=overlaps.__getitem__, default=None)
            if label is None or overlaps[label] <= 0 or label.startswith(WARM_UP):
                continue  # the checks' own steps, or what runs once per process
            found[label] = max(found.get(label, 0.0), late)
        return sorted(found.items(), key=lambda item: -item[1])


@contextlib.asynccontextmanager
async def following(dog: Watchdog, worker: Worker | None) -> AsyncIterator[None]:
    """While the block runs, ``dog`` also watches ``worker``'s event loop (if any)."""
    if worker is None:
        yield
        return
    raised: Exception | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(dog.follow, worker)
        try:
            yield
        except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
            raised = error  # so the caller sees its own exception, not a group of one
        finally:
            group.cancel_scope.cancel()
    if raised is not None:
        raise raised


@contextlib.asynccontextmanager
async def watching(threshold: float) -> AsyncIterator[Watchdog]:
    """A running `Watchdog`, stopped when the block ends."""
    dog = Watchdog(threshold)
    raised: Exception | None = None
    stop = threading.Event()
    thread = threading.Thread(target=dog.pulse, args=(stop,), name="pegboard-check-pulse")
    thread.start()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(dog.run)
            await anyio.sleep(TICK)  # the watchdog has started ticking
            try:
                yield dog
            except Exception as error:  # noqa: BLE001 - re-raised below, outside the group
                raised = error  # so the caller sees its own exception, not a group of one
            finally:
                group.cancel_scope.cancel()
    finally:
        stop.set()
        thread.join()
    if raised is not None:
        raise raised
