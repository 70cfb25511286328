"""Tool values: one execute function between an input and an output codec."""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar, overload

import attrs

from ._codec import AttrsCodec, Codec, as_codec
from ._content import ContentItem, normalize_content

__all__ = (
    "Progress",
    "Tool",
    "ToolAnnotations",
    "ToolContext",
    "ToolDefinition",
    "ToolResponse",
    "tool",
)

O = TypeVar("O")  # noqa: E741 - reads as "output"


@attrs.frozen
class Progress:
    """A progress report; ``content`` is a snapshot of the partial output so far.

    Each report replaces the previous snapshot: if the call then fails, the last
    one becomes the outcome's bounded ``partial``.
    """

    message: str | None = None
    current: float | None = None
    total: float | None = None
    content: tuple[ContentItem, ...] = attrs.field(default=(), converter=normalize_content)


async def _ignore_progress(_: Progress) -> None:
    return None


class ProgressRecorder:
    """Keeps the last progress content one call reported, for its partial snapshot."""

    __slots__ = ("context", "last")

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.last: tuple[ContentItem, ...] = ()


#: The recorder of the call whose tool is running in this context. A context
#: variable, so the tool gets the runner's own ToolContext, and nested calls
#: (a tool running another request) each record their own progress.
RECORDER: contextvars.ContextVar[ProgressRecorder | None] = contextvars.ContextVar(
    "pegboard_progress", default=None
)


@attrs.frozen
class ToolContext:
    """The identity the runner supplies for one call, and where progress goes.

    ``message_id`` is the durable ID of the assistant message that holds the
    call and ``call_id`` the same invocation ID durable events use; pegboard
    never infers either. The runner passes its progress callback as
    ``progress=``; a tool reports with ``await context.progress(Progress(...))``.
    """

    session_id: str
    agent: str
    message_id: str
    call_id: str
    _forward: Callable[[Progress], Awaitable[None]] = attrs.field(
        default=_ignore_progress, alias="progress", repr=False, eq=False
    )

    async def progress(self, update: Progress) -> None:
        """Report progress to the runner; the content becomes the call's latest snapshot."""
        if not isinstance(update, Progress):
            raise TypeError(f"progress() takes a pegboard.Progress, got {type(update).__name__}")
        recorder = RECORDER.get()
        if recorder is not None and recorder.context is self and update.content:
            recorder.last = update.content
        await self._forward(update)


@attrs.frozen
class ToolResponse(Generic[O]):
    """What ``execute`` returns; every part is optional.

    ``output`` is the machine value (encoded by the output codec for Code Mode),
    ``content`` what the model sees, ``metadata`` compact JSON for the host's UI.
    ``provider_state`` carries payloads one provider's protocol requires verbatim,
    keyed by provider module name (``{"anthropic": [search_result blocks]}``):
    JSON, bounded like metadata, kept apart from content and output, and used only
    by that provider's ``result()``.
    """

    output: O | None = None
    content: object = None
    metadata: Mapping[str, Any] | None = None
    provider_state: Mapping[str, Any] | None = attrs.field(default=None, kw_only=True)


def _hint(_: object, attribute: attrs.Attribute[bool | None], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"ToolAnnotations.{attribute.name} is True, False or None, got {value!r}")


@attrs.frozen(kw_only=True)
class ToolAnnotations:
    """What a tool does, as hints for the host and the user (MCP's tool annotations).

    ``None`` means unsaid, and a client assumes the cautious default:
    ``read_only`` False, ``destructive`` True (for a tool that is not read-only),
    ``idempotent`` False, ``open_world`` True. Hints are for display and
    approval prompts; they grant nothing: permissions still come from the host.
    """

    #: The tool does not modify its environment.
    read_only: bool | None = attrs.field(default=None, validator=_hint)
    #: The tool may destroy or overwrite data (meaningful when not read-only).
    destructive: bool | None = attrs.field(default=None, validator=_hint)
    #: Calling it again with the same input has no further effect.
    idempotent: bool | None = attrs.field(default=None, validator=_hint)
    #: The tool reaches beyond the Location: the network, other processes' state.
    open_world: bool | None = attrs.field(default=None, validator=_hint)


