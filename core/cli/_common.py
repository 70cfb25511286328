"""What every command shares: exit codes, usage errors, the Location options."""

from __future__ import annotations

import argparse
import enum
import gc
import os
import sys

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any, NoReturn

__all__ = (
    "Exit",
    "Parser",
    "UsageError",
    "add_location_options",
    "check_trust",
    "defer_collection",
    "path",
    "print_error",
    "started",
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
    """``intermixed``: the command's positional words may come between its options, as in
    ``pegboard call grep --yes '{...}'`` (argparse would take INPUT as extra arguments)."""

    def __init__(self, *args: Any, intermixed: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.intermixed = intermixed
        self._parsing = False

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.intermixed or self._parsing:
            return super().parse_known_args(args, namespace)
        # parse_known_intermixed_args parses twice through parse_known_args (on
        # Python 3.11 and 3.12): those calls take the plain path.
        self._parsing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False

    def error(self, message: str) -> NoReturn:
        # Two plain lines instead of the whole usage block.
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # The width argparse would take from shutil.get_terminal_size, without
        # importing shutil (and the compression modules it imports) for a help text.
        return self.formatter_class(prog=self.prog, width=terminal_columns() - 2)  # type: ignore[call-arg]


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: ``$COLUMNS``, else standard output's, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def path(text: str) -> Path:
    """``type=`` for a path option; pathlib is imported only when a command runs."""
    from pathlib import Path

    return Path(text)


def add_location_options(command: argparse.ArgumentParser) -> None:
    """``--location``, ``--plugin`` and ``--trust``, for the commands that open a Location."""
    command.add_argument(
        "--location", "-l", type=path, default=".", metavar="DIR",
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


def add_secret_options(command: argparse.ArgumentParser) -> None:
    """``--secret NAME``, for the commands that run tools."""
    command.add_argument(
        "--secret", action="append", default=[], metavar="NAME", dest="secrets",
        help="hand the tools the secret NAME, the value of the environment variable NAME "
        "(at least 8 characters), redacted from all output; a command gets it as NAME only "
        "with --allow secret:NAME (repeatable)",
    )  # fmt: skip


def secret_values(arguments: argparse.Namespace) -> dict[str, str]:
    """The values ``--secret`` names, from the environment; `UsageError` when one is missing."""
    values: dict[str, str] = {}
    for name in getattr(arguments, "secrets", ()):
        value = os.environ.get(name)
        if value is None:
            raise UsageError(
                f"--secret {name}: the environment has no variable {name}; export it first, "
                "or leave the option out"
            )
        values[name] = value
    from pegboard import Secrets

    try:
        Secrets(values)
    except (TypeError, ValueError) as error:
        raise UsageError(f"--secret: {str(error).removeprefix('secrets=: ')}") from None
    return values


def redact(arguments: argparse.Namespace, text: str) -> str:
    """``text`` without the values of the ``--secret`` options."""
    names = getattr(arguments, "secrets", ())
    if not names:
        return text
    from pegboard import Secrets

    values = {name: os.environ[name] for name in names if name in os.environ}
    try:
        return Secrets(values).redact(text)
    except (TypeError, ValueError):
        return text  # refused before any tool ran: nothing could hold them


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

        print(redact(arguments, "".join(traceback.format_exception(error))), file=sys.stderr)
    from ._words import in_cli_words

    print(f"pegboard: error: {redact(arguments, in_cli_words(str(error)))}", file=sys.stderr)


#: What `warn` has printed, so that each warning is printed once.
_WARNED: set[str] = set()


def warn(message: object) -> None:
    """``pegboard: warning: ...`` on standard error, once per distinct message, in the
    command line's words."""
    from ._words import in_cli_words

    text = in_cli_words(str(message))
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"pegboard: warning: {text}", file=sys.stderr)


#: Whether `defer_collection` turned the cyclic garbage collector off.
_deferred = False


def defer_collection() -> None:
    """Keep the cyclic garbage collector off while the command imports the engine.

    Importing the engine builds its modules, classes and their generated methods:
    objects that live as long as the process, and that the collector would scan
    again at each of the dozens of collections their making sets off, finding no
    garbage. `started` turns it back on before a Location opens, so no plugin's
    code runs without it, and `main` does on the way out whatever happened.
    """
    global _deferred
    if gc.isenabled():
        gc.disable()
        _deferred = True


def started() -> None:
    """Start-up is over: the collector runs again, if `defer_collection` stopped it.

    What the imports made is frozen first (moved to the collector's permanent
    generation), so no later collection scans it: unfrozen, it would all be
    scanned at once by the first collection. Cyclic garbage they left would never
    be freed; imports leave next to none, and no plugin has run yet.
    """
    global _deferred
    if _deferred:
        _deferred = False
        gc.freeze()
        gc.enable()
