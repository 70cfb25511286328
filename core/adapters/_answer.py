"""What an outcome tells the model, before any framework's types, and the call IDs to run it."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pegboard
from pegboard.providers._answer import data_url, media, text_of
from pegboard.providers._answer import shown as items

__all__ = ("OutcomeHook", "data_url", "fresh_id", "items", "media", "text_of", "text_only")

#: Called with every outcome an adapter settles, before the framework sees it.
OutcomeHook = Callable[[pegboard.Outcome], None]


def text_only(outcome: pegboard.Outcome) -> str:
    """The outcome as one text, media replaced by a note naming its type and size."""
    lines = []
    for item in items(outcome):
        said = text_of(item)
        if said is None:
            found = media(item)
            assert found is not None
            said = f"[{found[0]} content of {len(found[1])} bytes]"
        lines.append(said)
    return "\n".join(lines)


def fresh_id(prefix: str) -> str:
    """An ID for a call the framework gave none."""
    return f"{prefix}-{uuid.uuid4().hex}"
