"""What every command shares: exit codes, usage errors, the Location options."""

from __future__ import annotations

import argparse
import enum
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

__all__ = (
    "Exit",
    "Parser",
    "UsageError",
    "add_location_options",
    "check_trust",
    "print_error",
    "quiet_logging",
    "warn",
)


class Exit(enum.IntEnum):
    """The command's exit status."""

    COMPLETED = 0  # a completed call
    FAILED = 1  # a model-visible failure
    USAGE = 2  # a usage or config error
    OPERATIONAL = 3  # the call could not settle


class UsageError(Exception):
    """A mistake on the command line, in a config file or in the input."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # Two plain lines instead of the whole usage block.
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")


def add_location_options(command: argparse.ArgumentParser) -> None:
    """``--location``, ``--plugin`` and ``--trust``, for the commands that open a Location."""
    command.add_argument(
        "--location", "-l", type=Path, default=Path("."), metavar="DIR",
        help="the Location's root directory (default: the current directory)",
    )  # fmt: skip
    command.add_argument(
        "--plugin", "-p", action="append", default=None, metavar="NAME", dest="plugins",
        help="enable plugin NAME (repeatable, in order) instead of the plugins "
        "pegboard.toml names (default: that list, else builtin)",
    )  # fmt: skip
    command.add_argument(
        "--trust", action="append", default=[], metavar="PLUGIN",
        help="trust PLUGIN, an enabled plugin, with the trusted services (repeatable)",
    )  # fmt: skip


def check_trust(arguments: argparse.Namespace, enabled: Sequence[str]) -> None:
    """A ``--trust`` naming a plugin that is not enabled is a mistake: say so."""
    stray = [name for name in arguments.trust if name not in enabled]
    if stray:
        raise UsageError(
            f"--trust {stray[0]}: plugin {stray[0]!r} is not enabled in this Location "
            f"(enabled: {', '.join(enabled) or 'none'}); enable it with --plugin "
            f"{stray[0]} or in pegboard.toml"
        )


def print_error(arguments: argparse.Namespace, error: BaseException) -> None:
    """One line on standard error; the traceback too with ``--debug``."""
    if getattr(arguments, "debug", False):
        import traceback

        traceback.print_exception(error)
    print(f"pegboard: error: {error}", file=sys.stderr)


#: What `warn` has printed, so that each warning is printed once.
_WARNED: set[str] = set()


def warn(message: object) -> None:
    """``pegboard: warning: ...`` on standard error, once per distinct message."""
    text = str(message)
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"pegboard: warning: {text}", file=sys.stderr)


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
