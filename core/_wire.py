"""The confined-plugin worker protocol: length-prefixed JSON frames over pipes.

One vocabulary, both ways. Host to worker: ``activate``, ``call``, ``cancel``,
``execute_after``, ``prepare_request``, ``close``. Worker to host:
``registered``, ``closed``, ``activated``, ``progress``, ``result``, ``failure``,
``refused``, ``defect``, ``replaced``, ``error``, ``log``; the answer to
``prepare_request`` (``kept``) comes on a pipe of its own, since the host's
``location.prepare()`` waits for it synchronously. Content, outcomes and
definitions travel in their durable JSON forms (`pegboard.dump_outcome`'s items).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import attrs
import orjson
import sniffio

from ._content import ContentItem
from ._durable import _dump_item, _load_items
from ._json import thaw
from ._tool import Progress, Tool, ToolAnnotations, ToolDefinition

__all__ = (
    "Channel",
    "Message",
    "ProtocolError",
    "dump_annotations",
    "dump_content",
    "dump_definition",
    "dump_progress",
    "dump_tool",
    "frame",
    "load_annotations",
    "load_content",
    "load_definition",
    "load_progress",
    "read_blocking",
)

#: One message of the protocol: a JSON object whose ``type`` names it.
Message = dict[str, Any]
#: The largest frame either side accepts: a worker cannot make the host buffer more.
MAX_FRAME = 64 << 20
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The other side broke the protocol: a frame too large, or not a JSON object."""


#: Set in a frame's length: its JSON holds an integer beyond 64 bits, which orjson
#: cannot write and would read as a float, so the standard library's json does both.
_EXACT = 1 << 31


def frame(message: Mapping[str, Any]) -> bytes:
    """``message`` as one frame: its length (4 bytes, big-endian), then its JSON."""
    try:
        data, flag = orjson.dumps(message), 0
    except TypeError:  # an integer beyond 64 bits: JSON has them, orjson does not
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        flag = _EXACT
    if len(data) > MAX_FRAME:
        kind = message.get("type")
        raise ProtocolError(f"a {kind!r} message of {len(data):,} bytes is too large")
    return _HEADER.pack(len(data) | flag) + data


