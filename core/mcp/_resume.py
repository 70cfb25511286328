"""Polled SSE streams: a long call's stream is closed on time and resumed by the client.

A handshake-era client (2025-11-25 or later) that gets a priming event on a
call's stream reconnects with ``GET`` and ``Last-Event-ID`` when the server
closes that stream, and gets every event it missed. The events live in the
memory of the replica that ran the call, for `KEEP_FOR` seconds after it ends.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import attrs
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage, EventStore
from mcp_types import JSONRPCError, JSONRPCResponse

if TYPE_CHECKING:
    from mcp.server.streamable_http import EventCallback
    from mcp_types import JSONRPCMessage

__all__ = ("KEEP_FOR", "RETRY_MS", "SessionEvents", "Stream", "StreamEvents")

#: How long a finished call's events wait for its client to come back, in seconds.
KEEP_FOR = 300.0
#: How long a client waits before it resumes a closed stream, in milliseconds.
RETRY_MS = 500
#: At most this many streams are kept; the oldest finished ones go first.
MAX_STREAMS = 10_000
#: At most this many events are kept of one stream: the oldest notifications go
#: first, never the call's answer.
MAX_EVENTS = 1_000


@attrs.define(eq=False)
class Stream:
    """The events of one request's stream, in the order they were sent."""

    token: str
    session: str
    request_id: str
    events: list[tuple[int, JSONRPCMessage]] = attrs.field(factory=list)
    last: int = 0
    #: Whether the request's answer (or its end without one) is among the events.
    done: bool = False
    ended: float | None = None
    changed: anyio.Event = attrs.field(factory=anyio.Event)
    #: Whether the server closed the stream before the answer (the client resumes it).
    polled: bool = False
    #: Whether the client cancelled the call after its stream was closed.
    cancelled: bool = False

    def event_id(self, seq: int) -> str:
        return f"{self.token}.{seq}"

    def add(self, message: JSONRPCMessage | None) -> int:
        self.last += 1
        if message is not None:
            self.events.append((self.last, message))
            if len(self.events) > MAX_EVENTS:
                del self.events[0]
            if _answers(message, self.request_id):
                self.finish()
        self._changed()
        return self.last

    def after(self, seq: int) -> list[tuple[int, JSONRPCMessage]]:
        return [(number, message) for number, message in self.events if number > seq]

    def cancel(self) -> None:
        if not self.done:
            self.cancelled = True
            self._changed()

    def finish(self) -> None:
        if not self.done:
            self.done = True
            self.ended = time.monotonic()
            self._changed()

    def _changed(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


def _answers(message: JSONRPCMessage, request_id: str) -> bool:
    return (
        isinstance(message, JSONRPCResponse | JSONRPCError)
        and message.id is not None
        and str(message.id) == request_id
    )


class StreamEvents:
    """Every polled stream this process keeps, by token and by session and request."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._streams: OrderedDict[str, Stream] = OrderedDict()
        self._requests: dict[tuple[str, str], Stream] = {}
        self._clock = clock

    def session(self, session: str) -> SessionEvents:
        """The event store the SDK's transport uses for one request of ``session``."""
        return SessionEvents(self, session)

    def open(self, session: str, request_id: str) -> Stream:
        """A new stream for ``request_id`` (a request ID can be used again once answered)."""
        self._expire()
        stream = Stream(secrets.token_urlsafe(16), session, request_id)
        self._streams[stream.token] = stream
        self._requests[session, request_id] = stream
        return stream

    def request(self, session: str, request_id: str) -> Stream | None:
        return self._requests.get((session, request_id))

    def find(self, event_id: str, session: str) -> tuple[Stream, int] | None:
        """The stream holding ``event_id`` and the event's number, if it is one of
        ``session``'s; another session's event is as unknown as a made-up one.
        """
        token, _, number = event_id.rpartition(".")
        stream = self._streams.get(token)
        if stream is None or stream.session != session or not number.isdigit():
            return None
        return stream, int(number)

    def forget(self, stream: Stream) -> None:
        """Drop a stream whose answer reached its client on the stream itself."""
        self._streams.pop(stream.token, None)
        if self._requests.get((stream.session, stream.request_id)) is stream:
            del self._requests[stream.session, stream.request_id]

    def __len__(self) -> int:
        return len(self._streams)

    def _expire(self) -> None:
        now = self._clock()
        finished = [
            stream
            for stream in self._streams.values()
            if stream.ended is not None and now - stream.ended > KEEP_FOR
        ]
        for stream in finished:
            self.forget(stream)
        while len(self._streams) >= MAX_STREAMS:
            oldest = next(
                (stream for stream in self._streams.values() if stream.done),
                next(iter(self._streams.values())),
            )
            self.forget(oldest)


class SessionEvents(EventStore):
    """One session's view of `StreamEvents`, as the SDK's ``EventStore``."""

    def __init__(self, events: StreamEvents, session: str) -> None:
        self.events = events
        self.session = session

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        if stream_id == GET_STREAM_KEY:
            # No standalone stream is offered, so nothing on it can be resumed.
            return f"none.{secrets.token_urlsafe(8)}"
        stream = self.events.request(self.session, stream_id)
        if message is None or stream is None:
            # A priming event starts a request's stream.
            stream = self.events.open(self.session, stream_id)
        return stream.event_id(stream.add(message))

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        found = self.events.find(last_event_id, self.session)
        if found is None:
            return None
        stream, seq = found
        for number, message in stream.after(seq):
            await send_callback(EventMessage(message, stream.event_id(number)))
        return stream.request_id
