"""The OpenTelemetry SDK as a host sets it up, with in-memory exporters, for the tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import attrs
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

__all__ = ("Telemetry", "installed", "reset_providers")


@attrs.frozen
class Telemetry:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def durations(self) -> list[tuple[dict[str, object], int]]:
        """Each data point of the duration histogram: its attributes and count."""
        data = self.metrics.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "gen_ai.execute_tool.duration":
                        assert metric.unit == "s"
                        for point in metric.data.data_points:
                            found.append((dict(point.attributes or {}), point.count))
        return found

    def count(self, name: str, error_type: str | None = None) -> int:
        """How many durations of tool ``name`` ending with ``error_type`` were recorded."""
        return sum(
            count
            for attributes, count in self.durations()
            if attributes["gen_ai.tool.name"] == name and attributes.get("error.type") == error_type
        )

    def clear(self) -> None:
        self.spans.clear()


def reset_providers() -> None:
    # The API lets a process set its providers once; tests set and restore them.
    trace._TRACER_PROVIDER = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()


@contextlib.contextmanager
def installed() -> Iterator[Telemetry]:
    """Global SDK providers exporting to memory, removed again afterwards."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    reset_providers()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield Telemetry(exporter, reader)
    finally:
        reset_providers()
        tracer_provider.shutdown()
        meter_provider.shutdown()
