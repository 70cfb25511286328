"""What the benchmark scripts share: timing without the garbage collector, in rounds."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Iterator

__all__ = ("Job", "collector_paused", "time_rounds")

#: One timed thing to do: a function, or a coroutine function, of no arguments.
Job = Callable[[], Awaitable[None] | None]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of a timed section, as timeit does."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


async def time_rounds(
    contenders: dict[str, Job],
    rounds: int,
    calls: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each contender, one figure per round (the mean of its batch).

    The contenders take turns within a round, the order rotated each round so
    that none always runs first. ``clock`` is ``time.thread_time`` for work that
    never waits: other processes on a shared machine do not inflate it.
    """
    samples: dict[str, list[float]] = {label: [] for label in contenders}
    labels = list(contenders)
    for round_ in range(rounds):
        shift = round_ % len(labels)
        for label in labels[shift:] + labels[:shift]:
            job = contenders[label]
            with collector_paused():
                started = clock()
                for _ in range(calls):
                    pending = job()
                    if pending is not None:
                        await pending
                samples[label].append((clock() - started) / calls)
    return samples
