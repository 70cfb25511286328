"""The parser and the dispatch: each command lives in a module of its own."""

from __future__ import annotations

import argparse
import sys

from . import _check, _location, _new, _permissions, _plugins, _serve, _worker
from ._common import Exit, Parser, UsageError, defer_collection, print_error, started

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

    from pegboard import PermissionRejected

__all__ = ("build_parser", "main")

# Each module adds its commands with `add(commands)` and sets `run` on them.
# Modules import only argparse, enum, os and sys at the top, and typing only
# for the type checker: `pegboard --help` must stay cheap (bench_startup.py).
_COMMANDS = (_plugins, _location, _serve, _worker, _permissions, _check, _new)

#: The commands that import the engine without the cyclic garbage collector, each
#: turning it back on (`started`) before it opens a Location.
_STARTING = frozenset({"tools", "call", "serve"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole ``pegboard`` command line; with ``command``, that command's options
    only (every command is still listed, with its help, for ``pegboard --help``)."""
    parser = Parser(
        prog="pegboard",
        description="List plugins and tools, call a tool, or serve them over MCP, "
        "in a pegboard Location.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listed = _Listed(commands, command)
    for module in _COMMANDS:
        module.add(listed)
    return parser


class _Listed:
    """The subcommands, built in full only for the one being run.

    Building every option of every command costs more than parsing one: the
    others are listed by name and help alone, and what their modules add to
    them goes nowhere.
    """

    def __init__(self, commands: argparse._SubParsersAction[Parser], wanted: str | None) -> None:
        self._commands = commands
        self._wanted = wanted

    def add_parser(self, name: str, **options: Any) -> object:
        if self._wanted is None or name == self._wanted:
            return self._commands.add_parser(name, **options)
        said = {key: value for key, value in options.items() if key in ("help", "aliases")}
        self._commands.add_parser(name, **said)
        return _Elsewhere()


class _Elsewhere:
    """What a command not being run is built with: every call is accepted and dropped."""

    def __getattr__(self, _: str) -> Callable[..., _Elsewhere]:
        return self._ignore

    def _ignore(self, *_: object, **__: object) -> _Elsewhere:
        return self


def _command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not a top-level option."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    given = sys.argv[1:] if argv is None else argv
    command = _command_in(given)
    if argv is None and command in _STARTING:  # the program, not a test calling main
        defer_collection()
    arguments = build_parser(command).parse_args(given)
    from ._log import quiet_logging  # logging is imported once a command runs

    quiet_logging(arguments)
    try:
        status = _run(arguments)
    except UsageError as error:
        print_error(arguments, error)
        status = Exit.USAGE
    except KeyboardInterrupt:
        status = 130
    finally:
        started()
    if argv is None:  # the program itself, about to exit (not a test calling main)
        import gc

        # Exiting collects every object the engine made (its classes, their
        # generated methods): a tenth of `pegboard tools`. Nothing the command
        # printed or saved depends on it, and Python never promises finalizers
        # at exit, so the objects left now are spared the collector.
        gc.freeze()
    sys.exit(status)


def _run(arguments: argparse.Namespace) -> int:
    from pegboard import ConfigError, PermissionRejected, PluginError, RetentionError

    try:
        status: int = arguments.run(arguments)
    except (ConfigError, NotADirectoryError) as error:
        raise UsageError(str(error)) from error
    except UsageError:
        raise
    except PermissionRejected as error:
        print_error(arguments, _with_cli_hint(error))
        return Exit.OPERATIONAL
    except (RetentionError, PluginError) as error:
        print_error(arguments, error)
        return Exit.OPERATIONAL
    except Exception as error:  # noqa: BLE001 - a command line prints one line, not a traceback
        print_error(arguments, _unexpected(error))
        return Exit.OPERATIONAL
    return status


def _with_cli_hint(error: PermissionRejected) -> Exception:
    from ._words import allow_options

    request = error.request
    rules = None if request is None else allow_options(request)
    if request is not None and "needs approval" not in str(error):
        # The user said no: a rule is the way to stop being asked, if one can.
        hint = "" if rules is None else f"; to allow it without asking, pass {rules}"
    else:
        by_rule = (
            "or allow it by rule, e.g. --allow 'bash:git status *'"
            if rules is None
            else f"or allow it by rule: {rules}"
        )
        hint = (
            "; answer on a terminal, pass --yes to approve every request of this call, "
            f"{by_rule} (see pegboard call --help)"
        )
    rejected = type(error)(f"{error}{hint}", request=request)
    rejected.__traceback__ = error.__traceback__
    return rejected


def _unexpected(error: Exception) -> Exception:
    message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    wrapped = RuntimeError(f"{message} (run with --debug for the traceback)")
    wrapped.__traceback__ = error.__traceback__
    wrapped.__cause__ = error
    return wrapped