def _annotations(value: object) -> ToolAnnotations | None:
    if value is None or isinstance(value, ToolAnnotations):
        return value
    raise TypeError(f"annotations is a pegboard.ToolAnnotations(...), got {type(value).__name__}")


def _title(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a tool's title is a non-empty string for people, got {value!r}")
    return value


def _check_description(_: object, __: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a tool needs a description: a non-empty string telling the model")


def _check_callable(_: object, __: attrs.Attribute[Callable[..., Any]], value: object) -> None:
    if not callable(value):
        raise TypeError(f"execute must be a function, got {type(value).__name__}")


def _input_codec(spec: object) -> Codec[Any]:
    return as_codec(spec, role="input")


def _output_codec(spec: object) -> Codec[Any] | None:
    return None if spec is None else as_codec(spec, role="output")


@attrs.frozen(kw_only=True)
class Tool:
    """An immutable tool value with exactly one execute function and no name.

    ``execute(input, context)`` is ``async def``; a plain function runs in a
    worker thread. Build one with `pegboard.tool`.
    """

    description: str = attrs.field(validator=_check_description)
    execute: Callable[..., Any] = attrs.field(validator=_check_callable)
    input: Codec[Any] = attrs.field(default=None, converter=_input_codec)
    output: Codec[Any] | None = attrs.field(default=None, converter=_output_codec)
    #: A short name for people (the model sees the registered name).
    title: str | None = attrs.field(default=None, converter=_title)
    annotations: ToolAnnotations | None = attrs.field(default=None, converter=_annotations)
    is_async: bool = attrs.field(init=False, repr=False)
    #: The attrs class whose instances, returned bare, settle on the pipeline's
    #: short path; ``None`` when the output is not an `AttrsCodec`.
    _bare_output: type | None = attrs.field(init=False, repr=False, eq=False)

    @_bare_output.default
    def _detect_bare_output(self) -> type | None:
        return self.output.cls if type(self.output) is AttrsCodec else None

    @is_async.default
    def _detect_async(self) -> bool:
        execute = self.execute
        return inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
            getattr(execute, "__call__", None)  # noqa: B004 - async callable objects
        )


@overload
def tool(
    *,
    description: str,
    execute: None = None,
    input: Any = None,
    output: Any = None,
    title: str | None = None,
    annotations: ToolAnnotations | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
@overload
def tool(
    *,
    description: str,
    execute: Callable[..., Any],
    input: Any = None,
    output: Any = None,
    title: str | None = None,
    annotations: ToolAnnotations | None = None,
) -> Tool: ...
def tool(
    *,
    description: str,
    execute: Callable[..., Any] | None = None,
    input: Any = None,
    output: Any = None,
    title: str | None = None,
    annotations: ToolAnnotations | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool`; with ``execute`` omitted, return a decorator that does.

    ``input`` and ``output`` take an attrs class, a JSON Schema ``dict`` or a
    `pegboard.Codec`. Omitting ``input`` means the tool takes no arguments;
    omitting ``output`` means it returns model content only. Schemas are checked
    against JSON Schema 2020-12 here, so a bad one fails at import, not at call.
    ``title`` is a short name for people and ``annotations`` a
    `pegboard.ToolAnnotations` of hints about what the tool does.
    """

    def make(function: Callable[..., Any]) -> Tool:
        return Tool(
            description=description,
            execute=function,
            input=input,
            output=output,
            title=title,
            annotations=annotations,
        )

    return make if execute is None else make(execute)


@attrs.frozen
class ToolDefinition:
    """The inert, model-facing description of one advertised tool."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None
    title: str | None = None
    annotations: ToolAnnotations | None = None
