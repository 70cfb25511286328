"""Waiting for a server a test started to take requests."""

from __future__ import annotations

import anyio
import httpx2 as httpx

__all__ = ("wait_until_listening",)


async def wait_until_listening(*urls: str) -> None:
    """Return once each of ``urls`` answers an HTTP request (any status), within 20 s."""
    with anyio.fail_after(20):
        async with httpx.AsyncClient() as http:
            for url in urls:
                while True:
                    try:
                        await http.get(url)
                        break
                    except httpx.TransportError:
                        await anyio.sleep(0.05)
