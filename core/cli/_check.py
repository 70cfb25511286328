"""``pegboard check PLUGIN``: the conformance kit, which parses its own options."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ("add",)


def add(commands: Any) -> None:
    check = commands.add_parser("check", help="run the conformance checks on a plugin")
    check.add_argument("plugin", metavar="PLUGIN", help="an entry-point name or module")
    check.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    check.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    from pegboard.testing import run_cli

    return int(run_cli([arguments.plugin, *arguments.args]))
