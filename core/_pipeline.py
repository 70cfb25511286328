"""The fixed per-call pipeline: decode, execute, encode, normalize, bound, hooks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import anyio.lowlevel
import anyio.to_thread
import attrs
import orjson

from ._bounding import InvalidText, OutputLimits, bound_content, bound_text, fits
from ._codec import MAX_DEPTH, AttrsCodec, check_encoded, encode
from ._content import ContentItem, Text, normalize_content
from ._errors import CodecError, ToolFailure
from ._json import (
    TooLarge,
    copy_within,
    dumped_size,
    dumps,
    find_problem,
    freeze,
    iter_strings,
    loads,
)
from ._outcome import (
    CallIdentity,
    Completed,
    ErrorKind,
    Failed,
    Outcome,
    ToolCall,
    ToolError,
    settled,
)
from ._plugins import PluginError
from ._secrets import Secrets
from ._storage import ManagedStorage
from ._tool import RECORDER, ProgressRecorder, Tool, ToolContext, ToolResponse

__all__ = (
    "AfterHook",
    "ExecuteEvent",
    "Pipeline",
    "Refused",
    "encode_response",
    "run_execute",
    "why",
)

logger = logging.getLogger("pegboard")

_KINDS = frozenset(get_args(ErrorKind))
# Native asyncio cancellation a tool swallowed: no cancel scope remembers it, but the
# task's count of pending requests does (anyio's scopes withdraw theirs as they exit).
# Both functions are C and neither raises off asyncio.
_running_loop, _current_task = asyncio._get_running_loop, asyncio.current_task
_new = object.__new__


@attrs.frozen
class ExecuteEvent:
    """What an ``execute_after`` hook sees: the call's identity, the effective
    tool name, the bounded canonical outcome and its managed file paths.
    """

    call: CallIdentity
    name: str
    outcome: Outcome
    managed: tuple[Path, ...] = ()


class Refused(Exception):  # noqa: N818 - reads as what happened
    """A confined tool's own codec refused its input or output, in its worker.

    Raised by the host's proxy of that tool; the pipeline settles it exactly as
    it settles its own codec's refusal (``why`` is what `why` said there).
    """

    def __init__(self, kind: ErrorKind, why: str) -> None:
        super().__init__(why)
        self.kind = kind
        self.why = why


def _not_recorded(error: PluginError, cause: BaseException | None) -> None:
    return None


@attrs.frozen
class AfterHook:
    """One plugin's ``execute_after`` hook as the pipeline runs it.

    ``run`` calls the hook and returns what it returned; ``record`` notes a
    failure on the Location (`Activation.record`: once, or raised in strict mode).
    """

    plugin: str
    run: Callable[[ExecuteEvent], Awaitable[object]]
    record: Callable[[PluginError, BaseException | None], None] = _not_recorded

    def fault(self, message: str, cause: BaseException | None = None) -> PluginError:
        """A failure of this hook, recorded; the caller raises it."""
        error = PluginError(self.plugin, "hook", message)
        self.record(error, cause)
        return error


@attrs.frozen
class Pipeline:
    """A Location's settings for settling calls, shared by all its requests."""

    limits: OutputLimits
    storage: ManagedStorage
    max_input_bytes: int
    after_hooks: Sequence[AfterHook] = ()
    #: The host's secrets, redacted from all a call publishes; None when there are none.
    secrets: Secrets | None = None
    #: Whether spans record arguments and results (None: as the environment says).
    trace_content: bool | None = None

    async def run(self, name: str, tool: Tool, call: ToolCall, identity: CallIdentity) -> Outcome:
        """Steps 2 to 8 for a resolved call."""
        try:
            value = tool.input.decode(self.read_input(call.input))
        except ValueError as error:  # CodecError, or a custom codec's ValueError
            blank = _blank(call.input)
            if blank is None:
                return await self.fail(
                    identity,
                    name,
                    "invalid_input",
                    f"invalid input for tool {name!r}: {_why(error)}",
                    tool=tool,
                )
            # No arguments ("", whitespace, null) stand for {} where {} is valid input.
            try:
                value = tool.input.decode({})
            except ValueError as empty:
                return await self.fail(
                    identity,
                    name,
                    "invalid_input",
                    f"invalid input for tool {name!r}: the arguments were {blank}, "
                    f"read as {{}}: {_why(empty)}",
                    tool=tool,
                )
        # The tool gets the runner's own context; its progress is recorded here.
        context = call.context
        recorder = _new(ProgressRecorder)  # two slots, set without an __init__ call
        recorder.context = context
        recorder.last = ()
        recorder.secrets = self.secrets
        token = RECORDER.set(recorder)
        failure: ToolFailure | None = None
        # On asyncio, how many cancellations the task has pending (inlined: per call).
        task = _current_task() if _running_loop() is not None else None
        cancelling = 0 if task is None else task.cancelling()
        # No broad except here: cancellation and defects propagate unchanged.
        try:
            result = await run_execute(tool, value, context)
        except ToolFailure as caught:
            failure = caught
        except Refused as refused:
            return await self.fail(
                identity,
                name,
                refused.kind,
                f"invalid input for tool {name!r}: {refused.why}"
                if refused.kind == "invalid_input"
                else f"invalid output from tool {name!r}: {refused.why}",
                partial=recorder.last if refused.kind == "invalid_output" else (),
                tool=tool,
            )
        finally:
            RECORDER.reset(token)
        # Cancellation wins over whatever the tool made of it: a tool that shielded
        # itself, or caught the cancellation and returned or raised ToolFailure,
        # settles nothing.
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
            if task is not None and task.cancelling() > cancelling:
                # asyncio's own cancellation (task.cancel(), wait_for, timeout)
                # that the tool swallowed: no cancel scope remembers it.
                raise asyncio.CancelledError
        except anyio.get_cancelled_exc_class():
            _discarded(name, identity)
            raise
        if failure is not None:
            return await self.fail(
                identity,
                name,
                "tool_failure",
                str(failure.message),
                metadata=failure.metadata,
                partial=recorder.last,
                tool=tool,
            )
        secrets = self.secrets
        if not self.after_hooks and secrets is None and type(result) is tool._bare_output:
            settled = self.settle_bare(tool, result, identity, name)
            if settled is not None:
                return settled
        state = None
        if isinstance(result, ToolResponse):
            output, content, metadata = result.output, result.content, result.metadata
            state = result.provider_state
        elif tool.output is not None:
            output, content, metadata = result, None, None  # a bare output value
        else:
            output, content, metadata = None, result, None  # bare content
        try:
            outcome = self.complete(tool, output, content, metadata, identity, name, state)
            # Measuring checks the text for UTF-8 too: text that fits is encoded to
            # measure it (ASCII needs no encoding), text that does not as it is retained.
            if secrets is None and fits(outcome.content, self.limits):
                if not self.after_hooks:
                    return outcome  # nothing to bound, nobody to tell: skip the general path
                bounded: Outcome = outcome
                managed: tuple[Path, ...] = ()
            else:  # with secrets, measured once redacted
                bounded, managed = await self.bound(outcome, fitting=None if secrets else False)
        except ValueError as error:
            return await self.fail(
                identity,
                name,
                "invalid_output",
                f"invalid output from tool {name!r}: {_why(error)}",
                partial=recorder.last,
                tool=tool,
            )
        return await self.after(bounded, managed, name, tool)

    def settle_bare(
        self, tool: Tool, returned: object, identity: CallIdentity, name: str
    ) -> Completed | None:
        """The outcome of an attrs output returned bare, or ``None`` for the general path.

        What the general path checks holds here by construction: orjson writes
        compact JSON (no raw newline, valid UTF-8), so its text is within the
        limits once its bytes are.
        """
        codec: AttrsCodec[Any] = tool.output  # type: ignore[assignment]
        output = codec.encoded(returned)
        if output is None:
            return None
        try:
            data = orjson.dumps(output)
        except orjson.JSONEncodeError:
            return None  # an integer beyond 64 bits: written exactly by the general path
        if len(data) > self.limits.max_bytes:
            return None
        return settled(output, data.decode(), identity, name)

    def read_input(self, raw: object) -> Any:
        """Raw provider input as the tool's own plain JSON, within the size and depth limits.

        Oversized input is refused before it is parsed or walked whole.
        """
        limit = self.max_input_bytes
        if type(raw) is str and raw.isascii() and len(raw) <= limit:
            return loads(raw, max_depth=MAX_DEPTH)  # the common case, measured in O(1)
        if isinstance(raw, str | bytes | bytearray):
            size = len(raw) if not isinstance(raw, str) or raw.isascii() else _text_size(raw)
            if size > limit:
                raise _too_big_text(raw, size, limit)
            return loads(bytes(raw) if isinstance(raw, bytearray) else raw, max_depth=MAX_DEPTH)
        if isinstance(raw, Mapping):
            # The tool gets a copy: what it does to its input never reaches the
            # runner's ToolCall.input.
            try:
                value = copy_within(
                    raw if type(raw) is dict else dict(raw), max_depth=MAX_DEPTH, max_bytes=limit
                )
            except TooLarge as error:
                raise _too_big(f"input is over the {limit:,}-byte limit", error) from None
            size = dumped_size(value)
            if size > limit:
                raise _too_big_value(value, size, limit)
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
        provider_state: object = None,
    ) -> Completed:
        """Steps 4 and 5: encode the output and normalize the content."""
        output, items = encode_response(tool, returned, content)
        kept = None if metadata is None else self.metadata(metadata, name, identity)
        state = (
            None
            if provider_state is None
            else self.metadata(provider_state, name, identity, "provider state")
        )
        return Completed(output, items, kept, call=identity, name=name, provider_state=state)

    def metadata(
        self, value: object, name: str, identity: CallIdentity, what: str = "metadata"
    ) -> Mapping[str, Any] | None:
        """Metadata (or provider state: ``what``) as a read-only JSON object within
        its bound, or ``None`` with a warning.
        """
        if value is None:
            return None
        if isinstance(value, Unplain):  # a confined tool's, judged in its worker
            reason = value.reason
        elif not isinstance(value, Mapping):
            reason = f"it is a {type(value).__name__}, not a JSON object"
        else:
            limit = self.limits.max_metadata_bytes
            # Read once, into a plain copy that is measured and kept: a Mapping that
            # answers differently when read again cannot slip past the bound. The
            # walk is iterative and bounded, so no nesting or cycle can exhaust
            # the stack, and reading stops soon after the limit.
            try:
                plain = copy_within(
                    value if type(value) is dict else dict(value), max_depth=MAX_DEPTH,
                    max_bytes=limit,
                )  # fmt: skip
            except TooLarge as error:
                reason = f"it is at least {error.size:,} bytes, over the {limit:,} limit"
            except CodecError as problem:
                reason = f"it is not plain JSON: {problem}"
            else:
                try:
                    size = len(orjson.dumps(plain))
                except orjson.JSONEncodeError as error:
                    # Host UIs read metadata as ordinary JSON numbers.
                    reason = f"{error}; send integers beyond 64 bits as strings"
                else:
                    if size <= limit:
                        kept: Mapping[str, Any] = freeze(plain)
                        return kept
                    reason = f"it is {size:,} bytes, over the {limit:,} limit"
        logger.warning(
            "dropped %s from tool %r (call %s): %s", what, name, identity.call_id, reason
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
        tool: Tool | None = None,
    ) -> Outcome:
        """A failed outcome, published like any other."""
        error = ToolError(kind, message, metadata=self.metadata(metadata, name, identity))
        return await self.publish(Failed(error, partial, call=identity, name=name), name, tool)

    async def publish(self, outcome: Outcome, name: str, tool: Tool | None = None) -> Outcome:
        """Steps 6 to 8: bound, run ``execute_after`` hooks, bound their replacements."""
        bounded, managed = await self.bound(outcome)
        return await self.after(bounded, managed, name, tool)

    async def after(
        self, outcome: Outcome, managed: tuple[Path, ...], name: str, tool: Tool | None = None
    ) -> Outcome:
        """Steps 7 and 8 for a bounded outcome: hooks in order, each replacement bounded.

        A hook that raises, or returns something that is not a valid outcome of
        this tool, fails the call with `PluginError`: what a hook would have
        changed is never published without it. A call that is cancelled, or
        fails here, leaves none of its managed files behind.
        """
        call = outcome.call
        assert call is not None
        written = list(managed)
        try:
            event = ExecuteEvent(call, name, outcome, managed)
            for hook in self.after_hooks:
                try:
                    replacement = await hook.run(event)
                except Exception as error:
                    message = f"execute_after raised {type(error).__name__}: {error}"
                    raise hook.fault(message, error) from error
                if replacement is None:
                    continue
                try:
                    outcome, managed = await self.bound(
                        self.canonical(replacement, call, name, tool)
                    )
                except (TypeError, ValueError) as error:
                    raise hook.fault(str(error), error) from None
                written.extend(managed)
                event = ExecuteEvent(call, name, outcome, managed)
            if written or self.after_hooks:
                # Cancelled while retaining or in a hook: no outcome, no file.
                # (With neither, nothing was awaited since the tool returned.)
                await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            _discard(written)
            raise
        return outcome

    def canonical(
        self, outcome: object, call: CallIdentity, name: str, tool: Tool | None = None
    ) -> Outcome:
        """A hook's replacement in canonical form, carrying the runner's identity.

        Raises ``TypeError`` or ``ValueError`` saying what is wrong with it.
        """
        if isinstance(outcome, Completed):
            content = normalize_content(outcome.content)
            if not content:
                raise ValueError(
                    f"an execute_after hook replaced the outcome of {name!r} with a "
                    "Completed that has no content; completed calls carry non-empty content"
                )
            codec = None if tool is None else tool.output
            if codec is None and outcome.output is not None:
                raise ValueError(
                    f"an execute_after hook replaced the outcome of {name!r} with an output, "
                    "but the tool declares none; keep output=None"
                )
            if codec is not None:
                problem = check_encoded(codec, outcome.output)
                if problem is not None:
                    raise ValueError(
                        f"an execute_after hook replaced the outcome of {name!r} with an "
                        f"output its output schema refuses: {problem}"
                    )
            metadata = self.metadata(outcome.metadata, name, call)
            state = self.metadata(outcome.provider_state, name, call, "provider state")
            return Completed(
                outcome.output, content, metadata, call=call, name=name, provider_state=state
            )
        if isinstance(outcome, Failed):
            error = outcome.error
            if not isinstance(error, ToolError) or error.kind not in _KINDS:
                raise ValueError(
                    f"an execute_after hook replaced the outcome of {name!r} with a Failed "
                    f"whose error is not a pegboard.ToolError of a known kind: {error!r}"
                )
            if not isinstance(error.message, str):
                raise TypeError(
                    f"an execute_after hook replaced the outcome of {name!r} with an error "
                    f"message that is a {type(error.message).__name__}, not a str"
                )
            metadata = self.metadata(error.metadata, name, call)
            error = ToolError(error.kind, error.message, metadata=metadata)
            return Failed(error, normalize_content(outcome.partial), call=call, name=name)
        raise TypeError(
            f"an execute_after hook returned a {type(outcome).__name__} for {name!r}; "
            "return a pegboard.Completed, a pegboard.Failed or None"
        )

    async def bound(
        self, outcome: Outcome, *, fitting: bool | None = None
    ) -> tuple[Outcome, tuple[Path, ...]]:
        """Step 6: every text the model sees within the limits, the rest retained.

        Text is checked for UTF-8 as it is measured or retained (`InvalidText`).
        ``fitting`` is what `fits` already said of a completed outcome's content.
        Files written before a failure or cancellation are deleted. The host's
        secrets are redacted first, here, where everything published passes:
        before the cut, so no value is split by it.
        """
        if self.secrets is not None:
            outcome = self.secrets.redact_outcome(outcome)
            fitting = None
        if isinstance(outcome, Completed):
            # bound_content measures once; content that fits comes back as it was.
            bounded = await bound_content(
                outcome.content, self.limits, self.storage, fitting=fitting
            )
            if not bounded.managed:
                return outcome, ()
            return attrs.evolve(outcome, content=bounded.content), bounded.managed
        written: list[Path] = []
        try:
            message, path = await bound_text(outcome.error.message, self.limits, self.storage)
            if path is not None:
                written.append(path)
                outcome = attrs.evolve(outcome, error=attrs.evolve(outcome.error, message=message))
            if outcome.partial:
                try:
                    partial = await bound_content(outcome.partial, self.limits, self.storage)
                except InvalidText:
                    # The call has failed already; a partial snapshot is kept legibly.
                    partial = await bound_content(
                        _legible(outcome.partial), self.limits, self.storage
                    )
                written.extend(partial.managed)
                if partial.managed:
                    outcome = attrs.evolve(outcome, partial=partial.content)
        except BaseException:
            _discard(written)
            raise
        return outcome, tuple(written)


