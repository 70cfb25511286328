"""What the benchmark scripts share: timing without the garbage collector."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ("collector_paused",)


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
