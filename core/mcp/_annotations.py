"""Tool annotations both ways: pegboard's hints and MCP's."""

from __future__ import annotations

import mcp_types as types

from .._tool import ToolAnnotations

__all__ = ("from_mcp_annotations", "to_mcp_annotations")


def to_mcp_annotations(annotations: ToolAnnotations | None) -> types.ToolAnnotations | None:
    """MCP's ``annotations`` for a tool's hints; ``None`` when it gives none."""
    if annotations is None:
        return None
    return types.ToolAnnotations(
        read_only_hint=annotations.read_only,
        destructive_hint=annotations.destructive,
        idempotent_hint=annotations.idempotent,
        open_world_hint=annotations.open_world,
    )


def from_mcp_annotations(annotations: types.ToolAnnotations | None) -> ToolAnnotations | None:
    """pegboard's hints for MCP's ``annotations`` (its ``title`` is the tool's title)."""
    if annotations is None:
        return None
    hints = ToolAnnotations(
        read_only=annotations.read_only_hint,
        destructive=annotations.destructive_hint,
        idempotent=annotations.idempotent_hint,
        open_world=annotations.open_world_hint,
    )
    return None if hints == ToolAnnotations() else hints
