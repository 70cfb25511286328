"""The one ``execute`` tool a Code Mode request advertises."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pegboard import Request, Tool, ToolContext, ToolDefinition, ToolResponse, tool

from ._limits import CodeModeLimits
from ._program import run_program
from ._sandbox import require
from ._signatures import python_names, signature

__all__ = ("describe", "execute_tool")


@attrs.frozen
class Program:
    code: str = attrs.field(
        metadata={
            "description": "A Python program. Tools are async functions taking keyword "
            "arguments: `result = await some_tool(name=value)`. What it prints and the "
            "value of its last expression are the result."
        }
    )


#: The portable tool search's name; in a program it returns the list of matches.
SEARCH_TOOLS = "search_tools"

_SEARCHING = (
    "More tools are available than the stubs below show. Find them with "
    "`found = await search_tools(query='what to do', limit=5)`: a list of the best "
    "matching tools, best first, each a dict with `name`, `description` and "
    "`input_schema`. Any tool it returns, and every other tool of this request, can be "
    "called in the same program as an async function named after the tool (a `-` in the "
    "name becomes `_`), with keyword arguments following its input schema.\n\n"
)


def describe(
    functions: Mapping[str, str],
    definitions: tuple[ToolDefinition, ...],
    limits: CodeModeLimits,
    *,
    searching: bool = False,
) -> str:
    """The ``execute`` tool's description: how to write a program, then the stub of
    every advertised tool (``search_tools`` stands for the deferred ones).
    """
    by_name = {definition.name: definition for definition in definitions}
    stubs = "\n\n".join(
        signature(function, by_name[name])
        for function, name in functions.items()
        if name in by_name and name != SEARCH_TOOLS
    )
    memory = f"{limits.memory / (1024 * 1024):g} MiB"
    return (
        "Run a Python program that calls tools, in a sandbox: no files, network, processes "
        "or environment, only the modules the sandbox has (asyncio, json, re, math, "
        "datetime, dataclasses, ...), and a subset of Python (no class inheritance).\n\n"
        "Each tool below is an async function taking keyword arguments; `await` works at "
        "the top level: `result = await some_tool(name=value)`. Run several at once with "
        "`await asyncio.gather(first(...), second(...))`. A tool with a return type other "
        "than `str` returns its machine value (plain dicts and lists); a tool returning "
        "`str` returns its text. A failed tool call raises RuntimeError(\"tool '<name>' "
        'failed (<kind>): <message>"); catch it to go on.\n\n'
        "The result is what the program prints, then the value of its last expression: "
        "filter and summarize inside the program, and print only what matters. "
        f"Limits for one program: {limits.wall_time:g} s (tool calls included), {memory} "
        f"of memory, {limits.calls} tool calls. An argument shown as `= ...` is optional.\n\n"
        f"{_SEARCHING if searching else ''}"
        f"```python\n{stubs or '# (no tools are available)'}\n```"
    )


def execute_tool(request: Request, limits: CodeModeLimits) -> Tool:
    """The ``execute`` tool over ``request``'s captured tools.

    The program may call every captured tool, deferred or not; when some are
    deferred it also gets ``search_tools``. Each call runs one program; its
    tool calls run through ``request`` (the same snapshot and pipeline) with
    call IDs ``<execute call id>/1``, ``/2``...
    """
    require()  # a missing sandbox fails at prepare, not at the model's first call
    advertised = tuple(d for d in request.definitions if d.name != SEARCH_TOOLS)
    searching = len(advertised) < len(request.definitions)
    # search_tools first, so a tool whose name reads the same in Python yields to it.
    reachable = request.definitions[-1:] if searching else ()
    reachable += advertised + request.deferred
    functions = python_names(reachable)
    description = describe(functions, advertised, limits, searching=searching)

    async def execute(program: Program, context: ToolContext) -> ToolResponse[None]:
        text = await run_program(program.code, request, functions, context, limits)
        return ToolResponse(content=text)

    return tool(description=description, input=Program, execute=execute)
