"""pegboard's log warnings on the command line: one `warn` line each."""

from __future__ import annotations

import argparse
import logging

from ._common import warn

__all__ = ("WarningsOnce", "quiet_logging")


class WarningsOnce(logging.Handler):
    """pegboard's own log warnings as one `warn` line each (tracebacks only with --debug)."""

    def __init__(self, *, debug: bool) -> None:
        super().__init__(logging.WARNING)
        self.debug = debug

    def emit(self, record: logging.LogRecord) -> None:
        warn(record.getMessage())
        if self.debug and record.exc_info:
            import traceback

            traceback.print_exception(*record.exc_info)


def quiet_logging(arguments: argparse.Namespace) -> None:
    """Route the ``pegboard`` logger through `warn`: no duplicates, no stray tracebacks."""
    logger = logging.getLogger("pegboard")
    logger.handlers[:] = [WarningsOnce(debug=getattr(arguments, "debug", False))]
    logger.propagate = False
