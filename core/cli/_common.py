"""What every command shares: exit codes, usage errors, the Location options."""

from __future__ import annotations

import argparse
import enum
import sys
from pathlib import Path
from typing import NoReturn

__all__ = (
    "Exit",
    "Parser",
    "UsageError",
    "add_location_options",
    "print_error",
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
    """``--location`` and ``--trust``, for the commands that open a Location."""
    command.add_argument(
        "--location", "-l", type=Path, default=Path("."), metavar="DIR",
        help="the Location's root directory (default: the current directory)",
    )  # fmt: skip
    command.add_argument(
        "--trust", action="append", default=[], metavar="PLUGIN",
        help="trust PLUGIN with the trusted services (repeatable)",
    )  # fmt: skip


def print_error(arguments: argparse.Namespace, error: BaseException) -> None:
    """One line on standard error; the traceback too with ``--debug``."""
    if getattr(arguments, "debug", False):
        import traceback

        traceback.print_exception(error)
    print(f"pegboard: error: {error}", file=sys.stderr)


def warn(message: object) -> None:
    print(f"pegboard: warning: {message}", file=sys.stderr)
