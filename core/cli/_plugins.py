"""``pegboard plugins``: what is installed and whether it loads."""

from __future__ import annotations

import argparse

from ._common import Exit

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ("add",)


def add(commands: Any) -> None:
    plugins = commands.add_parser("plugins", help="installed plugins and whether they load")
    plugins.add_argument("--json", action="store_true", help="print JSON for scripts")
    plugins.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    from pegboard import Host

    infos = Host().plugins(load=True)
    if arguments.json:
        import json

        rows = [
            {
                "name": info.name,
                "distribution": info.distribution,
                "version": info.version,
                "state": info.state,
                "error": info.error,
            }
            for info in infos
        ]
        print(json.dumps(rows, indent=2))
        return Exit.COMPLETED
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table("plugin", "distribution", "version", "loads", box=None, pad_edge=False)
    for info in infos:
        # A plugin's error text is shown as written, never read as rich markup.
        loads = "yes" if info.loads else f"[red]no[/red]: {escape(str(info.error))}"
        table.add_row(info.name, info.distribution or "-", info.version or "-", loads)
    Console().print(table)
    return Exit.COMPLETED
