"""The parser and the dispatch: each command lives in a module of its own."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import _check, _location, _new, _permissions, _plugins, _serve
from ._common import Exit, Parser, UsageError, print_error

__all__ = ("build_parser", "main")

# Each module adds its commands with `add(commands)` and sets `run` on them.
# Modules import only the standard library at the top: `pegboard --help`
# must stay cheap.
_COMMANDS = (_plugins, _location, _serve, _permissions, _check, _new)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``pegboard`` command line."""
    parser = Parser(
        prog="pegboard",
        description="List plugins and tools, call a tool, or serve them over MCP, "
        "in a pegboard Location.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in _COMMANDS:
        module.add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    arguments = build_parser().parse_args(argv)
    try:
        status = _run(arguments)
    except UsageError as error:
        print_error(arguments, error)
        status = Exit.USAGE
    except KeyboardInterrupt:
        status = 130
    sys.exit(status)


def _run(arguments: argparse.Namespace) -> int:
    from pegboard import ConfigError, PermissionRejected, PluginError, RetentionError

    try:
        status: int = arguments.run(arguments)
    except (ConfigError, NotADirectoryError) as error:
        raise UsageError(str(error)) from error
    except (RetentionError, PluginError, PermissionRejected) as error:
        print_error(arguments, error)
        return Exit.OPERATIONAL
    return status