def encode_response(
    tool: Tool, returned: object, content: object
) -> tuple[Any, tuple[ContentItem, ...]]:
    """Steps 4 and 5 for what a tool returned: its encoded output and canonical content.

    Raises ``ValueError`` (a `CodecError`) saying what is wrong.
    """
    output = None
    if tool.output is not None:
        if returned is not None:
            output = encode(tool.output, returned)
        elif check_encoded(tool.output, None) is not None:
            raise CodecError("the tool declares an output but returned none", rule="output")
        # else: the output schema allows null, and null is the output.
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
                "the tool returned no content; a tool without output must return non-empty content",
                rule="content",
            )
        text = output if isinstance(output, str) and output else dumps(output)
        items = (Text(text),)
    return output, items


class Unplain:
    """Metadata a confined tool returned that cannot cross as JSON, and why.

    Its worker sends the reason instead of the value, so the host drops it with
    the same warning as a tool's in its own process.
    """

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def metadata_problem(value: object) -> str | None:
    """Why ``value`` cannot be a tool's metadata, as plain JSON; size is judged by the host."""
    if not isinstance(value, Mapping):
        return f"it is a {type(value).__name__}, not a JSON object"
    problem = find_problem(dict(value), max_depth=MAX_DEPTH)
    return None if problem is None else f"it is not plain JSON: {problem}"


