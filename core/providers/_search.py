"""Deferred tools in a provider's native form, or the error saying it has none."""

from __future__ import annotations

import pegboard

from ._errors import CompatibilityError

__all__ = ("SEARCH_TOOLS", "native_parts", "no_native_search")

#: The portable search tool's name, as `pegboard.Location.prepare` advertises it.
SEARCH_TOOLS = "search_tools"


def native_parts(
    request: pegboard.Request,
) -> tuple[tuple[pegboard.ToolDefinition, ...], tuple[pegboard.ToolDefinition, ...]]:
    """The definitions to send in full and those to send with ``defer_loading``:
    the provider's own search tool replaces the portable ``search_tools``.
    """
    advertised = tuple(d for d in request.definitions if d.name != SEARCH_TOOLS)
    return advertised, request.deferred


def no_native_search(provider: str) -> CompatibilityError:
    return CompatibilityError(
        f"{provider} has no native tool search; render with native_search=False, which "
        "advertises the portable search_tools tool",
        provider=provider,
        tool=SEARCH_TOOLS,
        path="$",
        rule="native_search needs a provider with deferred tool loading",
    )
