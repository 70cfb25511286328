"""``pegboard tools`` and ``pegboard call``: a Location's tools from the shell."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import Exit, UsageError, add_location_options, check_trust, warn
from ._rules import add_permission_options, host_rules
from ._sandbox import add_sandbox_options, sandbox_settings, say_sandbox

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pegboard import Location, Outcome, Progress, Request, ToolContext, ToolDefinition

    from ._call_io import TerminalApprover

__all__ = ("add",)


def add(commands: Any) -> None:
    tools = commands.add_parser("tools", help="the tools a Location advertises")
    add_location_options(tools)
    add_sandbox_options(tools)
    add_permission_options(tools)
    tools.add_argument("--json", action="store_true", help="print the definitions as JSON")
    tools.add_argument(
        "--search",
        metavar="QUERY",
        help="list the tools that best match QUERY, best first (over every tool)",
    )
    tools.add_argument(
        "--limit",
        type=_positive,
        default=10,
        metavar="N",
        help="with --search, list at most N tools (default 10)",
    )
    tools.set_defaults(run=run)

    call = commands.add_parser(
        "call",
        help="call one tool and show its outcome",
        description="INPUT is JSON text, '-' for standard input, or key=value pairs "
        "(each value is read as JSON when it parses, else as a string). Exit codes: "
        "0 completed, 1 model-visible failure, 2 usage error, 3 operational failure.",
    )
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("input", nargs="*", metavar="INPUT")
    add_location_options(call)
    add_sandbox_options(call)
    add_permission_options(call)
    answer = call.add_mutually_exclusive_group()
    answer.add_argument("--yes", "-y", action="store_true", help="approve permission requests")
    answer.add_argument("--no", "-n", action="store_true", help="reject permission requests")
    call.add_argument("--json", action="store_true", help="print the outcome as JSON")
    call.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    import anyio  # deferred: `pegboard --help` imports nothing heavy

    status: int = anyio.run(_location_command, arguments)
    return status


async def _location_command(arguments: argparse.Namespace) -> int:
    from pegboard import Completed, Host, ToolContext

    from ._call_io import (
        RecordingStorage,
        TerminalApprover,
        approver_for,
        parse_input,
        render_outcome,
    )

    rules = host_rules(arguments)
    sandbox = sandbox_settings(arguments)
    storage = RecordingStorage()
    approver = approver_for(
        yes=getattr(arguments, "yes", False), no=getattr(arguments, "no", False)
    )
    host = Host()
    async with host.location(
        arguments.location,
        plugins=arguments.plugins,
        trusted=arguments.trust,
        storage=storage,
        permissions=rules,
        approver=approver,
        **sandbox,
    ) as location:
        check_trust(arguments, location.enabled)
        for problem in location.plugin_errors:
            warn(problem)
        request = location.prepare()
        if arguments.command == "tools":
            if arguments.search is not None:
                return _search(location, arguments.search, arguments.limit, arguments.json)
            return _tools(request.definitions, as_json=arguments.json)
        say_sandbox(location.sandbox)
        raw = parse_input(arguments.input, stdin=sys.stdin)
        context = ToolContext(
            session_id=f"cli-{os.getpid()}", agent="cli", message_id="cli", call_id="cli-1"
        )
        terminal = approver if isinstance(approver, TerminalApprover) else None
        outcome = await _call(request, arguments.tool, raw, context, terminal)
        print(render_outcome(outcome, storage.saved, as_json=arguments.json))
        return Exit.COMPLETED if isinstance(outcome, Completed) else Exit.FAILED


async def _call(
    request: Request,
    name: str,
    raw: Any,
    context: ToolContext,
    terminal: TerminalApprover | None,
) -> Outcome:
    import attrs

    from pegboard import ToolCall

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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive whole number is needed, got {text!r}")
    return value


def _search(location: Location, query: str, limit: int, as_json: bool) -> int:
    """The best matches for ``query`` among every tool of the Location."""
    every = [definition.name for definition in location.prepare().definitions]
    if not query.strip():
        raise UsageError("--search needs a query: describe what the tool should do")
    found = location.prepare(defer=every).search(query, limit=limit) if every else ()
    if not found and not as_json:
        print(f"no tool matches {query!r}")
        return Exit.COMPLETED
    return _tools(found, as_json=as_json)


def _tools(definitions: Sequence[ToolDefinition], *, as_json: bool) -> int:
    if as_json:
        import json

        from pegboard import thaw

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
        return Exit.COMPLETED
    if not definitions:
        print("no tools: enable a plugin in pegboard.toml or with the host")
    width = max((len(definition.name) for definition in definitions), default=0)
    for definition in definitions:
        summary = definition.description.strip().splitlines()[0]
        print(f"{definition.name:<{width}}  {summary}")
    return Exit.COMPLETED
