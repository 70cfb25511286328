"""``pegboard check PLUGIN``: the conformance kit's options, defined once for both commands."""

from __future__ import annotations

import argparse

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ("DESCRIPTION", "add", "add_options")

DESCRIPTION = """\
Check that a pegboard plugin keeps pegboard's laws: activate it in fresh Locations,
inspect its tool definitions, run its example calls and inputs generated from each tool's
input schema, cancel them, feed them invalid input, close the Locations. Prints one
verdict per check, with the fix for each problem. Options go before or after PLUGIN.
Exit status: 0 when no check failed, 1 when one did (a tool that no call exercised is
"not verified" and fails), 2 when the checks could not start.
"""

_PLUGIN_HELP = """\
an installed plugin name (its entry point in the 'pegboard' group), a module or
'module:attribute' naming the plugin object, or 'module:Class' / 'path/to/file.py:Class'
naming a PluginConformance subclass, whose attributes supply everything below"""


def add(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="run the conformance checks on a plugin",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_options(check)
    check.set_defaults(run=run)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The plugin and every option of ``pegboard check`` (standard library only)."""
    parser.add_argument("plugin", metavar="PLUGIN", help=_PLUGIN_HELP)
    parser.add_argument("--options", type=_json_object, help="the plugin's options, as JSON")
    parser.add_argument(
        "--trusted", action="store_true", default=None, help="trust it with trusted services"
    )
    parser.add_argument(
        "--example",
        action="append",
        type=_json_object,
        metavar="JSON",
        help='an example call, repeatable: {"tool": ..., "input": {...}, "expect": "completed"}',
    )
    parser.add_argument(
        "--confine",
        choices=("auto", "required", "off"),
        help="where the plugin runs: auto (default) confined unless --trusted, as hosts run "
        "it (in this process where no sandbox works); required: confined or not at all; "
        "off: in this process",
    )
    parser.add_argument(
        "--network",
        action="store_true",
        default=None,
        help="grant the plugin the network, as a host does with network=[NAME]",
    )
    parser.add_argument("--files", help="a folder every fresh Location starts with")
    parser.add_argument("--timeout", type=float, help="seconds one call may take (default 10)")
    parser.add_argument(
        "--skip",
        action="append",
        type=_skip,
        metavar="TOOL=REASON",
        help="do not call TOOL, for REASON (repeatable); an unexercised tool otherwise fails",
    )
    parser.add_argument(
        "--expect-failure",
        action="append",
        type=_skip,
        metavar="TOOL=REASON",
        help="TOOL fails on every generated input, for REASON (repeatable); such a tool "
        "otherwise fails the generated check",
    )
    parser.add_argument(
        "--generated",
        type=_count,
        metavar="N",
        help="inputs to draw from each tool's input schema (default 25; 0 draws none)",
    )
    parser.add_argument("--only", action="append", metavar="CHECK", help="run this check only")
    parser.add_argument(
        "--backend",
        action="append",
        choices=("asyncio", "trio"),
        help="run on this backend (default: asyncio, and trio when it is installed)",
    )


def run(arguments: argparse.Namespace) -> int:
    from pegboard.testing._cli import run_parsed

    return run_parsed(arguments)


def _json_object(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON ({error}): {text}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text}")
    return value


def _skip(text: str) -> tuple[str, str]:
    tool, _, reason = text.partition("=")
    if not tool or not reason.strip():
        raise argparse.ArgumentTypeError(f"expected TOOL=REASON, got {text!r}")
    return tool, reason.strip()


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count of 0 or more, got {text!r}")
    return value
