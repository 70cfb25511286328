"""The ``pegboard`` command: plugins, tools and calls from the shell."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from . import Outcome, Progress, Request, ToolContext, ToolDefinition
    from ._cli_call import TerminalApprover

__all__ = ("main",)

# Exit codes: a completed call, a model-visible failure, a usage or config
# error, an operational failure (the call could not settle).
COMPLETED, FAILED, USAGE, OPERATIONAL = 0, 1, 2, 3


class UsageError(Exception):
    """A mistake on the command line, in a config file or in the input."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # Two plain lines instead of the whole usage block.
        self.exit(USAGE, f"{self.prog}: error: {message}\nsee '{self.prog} --help'\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pegboard",
        description="List plugins and tools, call a tool, or serve them over MCP, "
        "in a pegboard Location.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugins = commands.add_parser("plugins", help="installed plugins and whether they load")
    plugins.add_argument("--json", action="store_true", help="print JSON for scripts")

    def location_options(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--location", "-l", type=Path, default=Path("."), metavar="DIR",
            help="the Location's root directory (default: the current directory)",
        )  # fmt: skip
        command.add_argument(
            "--trust", action="append", default=[], metavar="PLUGIN",
            help="trust PLUGIN with the trusted services (repeatable)",
        )  # fmt: skip

    tools = commands.add_parser("tools", help="the tools a Location advertises")
    location_options(tools)
    tools.add_argument("--json", action="store_true", help="print the definitions as JSON")

    call = commands.add_parser(
        "call",
        help="call one tool and show its outcome",
        description="INPUT is JSON text, '-' for standard input, or key=value pairs "
        "(each value is read as JSON when it parses, else as a string). Exit codes: "
        "0 completed, 1 model-visible failure, 2 usage error, 3 operational failure.",
    )
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("input", nargs="*", metavar="INPUT")
    location_options(call)
    answer = call.add_mutually_exclusive_group()
    answer.add_argument("--yes", "-y", action="store_true", help="approve permission requests")
    answer.add_argument("--no", "-n", action="store_true", help="reject permission requests")
    call.add_argument("--json", action="store_true", help="print the outcome as JSON")

    serve = commands.add_parser(
        "serve",
        help="serve a Location's tools to MCP clients",
        description="Serve the tools of a Location to MCP clients over stdio (one client, "
        "until it disconnects) or streamable HTTP at http://127.0.0.1:PORT/mcp. Permission "
        "requests that ask are put to the client (MCP elicitation) or rejected. Needs the "
        "mcp extra: pip install 'pegboard[mcp]'.",
    )
    location_options(serve)
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio",
        help="stdio (default) or streamable HTTP",
    )  # fmt: skip
    serve.add_argument(
        "--port", type=int, default=8000, metavar="N", help="the HTTP port (default: 8000)"
    )

    check = commands.add_parser("check", help="run the conformance checks on a plugin")
    check.add_argument("plugin", metavar="PLUGIN", help="an entry-point name or module")
    check.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line and exit with its status."""
    arguments = _parser().parse_args(argv)
    try:
        status = _run(arguments)
    except UsageError as error:
        _error(arguments, error)
        status = USAGE
    except KeyboardInterrupt:
        status = 130
    sys.exit(status)


def _error(arguments: argparse.Namespace, error: BaseException) -> None:
    if arguments.debug:
        import traceback

        traceback.print_exception(error)
    print(f"pegboard: error: {error}", file=sys.stderr)


def _run(arguments: argparse.Namespace) -> int:
    import anyio  # deferred: `pegboard --help` imports nothing heavy

    from . import ConfigError, PermissionRejected, PluginError, RetentionError

    if arguments.command == "check":
        from .testing import run_cli

        return int(run_cli([arguments.plugin, *arguments.args]))
    try:
        if arguments.command == "plugins":
            return _plugins(arguments)
        if arguments.command == "serve":
            return _serve(arguments)
        return anyio.run(_location_command, arguments)
    except (ConfigError, NotADirectoryError) as error:
        raise UsageError(str(error)) from error
    except (RetentionError, PluginError, PermissionRejected) as error:
        _error(arguments, error)
        return OPERATIONAL


def _plugins(arguments: argparse.Namespace) -> int:
    from . import Host

    infos = Host().plugins(load=True)
    if arguments.json:
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
        return COMPLETED
    from rich.console import Console
    from rich.table import Table

    table = Table("plugin", "distribution", "version", "loads", box=None, pad_edge=False)
    for info in infos:
        loads = "yes" if info.loads else f"[red]no[/red]: {info.error}"
        table.add_row(info.name, info.distribution or "-", info.version or "-", loads)
    Console().print(table)
    return COMPLETED


def _serve(arguments: argparse.Namespace) -> int:
    import importlib.util

    import anyio

    if importlib.util.find_spec("mcp") is None:
        raise UsageError("pegboard serve needs the MCP SDK: pip install 'pegboard[mcp]'")
    try:
        return anyio.run(_serve_location, arguments)
    except OSError as error:  # a port already in use, say
        if isinstance(error, NotADirectoryError):
            raise
        _error(arguments, error)
        return OPERATIONAL


async def _serve_location(arguments: argparse.Namespace) -> int:
    from . import Host
    from .mcp import ClientApprover, serve

    async with Host().location(
        arguments.location, trusted=arguments.trust, approver=ClientApprover()
    ) as location:
        for problem in location.plugin_errors:
            print(f"pegboard: warning: {problem}", file=sys.stderr)
        await serve(location, transport=arguments.transport, port=arguments.port)
    return COMPLETED


async def _location_command(arguments: argparse.Namespace) -> int:
    from . import Completed, Host, ToolContext
    from ._cli_call import (
        RecordingStorage,
        TerminalApprover,
        approver_for,
        parse_input,
        render_outcome,
    )

    storage = RecordingStorage()
    approver = approver_for(
        yes=getattr(arguments, "yes", False), no=getattr(arguments, "no", False)
    )
    host = Host()
    async with host.location(
        arguments.location, trusted=arguments.trust, storage=storage, approver=approver
    ) as location:
        for problem in location.plugin_errors:
            print(f"pegboard: warning: {problem}", file=sys.stderr)
        request = location.prepare()
        if arguments.command == "tools":
            return _tools(request.definitions, as_json=arguments.json)
        raw = parse_input(arguments.input, stdin=sys.stdin)
        context = ToolContext(
            session_id=f"cli-{os.getpid()}", agent="cli", message_id="cli", call_id="cli-1"
        )
        terminal = approver if isinstance(approver, TerminalApprover) else None
        outcome = await _call(request, arguments.tool, raw, context, terminal)
        print(render_outcome(outcome, storage.saved, as_json=arguments.json))
        return COMPLETED if isinstance(outcome, Completed) else FAILED


async def _call(
    request: Request,
    name: str,
    raw: Any,
    context: ToolContext,
    terminal: TerminalApprover | None,
) -> Outcome:
    import attrs

    from . import ToolCall

    if not sys.stderr.isatty():
        return await request.execute(ToolCall(name, raw, context))
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(f"{name} …") as status:
        if terminal is not None:
            terminal.pause = status  # the prompt must not fight the spinner

        async def progress(update: Progress) -> None:
            parts = [update.message or ""]
            if update.total:
                parts.append(f"{update.current or 0:g}/{update.total:g}")
            status.update(f"{name}: {' '.join(part for part in parts if part)}")

        return await request.execute(ToolCall(name, raw, attrs.evolve(context, progress=progress)))


def _tools(definitions: Sequence[ToolDefinition], *, as_json: bool) -> int:
    from . import thaw

    if as_json:
        rows = [
            {
                "name": definition.name,
                "description": definition.description,
                "input_schema": thaw(definition.input_schema),
                "output_schema": thaw(definition.output_schema),
            }
            for definition in definitions
        ]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return COMPLETED
    if not definitions:
        print("no tools: enable a plugin in pegboard.toml or with the host")
    width = max((len(definition.name) for definition in definitions), default=0)
    for definition in definitions:
        summary = definition.description.strip().splitlines()[0]
        print(f"{definition.name:<{width}}  {summary}")
    return COMPLETED
