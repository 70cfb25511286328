"""Running one manifest command: JSON in on stdin, JSON or text out on stdout."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import attrs

import pegboard

__all__ = ("Finished", "response", "run_command")

#: A command that prints more than this is stopped: the model could not read it anyway.
MAX_STDOUT = 8 * 1024 * 1024
#: How much of standard error a failure quotes (its end, where the error usually is).
STDERR_TAIL = 4096
_WRAPPER_KEYS = frozenset({"output", "content", "metadata"})


@attrs.frozen
class Finished:
    """A command that ran to its end: exit status and what it printed."""

    status: int
    stdout: bytes
    stderr: bytes


async def run_command(
    command: Sequence[str],
    *,
    cwd: Path,
    stdin: bytes,
    timeout: float,  # noqa: ASYNC109 - the manifest's own limit, reported as a ToolFailure
    confinement: pegboard.Confinement,
) -> Finished:
    """Run ``command`` confined, in its own process group; stop all of it when it ends.

    Raises `pegboard.ToolFailure` when the command cannot start, prints too much or
    outlasts ``timeout``. Cancellation stops the process group and propagates.
    """
    try:
        process = await anyio.open_process(
            confinement.command(list(command), cwd=cwd),
            cwd=cwd,
            env=confinement.environment,
            pass_fds=confinement.pass_fds,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        raise pegboard.ToolFailure(
            f"cannot run {command[0]!r}: {error.strerror or error}; the manifest's command "
            "must name a program that exists here"
        ) from None
    out, err = bytearray(), bytearray()
    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(_feed, process, stdin)
                group.start_soon(_collect, process.stdout, out, MAX_STDOUT, group.cancel_scope)
                group.start_soon(_collect, process.stderr, err, None, group.cancel_scope)
            if len(out) > MAX_STDOUT:
                raise pegboard.ToolFailure(
                    f"the command printed more than {MAX_STDOUT:,} bytes and was stopped; "
                    "ask for less"
                )
            status = await process.wait()
    except TimeoutError:
        raise pegboard.ToolFailure(
            f"the command did not finish within {timeout:g} s and was stopped; try a smaller input"
        ) from None
    finally:
        # Whatever happened, nothing the command started outlives the call.
        _stop_group(process)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    return Finished(status, bytes(out), bytes(err[-STDERR_TAIL:]))


async def _feed(process: anyio.abc.Process, data: bytes) -> None:
    stream = process.stdin
    assert stream is not None
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the command exited without reading its input: its output says why
    finally:
        await stream.aclose()


async def _collect(
    stream: anyio.abc.ByteReceiveStream | None,
    into: bytearray,
    limit: int | None,
    scope: anyio.CancelScope,
) -> None:
    """Read ``stream`` into ``into``; past ``limit`` bytes, stop the whole command."""
    assert stream is not None
    async for chunk in stream:
        into.extend(chunk)
        if limit is not None and len(into) > limit:
            scope.cancel()  # a result, not an error: the caller reports it
            return
        if limit is None and len(into) > 2 * STDERR_TAIL:
            del into[:-STDERR_TAIL]  # keep standard error's end only


def _stop_group(process: anyio.abc.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
        os.killpg(process.pid, signal.SIGKILL)


def response(stdout: bytes, *, has_output: bool) -> pegboard.ToolResponse[Any] | str:
    """What a command printed, as the tool's response.

    A JSON object whose keys are among ``output``, ``content`` and ``metadata`` is
    the response itself; other JSON is the output of a tool that declares one;
    anything else is text for the model.
    """
    text = stdout.decode("utf-8", "replace")
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, dict) and value and set(value) <= _WRAPPER_KEYS:
        return pegboard.ToolResponse(
            output=value.get("output"),
            content=_content(value.get("content")),
            metadata=value.get("metadata"),
        )
    if has_output:
        return pegboard.ToolResponse(output=value)
    return text


def _content(value: Any) -> Any:
    """JSON content: a string, or a list of strings and text/image items."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        return json.dumps(value)
    items: list[pegboard.ContentItem | str] = []
    for item in value:
        items.append(_item(item) if isinstance(item, Mapping) else str(item))
    return items


def _item(item: Mapping[str, Any]) -> pegboard.ContentItem | str:
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        return pegboard.Text(item["text"])
    if kind == "image":
        try:
            data = base64.b64decode(str(item.get("data", "")), validate=True)
            return pegboard.Image(data, str(item.get("mime_type", "")))
        except (binascii.Error, ValueError):
            pass  # shown as JSON below: nothing the command said is lost
    return json.dumps(dict(item))
