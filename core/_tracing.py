"""OpenTelemetry spans and durations of tool calls, where the host set up a provider.

pegboard uses ``opentelemetry-api`` only, and only once the host has imported
it: with no provider configured a call pays one dictionary look-up.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio

from ._json import dumps
from ._outcome import Completed, Failed, Outcome, ToolCall

__all__ = (
    "CAPTURE_CONTENT",
    "DURATION_METRIC",
    "Instruments",
    "continued",
    "instruments",
    "trace_context",
    "trace_environment",
    "traced",
)

#: Set to ``true`` to record arguments and results on spans (the conventions' switch).
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: The conventions' histogram of tool execution durations, in seconds.
DURATION_METRIC = "gen_ai.execute_tool.duration"
#: The most characters of arguments or result one span attribute holds.
CONTENT_CHARACTERS = 4096

_modules = sys.modules


class Instruments:
    """The tracer and duration histogram of the providers the host configured."""

    __slots__ = ("histogram", "providers", "trace", "tracer")

    def __init__(self, providers: tuple[object, object]) -> None:
        from opentelemetry import metrics, trace

        package = "pegboard"
        self.providers = providers
        self.trace = trace
        tracer_provider, meter_provider = providers
        self.tracer: Any = (
            None
            if isinstance(tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
            else trace.get_tracer(package)
        )
        self.histogram: Any = None
        # The API's stand-in before a provider is set has no public name.
        unset = meter_provider is None or type(meter_provider).__name__ == "_ProxyMeterProvider"
        if not unset and not isinstance(meter_provider, metrics.NoOpMeterProvider):
            self.histogram = metrics.get_meter(package).create_histogram(
                DURATION_METRIC, unit="s", description="Duration of tool executions"
            )


_cached: Instruments | None = None


#: Whether a provider may come from the environment (read once, as the API reads it).
_from_environment: bool | None = None
#: The API's modules holding its providers, once both are imported.
_globals: tuple[Any, Any] | None = None


def instruments() -> Instruments | None:
    """The instruments to use now, or None: OpenTelemetry not imported, no provider set."""
    found = _globals
    if found is None:
        trace = _modules.get("opentelemetry.trace")
        if trace is None:
            return None
        return _looked_up(trace)
    trace, metrics = found
    # The API's own getters read os.environ on every call while no provider is set:
    # too slow for every tool call. Its globals say the same in two look-ups.
    if trace._TRACER_PROVIDER is None and metrics._METER_PROVIDER is None:
        return None
    return _configured(trace)


def _looked_up(trace: Any) -> Instruments | None:
    """`instruments` the slow way, remembering the API's modules when it can."""
    global _globals, _from_environment
    metrics = _modules.get("opentelemetry.metrics._internal")
    if _from_environment is None:
        _from_environment = any(
            name in os.environ
            for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")
        )
    readable = hasattr(trace, "_TRACER_PROVIDER") and (
        metrics is None or hasattr(metrics, "_METER_PROVIDER")
    )
    if readable and not _from_environment:
        if metrics is not None:
            _globals = (trace, metrics)
        if trace._TRACER_PROVIDER is None and (metrics is None or metrics._METER_PROVIDER is None):
            return None  # nothing set up: nothing to import or build on the event loop
    return _configured(trace)


def _configured(trace: Any) -> Instruments | None:
    metrics = _modules.get("opentelemetry.metrics")
    providers = (
        trace.get_tracer_provider(),
        None if metrics is None else metrics.get_meter_provider(),
    )
    global _cached
    found = _cached
    if (
        found is None
        or found.providers[0] is not providers[0]
        or found.providers[1] is not providers[1]
    ):
        found = _cached = Instruments(providers)
    if found.tracer is None and found.histogram is None:
        return None
    return found


def _capturing(trace_content: bool | None) -> bool:
    if trace_content is not None:
        return trace_content
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() == "true"


def _bounded(text: str) -> str:
    if len(text) <= CONTENT_CHARACTERS:
        return text
    return f"{text[:CONTENT_CHARACTERS]}… [{len(text) - CONTENT_CHARACTERS:,} more characters]"