async def run_execute(tool: Tool, value: Any, context: ToolContext) -> Any:
    """Run ``tool``'s execute: awaited, or a plain function in a worker thread."""
    if tool.is_async:
        return await tool.execute(value, context)
    # A running thread cannot be stopped: on cancellation the caller returns at
    # once and whatever the thread returns is discarded.
    return await anyio.to_thread.run_sync(tool.execute, value, context, abandon_on_cancel=True)


def _discarded(name: str, identity: CallIdentity) -> None:
    logger.warning(
        "discarded the result of tool %r (call %s): the call was cancelled while it ran",
        name,
        identity.call_id,
    )


def _discard(paths: Sequence[Path]) -> None:
    # Deleting a few files is quick; this runs while a cancellation unwinds,
    # where nothing may be awaited.
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            logger.warning("cannot delete managed file %s of an unsettled call: %s", path, error)


def _legible(content: tuple[ContentItem, ...]) -> tuple[ContentItem, ...]:
    return tuple(
        Text(item.text.encode("utf-8", "replace").decode("utf-8")) if type(item) is Text else item
        for item in content
    )


def why(error: ValueError) -> str:
    """What a codec's refusal says, with its rule: the tail of an invalid_input/output message."""
    return _why(error)


def _why(error: ValueError) -> str:
    if isinstance(error, CodecError) and error.rule not in (None, "decode"):
        return f"{error} (rule: {error.rule})"
    return str(error)


