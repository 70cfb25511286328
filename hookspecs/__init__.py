"""pegboard's hook specifications."""

import pluggy

__all__ = ("PROJECT", "hookimpl", "hookspec")

#: The pluggy project name shared by the specifications and the marker.
PROJECT = "pegboard"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
