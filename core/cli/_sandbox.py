"""``--sandbox``, ``--writable``, ``--confine``, ``--network``: the host's choice of sandbox
for a Location's commands and its untrusted plugins."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import UsageError

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pegboard import SandboxInfo

__all__ = ("add_sandbox_options", "sandbox_line", "sandbox_settings", "say_sandbox")

#: The modes of `pegboard.Host.location`'s ``sandbox=``, in the order --help shows them.
MODES = ("auto", "required", "off")


def add_sandbox_options(command: argparse.ArgumentParser) -> None:
    """``--sandbox`` and ``--writable``, for the commands that open a Location."""
    command.add_argument(
        "--sandbox", choices=MODES, default="auto",
        help="run the commands tools start (bash, manifest tools) in an OS sandbox: auto "
        "(default) where one works, else ask before each command; required: refuse "
        "commands without one; off: run them unconfined. Only the host (this command line) "
        "chooses; a Location's pegboard.toml cannot",
    )  # fmt: skip
    command.add_argument(
        "--writable", action="append", default=[], metavar="DIR",
        help="let sandboxed commands write in DIR, an existing folder outside the Location "
        "(repeatable)",
    )  # fmt: skip
    command.add_argument(
        "--confine", choices=MODES, default="auto",
        help="run each installed plugin you did not --trust in a sandboxed worker of its "
        "own: auto (default) where a sandbox can, else leave it out saying why; required: "
        "also refuse untrusted plugins that cannot be confined; off: run every plugin in "
        "this process",
    )  # fmt: skip
    command.add_argument(
        "--network", action="append", default=[], metavar="PLUGIN",
        help="let confined plugin PLUGIN reach the network (repeatable)",
    )  # fmt: skip


def sandbox_settings(arguments: argparse.Namespace) -> dict[str, Any]:
    """``sandbox=``, ``writable=``, ``confine=`` and ``network=`` for `pegboard.Host.location`,
    each folder checked."""
    writable = []
    for folder in arguments.writable:
        # Checked here so that the mistake names the option the user typed.
        if not os.path.isdir(folder):
            why = "is not a folder" if os.path.exists(folder) else "no such folder"
            raise UsageError(
                f"--writable {folder}: {why}; name an existing folder that commands may write"
            )
        writable.append(folder)
    return {
        "sandbox": arguments.sandbox,
        "writable": writable,
        "confine": arguments.confine,
        "network": arguments.network,
    }


def sandbox_line(info: SandboxInfo) -> str:
    """``sandbox: ...``: the sandbox in force, or why there is none."""
    from ._words import in_cli_words

    return f"sandbox: {in_cli_words(info.describe())}"


def say_sandbox(info: SandboxInfo, *, always: bool = True) -> None:
    """Tell standard error which sandbox confines the commands (``always``), or only that
    none does. Standard output stays the command's own, for scripts and protocols.
    """
    if always or info.kind is None:
        print(f"pegboard: {sandbox_line(info)}", file=sys.stderr, flush=True)
