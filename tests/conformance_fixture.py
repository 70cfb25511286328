"""A plugin with the fixture tools the MCP conformance suite's tool scenarios call."""

from __future__ import annotations

import io
import struct
import wave
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

import pegboard

__all__ = ("SCHEMA_2020_12", "activate_location")

#: The input schema the ``json-schema-2020-12`` scenario expects back unchanged.
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


def _png() -> bytes:
    """A 1x1 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav() -> bytes:
    """A tenth of a second of silence, 8 kHz mono."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(8000)
        audio.writeframes(b"\x00\x00" * 800)
    return buffer.getvalue()


PNG = _png()
WAV = _wav()


async def _simple_text(input: None, context: pegboard.ToolContext) -> str:
    return "This is a simple text response for testing."


async def _image(input: None, context: pegboard.ToolContext) -> pegboard.ToolResponse[None]:
    return pegboard.ToolResponse(content=[pegboard.Image(PNG, "image/png")])


async def _audio(input: None, context: pegboard.ToolContext) -> pegboard.ToolResponse[None]:
    return pegboard.ToolResponse(content=[pegboard.Audio(WAV, "audio/wav")])


async def _embedded(input: None, context: pegboard.ToolContext) -> pegboard.ToolResponse[None]:
    resource = pegboard.EmbeddedResource(
        uri="test://embedded-resource",
        text="This is an embedded resource content.",
        mime_type="text/plain",
    )
    return pegboard.ToolResponse(content=[resource])


async def _mixed(input: None, context: pegboard.ToolContext) -> pegboard.ToolResponse[None]:
    resource = pegboard.EmbeddedResource(
        uri="test://mixed-content-resource",
        text='{"test":"data","value":123}',
        mime_type="application/json",
    )
    return pegboard.ToolResponse(
        content=[
            pegboard.Text("Multiple content types test:"),
            pegboard.Image(PNG, "image/png"),
            resource,
        ]
    )


async def _error(input: None, context: pegboard.ToolContext) -> str:
    raise pegboard.ToolFailure("This tool intentionally returns an error for testing")


async def _progress(input: None, context: pegboard.ToolContext) -> str:
    for done in (0, 50, 100):
        if done:
            await anyio.sleep(0.05)
        await context.progress(pegboard.Progress(current=done, total=100))
    return "Progress complete"


async def _logging(input: None, context: pegboard.ToolContext) -> str:
    await context.log("info", "Tool execution started")
    await anyio.sleep(0.05)
    await context.log("info", "Tool processing data")
    await anyio.sleep(0.05)
    await context.log("info", "Tool execution completed")
    return "Logging complete"


#: How long ``test_reconnection`` runs: past the served fixture's ``poll_after``
#: (its stream is closed mid-call), and well before a second poll would close the
#: client's resumed stream.
RECONNECTION_SECONDS = 3.0
#: The ``poll_after`` the conformance tests serve the fixture with.
POLL_AFTER = 2.0


async def _reconnection(input: None, context: pegboard.ToolContext) -> str:
    await anyio.sleep(RECONNECTION_SECONDS)
    return "Reconnection test completed"


async def _schema_2020_12(input: dict[str, Any], context: pegboard.ToolContext) -> str:
    return f"Received: {sorted(input)}"


TOOLS = {
    "test_simple_text": pegboard.tool(
        description="Returns a simple text response.", execute=_simple_text
    ),
    "test_image_content": pegboard.tool(description="Returns a PNG image.", execute=_image),
    "test_audio_content": pegboard.tool(description="Returns a WAV clip.", execute=_audio),
    "test_embedded_resource": pegboard.tool(
        description="Returns an embedded text resource.", execute=_embedded
    ),
    "test_multiple_content_types": pegboard.tool(
        description="Returns text, an image and an embedded resource.", execute=_mixed
    ),
    "test_error_handling": pegboard.tool(
        description="Always fails with a message for the model.", execute=_error
    ),
    "test_tool_with_progress": pegboard.tool(
        description="Reports progress 0, 50 and 100 of 100.", execute=_progress
    ),
    "test_tool_with_logging": pegboard.tool(
        description="Sends three info log messages.", execute=_logging
    ),
    "test_reconnection": pegboard.tool(
        description="Runs past the server's poll interval, so its stream is closed mid-call.",
        execute=_reconnection,
    ),
    "json_schema_2020_12_tool": pegboard.tool(
        description="Tool with JSON Schema 2020-12 features",
        execute=_schema_2020_12,
        input=SCHEMA_2020_12,
    ),
}


@pegboard.hookimpl
async def activate_location(
    tools: pegboard.Tools, options: Mapping[str, Any], services: pegboard.Services
) -> AsyncIterator[None]:
    """Give the Location the conformance suite's fixture tools."""
    tools.register(TOOLS)
    yield
