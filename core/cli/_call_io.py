"""What ``pegboard call`` needs: input parsing, approvals, managed paths, rendering."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio.to_thread
import attrs

from pegboard import (
    Approver,
    Audio,
    Completed,
    EmbeddedResource,
    Image,
    ManagedStorage,
    Outcome,
    PermissionRequest,
    Reject,
    ResourceLink,
    Text,
)

from ._common import UsageError
from ._words import in_cli_words

__all__ = ("RecordingStorage", "TerminalApprover", "approver_for", "parse_input", "render_outcome")


@attrs.frozen
class RecordingStorage(ManagedStorage):
    """Managed storage that remembers the files it wrote, to tell the user."""

    saved: list[Path] = attrs.field(factory=list, eq=False, repr=False)

    def save_chunks_sync(self, chunks: Iterable[bytes]) -> Path:
        # Every save goes through here (save_sync too), written piece by piece.
        path = super().save_chunks_sync(chunks)
        self.saved.append(path)
        return path


def parse_input(words: Sequence[str], *, stdin: TextIO) -> Any:
    """INPUT as JSON text, ``-`` for standard input, or ``key=value`` pairs."""
    if not words:
        return "{}"
    if list(words) == ["-"]:
        return stdin.read()
    if len(words) == 1 and words[0].lstrip().startswith(("{", "[")):
        return words[0]
    pairs: dict[str, Any] = {}
    for word in words:
        key, equals, value = word.partition("=")
        if not equals or not key:
            raise UsageError(
                f"cannot read input {word!r}: give JSON text, '-' for standard input, "
                "or key=value pairs"
            )
        try:
            pairs[key] = json.loads(value)
        except ValueError:
            pairs[key] = value
    return pairs


Answer = Literal["once", "always"] | Reject


@attrs.define
class TerminalApprover:
    """Asks on the terminal; ``pause`` stops a live display while it asks."""

    pause: Any = None

    async def __call__(self, request: PermissionRequest) -> Answer:
        return await anyio.to_thread.run_sync(self._ask, request)

    def _ask(self, request: PermissionRequest) -> Answer:
        if self.pause is not None:
            self.pause.stop()
        try:
            resources = ", ".join(request.resources)
            print(f"pegboard: allow {request.action} on {resources}?", file=sys.stderr)
            while True:
                print("  [o]nce, [a]lways, [r]eject: ", end="", file=sys.stderr, flush=True)
                reply = sys.stdin.readline().strip().lower()
                if reply in ("o", "once", "y", "yes"):
                    return "once"
                if reply in ("a", "always"):
                    return "always"
                if reply in ("r", "reject", "n", "no", ""):
                    print("  why (optional, shown to the model): ", end="", file=sys.stderr)
                    sys.stderr.flush()
                    return Reject(sys.stdin.readline().strip() or None)
        finally:
            if self.pause is not None:
                self.pause.start()


async def _approve(request: PermissionRequest) -> Answer:
    return "once"


async def _reject(request: PermissionRequest) -> Answer:
    return Reject("rejected on the command line (--no)")


def approver_for(*, yes: bool, no: bool) -> Approver | None:
    """``--yes`` approves, ``--no`` rejects, a terminal asks; otherwise ``ask`` rejects."""
    if yes:
        return _approve
    if no:
        return _reject
    if sys.stdin.isatty() and sys.stderr.isatty():
        return TerminalApprover()
    return None


def render_outcome(outcome: Outcome, saved: Sequence[Path], *, as_json: bool) -> str:
    """The outcome as people (or, with ``as_json``, scripts) read it."""
    if isinstance(outcome, Completed):
        content, metadata = outcome.content, outcome.metadata
        error = None
    else:
        content, metadata = outcome.partial, outcome.error.metadata
        error = outcome.error
    if as_json:
        data: dict[str, Any] = {
            "status": "completed" if error is None else "failed",
            "content": [_item_json(item) for item in content],
            "metadata": metadata,
            "saved": [str(path) for path in saved],
        }
        if isinstance(outcome, Completed):
            data["output"] = outcome.output
        else:
            data["error"] = {
                "kind": outcome.error.kind,
                "message": in_cli_words(outcome.error.message),
            }
        return json.dumps(data, indent=2, ensure_ascii=False)
    lines = [] if error is None else [f"failed ({error.kind}): {in_cli_words(error.message)}"]
    if error is not None and content:
        lines.append("partial output:")
    lines.extend(_item_text(item) for item in content)
    if metadata:
        lines.append(f"metadata: {json.dumps(metadata, ensure_ascii=False)}")
    lines.extend(f"full output saved to {path}" for path in saved)
    return "\n".join(lines)


def _item_text(item: object) -> str:
    if isinstance(item, Text):
        return item.text
    if isinstance(item, Image | Audio):
        return f"[{item.mime_type}, {len(item.data):,} bytes]"
    if isinstance(item, ResourceLink):
        return f"[link: {item.name} {item.uri}]"
    if isinstance(item, EmbeddedResource):
        return f"[resource: {item.uri}]"
    return repr(item)


def _item_json(item: object) -> dict[str, Any]:
    if isinstance(item, Text):
        return {"type": "text", "text": item.text}
    if isinstance(item, Image | Audio):
        kind = "image" if isinstance(item, Image) else "audio"
        return {"type": kind, "mime_type": item.mime_type, "bytes": len(item.data)}
    if isinstance(item, ResourceLink):
        return {"type": "resource_link", "uri": item.uri, "name": item.name}
    if isinstance(item, EmbeddedResource):
        return {"type": "resource", "uri": item.uri, "mime_type": item.mime_type}
    return {"type": "unknown", "repr": repr(item)}
