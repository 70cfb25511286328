"""The host: the process-wide application board and the door to Locations."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from ._bounding import OutputLimits
from ._location import Location
from ._pipeline import Pipeline
from ._registry import Board, Scope, Tools
from ._storage import ManagedStorage

__all__ = ("Host",)

#: Default bound on one call's raw input: far above what a model sends.
DEFAULT_MAX_INPUT_BYTES = 1_048_576


class Host:
    """The process: application tools on ``host.tools`` and Locations to open."""

    def __init__(self) -> None:
        self._board = Board()
        self._scope = Scope("application")
        #: Registers application tools, available in every Location.
        self.tools = Tools(self._board, self._scope)

    @contextlib.asynccontextmanager
    async def location(
        self,
        root: str | os.PathLike[str],
        *,
        limits: OutputLimits | None = None,
        storage: str | os.PathLike[str] | ManagedStorage | None = None,
        max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES,
    ) -> AsyncIterator[Location]:
        """Open the Location at ``root``; closing it removes every registration it made.

        ``limits`` bound the model content of each call, ``storage`` is where
        oversized output is retained (a directory or a `ManagedStorage`; default:
        a per-user data directory), ``max_input_bytes`` bounds each call's input.
        """
        path = anyio.Path(root)
        if not await path.is_dir():
            raise NotADirectoryError(f"a Location's root must be a directory: {path}")
        if not isinstance(storage, ManagedStorage):
            storage = ManagedStorage(storage)
        pipeline = Pipeline(limits or OutputLimits(), storage, max_input_bytes)
        await storage.prune()
        location = Location(Path(await path.resolve()), self._board, pipeline)
        try:
            yield location
        finally:
            location._close()
