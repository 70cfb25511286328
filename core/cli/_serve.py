"""``pegboard serve``: a Location's tools for MCP clients."""

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
    path,
    print_error,
    secret_values,
    started,
    warn,
)
from ._rules import add_permission_options, host_rules
from ._sandbox import add_sandbox_options, sandbox_settings, say_sandbox

# typing is not imported at run time: `pegboard --help` stays cheap.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

__all__ = ("add",)


def add(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve a Location's tools to MCP clients",
        description="Serve the tools of a Location to MCP clients over stdio (one client, "
        "until it disconnects) or streamable HTTP at http://HOST:PORT/mcp, where every "
        "request needs the bearer token. Requests that the permission rules leave at "
        "'ask' are refused with the rule that would allow them, unless --client-approval "
        "lets clients answer them. Needs the mcp extra: pip install 'pegboard[mcp]'.",
    )
    add_location_options(serve)
    add_sandbox_options(serve)
    add_permission_options(serve)
    add_secret_options(serve)
    serve.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio",
        help="stdio (default) or streamable HTTP",
    )  # fmt: skip
    serve.add_argument(
        "--http", action="store_const", const="http", dest="transport",
        help="serve streamable HTTP: the same as --transport http",
    )  # fmt: skip
    serve.add_argument(
        "--host", metavar="HOST",
        help="the address to bind for HTTP (default: 127.0.0.1); Host and Origin "
        "headers must name it",
    )  # fmt: skip
    serve.add_argument(
        "--port", type=int, default=8000, metavar="N",
        help="the HTTP port, from 1 to 65535 (default: 8000)",
    )  # fmt: skip
    serve.add_argument(
        "--token-file", type=path, metavar="PATH",
        help="the bearer token HTTP clients must send, read from PATH (created with a new "
        "token, mode 0600, when missing); default: a new token in a new file",
    )  # fmt: skip
    serve.add_argument(
        "--session-key-file", type=path, metavar="PATH",
        help="the key that signs HTTP session IDs, read from PATH (created with a new key, "
        "mode 0600, when missing); give every replica behind one address the same file; "
        "default: a key of this process alone",
    )  # fmt: skip
    serve.add_argument(
        "--poll-after", type=float, metavar="SECONDS",
        help="close the HTTP stream of a call still running after SECONDS; clients on "
        "2025-11-25 resume it on this replica to get the rest (default: streams stay open)",
    )  # fmt: skip
    serve.add_argument(
        "--client-approval", action="store_true",
        help="let clients answer permission requests the rules leave at 'ask' (MCP "
        "elicitation); their answers last until the server stops and are never saved",
    )  # fmt: skip
    serve.set_defaults(run=run)


def run(arguments: argparse.Namespace) -> int:
    import contextlib
    import importlib.util
    import signal

    import anyio

    if arguments.port not in _PORTS:
        why = (
            "any free port is not offered, since clients must be told the port"
            if arguments.port == 0
            else "not a TCP port"
        )
        raise UsageError(f"--port {arguments.port}: {why}; give a number from 1 to 65535")
    sandbox = sandbox_settings(arguments)
    if importlib.util.find_spec("mcp") is None:
        raise UsageError("pegboard serve needs the MCP SDK: pip install 'pegboard[mcp]'")
    if arguments.transport == "stdio":
        for option, value in (
            ("--host", arguments.host),
            ("--token-file", arguments.token_file),
            ("--session-key-file", arguments.session_key_file),
            ("--poll-after", arguments.poll_after),
        ):
            if value is not None:
                raise UsageError(f"{option} applies to HTTP; add --http")
    poll_after = arguments.poll_after
    if poll_after is not None and not 0 < poll_after < float("inf"):
        raise UsageError(f"--poll-after {poll_after}: give a number of seconds above 0, such as 30")
    rules = host_rules(arguments)
    session_key = _session_key(arguments.session_key_file)
    # SIGTERM, as a client stops a server it started, unwinds like Ctrl-C, so that
    # a token file made for this run is removed.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with contextlib.contextmanager(_token)(arguments) as token:
            return anyio.run(_serve_location, arguments, rules, sandbox, token, session_key)
    except OSError as error:  # a port already in use, say
        if isinstance(error, NotADirectoryError):
            raise
        print_error(arguments, error)
        return Exit.OPERATIONAL


