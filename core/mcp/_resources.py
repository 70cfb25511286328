"""Managed output files a served result named, readable by the client as resources."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from pathlib import Path

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from .._content import Text
from .._outcome import Completed, Outcome

__all__ = ("ManagedResources",)

#: How many named files one server remembers; the oldest are forgotten first.
REMEMBERED = 1024


class ManagedResources:
    """The managed files this server's previews named: only those can be read.

    The storage directory may hold other output (other Locations', other
    servers'); a client reads exactly what it was told about, nothing it could
    guess.
    """

    def __init__(self, directory: Path) -> None:
        self._pattern = re.compile(re.escape(f"{directory}{os.sep}") + r"[A-Za-z0-9._-]+")
        self._files: OrderedDict[str, Path] = OrderedDict()

    def note(self, outcome: Outcome) -> list[types.ResourceLink]:
        """Remember the managed files ``outcome``'s text names; links to them."""
        content = outcome.content if isinstance(outcome, Completed) else outcome.partial
        links = []
        for item in content:
            if not isinstance(item, Text):
                continue
            for found in dict.fromkeys(self._pattern.findall(item.text)):
                path = Path(found)
                uri = path.as_uri()
                self._files[uri] = path
                self._files.move_to_end(uri)
                links.append(
                    types.ResourceLink(
                        uri=uri,
                        name=path.name,
                        description="the complete output this result's preview shortened",
                        mime_type="text/plain",
                    )
                )
        while len(self._files) > REMEMBERED:
            self._files.popitem(last=False)
        return links

    def listing(self) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=path.name, mime_type="text/plain")
                for uri, path in self._files.items()
            ]
        )

    async def read(self, uri: str) -> types.ReadResourceResult:
        path = self._files.get(uri)
        if path is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"{uri} is not a managed output file this server named; only files a "
                "result's preview names can be read",
            )
        try:
            text = await anyio.Path(path).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise MCPError(
                types.INVALID_PARAMS,
                f"{uri} was removed: managed output is kept for a limited time; call the "
                "tool again",
            ) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="text/plain")]
        )
