"""``pegboard serve``: a Location's tools for MCP clients."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import Exit, UsageError, add_location_options, print_error, warn

__all__ = ("add",)


def add(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve a Location's tools to MCP clients",
        description="Serve the tools of a Location to MCP clients over stdio (one client, "
        "until it disconnects) or streamable HTTP at http://127.0.0.1:PORT/mcp. Permission "
        "requests that ask are put to the client (MCP elicitation) or rejected. Needs the "
        "mcp extra: pip install 'pegboard[mcp]'.",
    )
    add_location_options(serve)
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio",
        help="stdio (default) or streamable HTTP",
    )  # fmt: skip
    serve.add_argument(
        "--port", type=int, default=8000, metavar="N", help="the HTTP port (default: 8000)"
    )
    serve.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    import importlib.util

    import anyio

    if importlib.util.find_spec("mcp") is None:
        raise UsageError("pegboard serve needs the MCP SDK: pip install 'pegboard[mcp]'")
    try:
        return anyio.run(_serve_location, arguments)
    except OSError as error:  # a port already in use, say
        if isinstance(error, NotADirectoryError):
            raise
        print_error(arguments, error)
        return Exit.OPERATIONAL


async def _serve_location(arguments: argparse.Namespace) -> int:
    from pegboard import Host
    from pegboard.mcp import ClientApprover, serve

    async with Host().location(
        arguments.location, trusted=arguments.trust, approver=ClientApprover()
    ) as location:
        for problem in location.plugin_errors:
            warn(problem)
        await serve(location, transport=arguments.transport, port=arguments.port)
    return Exit.COMPLETED
