"""The tool the benchmarks time: ``{a: int, b: int}`` in, ``{sum: int}`` out, attrs both ways."""

from __future__ import annotations

import attrs

import pegboard

__all__ = ("ADD_TOOL", "AddInput", "AddOutput", "add")


@attrs.frozen
class AddInput:
    a: int
    b: int


@attrs.frozen
class AddOutput:
    sum: int


async def add(input: AddInput, context: pegboard.ToolContext) -> AddOutput:
    return AddOutput(sum=input.a + input.b)


ADD_TOOL = pegboard.tool(
    description="Add two integers.", execute=add, input=AddInput, output=AddOutput
)