def _parse(buffer: bytearray) -> Message | None:
    """Take one whole frame off the front of ``buffer``, or None while incomplete."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    exact, size = size & _EXACT, size & ~_EXACT
    if size > MAX_FRAME:
        raise ProtocolError(f"a frame of {size:,} bytes is over the {MAX_FRAME:,}-byte limit")
    end = _HEADER.size + size
    if len(buffer) < end:
        return None
    data = bytes(buffer[_HEADER.size : end])
    try:
        message = json.loads(data) if exact else orjson.loads(data)
    except ValueError as error:  # orjson.JSONDecodeError is a ValueError too
        raise ProtocolError(f"a frame is not JSON: {error}") from None
    del buffer[:end]
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("a frame is not a message (a JSON object with a 'type')")
    return message


class Channel:
    """Frames in from one pipe and out to another, on the event loop.

    ``send`` never blocks: it queues the frame and the `pump` task writes it, so
    a cancelled caller can still say ``cancel``. `flush_blocking` writes what is
    queued without the event loop, for the one synchronous exchange.
    """

    def __init__(self, incoming: int, outgoing: int) -> None:
        self._incoming = incoming
        self._outgoing = outgoing
        os.set_blocking(incoming, False)
        os.set_blocking(outgoing, False)
        self._read = bytearray()
        self._write = bytearray()
        self._wake, self._woken = anyio.create_memory_object_stream[None](math.inf)
        self.broken = False

    def send(self, message: Mapping[str, Any]) -> None:
        """Queue ``message`` for the pump to write."""
        if self.broken:
            return
        queued = bool(self._write)
        self._write += frame(message)
        if not queued:
            # Straight into the pipe while it has room: no task switch to the pump.
            # With frames queued, the pump writes this one after them, in order.
            self._write_some()
        if self._write:
            with contextlib.suppress(anyio.ClosedResourceError):  # closing: flush_blocking
                self._wake.send_nowait(None)

    def close(self) -> None:
        """Stop the pump once it has written what is queued (the descriptors stay open)."""
        self._wake.close()

    async def pump(self) -> None:
        """Write queued frames until the pipe breaks or the task is cancelled."""
        async with self._woken:
            async for _ in self._woken:
                while self._write and not self.broken:
                    if not self._write_some():
                        await anyio.wait_writable(self._outgoing)

    def _write_some(self) -> bool:
        try:
            written = os.write(self._outgoing, self._write)
        except BlockingIOError:
            return False
        except OSError:  # the other side is gone
            self.broken = True
            self._write.clear()
            return True
        del self._write[:written]
        return True

    def flush_blocking(self, deadline: float) -> None:
        """Write every queued frame now, waiting at most until ``deadline`` (monotonic)."""
        while self._write and not self.broken:
            if not self._write_some():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the worker does not read its pipe")
                select.select([], [self._outgoing], [], left)

    async def deliver(self, handle: Callable[[Message], bool]) -> None:
        """Hand each message to ``handle`` as it arrives, until the other side closes
        its end or ``handle`` returns False. Raises `ProtocolError` on a bad frame.

        On asyncio the pipe stays registered with the event loop and messages are
        handled in its callback: no task wakes up per message, and the descriptor is
        not re-registered for each one. Elsewhere it loops on `receive`.
        """
        while (message := _parse(self._read)) is not None:  # read before delivery began
            if not handle(message):
                return
        if sniffio.current_async_library() != "asyncio":
            while (message := await self.receive()) is not None:
                if not handle(message):
                    return
            return
        import asyncio

        loop = asyncio.get_running_loop()
        over: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if over.done():
                return
            try:
                data = os.read(self._incoming, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                over.set_result(None)
                return
            self._read += data
            try:
                while (message := _parse(self._read)) is not None:
                    if not handle(message):
                        over.set_result(None)
                        return
            except BaseException as error:  # noqa: BLE001 - raised by the waiting task
                over.set_exception(error)

        loop.add_reader(self._incoming, readable)
        try:
            await over
        finally:
            loop.remove_reader(self._incoming)

    async def receive(self) -> Message | None:
        """The next message, or None when the other side closed its end."""
        while True:
            message = _parse(self._read)
            if message is not None:
                return message
            try:
                data = os.read(self._incoming, 1 << 16)
            except BlockingIOError:
                await anyio.wait_readable(self._incoming)
                continue
            except OSError:
                return None
            if not data:
                return None
            self._read += data


def read_blocking(descriptor: int, buffer: bytearray, deadline: float) -> Message:
    """The next message on ``descriptor`` without the event loop, by ``deadline``."""
    while True:
        message = _parse(buffer)
        if message is not None:
            return message
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the worker did not answer in time")
        readable, _, _ = select.select([descriptor], [], [], left)
        if not readable:
            continue
        try:
            data = os.read(descriptor, 1 << 16)
        except BlockingIOError:
            continue
        if not data:
            raise EOFError("the worker closed its answers pipe")
        buffer += data


def dump_content(items: Sequence[ContentItem]) -> list[dict[str, Any]]:
    """Content items in their durable JSON form."""
    return [_dump_item(item) for item in items]


def load_content(data: object) -> tuple[ContentItem, ...]:
    """Content items back from their durable JSON form; ``ValueError`` if malformed."""
    if not isinstance(data, list):
        raise ValueError("content is a JSON array of items")
    try:
        return _load_items("$.content", data)
    except (KeyError, TypeError) as error:
        raise ValueError(f"malformed content item: {error}") from None


def dump_progress(progress: Progress) -> dict[str, Any]:
    """A progress report as JSON; its partial content in the durable form."""
    return {
        "message": progress.message,
        "current": progress.current,
        "total": progress.total,
        "content": dump_content(progress.content),
    }


def load_progress(data: Mapping[str, Any]) -> Progress:
    """A progress report back from `dump_progress`."""
    return Progress(
        message=data.get("message"),
        current=data.get("current"),
        total=data.get("total"),
        content=load_content(data.get("content", [])),
    )


def dump_annotations(annotations: ToolAnnotations | None) -> dict[str, Any] | None:
    return None if annotations is None else attrs.asdict(annotations)


def load_annotations(data: Mapping[str, Any] | None) -> ToolAnnotations | None:
    return None if data is None else ToolAnnotations(**data)


def dump_tool(authored: str, tool: Tool) -> dict[str, Any]:
    """What the host needs to stand a proxy in for ``tool``: its definition's parts."""
    output = tool.output
    return {
        "name": authored,
        "description": tool.description,
        "input_schema": thaw(tool.input.json_schema),
        "output_schema": None if output is None else thaw(output.json_schema),
        "title": tool.title,
        "annotations": dump_annotations(tool.annotations),
        "extra": thaw(tool.extra),
    }


def dump_definition(definition: ToolDefinition) -> dict[str, Any]:
    """A `ToolDefinition` as JSON (for a confined ``prepare_request`` hook)."""
    return {
        "name": definition.name,
        "description": definition.description,
        "input_schema": thaw(definition.input_schema),
        "output_schema": thaw(definition.output_schema),
        "title": definition.title,
        "annotations": dump_annotations(definition.annotations),
        "extra": thaw(definition.extra),
    }


def load_definition(data: Mapping[str, Any]) -> ToolDefinition:
    """A `ToolDefinition` back from `dump_definition`."""
    return ToolDefinition(
        data["name"],
        data["description"],
        data["input_schema"],
        data["output_schema"],
        title=data.get("title"),
        annotations=load_annotations(data.get("annotations")),
        extra=data.get("extra"),
    )
