"""Tool values: one execute function between an input and an output codec."""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar, overload

import attrs

from ._codec import AttrsCodec, Codec, as_codec
from ._content import ContentItem, normalize_content
from ._json import TooLarge, copy_within, freeze

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._secrets import Secrets

__all__ = (
    "LOG_LEVELS",
    "Progress",
    "Tool",
    "ToolAnnotations",
    "ToolContext",
    "ToolDefinition",
    "ToolLog",
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


#: The levels of a log message, least severe first: syslog's, as MCP names them.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: The most a log message's data may take, serialized: it travels to a client in one frame.
LOG_DATA_BYTES = 64 * 1024
#: The most a tool's extra definition fields may take, serialized.
EXTRA_BYTES = 64 * 1024


def _check_level(_: object, __: attrs.Attribute[str], value: object) -> None:
    if value not in LOG_LEVELS:
        raise ValueError(f"a log level is one of {', '.join(LOG_LEVELS)}; got {value!r}")


def _check_message(_: object, __: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"a log message is a string, got {type(value).__name__}")


def _log_data(value: object) -> Any:
    """A plain JSON copy of a log message's data, refused when it is not JSON or too large."""
    if value is None:
        return None
    try:
        return copy_within(value, max_depth=64, max_bytes=LOG_DATA_BYTES)
    except TooLarge as error:
        raise ValueError(
            f"a log message's data takes at most {LOG_DATA_BYTES // 1024} KiB as JSON, and this "
            f"is at least {error.size:,} bytes: log a summary, return the rest in the result"
        ) from None
    except ValueError as error:
        raise ValueError(f"a log message's data must be JSON: {error}") from None


@attrs.frozen
class ToolLog:
    """A log message a tool sends its runner, for the user's eyes (MCP's log notifications).

    ``level`` is one of `LOG_LEVELS`; ``data`` is optional JSON (at most 64 KiB
    serialized) that a client shows beside the message.
    """

    level: str = attrs.field(validator=_check_level)
    message: str = attrs.field(validator=_check_message)
    data: Any = attrs.field(default=None, converter=_log_data)


async def _ignore_log(_: ToolLog) -> None:
    return None


class ProgressRecorder:
    """Keeps the last progress content one call reported, for its partial snapshot."""

    __slots__ = ("context", "last", "secrets")

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.last: tuple[ContentItem, ...] = ()
        #: The host's secrets, redacted from each report before anyone sees it.
        self.secrets: Secrets | None = None


#: The recorder of the call whose tool is running in this context. A context
#: variable, so the tool gets the runner's own ToolContext, and nested calls
#: (a tool running another request) each record their own progress.
RECORDER: contextvars.ContextVar[ProgressRecorder | None] = contextvars.ContextVar(
    "pegboard_progress", default=None
)


def _positive(_: object, __: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ToolContext.attempt is a positive integer (1 first), got {value!r}")


#: The namespace of idempotency keys: fixed, so keys never change.
_KEYS = "6f0d2d98-a298-5f0a-9637-6c50b87f2725"


@attrs.frozen
class ToolContext:
    """The identity the runner supplies for one call, and where progress and logs go.

    ``message_id`` is the durable ID of the assistant message that holds the
    call and ``call_id`` the same invocation ID durable events use; pegboard
    never infers either. The runner passes its progress callback as
    ``progress=``; a tool reports with ``await context.progress(Progress(...))``.
    Likewise ``log=`` receives what a tool sends with ``await context.log("info", "...")``.

    ``attempt`` is 1 on a call's first execution and one more on each
    re-execution of the same call (a journal or a Temporal worker running it
    again after a crash); `idempotency_key` stays the same across them all.
    """

    session_id: str
    agent: str
    message_id: str
    call_id: str
    _forward: Callable[[Progress], Awaitable[None]] = attrs.field(
        default=_ignore_progress, alias="progress", repr=False, eq=False
    )
    _send_log: Callable[[ToolLog], Awaitable[None]] = attrs.field(
        default=_ignore_log, alias="log", repr=False, eq=False, kw_only=True
    )
    attempt: int = attrs.field(default=1, kw_only=True, validator=_positive)

    @property
    def idempotency_key(self) -> str:
        """A key for this call that a tool can hand to an external API.

        A UUID string (36 characters: hex digits and hyphens, which every API
        that takes idempotency keys accepts) derived from ``session_id`` and
        ``call_id`` alone: identical on every attempt, in every process, on
        every machine, and different for any other call. A tool with side
        effects passes it on (for example as an ``Idempotency-Key`` header),
        so a call re-executed after a crash is not done twice.
        """
        import uuid

        # Length-prefixed, so ("ab", "c") and ("a", "bc") differ.
        name = f"{len(self.session_id)}:{self.session_id}:{self.call_id}"
        return str(uuid.uuid5(uuid.UUID(_KEYS), name))

    async def progress(self, update: Progress) -> None:
        """Report progress to the runner; the content becomes the call's latest snapshot."""
        if not isinstance(update, Progress):
            raise TypeError(f"progress() takes a pegboard.Progress, got {type(update).__name__}")
        recorder = RECORDER.get()
        if recorder is not None:
            # Whatever context a tool reports through, the runner sees no secret.
            if recorder.secrets is not None:
                update = recorder.secrets.redact_progress(update)
            if recorder.context is self and update.content:
                recorder.last = update.content
        await self._forward(update)

    async def log(self, level: str, message: str, data: Any = None) -> None:
        """Send the runner a log message: ``level`` is one of `LOG_LEVELS` (``"info"``...).

        The runner's ``log=`` callback receives it as a `ToolLog`; ``pegboard
        serve`` sends it to the client as an MCP log notification. A log message
        is for people watching; what the model should see belongs in the result.
        """
        record = ToolLog(level, message, data)
        recorder = RECORDER.get()
        if recorder is not None and recorder.secrets is not None:
            # As with progress: whatever context a tool logs through, no secret leaves.
            secrets = recorder.secrets
            record = ToolLog(
                record.level, secrets.redact(record.message), secrets.redact_json(record.data)
            )
        await self._send_log(record)


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


def _extra(value: object) -> Mapping[str, Any] | None:
    """A plain, read-only JSON copy of a definition's extra fields, or None when empty."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"extra is a mapping of JSON fields, got {type(value).__name__}")
    if not value:
        return None
    try:
        copied = copy_within(dict(value), max_depth=64, max_bytes=EXTRA_BYTES)
    except TooLarge as error:
        raise ValueError(
            f"a tool's extra fields take at most {EXTRA_BYTES // 1024} KiB as JSON, and these "
            f"are at least {error.size:,} bytes"
        ) from None
    except ValueError as error:
        raise ValueError(f"a tool's extra fields must be JSON: {error}") from None
    frozen: Mapping[str, Any] = freeze(copied)
    return frozen


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
    #: Fields of the tool's definition pegboard itself does not use (JSON), kept for
    #: whoever advertises it again: a mounted MCP tool's ``execution``, ``icons``, ``_meta``.
    extra: Mapping[str, Any] | None = attrs.field(default=None, converter=_extra, repr=False)
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
    extra: Mapping[str, Any] | None = None,
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
    extra: Mapping[str, Any] | None = None,
) -> Tool: ...
def tool(
    *,
    description: str,
    execute: Callable[..., Any] | None = None,
    input: Any = None,
    output: Any = None,
    title: str | None = None,
    annotations: ToolAnnotations | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a `Tool`; with ``execute`` omitted, return a decorator that does.

    ``input`` and ``output`` take an attrs class, a JSON Schema ``dict`` or a
    `pegboard.Codec`. Omitting ``input`` means the tool takes no arguments;
    omitting ``output`` means it returns model content only. Schemas are checked
    against JSON Schema 2020-12 here, so a bad one fails at import, not at call.
    ``title`` is a short name for people and ``annotations`` a
    `pegboard.ToolAnnotations` of hints about what the tool does. ``extra`` holds
    fields of the definition pegboard itself does not use (JSON, at most 64 KiB),
    carried unchanged to `ToolDefinition.extra`.
    """

    def make(function: Callable[..., Any]) -> Tool:
        return Tool(
            description=description,
            execute=function,
            input=input,
            output=output,
            title=title,
            annotations=annotations,
            extra=extra,
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
    #: Fields of the definition pegboard does not use, as the tool carried them
    #: (`Tool.extra`): for a host or server that advertises the tool again.
    extra: Mapping[str, Any] | None = None
