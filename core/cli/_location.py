"""``pegboard tools`` and ``pegboard call``: a Location's tools from the shell."""

from __future__ import annotations

import argparse
import os
import sys

from ._common import (
    Exit,
    UsageError,
    add_location_options,
    add_secret_options,
    check_trust,
    secret_values,
    started,
    warn,
)
from ._rules import add_permission_options, host_rules
from ._sandbox import add_sandbox_options, sandbox_settings, say_sandbox

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pegboard import (
        Approver,
        Location,
        Outcome,
        PluginError,
        Progress,
        Request,
        ToolContext,
        ToolDefinition,
    )

    from ._call_io import RecordingStorage, TerminalApprover

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
        intermixed=True,
        help="call one tool and show its outcome",
        description="INPUT is JSON text, '-' for standard input, or key=value pairs "
        "(each value is read as JSON when it parses, else as a string); options may come "
        "before, between or after TOOL and INPUT. Exit codes: "
        "0 completed, 1 model-visible failure, 2 usage error, 3 operational failure.",
    )
    call.add_argument("tool", metavar="TOOL")
    call.add_argument("input", nargs="*", default=[], metavar="INPUT")
    add_location_options(call)
    add_sandbox_options(call)
    add_permission_options(call)
    add_secret_options(call)
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
    from pegboard import Host

    started()  # the engine is imported; plugins' code runs with the collector on
    rules = host_rules(arguments)
    sandbox = sandbox_settings(arguments)
    calling = arguments.command == "call"
    storage: RecordingStorage | None = None
    approver: Approver | None = None
    if calling:  # listing tools neither asks nor saves: it needs none of this
        from ._call_io import RecordingStorage, approver_for

        storage = RecordingStorage()
        approver = approver_for(yes=arguments.yes, no=arguments.no)
    secrets = secret_values(arguments)
    async with Host().location(
        arguments.location,
        plugins=arguments.plugins,
        trusted=arguments.trust,
        storage=storage,
        permissions=rules,
        approver=approver,
        secrets=secrets,
        **sandbox,
    ) as location:
        check_trust(arguments, location.enabled)
        request = location.prepare()
        if storage is None:  # pegboard tools
            if arguments.search is not None:
                return _search(location, arguments.search, arguments.limit, arguments.json)
            return _tools(
                request.definitions,
                location.enabled,
                location.plugin_errors,
                as_json=arguments.json,
            )
        for problem in location.plugin_errors:
            warn(problem)
        say_sandbox(location.sandbox)
        return await _call_command(arguments, request, storage, approver)


async def _call_command(
    arguments: argparse.Namespace,
    request: Request,
    storage: RecordingStorage,
    approver: Approver | None,
) -> int:
    from pegboard import Completed, ToolContext

    from ._call_io import TerminalApprover, parse_input, render_outcome

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
    return _tools(found, location.enabled, location.plugin_errors, as_json=as_json)


def _tools(
    definitions: Sequence[ToolDefinition],
    enabled: Sequence[str],
    errors: Sequence[PluginError],
    *,
    as_json: bool,
) -> int:
    if not definitions and errors and not as_json:
        # Nothing to list because plugins failed: why is the command's one message.
        print(f"pegboard: error: {_no_tools(enabled, errors)}", file=sys.stderr)
        return Exit.OPERATIONAL
    for problem in errors:
        warn(problem)
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
        return Exit.OPERATIONAL if errors and not definitions else Exit.COMPLETED
    if not definitions:
        print(
            "no tools: no plugin is enabled, or the plugins enabled register none; enable one "
            "with --plugin NAME or in pegboard.toml (plugins = [...]); 'pegboard plugins' "
            "lists those installed"
        )
    width = max((len(definition.name) for definition in definitions), default=0)
    for definition in definitions:
        summary = definition.description.strip().splitlines()[0]
        print(f"{definition.name:<{width}}  {summary}")
    return Exit.COMPLETED


#: What to do about a plugin that failed in these phases; in the others its message
#: says what to do (trust it, turn confinement off), or the plugin itself needs a fix.
_REMEDIES = {
    "import": "its module does not import: reinstall or fix it ('pegboard plugins' shows "
    "whether each installed plugin loads)",
    "options": "fix its options: the [{name}] table in pegboard.toml",
}


def _no_tools(enabled: Sequence[str], errors: Sequence[PluginError]) -> str:
    """Why there is nothing to list: each failed plugin's error, and what to do."""
    from ._words import in_cli_words

    reasons = []
    for error in errors:
        reason = f"{error.plugin!r} failed ({error.phase}): {in_cli_words(error.message)}"
        remedy = _REMEDIES.get(error.phase)
        if remedy is not None:
            reason += f"; {remedy.format(name=error.plugin)}"
        elif "--" not in reason:  # no option to pass: the plugin itself is at fault
            reason += f"; fix the plugin ('pegboard check {error.plugin}' tests it)"
        reasons.append(reason)
    other = "enable another plugin with --plugin NAME ('pegboard plugins' lists them)"
    if len(enabled) == 1 == len(reasons):
        return f"no tools: the only enabled plugin, {reasons[0]}; or {other}"
    lines = ["no tools: these enabled plugins failed:", *reasons, f"or {other}"]
    return "\n  ".join(lines)