#: The ports ``--port`` takes. The address is announced, token file and all,
#: before the server binds it, so 0 (the system picks one) would announce a
#: port no client could reach.
_PORTS = range(1, 65536)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _token(arguments: argparse.Namespace) -> Iterator[str | None]:
    """The bearer token for HTTP: read, or made and written to a new 0600 file."""
    import secrets

    if arguments.transport != "http":
        yield None
        return
    path: Path | None = arguments.token_file
    if path is not None and path.exists():
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"--token-file {path}: cannot be read: {error}") from None
        if not token or any(char.isspace() for char in token):
            raise UsageError(
                f"--token-file {path}: holds no token; write one line without spaces, "
                "or remove the file to have one made"
            )
        if path.stat().st_mode & 0o077:
            warn(f"{path} can be read by other users; chmod 600 {path}")
        _announce(arguments, path)
        yield token
        return
    made = path is None
    if path is None:
        import platformdirs

        directory = platformdirs.user_data_path("pegboard") / "tokens"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = directory / f"serve-{os.getpid()}-{secrets.token_hex(4)}.token"
    token = secrets.token_urlsafe(32)
    try:
        # O_EXCL: never write a token into a file someone else prepared.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise UsageError(f"--token-file {path}: cannot be created: {error}") from None
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(token + "\n")
    _announce(arguments, path)
    try:
        yield token
    finally:
        if made:  # a token nobody asked to keep dies with the server
            path.unlink(missing_ok=True)


def _session_key(path: Path | None) -> bytes | None:
    """The session key in ``path``, made (64 hex digits, mode 0600) when missing."""
    import secrets

    from pegboard.mcp._sessions import MIN_KEY_BYTES

    if path is None:
        return None
    if not path.exists():
        try:
            # O_EXCL: never write a key into a file someone else prepared.
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another replica made it a moment ago: read it below
        except OSError as error:
            raise UsageError(f"--session-key-file {path}: cannot be created: {error}") from None
        else:
            with os.fdopen(descriptor, "w", encoding="ascii") as file:
                file.write(secrets.token_hex(32) + "\n")
            warn(f"wrote a new session key to {path}; give every replica this file")
    try:
        key = path.read_bytes().strip()
    except OSError as error:
        raise UsageError(f"--session-key-file {path}: cannot be read: {error}") from None
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(
            f"--session-key-file {path}: holds {len(key)} bytes, and a session key needs "
            f"{MIN_KEY_BYTES} or more; write one with: openssl rand -hex 32 > {path}"
        )
    if path.stat().st_mode & 0o077:
        warn(f"{path} can be read by other users; chmod 600 {path}")
    return key


def _announce(arguments: argparse.Namespace, path: Path) -> None:
    host = arguments.host or "127.0.0.1"
    where = f"[{host}]" if ":" in host else host
    print(
        f"pegboard: serving http://{where}:{arguments.port}/mcp; clients must send "
        f"Authorization: Bearer <the token in {path}>",
        file=sys.stderr,
        flush=True,
    )


async def _serve_location(
    arguments: argparse.Namespace,
    rules: list[Any],
    sandbox: dict[str, Any],
    token: str | None,
    session_key: bytes | None,
) -> int:
    from pegboard import Host
    from pegboard.mcp import ClientApprover, serve

    started()  # the engine is imported; plugins' code runs with the collector on
    approver = ClientApprover(client_approval=arguments.client_approval)
    secrets = secret_values(arguments)
    async with Host().location(
        arguments.location,
        plugins=arguments.plugins,
        trusted=arguments.trust,
        permissions=rules,
        approver=approver,
        secrets=secrets,
        **sandbox,
    ) as location:
        check_trust(arguments, location.enabled)
        for problem in location.plugin_errors:
            warn(problem)
        say_sandbox(location.sandbox, always=False)
        try:
            await serve(
                location,
                transport=arguments.transport,
                host=arguments.host or "127.0.0.1",
                port=arguments.port,
                token=token,
                session_key=session_key,
                poll_after=arguments.poll_after,
            )
        except ValueError as error:  # an address that cannot be checked
            raise UsageError(str(error)) from None
    return Exit.COMPLETED