def _blank(raw: object) -> str | None:
    """How raw input with no arguments arrived (``empty``, ``whitespace``, ``null``), else None."""
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(raw, str) or len(raw) > 64:
        return None
    stripped = raw.strip()
    if not raw:
        return "empty ('')"
    if not stripped:
        return f"only whitespace ({raw!r})"
    if stripped == "null":
        return "null"
    return None


def _text_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


#: Oversized text is parsed, to name its largest field, only up to this many
#: times the limit: the parse is bounded; beyond, the size alone is reported.
_PARSE_OVERSIZED = 4


def _too_big_text(raw: str | bytes | bytearray, size: int, limit: int) -> CodecError:
    message = f"input is {size:,} bytes, over the {limit:,}-byte limit"
    if size > limit * _PARSE_OVERSIZED:
        return CodecError(f"{message}; send a smaller input", rule="size")
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return CodecError(f"{message}; send a smaller input", rule="size")
    return _too_big_value(value, size, limit)


def _too_big_value(value: object, size: int, limit: int) -> CodecError:
    message = f"input is {size:,} bytes, over the {limit:,}-byte limit"
    largest = max(iter_strings(value), key=lambda found: len(found[1]), default=None)
    if largest is None:
        return CodecError(f"{message}; send a smaller input", rule="size")
    path, text = largest
    return CodecError(
        f"{message}; the largest field is {path} ({len(text):,} characters); send a smaller value",
        rule="size",
    )


def _too_big(message: str, error: TooLarge) -> CodecError:
    if error.longest_path is None:
        return CodecError(f"{message}; send a smaller input", rule="size")
    return CodecError(
        f"{message}; the largest field read before stopping is {error.longest_path} "
        f"({error.longest:,} characters); send a smaller value",
        rule="size",
    )
