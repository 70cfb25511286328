"""The exceptions pegboard raises, and the one a tool raises."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = (
    "CodecError",
    "PluginCrashed",
    "RegistrationError",
    "RetentionError",
    "SchemaError",
    "ToolFailure",
)


class SchemaError(ValueError):
    """A tool's schema is not valid JSON Schema 2020-12, or cannot be derived.

    ``keyword`` names the offending schema keyword when there is one, and ``path``
    says where in the schema it sits.
    """

    def __init__(self, message: str, *, keyword: str | None = None, path: str = "") -> None:
        super().__init__(message)
        self.keyword = keyword
        self.path = path


class CodecError(ValueError):
    """A value does not fit a codec's schema.

    ``path`` is a JSONPath-like location (``$.items[2].name``) and ``rule`` the
    schema rule that failed. Codecs raise it from ``decode`` and ``encode``; the
    pipeline turns it into an ``invalid_input`` or ``invalid_output`` error.
    """

    def __init__(self, message: str, *, path: str = "$", rule: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.rule = rule

    def __str__(self) -> str:
        return self.message if self.path == "$" else f"{self.path}: {self.message}"


class RegistrationError(ValueError):
    """A registration was refused; nothing of it was registered."""


class RetentionError(OSError):
    """Oversized output could not be retained whole in managed storage.

    The call fails operationally instead of publishing a lossy success.
    """


class ToolFailure(Exception):  # noqa: N818 - the name is the public contract
    """The one exception a tool raises for an expected, model-visible failure.

    ``message`` is shown to the model; ``metadata`` is optional compact JSON for
    the host's UI. Every other exception propagates to the runner unchanged.
    """

    def __init__(self, message: str, *, metadata: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


@attrs.frozen(auto_exc=True)
class PluginCrashed(Exception):  # noqa: N818 - the name is the public contract
    """A confined plugin's code failed unexpectedly, or its worker process died.

    Names the plugin, the tool (or hook) it was running, and the exception type
    and message the worker saw (``error_type`` is None when the worker itself
    died). Raised to the runner like any defect: never a model-visible outcome.
    """

    plugin: str
    tool: str
    error_type: str | None
    message: str

    def __str__(self) -> str:
        what = self.message if self.error_type is None else f"{self.error_type}: {self.message}"
        return f"confined plugin {self.plugin!r} crashed in {self.tool!r}: {what}"