def _arguments(raw: object) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray):
        return bytes(raw).decode("utf-8", "replace")
    try:
        return dumps(raw)
    except (TypeError, ValueError):
        return repr(raw)


def _result(outcome: Outcome) -> str:
    if isinstance(outcome, Completed) and outcome.output is not None:
        return dumps(outcome.output)
    content = outcome.content if isinstance(outcome, Completed) else outcome.partial
    texts = [getattr(item, "text", None) for item in content]
    result = "\n".join(text for text in texts if isinstance(text, str))
    if isinstance(outcome, Failed):
        return outcome.error.message if not result else f"{outcome.error.message}\n{result}"
    return result


async def traced(
    found: Instruments,
    execute: Callable[[ToolCall], Awaitable[Outcome]],
    call: ToolCall,
    *,
    redact: Callable[[str], str] | None,
    trace_content: bool | None,
) -> Outcome:
    """Run ``execute(call)`` in an ``execute_tool`` span and record its duration."""
    trace = found.trace
    context = call.context
    # The runner's IDs too: a span holds no secret, wherever it came from.
    plain = (call.name, context.call_id, context.session_id, context.agent)
    name, call_id, session_id, agent = plain if redact is None else map(redact, plain)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": session_id,
        "gen_ai.agent.name": agent,
    }
    capture = _capturing(trace_content)

    def shown(text: str) -> str:
        return _bounded(text if redact is None else redact(text))

    if capture:
        attributes["gen_ai.tool.call.arguments"] = shown(_arguments(call.input))
    span = None
    token = None
    if found.tracer is not None:
        span = found.tracer.start_span(
            f"execute_tool {name}", kind=trace.SpanKind.INTERNAL, attributes=attributes
        )
        token = _attach(trace.set_span_in_context(span))
    error_type: str | None = None
    started = time.perf_counter()
    try:
        outcome = await execute(call)
    except BaseException as error:
        cancelled = isinstance(error, anyio.get_cancelled_exc_class())
        error_type = "cancelled" if cancelled else _qualified(type(error))
        if span is not None:
            description = "the call was cancelled" if cancelled else shown(str(error))
            span.set_attribute("error.type", error_type)
            span.set_status(trace.Status(trace.StatusCode.ERROR, description))
        raise
    else:
        if isinstance(outcome, Failed):
            error_type = outcome.error.kind
            if span is not None:
                span.set_attribute("error.type", error_type)
                # The outcome is redacted already.
                span.set_status(
                    trace.Status(trace.StatusCode.ERROR, _bounded(outcome.error.message))
                )
        if span is not None and capture:
            span.set_attribute("gen_ai.tool.call.result", shown(_result(outcome)))
        return outcome
    finally:
        elapsed = time.perf_counter() - started
        if span is not None:
            _detach(token)
            span.end()
        if found.histogram is not None:
            measured = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
            }
            if error_type is not None:
                measured["error.type"] = error_type
            found.histogram.record(elapsed, attributes=measured)


def _qualified(kind: type[BaseException]) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _attach(context: object) -> object:
    from opentelemetry import context as otel_context

    return otel_context.attach(context)  # type: ignore[arg-type]


def _detach(token: object) -> None:
    from opentelemetry import context as otel_context

    otel_context.detach(token)  # type: ignore[arg-type]


def trace_context() -> dict[str, str]:
    """The current span as W3C ``traceparent`` (and ``tracestate``), or empty."""
    if _modules.get("opentelemetry.trace") is None:
        return {}
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def trace_environment() -> dict[str, str]:
    """The current span for a command's environment: ``TRACEPARENT``, ``TRACESTATE``."""
    return {name.upper(): value for name, value in trace_context().items()}


@contextmanager
def continued(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """Continue the trace a request's ``_meta.traceparent`` names, while open."""
    if not meta or not isinstance(meta.get("traceparent"), str) or instruments() is None:
        yield
        return
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if trace.get_current_span().get_span_context().is_valid:
        # The MCP SDK's server span continued it already: ours nests under that.
        yield
        return
    carrier = {
        key: meta[key] for key in ("traceparent", "tracestate") if isinstance(meta.get(key), str)
    }
    token = otel_context.attach(TraceContextTextMapPropagator().extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)
