"""Tools the adapter tests run through each framework: parallel, failing, media, slow."""

from __future__ import annotations

from typing import Any

import anyio

import pegboard

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
WORD = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


class Board:
    """Tools for one test, with what they saw."""

    def __init__(self) -> None:
        self.both_started = anyio.Event()
        self.started: list[str] = []
        self.contexts: list[pegboard.ToolContext] = []
        self.cleaned_up = anyio.Event()

    def tools(self) -> dict[str, pegboard.Tool]:
        async def meet(input: Any, context: pegboard.ToolContext) -> str:
            # Finishes only when a second call is running at the same time.
            self.contexts.append(context)
            self.started.append(input["word"])
            if len(self.started) >= 2:
                self.both_started.set()
            with anyio.fail_after(5):
                await self.both_started.wait()
            return f"met {input['word']}"

        async def picture(input: Any, context: pegboard.ToolContext) -> pegboard.ToolResponse:
            self.contexts.append(context)
            return pegboard.ToolResponse(
                content=["a picture", pegboard.Image(PNG, "image/png")], metadata={"ui": 1}
            )

        async def fail(input: Any, context: pegboard.ToolContext) -> str:
            self.contexts.append(context)
            await context.progress(pegboard.Progress(content=("wrote 3 of 5",)))
            raise pegboard.ToolFailure("disk full")

        async def crash(input: Any, context: pegboard.ToolContext) -> str:
            self.contexts.append(context)
            raise RuntimeError("bug in the tool")

        async def hang(input: Any, context: pegboard.ToolContext) -> str:
            self.contexts.append(context)
            try:
                await anyio.sleep(3600)
            finally:
                self.cleaned_up.set()
            return "never"

        return {
            "meet": pegboard.tool(description="Meet another call.", execute=meet, input=WORD),
            "picture": pegboard.tool(description="Draw.", execute=picture),
            "fail": pegboard.tool(description="Fails.", execute=fail),
            "crash": pegboard.tool(description="Crashes.", execute=crash),
            "hang": pegboard.tool(description="Never returns.", execute=hang),
        }
