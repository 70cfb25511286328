"""The fixed per-call pipeline: decode, execute, encode, normalize, bound, hooks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread
import attrs
import orjson

from ._bounding import InvalidText, OutputLimits, bound_content, check_text, fits
from ._codec import MAX_DEPTH
from ._content import ContentItem, Text, normalize_content
from ._errors import CodecError, ToolFailure
from ._json import dumps, find_problem, iter_strings, loads
from ._outcome import CallIdentity, Completed, ErrorKind, Failed, Outcome, ToolCall, ToolError
from ._storage import ManagedStorage
from ._tool import RECORDER, ProgressRecorder, Tool, ToolResponse

__all__ = ("AfterHook", "ExecuteEvent", "Pipeline")

logger = logging.getLogger("pegboard")


@attrs.frozen
class ExecuteEvent:
    """What an ``execute_after`` hook sees: the call's identity, the effective
    tool name, the bounded canonical outcome and its managed file paths.
    """

    call: CallIdentity
    name: str
    outcome: Outcome
    managed: tuple[Path, ...] = ()


#: An ``execute_after`` hook as the pipeline runs it: a replacement or ``None``.
AfterHook = Callable[[ExecuteEvent], Awaitable[Outcome | None]]


@attrs.frozen
class Pipeline:
    """A Location's settings for settling calls, shared by all its requests."""

    limits: OutputLimits
    storage: ManagedStorage
    max_input_bytes: int
    after_hooks: Sequence[AfterHook] = ()

    async def run(self, name: str, tool: Tool, call: ToolCall, identity: CallIdentity) -> Outcome:
        """Steps 2 to 8 for a resolved call."""
        try:
            value = tool.input.decode(self.read_input(call.input))
        except ValueError as error:  # CodecError, or a custom codec's ValueError
            return await self.fail(
                identity, name, "invalid_input", f"invalid input for tool {name!r}: {_why(error)}"
            )
        # The tool gets the runner's own context; its progress is recorded here.
        context = call.context
        recorder = ProgressRecorder(context)
        token = RECORDER.set(recorder)
        failure: ToolFailure | None = None
        # No broad except here: cancellation and defects propagate unchanged.
        try:
            if tool.is_async:
                result = await tool.execute(value, context)
            else:
                result = await anyio.to_thread.run_sync(tool.execute, value, context)
        except ToolFailure as caught:
            failure = caught
        finally:
            RECORDER.reset(token)
        if failure is not None:
            return await self.fail(
                identity,
                name,
                "tool_failure",
                str(failure.message),
                metadata=failure.metadata,
                partial=recorder.last,
            )
        if isinstance(result, ToolResponse):
            output, content, metadata = result.output, result.content, result.metadata
        elif tool.output is not None:
            output, content, metadata = result, None, None  # a bare output value
        else:
            output, content, metadata = None, result, None  # bare content
        try:
            outcome = self.complete(tool, output, content, metadata, identity, name)
            if not self.after_hooks and fits(outcome.content, self.limits):
                return outcome  # nothing to bound, nobody to tell: skip the general path
            # Text too large to measure cheaply is checked for UTF-8 as it is bounded.
            bounded, managed = await self.bound(outcome)
        except ValueError as error:
            return await self.fail(
                identity,
                name,
                "invalid_output",
                f"invalid output from tool {name!r}: {_why(error)}",
                partial=recorder.last,
            )
        return await self.after(bounded, managed, name)

    def read_input(self, raw: object) -> Any:
        """Raw provider input as plain JSON within the size and depth limits."""
        if type(raw) is str and raw.isascii() and len(raw) <= self.max_input_bytes:
            return loads(raw, max_depth=MAX_DEPTH)  # the common case, measured in O(1)
        if isinstance(raw, str | bytes | bytearray):
            size = len(raw) if not isinstance(raw, str) or raw.isascii() else _text_size(raw)
            if size > self.max_input_bytes:
                raise _too_big(raw, size, self.max_input_bytes)
            return loads(bytes(raw) if isinstance(raw, bytearray) else raw, max_depth=MAX_DEPTH)
        if isinstance(raw, Mapping):
            value = raw if type(raw) is dict else dict(raw)
            problem = find_problem(value, max_depth=MAX_DEPTH)
            if problem is not None:
                raise problem
            size = len(orjson.dumps(value))
            if size > self.max_input_bytes:
                raise _too_big(value, size, self.max_input_bytes)
            return value
        raise CodecError(f"expected JSON text or a mapping, got {type(raw).__name__}", rule="type")

    def complete(
        self,
        tool: Tool,
        returned: object,
        content: object,
        metadata: object,
        identity: CallIdentity,
        name: str,
    ) -> Completed:
        """Steps 4 and 5: encode the output and normalize the content."""
        output = None
        if tool.output is not None:
            if returned is None:
                raise CodecError("the tool declares an output but returned none", rule="output")
            output = tool.output.encode(returned)
        elif returned is not None:
            raise CodecError(
                "the tool returned an output but declares none; pass output= to pegboard.tool",
                rule="output",
            )
        try:
            items = () if content is None else normalize_content(content)
        except TypeError as error:
            raise CodecError(str(error), rule="content") from None
        if not items:
            if tool.output is None:
                raise CodecError(
                    "the tool returned no content; a tool without output must return "
                    "non-empty content",
                    rule="content",
                )
            text = output if isinstance(output, str) and output else dumps(output)
            items = (Text(text),)
        check_text(items, self.limits)
        kept = None if metadata is None else self.metadata(metadata, name, identity)
        return Completed(output, items, kept, call=identity, name=name)

    def metadata(
        self, value: object, name: str, identity: CallIdentity
    ) -> Mapping[str, Any] | None:
        """Metadata as a private JSON object within its bound, or ``None`` with a warning."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            reason = f"it is a {type(value).__name__}, not a JSON object"
        elif (problem := find_problem(dict(value), max_depth=MAX_DEPTH)) is not None:
            reason = f"it is not plain JSON: {problem}"
        else:
            data = orjson.dumps(dict(value))
            if len(data) <= self.limits.max_metadata_bytes:
                copy: dict[str, Any] = orjson.loads(data)
                return copy
            reason = f"it is {len(data):,} bytes, over the {self.limits.max_metadata_bytes:,} limit"
        logger.warning(
            "dropped metadata from tool %r (call %s): %s", name, identity.call_id, reason
        )
        return None

    async def fail(
        self,
        identity: CallIdentity,
        name: str,
        kind: ErrorKind,
        message: str,
        *,
        metadata: object = None,
        partial: tuple[ContentItem, ...] = (),
    ) -> Outcome:
        """A failed outcome, published like any other."""
        error = ToolError(kind, message, metadata=self.metadata(metadata, name, identity))
        return await self.publish(Failed(error, partial, call=identity, name=name), name)

    async def publish(self, outcome: Outcome, name: str) -> Outcome:
        """Steps 6 to 8: bound, run ``execute_after`` hooks, bound their replacements."""
        bounded, managed = await self.bound(outcome)
        return await self.after(bounded, managed, name)

    async def after(self, outcome: Outcome, managed: tuple[Path, ...], name: str) -> Outcome:
        """Steps 7 and 8 for a bounded outcome: hooks in order, each replacement bounded."""
        call = outcome.call
        assert call is not None
        event = ExecuteEvent(call, name, outcome, managed)
        for hook in self.after_hooks:
            replacement = await hook(event)
            if replacement is not None:
                outcome, managed = await self.bound(self.canonical(replacement, call, name))
                event = ExecuteEvent(call, name, outcome, managed)
        return outcome

    def canonical(self, outcome: object, call: CallIdentity, name: str) -> Outcome:
        """A hook's replacement in canonical form, carrying the runner's identity."""
        if isinstance(outcome, Completed):
            content = normalize_content(outcome.content)
            check_text(content, self.limits)
            if not content:
                raise ValueError(
                    f"an execute_after hook replaced the outcome of {name!r} with a "
                    "Completed that has no content; completed calls carry non-empty content"
                )
            metadata = self.metadata(outcome.metadata, name, call)
            return Completed(outcome.output, content, metadata, call=call, name=name)
        if isinstance(outcome, Failed):
            error = outcome.error
            metadata = self.metadata(error.metadata, name, call)
            error = ToolError(error.kind, error.message, metadata=metadata)
            return Failed(error, normalize_content(outcome.partial), call=call, name=name)
        raise TypeError(
            f"an execute_after hook returned a {type(outcome).__name__} for {name!r}; "
            "return a pegboard.Completed, a pegboard.Failed or None"
        )

    async def bound(self, outcome: Outcome) -> tuple[Outcome, tuple[Path, ...]]:
        if isinstance(outcome, Completed):
            # bound_content measures once; content that fits comes back as it was.
            bounded = await bound_content(outcome.content, self.limits, self.storage)
            if not bounded.managed:
                return outcome, ()
            return attrs.evolve(outcome, content=bounded.content), bounded.managed
        if not outcome.partial:
            return outcome, ()
        try:
            bounded = await bound_content(outcome.partial, self.limits, self.storage)
        except InvalidText:
            # The call has failed already; a partial snapshot is kept legibly.
            bounded = await bound_content(_legible(outcome.partial), self.limits, self.storage)
        return attrs.evolve(outcome, partial=bounded.content), bounded.managed


def _legible(content: tuple[ContentItem, ...]) -> tuple[ContentItem, ...]:
    return tuple(
        Text(item.text.encode("utf-8", "replace").decode("utf-8")) if type(item) is Text else item
        for item in content
    )


def _why(error: ValueError) -> str:
    if isinstance(error, CodecError) and error.rule not in (None, "decode"):
        return f"{error} (rule: {error.rule})"
    return str(error)


def _text_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _too_big(raw: object, size: int, limit: int) -> CodecError:
    message = f"input is {size:,} bytes, over the {limit:,}-byte limit"
    value = raw
    if isinstance(raw, str | bytes | bytearray):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return CodecError(f"{message}; send a smaller input", rule="size")
    largest = max(iter_strings(value), key=lambda found: len(found[1]), default=None)
    if largest is None:
        return CodecError(f"{message}; send a smaller input", rule="size")
    path, text = largest
    return CodecError(
        f"{message}; the largest field is {path} ({len(text):,} characters); send a smaller value",
        rule="size",
    )
